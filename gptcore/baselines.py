"""Reference losses a trained model has to beat: a uniform guess and a bigram table.

Both are per-character cross-entropies in nats, directly comparable with the training curves.
"""
from __future__ import annotations

import math

import torch


def uniform_loss(vocab_size: int) -> float:
    """Cross-entropy of giving every character the same probability 1/V: ln V."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be at least 1, got {vocab_size}")
    return math.log(vocab_size)


def bigram_counts(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """counts[a, b] = how often character b directly follows character a in ids."""
    pairs = ids[:-1].long() * vocab_size + ids[1:].long()
    return torch.bincount(pairs, minlength=vocab_size * vocab_size).view(vocab_size, vocab_size)


def bigram_log_probs(train_ids: torch.Tensor, vocab_size: int, alpha: float = 1.0) -> torch.Tensor:
    """log P(next | previous) from train counts; alpha pseudo-counts keep unseen pairs above zero."""
    if alpha <= 0:
        raise ValueError(f"alpha must be positive (a zero count would give an infinite loss), got {alpha}")
    counts = bigram_counts(train_ids, vocab_size).double() + alpha
    return (counts / counts.sum(1, keepdim=True)).log()


def bigram_val_loss(train_ids: torch.Tensor, val_ids: torch.Tensor, vocab_size: int, alpha: float = 1.0) -> float:
    """Mean cross-entropy on val of a bigram model fitted on train (add-alpha smoothing; 1 = add-one).

    Scores positions 1..N-1 of val, each from the one character before it: the same positions
    `step.evaluate` scores, with one character of context instead of up to `context`.
    """
    if len(val_ids) < 2:
        raise ValueError("need at least 2 validation tokens")
    log_p = bigram_log_probs(train_ids, vocab_size, alpha)
    return -log_p[val_ids[:-1].long(), val_ids[1:].long()].mean().item()
