"""RoPE: rotating q and k by their positions makes q·k depend on the offset m − n only.

Everything here goes through the model's own rope_frequencies / rope_tables / apply_rope.
"""
from __future__ import annotations

import math

import pandas as pd
import torch

from ..model import apply_rope, rope_frequencies, rope_tables

TUTORIAL_PAIRS = ((3, 1), (10, 8), (1002, 1000))


def tutorial_qk(d: int = 64, seed: int = 0):
    """q then k = randn(1, d) from one seed, as in the tutorial."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, d, generator=g), torch.randn(1, d, generator=g)


def rotate(x: torch.Tensor, positions, theta: float = 10000.0) -> torch.Tensor:
    """x (1, d) rotated to each position: (len(positions), d). Positions are float, as in the tutorial."""
    pos = torch.as_tensor(positions, dtype=torch.float32).reshape(-1)
    cos, sin = rope_tables(pos, x.shape[-1], theta)
    return apply_rope(x.expand(len(pos), -1), cos, sin)


def rope_score(q, k, m: int, n: int, theta: float = 10000.0) -> float:
    """q at position m against k at position n, both rotated."""
    return (rotate(q, [m], theta) * rotate(k, [n], theta)).sum().item()


def absolute_positions(n_positions: int, d: int, seed: int = 1) -> torch.Tensor:
    """A stand-in for learned absolute positions: one random vector per position, added to q and k.

    Not GPT-2's scheme, which adds a trained table to x before the projections; like it, though, the
    score then depends on where a pair sits and not only on its offset."""
    return torch.randn(n_positions, d, generator=torch.Generator().manual_seed(seed))


def absolute_score(q, k, m: int, n: int, table: torch.Tensor) -> float:
    """q + p_m against k + p_n: a position vector added instead of a rotation."""
    return ((q[0] + table[m]) * (k[0] + table[n])).sum().item()


def invariance_table(q, k, pairs=TUTORIAL_PAIRS, theta: float = 10000.0, seed: int = 1) -> pd.DataFrame:
    """q·k for each (m, n) with RoPE and with the stand-in absolute position vectors added."""
    table = absolute_positions(max(max(p) for p in pairs) + 1, q.shape[-1], seed)
    return pd.DataFrame([{"m": m, "n": n, "m − n": m - n, "RoPE q·k": rope_score(q, k, m, n, theta),
                          "absolute q·k": absolute_score(q, k, m, n, table)} for m, n in pairs])


def rope_score_grid(q, k, n_positions: int, theta: float = 10000.0) -> torch.Tensor:
    """S[m, n] = rotated q at m · rotated k at n, for m, n < n_positions."""
    positions = range(n_positions)
    return rotate(q, positions, theta) @ rotate(k, positions, theta).T


def absolute_score_grid(q, k, n_positions: int, seed: int = 1) -> torch.Tensor:
    table = absolute_positions(n_positions, q.shape[-1], seed)
    return (q + table) @ (k + table).T


def diagonal_spread(grid: torch.Tensor) -> float:
    """Largest max − min along any diagonal m − n = const: 0 when the score depends on m − n only."""
    T = grid.shape[0]
    return max((d.max() - d.min()).item() for d in (grid.diagonal(o) for o in range(-(T - 1), T)))


def pair_path(x, pair: int, positions, theta: float = 10000.0) -> pd.DataFrame:
    """Channels (2·pair, 2·pair + 1) of x rotated to each position: a point turning around the origin."""
    rotated = rotate(x, positions, theta)[:, 2 * pair:2 * pair + 2]
    angle = torch.as_tensor(positions, dtype=torch.float32) * rope_frequencies(x.shape[-1], theta)[pair]
    return pd.DataFrame({"position": list(positions), "x": rotated[:, 0].numpy(), "y": rotated[:, 1].numpy(),
                         "angle (rad)": angle.numpy()})


def frequency_table(d: int = 64, theta: float = 10000.0) -> pd.DataFrame:
    """θ_i per channel pair and its wavelength 2π/θ_i in tokens (positions per full turn)."""
    freqs = rope_frequencies(d, theta)
    return pd.DataFrame({"pair": range(len(freqs)), "θ_i (rad/token)": freqs.numpy(),
                         "wavelength (tokens)": (2 * math.pi / freqs).numpy()})
