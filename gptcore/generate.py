"""Generation: sampling one token, streaming many with a KV cache, and the checks on a sampling request.

The model (model.py) only maps tokens to logits; everything that turns logits into text lives here.
"""
from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from .errors import InputError
from .model import GPT


class LayerCache:
    """Keys and values already computed for one layer, so each new token costs one position, not T.

    With grouped-query attention the model hands every query head its group's key and value; the cache keeps
    one copy per group (every group-th head), which is what makes a GQA model's cache group times smaller."""

    def __init__(self, group: int = 1):
        self.group, self.k, self.v = group, None, None

    def extend(self, k, v):
        k, v = k[:, ::self.group], v[:, ::self.group]  # (B, n_kv_head, T, d_head)
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        if self.group == 1:
            return self.k, self.v
        return self.k.repeat_interleave(self.group, 1), self.v.repeat_interleave(self.group, 1)


class NonFiniteLogits(ValueError):
    """Sampling met NaN or infinite logits: the weights, not the request, are at fault."""


def check_sampling(temperature: float, top_k: int | None) -> None:
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not math.isfinite(temperature) \
            or temperature < 0:
        raise InputError("model.bad_temperature", "temperature must be a finite number, 0 or more (0 = always the "
                         "most likely token), got {value}", value=repr(temperature))
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0):
        raise InputError("model.bad_top_k", "top_k must be a whole number, 0 (off) or more, got {value}",
                         value=repr(top_k))


def sample_next(logits, temperature=1.0, top_k=None, generator=None) -> torch.Tensor:
    """Draw one token per row from softmax(logits / temperature), optionally among the top k only.

    Temperature 0, or one so small that logits / temperature overflows, picks the most likely token."""
    if not torch.isfinite(logits).all():
        raise NonFiniteLogits("the model's outputs are NaN or infinite: its weights are broken (a diverged run?)")
    scaled = logits / temperature if temperature else None
    if scaled is None or not torch.isfinite(scaled).all():
        return logits.argmax(-1, keepdim=True)
    logits = scaled
    if top_k and top_k < logits.shape[-1]:  # (0 or None: every token)
        kth = torch.topk(logits, top_k).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)


def stream(model: GPT, idx: torch.Tensor, n_new: int, temperature: float = 1.0, top_k: int | None = None,
           generator: torch.Generator | None = None, use_cache: bool = True) -> Iterator[int]:
    """Yield n_new sampled token ids continuing idx (1, T).

    The model sees at most `context` tokens, as in the tutorial's idx[:, -ctx:]. Without the cache,
    every step is a fresh forward over that window. With the KV cache, each new token costs one
    position; when the window is full, the cache is rebuilt from the newest 3/4 of it. Keys of
    deeper layers carry what their token saw, so simply evicting the oldest key would leak evicted
    text into the window; rebuilding keeps every step an exact forward over a window of 3/4·ctx
    to ctx tokens, at the cost of one prefill every ctx/4 tokens.
    """
    check_sampling(temperature, top_k)  # here: inside the generator it would wait for the first next()
    return _stream(model, idx, n_new, temperature, top_k, generator, use_cache)


@torch.inference_mode()  # cheaper than no_grad per op, and only token ids leave this generator
def _stream(model, idx, n_new, temperature, top_k, generator, use_cache) -> Iterator[int]:
    ctx = model.cfg.context
    window = idx[:, -ctx:]
    caches, logits = _prefill(model, window, use_cache)
    for i in range(n_new):
        nxt = sample_next(logits[:, -1], temperature, top_k, generator)
        yield int(nxt)
        if i == n_new - 1:
            break
        window = torch.cat([window, nxt], 1)
        if not use_cache:
            window = window[:, -ctx:]
            logits, _ = model(window, last_only=True)
        elif window.shape[1] > ctx:
            window = window[:, -(ctx - ctx // 4):]
            caches, logits = _prefill(model, window, use_cache)
        else:
            logits, _ = model(nxt, caches=caches, start=window.shape[1] - 1, last_only=True)


def _prefill(model, window, use_cache: bool):
    """(fresh per-layer caches or None, logits) for a forward over window."""
    group = model.cfg.n_head // model.cfg.kv_heads
    caches = [LayerCache(group) for _ in model.blocks] if use_cache else None
    return caches, model(window, caches=caches, last_only=True)[0]


def generate(model: GPT, idx, n_new: int, **kw) -> torch.Tensor:
    """idx with n_new sampled tokens appended."""
    new = list(stream(model, idx, n_new, **kw))
    return torch.cat([idx, torch.tensor([new], dtype=idx.dtype)], 1)
