"""The tutorial's model and training step, literally as its listing writes them.

Kept as the baseline every speed-up is measured against (`python -m bench.step`, `python -m bench.time_to_loss`)
and as the reference gptcore.GPT must agree with: RoPE tables and the causal mask are rebuilt on every forward,
softmax attention is written out, and the optimizer is a plain AdamW. Module names and shapes equal
gptcore.GPT's, so one state_dict fits both.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .model import GPT
from .train import INIT_LOCK


class TutorialRMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        inv_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * inv_rms * self.weight


def tutorial_rope(x, theta: float = 10000.0):
    """Rotate the channel pairs of x (B, H, T, d_head), building the angle table from scratch each call."""
    T, d_head = x.shape[-2], x.shape[-1]
    speeds = theta ** (-torch.arange(0, d_head, 2) / d_head)
    angles = torch.arange(T)[:, None] * speeds[None, :]
    cos, sin = angles.cos(), angles.sin()
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)


class TutorialAttention(nn.Module):
    def __init__(self, d: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        heads = [t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in self.qkv(x).split(C, -1)]
        q, k, v = tutorial_rope(heads[0]), tutorial_rope(heads[1]), heads[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))


class TutorialSwiGLU(nn.Module):
    def __init__(self, d: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d, d_ff, bias=False)
        self.w3 = nn.Linear(d, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TutorialBlock(nn.Module):
    def __init__(self, d: int, n_head: int, d_ff: int):
        super().__init__()
        self.ln1, self.attn = TutorialRMSNorm(d), TutorialAttention(d, n_head)
        self.ln2, self.ffn = TutorialRMSNorm(d), TutorialSwiGLU(d, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class TutorialGPT(nn.Module):
    def __init__(self, vocab: int, d: int = 128, n_layer: int = 4, n_head: int = 4, d_ff: int = 344):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(TutorialBlock(d, n_head, d_ff) for _ in range(n_layer))
        self.ln_f = TutorialRMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets=None):
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


def tutorial_twin(model: GPT) -> TutorialGPT:
    """The tutorial's literal model carrying a copy of model's weights (RoPE, RMSNorm, SwiGLU configs only)."""
    cfg = model.cfg
    with INIT_LOCK, torch.random.fork_rng(devices=[]):  # its throwaway init must not shift a seeded build elsewhere
        twin = TutorialGPT(cfg.vocab_size, cfg.d_model, cfg.n_layer, cfg.n_head, cfg.d_ff)
    twin.load_state_dict(model.state_dict())
    twin.cfg = cfg  # what gptcore.step.evaluate reads for the context
    return twin


def tutorial_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One step of the tutorial's loop: forward, zero_grad, backward, optimizer step; returns the loss."""
    _, loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss
