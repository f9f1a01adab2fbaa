"""How large a model may be, checked from its config before a single weight is allocated."""
from __future__ import annotations

import math
import os

import torch

from .config import ConfigError, GPTConfig
from .model import GPT

# GPTConfig's per-field limits allow GPT-3-sized shapes (the concept pages count their parameters); weights that
# train are capped here. 100M parameters are 0.4 GB in fp32 (1.6 GB with AdamW's state), far past what trains on a
# CPU.
MAX_PARAMS = 100_000_000
# A model opened only to read (an imported one) may be larger: its float32 weights must fit in this many bytes,
# by default a quarter of the machine's memory, so a class's server keeps room for its sessions.
LOAD_LIMIT_ENV = "GPTCORE_MAX_MODEL_GB"


def meta_model(cfg: GPTConfig) -> GPT:
    """The model for cfg on PyTorch's meta device: exact shapes and counts, no memory, no random draws."""
    with torch.device("meta"):
        return GPT(cfg)


def check_buildable(cfg: GPTConfig) -> int:
    """Refuse, before any memory is allocated, a config whose weights would not fit the cap; its parameter count."""
    n = cfg.n_params
    if n > MAX_PARAMS:
        raise ConfigError("model.too_big", "this model would have {n:,} parameters ({gb:.1f} GB of weights); the "
                          "limit is {limit:,}. Use a smaller d_model, d_ff, n_layer or vocabulary.",
                          n=n, gb=n * 4 / 1e9, limit=MAX_PARAMS)
    return n


def load_limit_bytes() -> int:
    """The largest float32 model this process opens (GPTCORE_MAX_MODEL_GB, else a quarter of the memory)."""
    if (value := os.environ.get(LOAD_LIMIT_ENV)):
        try:
            gb = float(value)
        except ValueError:
            gb = math.nan
        if not (math.isfinite(gb) and gb > 0):
            raise ConfigError("model.bad_load_limit", "{env} must be a number of gigabytes above 0, got {value!r}",
                              env=LOAD_LIMIT_ENV, value=value)
        return int(gb * 1e9)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 * 10**9
    return total // 4


def check_loadable(cfg: GPTConfig) -> int:
    """Refuse, before loading, a model whose float32 weights exceed load_limit_bytes(); its parameter count."""
    n, limit = cfg.n_params, load_limit_bytes()
    if n * 4 > limit:
        raise ConfigError("model.too_big_to_open", "this model has {n:,} parameters, {gb:.1f} GB in float32; this "
                          "server opens models up to {limit:.1f} GB ({env})", n=n, gb=n * 4 / 1e9,
                          limit=limit / 1e9, env=LOAD_LIMIT_ENV)
    return n
