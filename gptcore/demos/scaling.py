"""Why attention divides q·k by √d_k: the variance of a dot product, softmax saturation, dying gradients."""
from __future__ import annotations

import math

import pandas as pd
import torch


def dot_products(d: int, n: int = 10_000, generator: torch.Generator | None = None) -> torch.Tensor:
    """n dot products of independent q, k ~ N(0, I_d): q drawn first, then k, from one generator."""
    q = torch.randn(n, d, generator=generator)
    k = torch.randn(n, d, generator=generator)
    return (q * k).sum(-1)


def score_samples(d: int, n: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """n dot products for one d, before and after dividing by √d."""
    s = dot_products(d, n, torch.Generator().manual_seed(seed))
    return pd.DataFrame({"q·k": s.numpy(), "q·k/√d": (s / math.sqrt(d)).numpy()})


def variance_table(dims=(16, 64, 256), n: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """The tutorial's experiment: one generator seeded once, consumed d by d in order."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for d in dims:
        s = dot_products(d, n, g)
        rows.append({"d": d, "var(q·k)": s.var().item(), "var(q·k/√d)": (s / math.sqrt(d)).var().item()})
    return pd.DataFrame(rows)


def variance_printout(table: pd.DataFrame) -> str:
    """The table in the tutorial's print format."""
    return "\n".join(f"d={r['d']:3d}  var(q.k)={r['var(q·k)']:7.1f}  var(q.k/sqrt(d))={r['var(q·k/√d)']:.2f}"
                     for r in table.to_dict("records"))


def softmax_pair(logits=(1.0, 2.0, 3.0), factor: float = 16.0):
    """softmax(logits) and softmax(factor·logits): the same ranking, a very different spread."""
    x = torch.tensor(logits)
    return torch.softmax(x, -1), torch.softmax(x * factor, -1)


def softmax_jacobian(p: torch.Tensor) -> torch.Tensor:
    """∂softmax/∂logits = diag(p) − p pᵀ for one probability vector p."""
    return torch.diag_embed(p) - p[..., :, None] * p[..., None, :]


def gradient_vs_scale(logits=(1.0, 2.0, 3.0), factors=None) -> pd.DataFrame:
    """How much a change in the logits can still move softmax(factor·logits), factor by factor."""
    factors = torch.logspace(-1, 2, 61) if factors is None else torch.as_tensor(factors, dtype=torch.float32)
    p = torch.softmax(factors[:, None] * torch.tensor(logits)[None, :], -1)
    jac = softmax_jacobian(p)
    return pd.DataFrame({"factor": factors.numpy(), "jacobian norm": torch.linalg.matrix_norm(jac).numpy(),
                         "largest weight": p.max(-1).values.numpy()})


def entropy(p: torch.Tensor) -> torch.Tensor:
    """Entropy in nats along the last axis (0·log 0 counted as 0)."""
    return -(p * p.clamp_min(1e-30).log()).sum(-1)


def attention_rows(d: int, T: int = 32, n_queries: int = 2_000, seed: int = 0):
    """Scores of n_queries random queries against T random keys: (unscaled, scaled), each (n_queries, T)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, d, generator=g)
    k = torch.randn(T, d, generator=g)
    s = q @ k.T
    return s, s / math.sqrt(d)


def attention_stats(d: int, T: int = 32, n_queries: int = 2_000, seed: int = 0) -> pd.DataFrame:
    """Unscaled vs scaled attention rows: spread of the scores, entropy, share of near one-hot rows
    (largest weight > 0.99) and the median softmax-Jacobian norm (how much gradient can flow back)."""
    rows = []
    for name, s in zip(("q·k", "q·k/√d"), attention_rows(d, T, n_queries, seed)):
        p = s.softmax(-1)
        rows.append({"scores": name, "score std": s.std().item(), "mean entropy (nats)": entropy(p).mean().item(),
                     "near one-hot rows": (p.max(-1).values > 0.99).float().mean().item(),
                     "median Jacobian norm": torch.linalg.matrix_norm(softmax_jacobian(p)).median().item()})
    return pd.DataFrame(rows)


def entropy_vs_d(dims=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), T: int = 32, n_queries: int = 2_000,
                 seed: int = 0) -> pd.DataFrame:
    """Mean attention entropy for every d, unscaled and scaled; log T is the uniform maximum.
    Each point is attention_stats' own number, so a curve and a table at the same d agree."""
    rows = []
    for d in dims:
        stats = attention_stats(d, T, n_queries, seed).set_index("scores")["mean entropy (nats)"]
        rows.append({"d": d, **stats.to_dict()})
    return pd.DataFrame(rows)
