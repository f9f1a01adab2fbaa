"""Residual stream and normalization: RMSNorm against LayerNorm, and pre-norm against post-norm in training.

The training comparison runs gptcore's own Trainer on a deep, narrow model, one variant after another on
the same seed and data, and records per-layer gradient norms (after every backward) and per-layer
residual-stream norms (through the blocks' hook points).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import pandas as pd
import torch
import torch.nn as nn

from ..config import GPTConfig, TrainConfig, swiglu_hidden
from ..data import get_batch
from ..events import EvalEvent, StepEvent, TrainingEvent
from ..model import GPT, RMSNorm
from ..texts import builtin_corpus
from ..train import Trainer
from .races import RaceProgress

# --- RMSNorm vs LayerNorm --------------------------------------------------------------------------------

def sample_vector(d: int = 8, shift: float = 0.0, seed: int = 0) -> torch.Tensor:
    """randn(d) from a private generator, plus a constant shift (a non-zero mean)."""
    return torch.randn(d, generator=torch.Generator().manual_seed(seed)) + shift


def make_norms(d: int, eps: float = 1e-5) -> dict[str, nn.Module]:
    """The two norms a GPTConfig can ask for, at their initial γ = 1 (and β = 0)."""
    return {"RMSNorm": RMSNorm(d, eps), "LayerNorm": nn.LayerNorm(d, eps=eps)}


@torch.no_grad()
def norm_outputs(x: torch.Tensor, eps: float = 1e-5) -> pd.DataFrame:
    """x, RMSNorm(x), LayerNorm(x) and RMSNorm(x − mean x): the last two agree, because LayerNorm is
    RMSNorm applied to the centred vector (with β = 0)."""
    norms = make_norms(x.shape[-1], eps)
    return pd.DataFrame({"x": x.numpy(), "RMSNorm(x)": norms["RMSNorm"](x).numpy(),
                         "LayerNorm(x)": norms["LayerNorm"](x).numpy(),
                         "RMSNorm(x − mean)": norms["RMSNorm"](x - x.mean()).numpy()})


def norm_summary(x: torch.Tensor, eps: float = 1e-5) -> pd.DataFrame:
    """Mean and root-mean-square of each output: RMSNorm fixes only the RMS, LayerNorm also the mean."""
    out = norm_outputs(x, eps)
    return pd.DataFrame({"vector": out.columns, "mean": out.mean().values,
                         "RMS": (out.pow(2).mean() ** 0.5).values})


def norm_parameters(d: int) -> pd.DataFrame:
    """Parameters per norm, counted on the modules: RMSNorm has γ only, LayerNorm γ and β."""
    return pd.DataFrame([{"norm": name, "parameters": sum(p.numel() for p in m.parameters()),
                          "tensors": ", ".join(n for n, _ in m.named_parameters())}
                         for name, m in make_norms(d).items()])


@torch.no_grad()
def time_norms(d: int = 128, n_rows: int = 32 * 128, repeats: int = 20) -> pd.DataFrame:
    """Wall time per call of each norm on an (n_rows, d) activation, best of three batches of repeats."""
    x = torch.randn(n_rows, d, generator=torch.Generator().manual_seed(0))
    rows = []
    for name, norm in make_norms(d).items():
        norm(x)  # warm-up
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(repeats):
                norm(x)
            best = min(best, (time.perf_counter() - t0) / repeats)
        rows.append({"norm": name, "activation": f"{n_rows} × {d}", "µs per call": best * 1e6})
    return pd.DataFrame(rows)


# --- pre-norm vs post-norm training ----------------------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    placement: str  # "pre" | "post"
    warmup: bool
    norm: str = "rms"  # "rms" | "layer"
    name: str = ""  # a label of its own, for races that vary only the norm

    @property
    def label(self) -> str:
        return self.name or f"{self.placement}-norm, {'with' if self.warmup else 'no'} warmup"


ALL_VARIANTS = tuple(Variant(p, w) for p in ("pre", "post") for w in (False, True))
NORM_VARIANTS = (Variant("pre", True, "rms", "RMSNorm"), Variant("pre", True, "layer", "LayerNorm"))


@dataclass(frozen=True)
class NormRace:
    """A deep, narrow model: depth is where the placement of the norm matters."""
    n_layer: int = 16
    d_model: int = 32
    n_head: int = 4
    context: int = 32
    batch_size: int = 16
    steps: int = 100
    lr: float = 1e-2
    warmup: int = 20
    probe_every: int = 10
    eval_batches: int = 2  # at the last step
    corpus_chars: int = 200_000
    seed: int = 0
    variants: tuple[Variant, ...] = field(default=ALL_VARIANTS)

    def model_config(self, variant: Variant) -> GPTConfig:
        return GPTConfig(d_model=self.d_model, n_layer=self.n_layer, n_head=self.n_head,
                         d_ff=swiglu_hidden(self.d_model), context=self.context, norm_placement=variant.placement,
                         norm=variant.norm)

    def train_config(self, warmup: bool) -> TrainConfig:
        return TrainConfig(steps=self.steps, batch_size=self.batch_size, lr=self.lr, seed=self.seed,
                           schedule="cosine", warmup=self.warmup if warmup else 0, eval_every=self.steps,
                           eval_batches=self.eval_batches, final_eval=False, sample_chars=1)

    @property
    def total_steps(self) -> int:
        return len(self.variants) * (self.steps + 1)


def block_grad_norms(model: GPT) -> list[float]:
    """L2 norm of the gradient of each block's parameters, bottom block first."""
    return [torch.sqrt(sum(p.grad.pow(2).sum() for p in b.parameters() if p.grad is not None)).item()
            for b in model.blocks]


