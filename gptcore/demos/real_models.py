"""Real models beside the tutorial's: what each convention a concept page teaches comes to in the published
configurations of gptcore.published (grouped-query attention's savings, RoPE's slowest wavelength, SwiGLU's width,
the embeddings' share, the norms), and in a converted copy of one under checkpoints/ when there is one.

Every count here comes from a GPTConfig and the model's own formulas (GPTConfig.n_params, swiglu_hidden,
scaled_frequencies), so the numbers are those of gptcore's GPT built with the published shapes.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import pandas as pd
from safetensors import SafetensorError, safe_open

from ..config import GPTConfig, swiglu_hidden
from ..errors import Message, message
from ..model import scaled_frequencies
from ..published import PUBLISHED, SMOLLM2_135M, PublishedModel
from .frames import message_frame

BF16 = 2  # bytes per number: real models ship and run their weights and KV cache in bfloat16
SWIGLU_MULTIPLES = (8, 64, 128, 256)  # the roundings of 8/3·d_model that published SwiGLU widths use
SHAPE = ("vocab_size", "d_model", "n_layer", "n_head", "kv_heads", "d_head", "d_ff")  # what a converted copy keeps


def ours_name() -> Message:
    return message("real_models.ours", "this app's GPT")


def compared(ours: GPTConfig | None = None) -> dict[Message | str, GPTConfig]:
    """{name: config}: this app's model (the tutorial's unless given), then every published model."""
    return {ours_name(): ours or GPTConfig(), **{m.name: m.config for m in PUBLISHED.values()}}


# --- grouped-query attention -----------------------------------------------------------------------------

def kv_sharing(cfg: GPTConfig) -> dict:
    """What sharing key/value heads saves: the KV cache kept per token (k and v of every block) and the k and v
    projections' weights, against the same model with one key/value head per query head."""
    H, G, D, L = cfg.n_head, cfg.kv_heads, cfg.d_head, cfg.n_layer
    cache, cache_unshared = 2 * G * D * L, 2 * H * D * L
    weights, weights_unshared = 2 * cfg.d_model * G * D, 2 * cfg.d_model * H * D  # per block
    return {"query heads": H, "key/value heads": G, "group": H // G, "d_head": D, "n_layer": L,
            "KV cache / token": cache, "without sharing": cache_unshared, "smaller by": cache_unshared / cache,
            "KV cache at full context (MB)": cache * cfg.context * BF16 / 1e6,
            "unshared at full context (MB)": cache_unshared * cfg.context * BF16 / 1e6,
            "k/v weights / block": weights, "unshared k/v weights / block": weights_unshared,
            "weights saved": L * (weights_unshared - weights),
            "share of parameters saved": L * (weights_unshared - weights) / cfg.n_params, "parameters": cfg.n_params}


def kv_table(ours: GPTConfig | None = None) -> pd.DataFrame:
    columns = ["query heads", "key/value heads", "KV cache / token", "without sharing", "smaller by"]
    return message_frame([{"model": name, **{c: kv_sharing(cfg)[c] for c in columns}}
                          for name, cfg in compared(ours).items()])


# --- RoPE ------------------------------------------------------------------------------------------------

def rope_reach(cfg: GPTConfig) -> dict:
    """How far RoPE's slowest channel pair reaches: its wavelength 2π/θ_i in tokens (after the model's RoPE
    scaling, if any) against the context, and how many pairs never complete a turn within the context."""
    wavelengths = (2 * math.pi / scaled_frequencies(cfg).double()).tolist()
    return {"θ": cfg.rope_theta, "d_head": cfg.d_head, "pairs": len(wavelengths), "context": cfg.context,
            "slowest wavelength": wavelengths[-1],
            "pairs slower than the context": sum(w > cfg.context for w in wavelengths)}


def rope_table(ours: GPTConfig | None = None) -> pd.DataFrame:
    columns = ["θ", "d_head", "context", "slowest wavelength", "pairs slower than the context"]
    return message_frame([{"model": name, **{c: rope_reach(cfg)[c] for c in columns}}
                          for name, cfg in compared(ours).items()])


# --- SwiGLU ----------------------------------------------------------------------------------------------

def swiglu_rule(cfg: GPTConfig) -> Message:
    """How d_ff relates to 8/3·d_model: exactly, rounded up to a multiple (the smallest that gives it), or not."""
    if 8 * cfg.d_model == 3 * cfg.d_ff:
        return message("real_models.swiglu_exact", "exactly 8/3·d_model")
    for multiple in SWIGLU_MULTIPLES:
        if swiglu_hidden(cfg.d_model, multiple) == cfg.d_ff:
            return message("real_models.swiglu_rounded", "8/3·d_model rounded up to a multiple of {multiple}",
                           multiple=multiple)
    return message("real_models.swiglu_other", "not 8/3: {ratio:.3g}·d_model", ratio=cfg.d_ff / cfg.d_model)


