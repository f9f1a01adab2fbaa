"""One-line descriptions of a model, a training setup and a duration, shared by the CLI and the app."""
from __future__ import annotations

import math

from .config import GPTConfig, TrainConfig
from .errors import Message, message


def describe_model(cfg: GPTConfig) -> Message:
    norm = {"rms": "RMSNorm", "layer": "LayerNorm"}[cfg.norm]
    norm = message("describe.pre_norm", "pre-{norm}", norm=norm) if cfg.norm_placement == "pre" else \
        message("describe.post_norm", "post-{norm}", norm=norm)
    position = {"rope": message("describe.rope", "RoPE θ={theta:g}", theta=cfg.rope_theta),
                "learned": message("describe.learned_positions", "learned positions"),
                "none": message("describe.no_positions", "no positions")}[cfg.position]
    ffn = {"swiglu": "SwiGLU", "relu": "ReLU MLP", "gelu": "GELU MLP", "relu2": "ReLU² MLP"}[cfg.ffn]
    layers = message("describe.one_layer", "1 layer") if cfg.n_layer == 1 else \
        message("describe.layers", "{n} layers", n=cfg.n_layer)
    heads = message("describe.one_head", "1 head of {d_head}", d_head=cfg.d_head) if cfg.n_head == 1 else \
        message("describe.heads", "{n} heads of {d_head}", n=cfg.n_head, d_head=cfg.d_head)
    attention = message("describe.scaled", "scaled attention") if cfg.scale_attention else \
        message("describe.unscaled", "unscaled attention")
    if cfg.qk_norm:
        attention = message("describe.qk_norm", "{attention} with QK-norm", attention=attention)
    model = message("describe.model", "d_model {d_model} · {layers} · {heads} · {ffn} d_ff {d_ff} · context {context} "
                    "· vocab {vocab} · {norm} · {position} · {attention}", d_model=cfg.d_model,
                    layers=layers, heads=heads, ffn=ffn, d_ff=cfg.d_ff, context=cfg.context, vocab=cfg.vocab_size,
                    norm=norm, position=position, attention=attention)
    return message("describe.zero_init", "{model} · output matrices from zero", model=model) if cfg.zero_init \
        else model


def describe_training(tc: TrainConfig) -> Message:
    if tc.schedule == "cosine":
        schedule = message("describe.cosine", "cosine to {ratio:g}×, warmup {warmup}", ratio=tc.min_lr_ratio,
                           warmup=tc.warmup)
    elif tc.schedule == "warmdown":
        schedule = message("describe.warmdown", "warmup {warmup}, warm-down over the last {share:.0%} to {ratio:g}×",
                           warmup=tc.warmup, share=tc.warmdown, ratio=tc.min_lr_ratio)
    else:
        schedule = message("describe.constant", "constant")
    clip = message("describe.clip", " · clip {clip:g}", clip=tc.grad_clip) if tc.grad_clip else ""
    optimizer = message("describe.adamw", "AdamW lr {lr:g}", lr=tc.lr) if tc.optimizer == "adamw" else \
        message("describe.muon", "Muon lr {muon_lr:g} + AdamW lr {lr:g}", muon_lr=tc.muon_lr, lr=tc.lr)
    if tc.embed_lr:
        optimizer = message("describe.embed_lr", "{optimizer}, embedding lr {embed_lr:g}", optimizer=optimizer,
                            embed_lr=tc.embed_lr)
    return message("describe.training", "steps 0–{steps:,} · batch {batch} · {optimizer} ({schedule}) · weight decay "
                   "{weight_decay:g}{clip} · eval every {eval_every} · seed {seed}", steps=tc.steps,
                   batch=tc.batch_size, optimizer=optimizer, schedule=schedule, weight_decay=tc.weight_decay,
                   clip=clip, eval_every=tc.eval_every, seed=tc.seed)


def format_step(step: int, last: int) -> Message:
    """Where a run stands: steps are numbered 0…last, like the tutorial's range(last + 1)."""
    if step < 0:
        return message("describe.no_step", "no step yet of {last:,}", last=last)
    return message("describe.step", "step {step:,} of {last:,}", step=step, last=last)


def format_duration(seconds: float | None) -> Message | str:
    if not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return "–"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return message("describe.hours", "{h}h {m:02d}m", h=h, m=m)
    return message("describe.minutes", "{m}m {s:02d}s", m=m, s=s) if m else message("describe.seconds", "{s}s", s=s)
