"""Multi-head attention, and why attention on its own cannot tell the order of its inputs."""
from __future__ import annotations

import pandas as pd
import torch

from ..config import GPTConfig
from ..errors import InputError
from ..model import Attention, rope_tables
from .averaging import attention_module, run_attention


def attention_param_counts(d_model: int = 128, heads=(1, 2, 4, 8, 16, 32)) -> pd.DataFrame:
    """Parameters of the model's own Attention for several head counts (built on the meta device)."""
    rows = []
    for h in heads:
        with torch.device("meta"):
            attn = Attention(GPTConfig(d_model=d_model, n_head=h, position="none"))
        rows.append({"n_head": h, "d_head": d_model // h, "parameters": sum(p.numel() for p in attn.parameters()),
                     "4·d_model²": 4 * d_model ** 2})
    return pd.DataFrame(rows)


def tutorial_inputs(T: int = 5, d: int = 8, seed: int = 0):
    """The tutorial's draws in its order: x (T, d), then W_Q, W_K, W_V (d, d), all from one seed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, d, generator=g)
    Wq, Wk, Wv = (torch.randn(d, d, generator=g) for _ in range(3))
    return x, Wq, Wk, Wv


def parse_permutation(text: str, T: int) -> list[int]:
    """'4, 2, 0, 1, 3' -> [4, 2, 0, 1, 3]; ValueError with a readable message unless it reorders 0..T-1."""
    parts = text.replace(",", " ").split()
    if not parts:
        raise InputError(f"enter an order of the positions 0 to {T - 1}, e.g. {' '.join(map(str, range(T)[::-1]))}")
    try:
        perm = [int(p) for p in parts]
    except ValueError:
        bad = next(p for p in parts if not p.lstrip("-").isdigit())
        raise InputError(f"'{bad}' is not a whole number; use the positions 0 to {T - 1}") from None
    if len(perm) != T:
        raise InputError(f"the sequence has {T} positions, so give {T} numbers (got {len(perm)})")
    outside = [p for p in perm if not 0 <= p < T]
    if outside:
        raise InputError(f"positions run from 0 to {T - 1}; {outside[0]} is out of range")
    if sorted(perm) != list(range(T)):
        missing = sorted(set(range(T)) - set(perm))
        raise InputError(f"use each of 0 to {T - 1} exactly once (missing: {', '.join(map(str, missing))})")
    return perm


def model_attention(n_head: int = 1, causal: bool = False, use_rope: bool = False, seed: int = 0):
    """A function x (T, d) -> (output (T, d), weights (H, T, T)) running the model's Attention with the
    tutorial's weights; RoPE, when on, rotates q and k by the positions 0..T-1 of the sequence."""
    x, Wq, Wk, Wv = tutorial_inputs(seed=seed)
    attn = attention_module(Wq, Wk, Wv, n_head=n_head, causal=causal)
    T, d = x.shape
    rope = rope_tables(torch.arange(T), d // n_head) if use_rope else None
    return x, lambda inputs: run_attention(attn, inputs, rope)


VARIANTS = {"no mask, no positions (the tutorial's attn)": (False, False), "with the causal mask": (True, False),
            "with RoPE": (False, True), "with the mask and RoPE": (True, True)}


def permutation_check(perm: list[int], n_head: int = 1, causal: bool = False, use_rope: bool = False,
                      seed: int = 0) -> dict:
    """Does attention commute with shuffling? Compares attn(x)[perm] with attn(x[perm])."""
    x, attn = model_attention(n_head, causal, use_rope, seed)
    p = torch.tensor(perm)
    shuffled_after, shuffled_before = attn(x)[0][p], attn(x[p])[0]
    return {"equal": torch.allclose(shuffled_after, shuffled_before, atol=1e-5),
            "max |difference|": (shuffled_after - shuffled_before).abs().max().item(),
            "attn(x)[perm]": shuffled_after, "attn(x[perm])": shuffled_before}


def permutation_table(perm: list[int], n_head: int = 1, seed: int = 0) -> pd.DataFrame:
    rows = []
    for name, (causal, use_rope) in VARIANTS.items():
        check = permutation_check(perm, n_head, causal, use_rope, seed)
        rows.append({"attention": name, "allclose": check["equal"], "max |difference|": check["max |difference|"]})
    return pd.DataFrame(rows)


def head_patterns(n_head: int, causal: bool = True, use_rope: bool = False, seed: int = 0) -> torch.Tensor:
    """(n_head, T, T) weights of each head on the tutorial's x: same inputs, one pattern per subspace."""
    x, attn = model_attention(n_head, causal, use_rope, seed)
    return attn(x)[1]
