"""The tutorial's LLaMA-style GPT, with its ablation switches, the options real LLaMA-family models need, and
hook points named as TransformerLens names them (gptcore/hooks.py: run_with_hooks, run_with_cache).

Module creation order matches the tutorial's `gpt.py` (embedding, then per block qkv, proj, w1, w3, w2,
then head), so with the same seed PyTorch's default init draws the very same weights.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import GPTConfig
from .hooks import HookedRootModule, HookPoint


class RMSNorm(nn.Module):
    """x / rms(x) · γ — LayerNorm without the mean subtraction and without β."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):  # autograd derives the backward: one written by hand measured no faster (bench.rmsnorm)
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(cfg: GPTConfig) -> nn.Module:
    if cfg.norm == "rms":
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=True)


def rope_frequencies(d_head: int, theta: float = 10000.0) -> torch.Tensor:
    """One rotation speed per channel pair: θ_i = theta^(-2i/d). Early pairs spin fast, late pairs slowly."""
    return theta ** (-torch.arange(0, d_head, 2) / d_head)


def scaled_frequencies(cfg: GPTConfig) -> torch.Tensor:
    """The model's RoPE speeds, stretched for a longer context when cfg.rope_scaling asks.

    linear slows every pair by the factor. llama3 slows only the pairs whose wavelength 2π/θ_i is longer than the
    original context / low_freq_factor, keeps those shorter than original / high_freq_factor, and blends between."""
    freq = rope_frequencies(cfg.d_head, cfg.rope_theta)
    if cfg.rope_scaling == "linear":
        return freq / cfg.rope_factor
    if cfg.rope_scaling == "llama3":
        turns = cfg.rope_original_context * freq / (2 * math.pi)  # how often each pair turns over the old context
        low, high = cfg.rope_low_freq_factor, cfg.rope_high_freq_factor
        blend = ((turns - low) / (high - low)).clamp(0, 1) if high != low else (turns >= high).to(freq.dtype)
        return freq / cfg.rope_factor * (1 - blend) + freq * blend
    return freq


