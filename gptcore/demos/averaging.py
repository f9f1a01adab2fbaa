"""From averaging to attention: the causal average three ways, scores that depend on the data, and
what a model learns when the causal mask is missing."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from ..config import GPTConfig, TrainConfig, swiglu_hidden
from ..data import Corpus
from ..errors import InputError
from ..events import FinalEvalEvent, SampleEvent, StepEvent, TrainingEvent
from ..model import Attention
from ..texts import builtin_corpus
from ..train import TrainControl, Trainer


def causal_mask(T: int) -> torch.Tensor:
    """(T, T) bool, True where query t may look at key j (j <= t)."""
    return torch.tril(torch.ones(T, T, dtype=torch.bool))


def average_by_loop(x: torch.Tensor) -> torch.Tensor:
    """x (B, T, C) -> the mean of positions 0..t at every t, one position at a time."""
    out = torch.zeros_like(x)
    for t in range(x.shape[1]):
        out[:, t] = x[:, :t + 1].mean(1)
    return out


def average_weights(T: int) -> torch.Tensor:
    """Lower-triangular ones with each row divided by its sum: one matmul averages every prefix."""
    w = causal_mask(T).float()
    return w / w.sum(1, keepdim=True)


def masked_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Future scores set to -inf before softmax; exp(-inf) = 0, so every row still sums to 1."""
    T = scores.shape[-1]
    return scores.masked_fill(~causal_mask(T), float("-inf")).softmax(-1)


def zero_future(weights: torch.Tensor) -> torch.Tensor:
    """The wrong order: weights already softmaxed over every position, then the future zeroed.
    Each row loses the share its future held, so it no longer sums to 1."""
    return weights * causal_mask(weights.shape[-1])


@dataclass
class AveragingExample:
    x: torch.Tensor  # (1, T, C)
    loop: torch.Tensor  # causal average computed position by position
    matmul_weights: torch.Tensor  # row-normalised lower triangle
    softmax_weights: torch.Tensor  # softmax of all-zero scores with the -inf mask

    @property
    def matmul(self) -> torch.Tensor:
        return self.matmul_weights @ self.x

    @property
    def softmax(self) -> torch.Tensor:
        return self.softmax_weights @ self.x


def averaging_example(T: int = 4, C: int = 2, seed: int = 0) -> AveragingExample:
    """The tutorial's setup: x = randn(1, T, C) from seed 0, averaged three ways."""
    x = torch.randn(1, T, C, generator=torch.Generator().manual_seed(seed))
    return AveragingExample(x, average_by_loop(x), average_weights(T), masked_softmax(torch.zeros(T, T)))


def tutorial_printout(ex: AveragingExample) -> str:
    """What the tutorial's script prints: the weights, row 2 of w @ x beside the plain mean, softmax row 2."""
    return "\n".join([str(ex.matmul_weights), f"{ex.matmul[0, 2]} {ex.x[0, :3].mean(0)}", str(ex.softmax_weights[2])])


# --- scores that depend on the data --------------------------------------------------------------------

def char_vectors(text: str, d: int, seed: int = 0) -> torch.Tensor:
    """(len(text), d): one random vector per distinct character, so equal characters get equal vectors."""
    chars = sorted(set(text))
    table = torch.randn(len(chars), d, generator=torch.Generator().manual_seed(seed))
    return table[[chars.index(c) for c in text]]


def projections(d: int, seed: int = 0, tied: bool = False):
    """W_Q, W_K, W_V (d, d) scaled so q and k have unit-size entries. tied: W_K = W_Q, so q_i·k_j = (x_i W)·(x_j W)
    tends to be largest when x_j looks like x_i (a key with a larger norm can still win)."""
    g = torch.Generator().manual_seed(seed)
    Wq, Wk, Wv = (torch.randn(d, d, generator=g) / d ** 0.5 for _ in range(3))
    return Wq, (Wq if tied else Wk), Wv


