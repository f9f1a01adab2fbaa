"""The feed-forward layer: SiLU against ReLU/GELU, the SwiGLU gate at work, and why d_ff ≈ 8/3·d.

The gate is read out of gptcore's own FeedForward through forward hooks, and parameter counts come from
building real FeedForward modules (on the meta device, so even LLaMA-sized ones cost no memory).
"""
from __future__ import annotations

import math

import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import GPTConfig, swiglu_hidden
from ..errors import message
from ..model import FeedForward
from .frames import message_frame


def activation_curves(lo: float = -5.0, hi: float = 5.0, n: int = 201) -> pd.DataFrame:
    """ReLU, GELU and SiLU = z·σ(z) on a grid: SiLU is smooth and dips slightly below zero, like GELU."""
    z = torch.linspace(lo, hi, n)
    return pd.DataFrame({"z": z.numpy(), "ReLU": F.relu(z).numpy(), "GELU": F.gelu(z).numpy(),
                         "SiLU": F.silu(z).numpy()})


def feedforward(d_model: int, d_ff: int, kind: str = "swiglu", seed: int = 0) -> FeedForward:
    """A gptcore FeedForward with PyTorch's default Linear init drawn from a private generator."""
    ffn = FeedForward(GPTConfig(d_model=d_model, n_head=1, d_ff=d_ff, ffn=kind, position="none"))
    g = torch.Generator().manual_seed(seed)
    for linear in (m for m in ffn.modules() if isinstance(m, nn.Linear)):
        nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5), generator=g)  # what nn.Linear does by default
    return ffn


def sample_tokens(n_tokens: int, d_model: int, seed: int = 0) -> torch.Tensor:
    """Stand-in token vectors with entries ~ N(0, 1): what a block sees after RMSNorm."""
    return torch.randn(n_tokens, d_model, generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def gate_readout(ffn: FeedForward, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Run ffn on x and catch its branches with hooks: w1·x, the gate w3·x, and what enters w2.

    'silu(w1 x)' is the activated branch and 'silu(w1 x) ⊙ w3 x' is exactly the tensor the model feeds
    to w2, captured from the forward pass rather than recomputed.
    """
    seen: dict[str, torch.Tensor] = {}
    handles = [
        ffn.w1.register_forward_hook(lambda m, i, out: seen.__setitem__("w1 x", out)),
        ffn.w3.register_forward_hook(lambda m, i, out: seen.__setitem__("w3 x", out)),
        ffn.w2.register_forward_pre_hook(lambda m, i: seen.__setitem__("silu(w1 x) ⊙ w3 x", i[0])),
    ]
    try:
        out = ffn(x)
    finally:
        for h in handles:
            h.remove()
    return {"silu(w1 x)": F.silu(seen["w1 x"]), "w3 x": seen["w3 x"],
            "silu(w1 x) ⊙ w3 x": seen["silu(w1 x) ⊙ w3 x"], "output": out}


def gate_stats(readout: dict[str, torch.Tensor]) -> pd.DataFrame:
    """How the gate reshapes the hidden layer: share of near-zero units, sign flips, spread."""
    act, gate, prod = readout["silu(w1 x)"], readout["w3 x"], readout["silu(w1 x) ⊙ w3 x"]
    rows = []
    for name, t in (("silu(w1 x)", act), ("w3 x", gate), ("silu(w1 x) ⊙ w3 x", prod)):
        rows.append({"tensor": name, "mean": t.mean().item(), "std": t.std().item(),
                     "share |value| < 0.05": (t.abs() < 0.05).float().mean().item(),
                     "share negative": (t < 0).float().mean().item()})
    return pd.DataFrame(rows)


def count_feedforward(d_model: int, d_ff: int, kind: str) -> int:
    """Parameters of a real gptcore FeedForward, built on the meta device (shapes only, no memory)."""
    with torch.device("meta"):
        ffn = FeedForward(GPTConfig(d_model=d_model, n_head=1, d_ff=d_ff, ffn=kind, position="none"))
    return sum(p.numel() for p in ffn.parameters())


def ffn_budget(d_model: int, multiple: int = 8) -> pd.DataFrame:
    """SwiGLU at d_ff = 8/3·d (rounded up to `multiple`) against the classic 4·d MLP.

    Formula and a count from the real module side by side: 2·d·4d = 8d² for the MLP, 3·d·d_ff for SwiGLU.
    """
    d_ff = swiglu_hidden(d_model, multiple)
    variants = [(message("ffn.mlp", "ReLU/GELU MLP, d_ff = 4·d"), 4 * d_model, "gelu", 2),
                (message("ffn.swiglu", "SwiGLU, d_ff = 8/3·d → multiple of {multiple}", multiple=multiple), d_ff,
                 "swiglu", 3),
                (message("ffn.swiglu_wide", "SwiGLU, d_ff = 4·d (no shrink)"), 4 * d_model, "swiglu", 3)]
    table = message_frame([{"FFN": name, "d_ff": width, "matrices": mats, "formula": mats * d_model * width,
                           "counted in FeedForward": count_feedforward(d_model, width, kind)}
                          for name, width, kind, mats in variants])
    table["÷ 8d²"] = table["formula"] / (8 * d_model ** 2)
    return table
