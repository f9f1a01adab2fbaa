"""The head atlas: the previous-token, induction and first-token score of every head of a model of any size.

The scores are the head finder's: on a text, inspector.head_scores of its patterns; on random tokens shown twice,
copying's scores (`python -m gptcore copying`). Here each layer's patterns are reduced to their scores as the
forward pass makes them, so a model of 30 layers never holds more than one layer's patterns (all of SmolLM2's, for
its four random sequences in float64, would take 86 MB).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from . import copying
from .config import GPTConfig
from .model import GPT

SCORES = ("previous_token", "induction", "first_token")  # the atlas's panels, in the order shown
LARGE = 20_000_000  # parameters: a model this large is scored on fewer, shorter sequences, to stay within seconds
LARGE_LENGTH, LARGE_SEQUENCES = 50, 4  # random tokens per copy, sequences (both copies: 100 tokens a forward)


def repeated_shape(cfg: GPTConfig) -> tuple[int, int]:
    """(tokens per copy, sequences) of the repeated-token test: the copying test's own for a small model (the
    longest two copies that fit, 16 sequences); for a large one fewer and shorter, so it takes about a second."""
    if cfg.n_params > LARGE:
        return min(LARGE_LENGTH, cfg.context // 2), LARGE_SEQUENCES
    return cfg.context // 2, copying.DEFAULT_SEQUENCES


def score_table(previous: torch.Tensor, first: torch.Tensor, induction: torch.Tensor) -> pd.DataFrame:
    """The head finder's table from three (L, H) score tensors: one row per head, L0H0 first."""
    L, H = induction.shape
    return pd.DataFrame({
        "head": [f"L{layer}H{head}" for layer in range(L) for head in range(H)],
        "layer": np.repeat(np.arange(L), H),
        "head_index": np.tile(np.arange(H), L),
        "previous_token": previous.flatten().numpy(),
        "first_token": first.flatten().numpy(),
        "induction": induction.flatten().numpy(),
    })


@torch.no_grad()
def sequence_scores(model: GPT, ids: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(copy losses (B, repeats), scores (B, 3, L, H): previous token, first token, induction) of sequences (B, T)
    of `length` tokens repeated, each layer's patterns reduced to their scores as copying.measure_copying reduces
    them, and dropped, before the next layer runs."""
    layers = {}

    def reduce(pattern: torch.Tensor, hook) -> None:
        p = pattern.double()  # (B, H, T, T): measure_copying scores in float64 too
        layers[int(hook.name.split(".")[1])] = torch.stack([copying.previous_token_scores(p),
                                                       copying.first_token_scores(p),
                                                       copying.induction_scores(p, length)], 1)

    logits, _ = model.run_with_hooks(ids.to(next(model.parameters()).device),
                                     fwd_hooks=[(lambda name: name.endswith("hook_pattern"), reduce)])
    losses = copying.copy_losses(logits.cpu(), ids, length)
    return losses, torch.stack([layers[i].cpu() for i in range(model.cfg.n_layer)], 2)


def repeated_token_scores(model: GPT, length: int | None = None, n_sequences: int | None = None,
                          seed: int = 0) -> tuple[pd.DataFrame, copying.CopyingReport]:
    """Every head's scores on n_sequences random sequences of `length` tokens shown twice (default:
    repeated_shape), laid out like inspector.head_scores, and the measurement (the loss of each copy).

    The same sequences, in one batch, and the same numbers as copying.measure_copying; only one layer's patterns
    are held at a time. The caller holds the model's lock."""
    default_length, default_sequences = repeated_shape(model.cfg)
    length, n_sequences = length or default_length, n_sequences or default_sequences
    copying.check_shape(length, 2, n_sequences, model.cfg.context)
    was_training = model.training
    model.eval()
    try:
        losses, scores = sequence_scores(model, copying.repeated_ids(model.cfg.vocab_size, length, 2, n_sequences,
                                                                     seed), length)
    finally:
        model.train(was_training)
    previous, first, induction = scores.mean(0)
    report = copying.CopyingReport(length, 2, n_sequences, seed, losses.mean(0).tolist(), induction, previous, first)
    return score_table(previous, first, induction), report


def clear_heads(scores: pd.DataFrame, column: str, at_least: float) -> pd.DataFrame:
    """The heads whose `column` score reaches at_least, best first (none when no score does, or none is known)."""
    found = scores[scores[column] >= at_least]
    return found.sort_values(column, ascending=False, kind="stable")