def attention_module(Wq, Wk, Wv, n_head: int = 1, causal: bool = True) -> Attention:
    """The model's own Attention with given W_Q, W_K, W_V (x @ W convention) and an identity output matrix,
    so its output is exactly the concatenated heads. Built on the meta device: no global RNG draw."""
    d = Wq.shape[0]
    with torch.device("meta"):
        attn = Attention(GPTConfig(d_model=d, n_head=n_head, causal=causal, position="none"))
    attn.to_empty(device="cpu")
    with torch.no_grad():
        attn.qkv.weight.copy_(torch.cat([Wq.T, Wk.T, Wv.T]))  # nn.Linear computes x @ weight.T
        attn.proj.weight.copy_(torch.eye(d))
    return attn


@torch.no_grad()
def run_attention(attn: Attention, x: torch.Tensor, rope=None):
    """Output (T, d) and attention weights (H, T, T) of `attn` on one sequence x (T, d)."""
    store = {}
    handle = attn.hook_pattern.register_forward_hook(lambda module, inputs, out: store.setdefault("w", out))
    try:
        y = attn(x[None], rope)
    finally:
        handle.remove()
    return y[0], store["w"][0]


@torch.no_grad()
def text_attention(text: str, sharpness: float = 1.0, tied: bool = False, causal: bool = True,
                   d: int = 16, seed: int = 0) -> torch.Tensor:
    """(T, T) weights of one attention head reading `text`; sharpness multiplies every score
    (0 gives back the plain causal average). causal=False: softmax over every position."""
    if not text:
        raise InputError("averaging.empty_text", "type at least one character")
    Wq, Wk, Wv = projections(d, seed, tied)
    attn = attention_module(Wq * sharpness, Wk, Wv, causal=causal)
    return run_attention(attn, char_vectors(text, d, seed))[1][0]


# --- what leaks without the mask -----------------------------------------------------------------------

@dataclass
class LeakSetup:
    """A small model trained twice on the same data, once with and once without the causal mask."""
    corpus_chars: int = 200_000
    model: GPTConfig = field(default_factory=lambda: GPTConfig(d_model=64, n_layer=2, n_head=4,
                                                               d_ff=swiglu_hidden(64), context=64))
    train: TrainConfig = field(default_factory=lambda: TrainConfig(
        steps=120, batch_size=16, eval_every=120, eval_batches=5, threads=1, sample_chars=160))


LEAK_SETUP = LeakSetup()
LEAK_VARIANTS = (("causal", True), ("no mask", False))


def leak_experiment(text: str, report: Callable[[str, TrainingEvent], None], control: TrainControl | None = None,
                    setup: LeakSetup | None = None) -> dict[str, float | None]:
    """Train the same model (same seed, same batches) with and without the mask, one after the other.

    report(variant, event) receives every Trainer event. Returns {variant: loss on the whole
    validation split}.
    """
    setup = setup or LEAK_SETUP
    results = {}
    for variant, causal in LEAK_VARIANTS:
        if control is not None and control.stop.is_set():
            break
        trainer = Trainer.fresh(replace(setup.model, causal=causal), setup.train, Corpus(text, ""))
        trainer.run(lambda event, variant=variant: report(variant, event), control)
        results[variant] = trainer.final_val
    return results


def leak_job(job) -> None:
    """Background-job body (explorer.jobs.Job): streams both loss curves, final losses and samples."""
    setup = LEAK_SETUP
    text = builtin_corpus(setup.corpus_chars).text

    def report(variant: str, event: TrainingEvent) -> None:
        match event:
            case StepEvent(step=step, loss=loss, total_steps=total):
                job.append(f"{variant}/step", step)
                job.append(f"{variant}/loss", loss)
                done = [v for v, _ in LEAK_VARIANTS].index(variant) + (step + 1) / (total + 1)
                # the page words the progress line in its reader's language from these two values
                job.update(progress=done / len(LEAK_VARIANTS), data={"training": variant, "training/step": step})
            case FinalEvalEvent(val=val):
                job.update(data={f"{variant}/val": val})
            case SampleEvent(text=sample):
                job.update(data={f"{variant}/sample": sample})

    leak_experiment(text, report, job.control, setup)
    job.update(progress=1.0)
