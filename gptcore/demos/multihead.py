"""Multi-head attention, and why attention on its own cannot tell the order of its inputs."""
from __future__ import annotations

import pandas as pd
import torch
from torch.utils.flop_counter import FlopCounterMode

from ..config import GPTConfig
from ..errors import InputError, Message, message
from ..inspector import CLEAR_SCORE, head_scores
from ..model import Attention, rope_tables
from .averaging import attention_module, run_attention


def attention_costs(d_model: int = 128, T: int = 128, heads=(1, 2, 4, 8, 16, 32)) -> pd.DataFrame:
    """Parameters and forward FLOPs of the model's own Attention for several head counts.

    FLOPs are counted by PyTorch's FlopCounterMode on one forward pass over T positions, with the hook point
    watched so that the written-out softmax path runs (the fused kernel is invisible to the counter). Matrix
    products of 2-D operands (aten.mm) are the q/k/v and output projections; the batched ones (aten.bmm) are
    the scores and the weighted sum of the values, computed in full and then masked.
    """
    rows = []
    for h in heads:
        attn = Attention(GPTConfig(d_model=d_model, n_head=h, context=max(T, 1), position="none"))
        x = torch.zeros(1, T, d_model)
        handle = attn.hook_pattern.register_forward_hook(lambda *_: None)
        try:
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                attn(x)
        finally:
            handle.remove()
        flops = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
        rows.append({"n_head": h, "d_head": d_model // h, "parameters": sum(p.numel() for p in attn.parameters()),
                     "4·d_model²": 4 * d_model ** 2, "projection FLOPs": flops.get("aten.mm", 0),
                     "score + mixing FLOPs": flops.get("aten.bmm", 0)})
    return pd.DataFrame(rows)


