"""The training step and the loss estimates in plain PyTorch: the tutorial's loop, one piece per function.

    for step in range(steps + 1):
        set_lr(optimizer, lr_at(step, tc))
        x, y = get_batch(train_ids, context, batch_size, generator)
        loss = train_step(model, optimizer, x, y, tc.grad_clip)

gptcore.train.Trainer runs exactly this, with what a long run needs around it (checkpoints, evaluations, samples,
pause and stop). On the CPU it passes `loss_and_grads` that splits the batch into one shard per core
(gptcore.threads.ShardedGrads); under torchrun, one whose backward DDP averages over the processes. Both give
the gradients the plain backward below gives, to float rounding.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .config import TrainConfig
from .data import get_batch
from .model import GPT

LossAndGrads = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x, y) -> loss, with every .grad set


def lr_at(step: int, tc: TrainConfig) -> float:
    """The learning rate of a step: constant; or a linear warmup, then down to lr · min_lr_ratio at the last step,
    along a cosine or (warm-down) held at the peak and then along a straight line over the last `warmdown` share."""
    if tc.schedule == "constant":
        return tc.lr
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    floor = tc.lr * tc.min_lr_ratio
    if tc.schedule == "warmdown":
        start = max(tc.warmup, tc.steps * (1 - tc.warmdown))  # the peak holds until here
        return tc.lr - (tc.lr - floor) * min(1.0, max(0.0, step - start) / max(1e-9, tc.steps - start))
    progress = min(1.0, (step - tc.warmup) / max(1, tc.steps - tc.warmup))
    return floor + (tc.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def backward_pass(model: torch.nn.Module) -> LossAndGrads:
    """The plain way to a batch's gradients: one forward, one backward."""
    def loss_and_grads(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        _, loss = model(x, y)
        loss.backward()
        return loss.detach()
    return loss_and_grads


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               grad_clip: float = 0.0, loss_and_grads: LossAndGrads | None = None,
               before_update: Callable[[torch.Tensor], None] | None = None) -> torch.Tensor:
    """One update of the model on the batch (x, y); returns the batch's mean loss.

    before_update(loss) runs between the backward pass and the update: it may read the gradients, or raise to
    keep a broken update (a NaN loss) out of the weights.
    """
    optimizer.zero_grad(set_to_none=True)
    loss = (loss_and_grads or backward_pass(model))(x, y)  # forward and backward: every .grad is set
    if before_update is not None:
        before_update(loss)
    if grad_clip:
        # scale all gradients down together when their joint norm exceeds grad_clip: one bad batch cannot
        # throw the weights far
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def estimate_loss(model: GPT, data, batch_size: int, n_batches: int, generator: torch.Generator) -> float:
    """Mean loss over n random batches: the tutorial's quick val estimate. Batches are drawn on the CPU (the same
    random stream on every device) and moved to the model's device."""
    ctx, device = model.cfg.context, model_device(model)
    batches = (get_batch(data, ctx, batch_size, generator) for _ in range(n_batches))
    return sum(model(x.to(device), y.to(device))[1].item() for x, y in batches) / n_batches


LOGITS_BUDGET = 256 * 2**20  # bytes of logits one evaluation batch may hold (SmolLM2: 2048 × 49,152 × 4 is 400 MB)


@torch.no_grad()
def evaluate(model: GPT, ids: torch.Tensor, batch_size: int = 64) -> float:
    """Mean cross-entropy of every position 1..N-1 of ids (at least 2 tokens), each predicted from its own window.

    Windows are consecutive and non-overlapping, so each position is scored once with 0..ctx-1
    tokens of left context: the same distribution as the tutorial's random-window estimate,
    without its sampling noise. A batch holds at most batch_size windows and, for a large vocabulary and
    context, only as many as LOGITS_BUDGET allows.
    """
    ctx, device = model.cfg.context, model_device(model)
    batch_size = max(1, min(batch_size, LOGITS_BUDGET // (ctx * model.cfg.vocab_size * 4)))
    if len(ids) < 2:
        raise ValueError(f"evaluate needs at least 2 tokens, got {len(ids)}")
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    full = (len(ids) - 1) // ctx
    # contiguous spans, so ids may be a tensor or a memory-mapped TokenArray (read one span at a time)
    for first in range(0, full, batch_size):
        rows = min(batch_size, full - first)
        span = ids[first * ctx:(first + rows) * ctx + 1].to(device)
        x, y = span[:-1].view(rows, ctx), span[1:].view(rows, ctx)
        total += model(x, y)[1].item() * y.numel()
        count += y.numel()
    tail = full * ctx
    if tail < len(ids) - 1:
        span = ids[tail:len(ids)].to(device)
        x, y = span[None, :-1], span[None, 1:]
        total += model(x, y)[1].item() * y.numel()
        count += y.numel()
    model.train(was_training)
    return total / count