def rope_tables(positions: torch.Tensor, d_head: int, theta: float = 10000.0, freq: torch.Tensor | None = None):
    """cos and sin of position·θ_i, shape (len(positions), d_head/2)."""
    freq = rope_frequencies(d_head, theta) if freq is None else freq
    angles = positions[:, None] * freq[None, :]
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved channel pairs (x[..., 0::2], x[..., 1::2]) of x (..., T, d) by their angles.

    A pair (x1, x2) read as the complex number x1 + i·x2 turns by an angle when multiplied by
    cos + i·sin: (x1·cos − x2·sin) + i·(x1·sin + x2·cos), the tutorial's two formulas, in one
    kernel instead of six (slicing, four products, stack). The result is bitwise the same.
    """
    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)))  # a view: no copy of x
    return torch.view_as_real(pairs * torch.complex(cos, sin)).flatten(-2)


def _hook_pair(qk: torch.Tensor, hook_q: HookPoint, hook_k: HookPoint) -> torch.Tensor:
    """q and k, stacked on dim 2 of qk, through their hook points; qk untouched when neither is observed."""
    if not (hook_q.active or hook_k.active):
        return qk
    q, k = qk.unbind(2)
    return torch.stack([hook_q(q), hook_k(k)], 2)


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.n_kv_head, self.d_head, self.causal = cfg.n_head, cfg.kv_heads, cfg.d_head, cfg.causal
        self.scale = 1 / math.sqrt(cfg.d_head) if cfg.scale_attention else 1.0
        # one matmul instead of three: n_head query rows, then n_kv_head key rows and as many value rows
        self.qkv = nn.Linear(cfg.d_model, (cfg.n_head + 2 * cfg.kv_heads) * cfg.d_head, bias=cfg.qkv_bias)
        self.proj = nn.Linear(cfg.n_head * cfg.d_head, cfg.d_model, bias=False)  # W_O
        # QK-norm: q and k of fixed RMS, so the scores' size is set by the two learned gains, not by how large the
        # weights grow
        self.qk_norm = nn.ModuleList([RMSNorm(cfg.d_head, cfg.norm_eps), RMSNorm(cfg.d_head, cfg.norm_eps)]) \
            if cfg.qk_norm else None
        # Hook points. Per-head vectors are (B, T, H, d_head): q, k (after QK-norm, if on) and v before RoPE, rot_q,
        # rot_k after it, z = each head's weighted sum of values (before W_O); result (B, T, H, d_model) is each
        # head's share of the output after W_O. attn_scores (pre-softmax, scaled and masked) and pattern are
        # (B, H, T_query, T_key). With grouped keys and values, k and v are already given to every query head of
        # the group, so each head is read and changed the same way whatever the grouping.
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_rot_q, self.hook_rot_k = HookPoint(), HookPoint()
        self.hook_attn_scores, self.hook_pattern = HookPoint(), HookPoint()
        self.hook_z, self.hook_result = HookPoint(), HookPoint()

    def project(self, x):
        """(qk, v) of x (B, T, d_model): q and k stacked (B, T, 2, H, d_head), QK-normed when on; v (B, T, 1, H,
        d_head). Before RoPE."""
        B, T, _ = x.shape
        H, G, D = self.n_head, self.n_kv_head, self.d_head
        qkv = self.qkv(x)
        if G == H:  # (B, T, 3·H·D) -> (B, T, {q,k,v}, H, D) as one view: no copy
            qk, v = qkv.view(B, T, 3, H, D).split([2, 1], dim=2)
        else:  # each key/value head serves H / G query heads: repeat it for each of them
            q, k, v = qkv.split([H * D, G * D, G * D], dim=-1)
            k, v = (t.view(B, T, G, D).repeat_interleave(H // G, dim=2) for t in (k, v))
            qk, v = torch.stack([q.view(B, T, H, D), k], 2), v[:, :, None]
        if self.qk_norm is not None:
            qk = torch.stack([norm(t) for norm, t in zip(self.qk_norm, qk.unbind(2))], 2)
        return qk, v

    def forward(self, x, rope=None, cache=None):
        B, T, _ = x.shape
        qk, v = self.project(x)
        qk = _hook_pair(qk, self.hook_q, self.hook_k)
        if rope is not None:  # q and k rotated together, in one kernel
            cos, sin = rope
            qk = _hook_pair(apply_rope(qk, cos[:, None, None], sin[:, None, None]), self.hook_rot_q, self.hook_rot_k)
        # -> (B, H, T, d_head) views; unbind and split (not indexing) keep the backward free of zero-filled copies
        q, k = (t.transpose(1, 2) for t in qk.unbind(2))
        v = self.hook_v(v.squeeze(2)).transpose(1, 2)
        if cache is not None:
            k, v = cache.extend(k, v)
        # A single new query may see every cached key; a block of T queries over T keys needs the mask.
        causal = self.causal and T > 1
        # SDPA's is_causal lines the mask up from the first key: right only when there are as many keys as queries
        if self.hook_attn_scores.active or self.hook_pattern.active or (causal and k.shape[2] != T):
            y = self._explicit(q, k, v, causal)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=self.scale)
        z = self.hook_z(y.transpose(1, 2))  # (B, T, H, d_head)
        if self.hook_result.active:
            return self.hook_result(self._per_head(z)).sum(2)
        # transpose left z non-contiguous, so .view would fail: reshape copies when it must
        return self.proj(z.reshape(B, T, -1))

    def _explicit(self, q, k, v, causal: bool):
        """softmax(q·kᵀ·scale + M)·v written out, so the scores and weights can pass through their hook points."""
        scores = (q @ k.transpose(-2, -1)) * self.scale
        if causal:
            Tq, Tk = scores.shape[-2:]
            future = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).triu(Tk - Tq + 1)
            scores = scores.masked_fill(future, float("-inf"))
        return self.hook_pattern(self.hook_attn_scores(scores).softmax(-1)) @ v

    def _per_head(self, z):
        """(B, T, H, d_model): head h's z times its own d_head columns of W_O. Summed over heads, this is proj(z)."""
        w_o = self.proj.weight.view(-1, self.n_head, z.shape[-1])  # (d_model, H, d_head)
        return torch.einsum("bthd,chd->bthc", z, w_o)