def tutorial_inputs(T: int = 5, d: int = 8, seed: int = 0):
    """The tutorial's draws in its order: x (T, d), then W_Q, W_K, W_V (d, d), all from one seed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, d, generator=g)
    Wq, Wk, Wv = (torch.randn(d, d, generator=g) for _ in range(3))
    return x, Wq, Wk, Wv


def parse_permutation(text: str, T: int) -> list[int]:
    """'4, 2, 0, 1, 3' -> [4, 2, 0, 1, 3]; an InputError that says what is wrong unless it reorders 0..T-1."""
    parts = text.replace(",", " ").split()
    last = T - 1
    if not parts:
        raise InputError("multihead.perm_empty", "enter an order of the positions 0 to {last}, e.g. {example}",
                         last=last, example=" ".join(map(str, range(T)[::-1])))
    try:
        perm = [int(p) for p in parts]
    except ValueError:
        bad = next(p for p in parts if not p.lstrip("-").isdigit())
        raise InputError("multihead.perm_not_number", "'{bad}' is not a whole number; use the positions 0 to {last}",
                         bad=bad, last=last) from None
    if len(perm) != T:
        raise InputError("multihead.perm_count", "the sequence has {T} positions, so give {T} numbers (got {n})",
                         T=T, n=len(perm))
    outside = [p for p in perm if not 0 <= p < T]
    if outside:
        raise InputError("multihead.perm_range", "positions run from 0 to {last}; {bad} is out of range",
                         last=last, bad=outside[0])
    if sorted(perm) != list(range(T)):
        missing = sorted(set(range(T)) - set(perm))
        raise InputError("multihead.perm_repeat", "use each of 0 to {last} exactly once (missing: {missing})",
                         last=last, missing=", ".join(map(str, missing)))
    return perm


def model_attention(n_head: int = 1, causal: bool = False, use_rope: bool = False, seed: int = 0):
    """A function x (T, d) -> (output (T, d), weights (H, T, T)) running the model's Attention with the
    tutorial's weights; RoPE, when on, rotates q and k by the positions 0..T-1 of the sequence."""
    x, Wq, Wk, Wv = tutorial_inputs(seed=seed)
    attn = attention_module(Wq, Wk, Wv, n_head=n_head, causal=causal)
    T, d = x.shape
    rope = rope_tables(torch.arange(T), d // n_head) if use_rope else None
    return x, lambda inputs: run_attention(attn, inputs, rope)


# name -> (causal mask, RoPE); "plain" is the tutorial's attn: no mask, no positions
VARIANTS = {"plain": (False, False), "causal": (True, False), "rope": (False, True), "causal_rope": (True, True)}
VARIANT_NAMES = {"plain": message("multihead.variant.plain", "no mask, no positions (the tutorial's attn)"),
                 "causal": message("multihead.variant.causal", "with the causal mask"),
                 "rope": message("multihead.variant.rope", "with RoPE"),
                 "causal_rope": message("multihead.variant.causal_rope", "with the mask and RoPE")}


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
    checks = [permutation_check(perm, n_head, causal, use_rope, seed) for causal, use_rope in VARIANTS.values()]
    names = pd.Series([VARIANT_NAMES[v] for v in VARIANTS], dtype=object)  # object: the Messages keep their keys
    return pd.DataFrame({"attention": names,
                         "allclose": [c["equal"] for c in checks],
                         "max |difference|": [c["max |difference|"] for c in checks]})


def head_patterns(n_head: int, causal: bool = True, use_rope: bool = False, seed: int = 0) -> torch.Tensor:
    """(n_head, T, T) weights of each head on the tutorial's x: same inputs, one pattern per subspace."""
    x, attn = model_attention(n_head, causal, use_rope, seed)
    return attn(x)[1]


# --- trained heads ---------------------------------------------------------------------------------------

ROLE_SCORES = {"previous_token": message("multihead.role.previous_token", "previous character"),
               "word_start": message("multihead.role.word_start", "start of the current word"),
               "first_token": message("multihead.role.first_token", "first character"),
               "induction": message("multihead.role.induction", "induction (what followed this character last time)")}


def head_profiles(patterns: torch.Tensor, ids: torch.Tensor, text: str) -> pd.DataFrame:
    """One row per head of a trained model on one text: the Inspect page's role scores, the weight on the space
    that opened the current word, how far back the head reads on average (in characters), how spread its
    weights are (entropy, nats), and a one-phrase role (a Message).

    Averages run over the queries 1..T-1 (query 0 can only see itself); word_start over the queries that have
    a space (or line break) at or before them.
    """
    table = head_scores(patterns, ids)
    p = patterns.double()
    T = p.shape[-1]
    pos = torch.arange(T)
    table.insert(4, "word_start", word_start_scores(p, [c in " \n" for c in text]).flatten().numpy())
    back = (pos[:, None] - pos[None, :]).clamp_min(0).double()
    table["mean reach"] = (p * back).sum(-1)[..., 1:].mean(-1).flatten().numpy()
    table["entropy"] = (-(p * p.clamp_min(1e-30).log()).sum(-1))[..., 1:].mean(-1).flatten().numpy()
    # object dtype: pandas would otherwise store the Messages as plain strings and lose their keys
    table["role"] = pd.Series([head_role(row) for row in table.to_dict("records")], index=table.index, dtype=object)
    return table


def word_start_scores(p: torch.Tensor, is_space: list[bool]) -> torch.Tensor:
    """(L, H) mean weight on the space that opened each query's word: the latest space at or before it (a space
    opens the word after it, so a space's own is itself); NaN when no query has one."""
    latest, last_space = [], -1
    for i, space in enumerate(is_space):
        if space:
            last_space = i
        latest.append(last_space)
    queries = [i for i in range(1, len(is_space)) if latest[i] >= 0]
    if not queries:
        return torch.full(p.shape[:2], float("nan"), dtype=p.dtype)
    q = torch.tensor(queries)
    return p[..., q, torch.tensor([latest[i] for i in queries])].mean(-1)


def head_role(row: dict) -> Message:
    """The strongest named score when it is clear, else where the head's weight goes on average."""
    scores = {name: row[name] for name in ROLE_SCORES if row[name] == row[name]}  # NaN: no repeat in the text
    best = max(scores, key=scores.get, default=None)
    if best is not None and scores[best] >= CLEAR_SCORE:
        return ROLE_SCORES[best]
    if row["mean reach"] >= 4:
        return message("multihead.role.spread", "spread out, about {n:.0f} characters back", n=row["mean reach"])
    return message("multihead.role.local", "local, the last few characters")


def clearest_head(profiles: pd.DataFrame) -> pd.Series | None:
    """The row of the head with the highest named score, or None when no head reaches CLEAR_SCORE."""
    best = profiles[list(ROLE_SCORES)].max(axis=1).fillna(0)
    return profiles.loc[best.idxmax()] if best.max() >= CLEAR_SCORE else None


def varied_layer(profiles: pd.DataFrame) -> int:
    """The layer whose heads play the most different roles (ties: the highest named score): the layer that
    shows best how the heads of one layer divide the work."""
    kinds = profiles["role"].map(lambda role: role.key.replace("multihead.role.", ""))
    best = profiles[list(ROLE_SCORES)].max(axis=1).fillna(0)
    layers = pd.DataFrame({"layer": profiles["layer"], "kind": kinds, "best": best}).groupby("layer")
    ranked = pd.DataFrame({"kinds": layers["kind"].nunique(), "best": layers["best"].max()})
    return int(ranked.sort_values(["kinds", "best"], ascending=False).index[0])