def ffn_table(ours: GPTConfig | None = None) -> pd.DataFrame:
    return message_frame([{"model": name, "d_model": cfg.d_model, "8/3·d_model": 8 * cfg.d_model / 3, "d_ff": cfg.d_ff,
                           "rule": swiglu_rule(cfg)} for name, cfg in compared(ours).items()])


# --- embeddings ------------------------------------------------------------------------------------------

def embedding_share(cfg: GPTConfig) -> dict:
    """The token embedding (vocab × d_model) and the output head (the same matrix when tied) against the whole."""
    table = cfg.vocab_size * cfg.d_model
    both = table if cfg.tie_embeddings else 2 * table
    untied = cfg.n_params + (table if cfg.tie_embeddings else 0)
    return {"vocab": cfg.vocab_size, "d_model": cfg.d_model, "embedding": table, "tied": cfg.tie_embeddings,
            "embedding + head": both, "parameters": cfg.n_params, "embedding share": both / cfg.n_params,
            "untied parameters": untied, "untied share": 2 * table / untied}


def embedding_table(ours: GPTConfig | None = None) -> pd.DataFrame:
    columns = ["vocab", "embedding", "tied", "parameters", "embedding share"]
    return message_frame([{"model": name, **{c: embedding_share(cfg)[c] for c in columns}}
                          for name, cfg in compared(ours).items()])


# --- norms -----------------------------------------------------------------------------------------------

def norm_count(cfg: GPTConfig) -> dict:
    """The model's norms: two per block and a final one under pre-norm, plus QK-norm's two per block."""
    width = cfg.d_model * (1 if cfg.norm == "rms" else 2)
    final = cfg.norm_placement == "pre"
    norms = 2 * cfg.n_layer + final + (2 * cfg.n_layer if cfg.qk_norm else 0)
    gains = (2 * cfg.n_layer + final) * width + (2 * cfg.n_layer * cfg.d_head if cfg.qk_norm else 0)
    return {"placement": cfg.norm_placement, "ε": cfg.norm_eps, "norms": norms, "gains": gains,
            "share of parameters": gains / cfg.n_params}


def norm_table(ours: GPTConfig | None = None) -> pd.DataFrame:
    columns = ["ε", "norms", "gains", "share of parameters"]
    return message_frame([{"model": name, **{c: norm_count(cfg)[c] for c in columns}}
                          for name, cfg in compared(ours).items()])


# --- side by side ----------------------------------------------------------------------------------------

def side_by_side(ours: GPTConfig | None = None) -> pd.DataFrame:
    """One row per model: its shape, its RoPE and its parameters."""
    rows = []
    for name, cfg in compared(ours).items():
        rows.append({"model": name, "layers": cfg.n_layer, "d_model": cfg.d_model, "heads": cfg.n_head,
                     "kv heads": cfg.kv_heads, "d_head": cfg.d_head, "d_ff": cfg.d_ff,
                     "d_ff / d_model": cfg.d_ff / cfg.d_model, "vocab": cfg.vocab_size, "context": cfg.context,
                     "θ": cfg.rope_theta, "tied": cfg.tie_embeddings, "parameters": cfg.n_params,
                     "embedding share": embedding_share(cfg)["embedding share"]})
    return message_frame(rows)


# --- a converted copy under checkpoints/ -----------------------------------------------------------------

def shape_of(cfg: GPTConfig) -> tuple:
    return tuple(getattr(cfg, name) for name in SHAPE)


def converted_copy(folders: list[Path], model: PublishedModel = SMOLLM2_135M) -> tuple[Path, dict] | None:
    """(folder, weight counts) of the first checkpoint folder that holds an imported copy of `model` (meta.json
    says `imported: true`, its weights have the model's shape, its context perhaps capped), or None."""
    for folder in folders:
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            if not (isinstance(meta, dict) and meta.get("imported") is True):
                continue  # a trained run: its weights are not opened
            weights = (folder / "model.safetensors").stat()
            shape, counts = header_facts(str(folder / "model.safetensors"), weights.st_mtime_ns, weights.st_size)
            if shape == shape_of(model.config):
                return folder, counts
        except (OSError, ValueError, TypeError, KeyError, SafetensorError):
            continue  # not a readable copy of this model: the panel does without it
    return None


@lru_cache(maxsize=16)
def header_facts(path: str, mtime_ns: int, size: int) -> tuple[tuple, dict]:
    """(the model's shape, its weight counts) from a checkpoint's safetensors header alone: the config it stores
    (not the tokenizer beside it, megabytes for a real model), and the token embedding's and all the numbers (a
    tied head stored once). Cached per version of the file (mtime_ns and size say which)."""
    with safe_open(path, framework="pt") as f:
        cfg = GPTConfig.from_dict(json.loads(f.metadata()["config"]))
        sizes = {name: math.prod(f.get_slice(name).get_shape()) for name in f.keys()}
    return shape_of(cfg), {"embedding": sizes.get("emb.weight", 0), "parameters": sum(sizes.values())}
