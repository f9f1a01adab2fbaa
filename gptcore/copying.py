"""Does a model copy from its context? Loss and attention on a random sequence shown more than once.

Random characters cannot be predicted from anything a model memorised, so the first copy of such a sequence
costs a lot. From the second copy on, a model that has learned in-context copying finds the earlier occurrence
of the current character, reads the character that followed it, and predicts that: the loss drops. The heads
that do the reading ("induction heads") attend from each position of a later copy to the position right after
its match in the copy before.

Pure torch, so `python -m gptcore copying` stays light to import.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .errors import InputError
from .model import GPT

DEFAULT_SEQUENCES = 16


def repeated_ids(vocab_size: int, length: int, repeats: int, n_sequences: int, seed: int) -> torch.Tensor:
    """(n_sequences, length * repeats) ids: each row is `length` uniform random characters, `repeats` times.

    Drawn from a private generator, so it never disturbs anyone's global random state.
    """
    generator = torch.Generator().manual_seed(seed)
    once = torch.randint(vocab_size, (n_sequences, length), generator=generator)
    return once.repeat(1, repeats)


def copy_losses(logits: torch.Tensor, ids: torch.Tensor, length: int) -> torch.Tensor:
    """(..., repeats) mean cross-entropy (nats) of each copy's characters given everything before them.

    logits (..., T, V), ids (..., T) with T = length * repeats. A copy's first character is left out: nothing
    announces where a copy starts, so it is as unpredictable in every copy; from its second character on, an
    earlier copy says what comes next.
    """
    T = ids.shape[-1]
    losses = F.cross_entropy(logits[..., :-1, :].flatten(0, -2).float(), ids[..., 1:].flatten(),
                             reduction="none").view(ids[..., 1:].shape)  # losses[..., t]: predicting t + 1
    targets = torch.arange(1, T)
    return torch.stack([losses[..., (targets > start) & (targets < start + length)].mean(-1)
                        for start in range(0, T, length)], -1)


def induction_scores(patterns: torch.Tensor, length: int) -> torch.Tensor:
    """(..., L, H) mean attention from each position of a later copy to the position after its earlier match.

    patterns (..., L, H, T, T) are attention weights [query, key]. Query i >= length holds the character last
    seen at i - length, so the key that says what comes next is i - length + 1.
    """
    T = patterns.shape[-1]
    queries = torch.arange(length, T)
    return patterns[..., queries, queries - length + 1].mean(-1)


def previous_token_scores(patterns: torch.Tensor) -> torch.Tensor:
    """(..., L, H) mean attention from each position to the one just before it (position 0 has none)."""
    queries = torch.arange(1, patterns.shape[-1])
    return patterns[..., queries, queries - 1].mean(-1)


def first_token_scores(patterns: torch.Tensor) -> torch.Tensor:
    """(..., L, H) mean attention from each position to position 0 (position 0 itself left out)."""
    return patterns[..., 1:, 0].mean(-1)


@dataclass
class CopyingReport:
    length: int
    repeats: int
    n_sequences: int
    seed: int
    copy_losses: list[float]  # mean loss of each copy, first copy first
    induction: torch.Tensor  # (L, H), averaged over the sequences
    previous_token: torch.Tensor  # (L, H)
    first_token: torch.Tensor  # (L, H)

    @property
    def ratio(self) -> float:
        """Second-copy loss over first-copy loss: 1 means no copying, near 0 means perfect copying."""
        return self.copy_losses[1] / self.copy_losses[0]

    def top_heads(self, scores: torch.Tensor, k: int) -> list[tuple[str, float]]:
        """The k highest-scoring heads as ("L{layer}H{head}", score), best first."""
        n_head = scores.shape[-1]
        best = scores.flatten().topk(min(k, scores.numel()))
        return [(f"L{i // n_head}H{i % n_head}", v) for i, v in zip(best.indices.tolist(), best.values.tolist())]


def check_shape(length: int, repeats: int, n_sequences: int, context: int) -> None:
    if repeats < 2:
        raise InputError("copying.repeats", "repeats must be at least 2: copying needs a copy to copy from, got "
                         "{repeats}", repeats=repeats)
    if length < 2:
        raise InputError("copying.length", "length must be at least 2 (a copy's first character is never scored), "
                         "got {length}", length=length)
    if n_sequences < 1:
        raise InputError("copying.sequences", "the number of sequences must be at least 1, got {n}", n=n_sequences)
    if length * repeats > context:
        raise InputError("copying.too_long", "{repeats} copies of {length} characters need {need}; the model's "
                         "context is {context}", repeats=repeats, length=length, need=length * repeats,
                         context=context)


@torch.no_grad()
def measure_copying(model: GPT, length: int | None = None, repeats: int = 2,
                    n_sequences: int = DEFAULT_SEQUENCES, seed: int = 0) -> CopyingReport:
    """Losses per copy and head scores, averaged over n_sequences random sequences of the model's vocabulary.

    length defaults to the longest that fits: context // repeats.
    """
    context = model.cfg.context
    length = context // max(repeats, 1) if length is None else length  # (repeats below 2: refused just below)
    check_shape(length, repeats, n_sequences, context)
    ids = repeated_ids(model.cfg.vocab_size, length, repeats, n_sequences, seed)
    was_training = model.training
    model.eval()
    try:
        logits, store = model.run_with_cache(ids.to(next(model.parameters()).device))
    finally:
        model.train(was_training)
    logits = logits.cpu()
    patterns = torch.stack([store[f"blocks.{i}.attn.hook_pattern"] for i in range(model.cfg.n_layer)], 1)
    patterns = patterns.cpu().double()  # (B, L, H, T, T)
    return CopyingReport(length, repeats, n_sequences, seed, copy_losses(logits, ids, length).mean(0).tolist(),
                         induction_scores(patterns, length).mean(0), previous_token_scores(patterns).mean(0),
                         first_token_scores(patterns).mean(0))


def format_report(report: CopyingReport, k: int = 4) -> str:
    lines = [f"{report.n_sequences} random sequences of {report.length} characters, each shown {report.repeats} "
             f"times (seed {report.seed})"]
    for i, loss in enumerate(report.copy_losses):
        lines.append(f"copy {i + 1} loss: {loss:.3f} nats/char")
    lines.append(f"second / first copy: {report.ratio:.3f}")
    lines.append("induction heads (attention from a later copy to the character after its earlier match):")
    lines += [f"  {name}  {score:.3f}" for name, score in report.top_heads(report.induction, k)]
    lines.append("previous-token heads (attention to the character just before):")
    lines += [f"  {name}  {score:.3f}" for name, score in report.top_heads(report.previous_token, k)]
    return "\n".join(lines)