def relu_squared(x: torch.Tensor) -> torch.Tensor:
    """ReLU(x)²: as sparse as ReLU, smooth at 0, and growing like x² for large inputs (modded-nanogpt's MLP)."""
    return F.relu(x).square()


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) ⊙ w3 x); or the classic w2(act(w1 x)) with ReLU, GELU or ReLU²."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.kind = cfg.ffn
        self.act = {"swiglu": F.silu, "relu": F.relu, "gelu": F.gelu, "relu2": relu_squared}[cfg.ffn]
        self.w1 = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        if cfg.ffn == "swiglu":
            self.w3 = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)  # the linear "gate" branch
        self.w2 = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)
        # (B, T, d_ff) hook points: w1 x, act(w1 x), the linear branch w3 x, and what enters w2
        self.hook_pre, self.hook_act = HookPoint(), HookPoint()
        self.hook_pre_linear, self.hook_post = HookPoint(), HookPoint()

    def forward(self, x):
        h = self.hook_act(self.act(self.hook_pre(self.w1(x))))
        if self.kind == "swiglu":
            h = h * self.hook_pre_linear(self.w3(x))
        return self.w2(self.hook_post(h))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.pre_norm = cfg.norm_placement == "pre"
        self.ln1, self.attn = make_norm(cfg), Attention(cfg)
        self.ln2, self.ffn = make_norm(cfg), FeedForward(cfg)
        # (B, T, d_model) hook points: the residual stream before, between and after the two sub-blocks, each
        # norm's output and each sub-block's output
        self.hook_resid_pre, self.hook_resid_mid, self.hook_resid_post = HookPoint(), HookPoint(), HookPoint()
        self.hook_ln1_out, self.hook_attn_out = HookPoint(), HookPoint()
        self.hook_ln2_out, self.hook_mlp_out = HookPoint(), HookPoint()

    def forward(self, x, rope=None, cache=None):
        x = self.hook_resid_pre(x)
        if self.pre_norm:  # norm only on the branch: the residual trunk stays a clean chain of additions
            attn_out = self.hook_attn_out(self.attn(self.hook_ln1_out(self.ln1(x)), rope, cache))
            x = self.hook_resid_mid(x + attn_out)
            ffn_out = self.hook_mlp_out(self.ffn(self.hook_ln2_out(self.ln2(x))))
            return self.hook_resid_post(x + ffn_out)
        # post-norm: the trunk itself is normed
        x = self.hook_resid_mid(self.hook_ln1_out(self.ln1(x + self.hook_attn_out(self.attn(x, rope, cache)))))
        return self.hook_resid_post(self.hook_ln2_out(self.ln2(x + self.hook_mlp_out(self.ffn(x)))))


class GPT(HookedRootModule):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context, cfg.d_model) if cfg.position == "learned" else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        if cfg.zero_init:  # zeroed after the default init, so every other weight gets the same random numbers
            for block in self.blocks:
                nn.init.zeros_(block.attn.proj.weight)
                nn.init.zeros_(block.ffn.w2.weight)
        # Pre-norm lets the residual stream grow layer after layer, so it needs one last norm.
        self.ln_f = make_norm(cfg) if cfg.norm_placement == "pre" else nn.Identity()
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:  # logits = x · Eᵀ: a token's output row is its input row (after the head's own draw,
            self.head.weight = self.emb.weight  # so an untied model's random numbers stay the same)
        # (B, T, d_model): token embedding rows, learned position rows (if any), the final norm's output
        self.hook_embed, self.hook_pos_embed, self.hook_ln_f_out = HookPoint(), HookPoint(), HookPoint()
        if cfg.position == "rope":  # computed once, not on every forward as in the tutorial's sketch
            cos, sin = rope_tables(torch.arange(cfg.context), cfg.d_head, freq=scaled_frequencies(cfg))
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.setup()  # names every hook point after its place: blocks.0.attn.hook_pattern, …

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _rope(self, start: int, T: int):
        if self.cfg.position != "rope":
            return None
        return self.rope_cos[start:start + T], self.rope_sin[start:start + T]

    def forward(self, idx, targets=None, caches=None, start: int = 0, last_only: bool = False):
        """Logits (B, T, V) and mean cross-entropy against targets (or None).

        With `caches` (one LayerCache per block), idx continues a sequence whose first `start` tokens
        are already cached. last_only: logits (B, 1, V) of the last position alone, all that sampling needs (with
        a vocabulary of 49k, the head over a long prompt costs more than a few layers).
        """
        T = idx.shape[1]
        if start + T > self.cfg.context:
            raise ValueError(f"{start + T} positions exceed the model's context of {self.cfg.context}")
        x = self.hook_embed(self.emb(idx))
        if self.pos_emb is not None:
            x = x + self.hook_pos_embed(self.pos_emb(torch.arange(start, start + T, device=idx.device)))
        rope = self._rope(start, T)
        for i, block in enumerate(self.blocks):
            x = block(x, rope, None if caches is None else caches[i])
        logits = self.head(self.hook_ln_f_out(self.ln_f(x[:, -1:] if last_only else x)))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss
