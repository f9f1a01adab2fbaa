"""One-line descriptions of a model, a training setup and a duration, shared by the CLI and the app."""
from __future__ import annotations

import math

from .config import GPTConfig, TrainConfig
from .errors import Message, message
from .model import meta_model


def count_params(cfg: GPTConfig) -> int:
    """Parameter count of a config, from its meta-device model: no memory, no random draws."""
    return meta_model(cfg).num_params()


def describe_model(cfg: GPTConfig) -> str:
    norm = {"rms": "RMSNorm", "layer": "LayerNorm"}[cfg.norm]
    position = {"rope": f"RoPE θ={cfg.rope_theta:g}", "learned": "learned positions", "none": "no positions"}
    ffn = {"swiglu": "SwiGLU", "relu": "ReLU MLP", "gelu": "GELU MLP"}[cfg.ffn]
    layers = f"{cfg.n_layer} layer{'s' if cfg.n_layer != 1 else ''}"
    heads = f"{cfg.n_head} head{'s' if cfg.n_head != 1 else ''} of {cfg.d_head}"
    return (f"d_model {cfg.d_model} · {layers} · {heads} · "
            f"{ffn} d_ff {cfg.d_ff} · context {cfg.context} · vocab {cfg.vocab_size} · "
            f"{cfg.norm_placement}-{norm} · {position[cfg.position]} · "
            f"{'scaled' if cfg.scale_attention else 'unscaled'} attention")


def describe_training(tc: TrainConfig) -> str:
    schedule = "constant" if tc.schedule == "constant" else \
        f"cosine to {tc.min_lr_ratio:g}×, warmup {tc.warmup}"
    clip = f" · clip {tc.grad_clip:g}" if tc.grad_clip else ""
    optimizer = f"AdamW lr {tc.lr:g}" if tc.optimizer == "adamw" else f"Muon lr {tc.muon_lr:g} + AdamW lr {tc.lr:g}"
    return (f"steps 0–{tc.steps:,} · batch {tc.batch_size} · {optimizer} ({schedule}) · "
            f"weight decay {tc.weight_decay:g}{clip} · eval every {tc.eval_every} · seed {tc.seed}")


def format_step(step: int, last: int) -> Message:
    """Where a run stands: steps are numbered 0…last, like the tutorial's range(last + 1)."""
    if step < 0:
        return message("describe.no_step", "no step yet of {last:,}", last=last)
    return message("describe.step", "step {step:,} of {last:,}", step=step, last=last)


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "–"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {s:02d}s" if m else f"{s}s"