@torch.no_grad()
def residual_norms(model: GPT, idx: torch.Tensor) -> list[float]:
    """Mean L2 norm of the residual stream entering block 0 (the embeddings) and leaving every block."""
    names = ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(len(model.blocks))]
    _, acts = model.run_with_cache(idx, names_filter=names)
    return [acts[n].norm(dim=-1).mean().item() for n in names]


def run_norm_race(job, race: NormRace) -> str | None:
    """Train every variant in turn on the same seed and data, reporting into job (a explorer.jobs.Job) through a
    RaceProgress (gptcore.demos.races: run states, steps, speed, ETA).

    job.data gets rows appended as training goes: 'loss' (variant, step, loss), 'grads' and 'resid'
    (variant, step, layer, norm) every probe_every steps, taken before that step's update (so step 0 is the
    initialisation, the same for every warmup), 'val' (variant, validation loss at the last step) and 'timing'
    (variant, seconds per step) as each variant ends.
    """
    corpus = builtin_corpus(race.corpus_chars, race.seed)
    progress = RaceProgress(job, [v.label for v in race.variants], race.total_steps)
    for variant in race.variants:
        if progress.stopped:
            break
        trainer = Trainer.fresh(race.model_config(variant), race.train_config(variant.warmup), corpus)
        started = time.perf_counter()
        probe = get_batch(trainer.val_ids, race.context, 8, torch.Generator().manual_seed(race.seed))[0]
        window: list[list[float]] = []  # per-layer grad norms since the last probe

        def after_backward(tr: Trainer, variant=variant, probe=probe, window=window):
            # Between backward and update: the probe sees the weights this step's loss and gradient came from.
            step = tr.step + 1  # tr.step is the last finished step
            window.append(block_grad_norms(tr.model))
            if step % race.probe_every == 0 or step == race.steps:
                grads = torch.tensor(window).mean(0).tolist()
                window.clear()
                job.append("grads", *((variant.label, step, i + 1, g) for i, g in enumerate(grads)))
                job.append("resid", *((variant.label, step, i, r)
                                      for i, r in enumerate(residual_norms(tr.model, probe))))

        def on_event(event: TrainingEvent, variant=variant):
            if isinstance(event, EvalEvent) and event.step == race.steps:
                job.append("val", (variant.label, event.val))
            if isinstance(event, StepEvent):
                job.append("loss", (variant.label, event.step, event.loss))
                progress.step_done(event.tokens_per_s)

        progress.run(variant.label, trainer, on_event=on_event, after_backward=after_backward)
        # wall time per step, probes included (the same probes for every variant)
        job.append("timing", (variant.label, (time.perf_counter() - started) / max(1, trainer.step + 1)))
    return progress.outcome()


def race_frames(data: dict, smooth: int = 10) -> dict[str, pd.DataFrame]:
    """The job's rows as DataFrames; 'loss' gains a trailing moving average per variant, and 'results' has each
    finished variant's final validation loss and seconds per step."""
    loss = pd.DataFrame(data.get("loss", []), columns=["variant", "step", "loss"])
    loss["smoothed"] = loss.groupby("variant", sort=False)["loss"].rolling(smooth, min_periods=1).mean().droplevel(0)
    val = pd.DataFrame(data.get("val", []), columns=["variant", "final val loss"])
    timing = pd.DataFrame(data.get("timing", []), columns=["variant", "s / step"])
    return {"loss": loss, "results": timing.merge(val, on="variant", how="left"),
            "grads": pd.DataFrame(data.get("grads", []), columns=["variant", "step", "layer", "norm"]),
            "resid": pd.DataFrame(data.get("resid", []), columns=["variant", "step", "layer", "norm"])}


def at_probe(frame: pd.DataFrame, which: str) -> pd.DataFrame:
    """Per variant, the rows of its first ('first') or latest ('latest') probe step."""
    if frame.empty:
        return frame
    pick = frame.groupby("variant")["step"].transform("min" if which == "first" else "max")
    return frame[frame["step"] == pick]
