"""Training runs for the app: corpus sources, the background training job, and the runs under checkpoints/.

A run is a folder checkpoints/<name>/ written by `RunTrainer` (a Trainer that also records where its
corpus came from). Its meta.json is the source of truth for the runs table; a run whose meta.json
still says "running" while no job of this process trains it was cut off by a crash or restart, and
is listed as "interrupted" (its last checkpoint resumes it).
"""
from __future__ import annotations

import io
import json
import math
import zipfile
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Callable

import pandas as pd

from . import checkpoint as ckpt
from .baselines import bigram_val_loss, uniform_loss
from .config import GPTConfig
from .data import (DOWNLOAD_CACHE, TINYSTORIES_VALID_URL, Corpus, CorpusError, builtin_corpus, decode_corpus,
                   download_tinystories_valid, load_corpus, unknown_warning)
from .jobs import ACTIVE, Job, JobRefused, JobRegistry
from .model import meta_model
from .train import Diverged, TrainConfig, Trainer

JOB_KIND = "train"
SOURCE_KINDS = {"builtin": "Built-in stories", "upload": "Upload a text file", "file": "A file on the server",
                "tinystories": "TinyStories validation split (download)"}


# ---------------------------------------------------------------- corpora

def load_source(source: dict, upload: bytes | None = None,
                progress: Callable[[int, int | None], None] | None = None) -> Corpus:
    """The corpus a source describes; every problem with it becomes a CorpusError.

    source: {"kind": "builtin", "chars", "seed"} | {"kind": "file", "path", "max_chars"} |
            {"kind": "upload", "name", "max_chars"} (bytes in `upload`) | {"kind": "tinystories", "max_chars"}
    """
    kind, max_chars = source.get("kind"), source.get("max_chars")
    if kind == "builtin":
        if not 1 <= int(source["chars"]) <= 50_000_000:
            raise CorpusError("the built-in corpus size must be from 1 to 50,000,000 characters")
        return builtin_corpus(int(source["chars"]), int(source["seed"]))
    if kind == "file":
        path = str(source.get("path") or "").strip()
        if not path:
            raise CorpusError("enter the path of a UTF-8 text file on the server")
        return load_corpus(path, max_chars)
    if kind == "upload":
        if upload is None:
            raise CorpusError("choose a text file to upload")
        corpus = Corpus(decode_corpus(upload, source.get("name", "the upload")), f"upload {source.get('name')}")
    elif kind == "tinystories":
        path = download_tinystories_valid(cache_dir=DOWNLOAD_CACHE, progress=progress)
        corpus = load_corpus(str(path), None)
        corpus = Corpus(corpus.text, "TinyStories validation split")
    else:
        raise CorpusError(f"unknown corpus source {kind!r}")
    if max_chars is not None and len(corpus.text) > max_chars:
        corpus = Corpus(corpus.text[:max_chars], f"{corpus.description}, first {max_chars:,} chars")
    return corpus


def tinystories_cached() -> bool:
    """Is TinyStories' validation split already downloaded (so loading it needs no network)?"""
    target = DOWNLOAD_CACHE / Path(TINYSTORIES_VALID_URL).name
    return target.is_file() and target.stat().st_size > 0


def reloadable(source: dict | None) -> bool:
    """Can this source be loaded again later (to continue a run) without the user's help?"""
    return bool(source) and source.get("kind") in ("builtin", "file", "tinystories")


# ---------------------------------------------------------------- summaries

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
    return (f"{tc.steps + 1:,} steps · batch {tc.batch_size} · {optimizer} ({schedule}) · "
            f"weight decay {tc.weight_decay:g}{clip} · eval every {tc.eval_every} · seed {tc.seed}")


def smooth(values: list[float], weight: float = 0.9) -> list[float]:
    """Exponential moving average with bias correction, so the first points are not pulled to 0."""
    out, avg = [], 0.0
    for i, v in enumerate(values, 1):
        avg = weight * avg + (1 - weight) * v
        out.append(avg / (1 - weight ** i))
    return out


def thin(xs: list, ys: list, limit: int = 2000) -> tuple[list, list]:
    """Every k-th point (always keeping the last) so a chart never ships more than ~limit points."""
    if len(xs) <= limit:
        return xs, ys
    k = math.ceil(len(xs) / limit)
    keep = list(range(0, len(xs) - 1, k)) + [len(xs) - 1]
    return [xs[i] for i in keep], [ys[i] for i in keep]


def nice_interval(target: float) -> int:
    """The 1-2-5 series value nearest below target (at least 1): 100, 50, 20, 10, 5, ..."""
    if target < 1:
        return 1
    magnitude = 10 ** math.floor(math.log10(target))
    return max(m * magnitude for m in (1, 2, 5) if m * magnitude <= target)


def watch_defaults(tc: TrainConfig) -> TrainConfig:
    """Samples and checkpoints about 15 times per run, and weight snapshots for the Inspect page's "Over training"
    tab about 5 times, where a recipe says "only at the end" or "none".

    None of them draws from the training random stream, so the run itself is unchanged.
    """
    every, snapshots = nice_interval(tc.steps / 15), max(1, math.ceil(tc.steps / 5))  # steps 0, s, …, 5s
    return replace(tc, sample_every=tc.sample_every or every, checkpoint_every=tc.checkpoint_every or every,
                   snapshot_every=tc.snapshot_every or snapshots)


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "–"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {s:02d}s" if m else f"{s}s"


# ---------------------------------------------------------------- the trainer and its job

class RunTrainer(Trainer):
    """The app's Trainer: also records in meta.json how to load its corpus again, to continue later."""

    def __init__(self, model_cfg: GPTConfig | None, tc: TrainConfig, corpus: Corpus, source: dict | None,
                 out_dir: Path, resume_from: Path | None = None):
        super().__init__(model_cfg, tc, corpus.text, corpus.description, out_dir=out_dir, resume_from=resume_from)
        self.source = source

    def meta(self, status: str, wall_time: float) -> dict:
        return {**super().meta(status, wall_time), "corpus_source": self.source}


def baseline_losses(trainer: Trainer) -> dict:
    V = trainer.tokenizer.vocab_size
    return {"uniform": uniform_loss(V), "bigram": bigram_val_loss(trainer.train_ids, trainer.val_ids, V)}


def _training_job(trainer: RunTrainer, name: str) -> Callable[[Job], str]:
    """The job function: runs the trainer in the job's thread and mirrors its events into job.data."""
    tc, history = trainer.tc, trainer.history

    def on_event(job: Job, kind: str, d: dict):
        if kind == "step":
            done = d["step"] - trainer.start_step + 1
            job.update(progress=done / max(1, tc.steps - trainer.start_step + 1),
                       data={k: d[k] for k in ("step", "loss", "tokens_per_s", "eta_s", "elapsed_s")})
            job.append("curve_step", d["step"])
            job.append("curve_loss", d["loss"])
        elif kind == "eval":
            job.append("evals", d)
        elif kind == "sample":
            job.append("samples", d)
        elif kind == "checkpoint":
            job.update(data={"checkpoint_step": d["step"]})
        elif kind == "final_eval":
            job.update(data={"final_val": d["val"]})
        elif kind == "done":
            job.update(data={"elapsed_s": d["wall_time"], "checkpoint_step": d["step"], "eta_s": 0.0})

    def fn(job: Job) -> str:
        job.update(data={
            "run": name, "out_dir": str(trainer.out_dir), "params": trainer.model.num_params(),
            "model": trainer.cfg.to_dict(), "train": tc.to_dict(), "corpus": trainer.corpus_description,
            "model_summary": describe_model(trainer.cfg), "train_summary": describe_training(tc),
            "total_steps": tc.steps, "start_step": trainer.start_step, "step": trainer.start_step - 1,
            "curve_step": list(history["step"]), "curve_loss": list(history["train_loss"]),
            "evals": [{"step": s, "train": t, "val": v} for s, t, v in
                      zip(history["eval_step"], history["eval_train"], history["eval_val"])],
            "samples": [], "unknown": unknown_warning(trainer.unknown), **baseline_losses(trainer)})
        try:
            return trainer.run(lambda kind, d: on_event(job, kind, d), job.control)
        except Diverged as e:
            job.update(data={"diverged": True})
            raise Diverged(trainer.diverged_message(e)) from None

    return fn


def start_run(registry: JobRegistry, trainer: RunTrainer) -> Job:
    """Train in a background job named after the run folder; JobRefused names the job in the way."""
    name = trainer.out_dir.name
    return registry.start(name, JOB_KIND, _training_job(trainer, name), threads=trainer.tc.threads)


def refuse_if_busy(registry: JobRegistry) -> None:
    """Raise JobRefused before any expensive set-up if a job is already running."""
    job = registry.active()
    if job is not None:
        raise JobRefused.blocked_by(job)


# ---------------------------------------------------------------- runs on disk

@dataclass
class RunInfo:
    name: str
    path: Path
    status: str
    step: int
    total_steps: int
    best_val: float | None
    final_val: float | None
    wall_time: float
    params: int | None
    corpus: str
    saved: float  # mtime of meta.json
    has_weights: bool
    meta: dict = field(repr=False, default_factory=dict)

    @property
    def why_not_resumable(self) -> str | None:
        """Why Continue is off for this run (None: it can continue)."""
        if self.status in ACTIVE:
            return "It is training now."
        if self.status == "elsewhere":
            return f"Another process (pid {ckpt.lock_holder(self.path)}, the command line?) is training it now."
        if not self.has_weights:
            return "It has no saved weights to continue from."
        if self.name == SHIPPED:
            return (f"{SHIPPED} ships with the app and stays as it is: continue a copy of it from the command line "
                    "(checkpoints/README.md shows how).")
        if self.status == "unreadable":
            return "Its meta.json cannot be read, and the run's settings and history are kept there."
        return None

    @property
    def why_fixed(self) -> str | None:
        """Why the run cannot be renamed or deleted now (None: it can)."""
        if self.name == SHIPPED:
            return f"{SHIPPED} ships with the app and cannot be renamed or deleted here."
        if self.status in (*ACTIVE, "elsewhere"):
            return "It is training now: stop it first."
        return None

    @property
    def resumable(self) -> bool:
        return self.why_not_resumable is None

    @property
    def history(self) -> dict:
        return self.meta.get("history") or {}


def model_summary(run: RunInfo) -> str:
    """describe_model of the config saved next to the weights ('' if unreadable)."""
    try:
        return describe_model(GPTConfig.from_dict(json.loads((run.path / "config.json").read_text())["model"]))
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def run_status(meta: dict, path: Path, live: dict[str, str]) -> str:
    if path.name in live:
        return live[path.name]
    if ckpt.lock_holder(path) is not None:
        return "elsewhere"  # another process (the command line?) is training it
    status = str(meta.get("status", "unknown"))
    return "interrupted" if status == "running" else status


def read_run(path: Path, live: dict[str, str] | None = None) -> RunInfo:
    """A run's row; a meta.json that cannot be understood gives status 'unreadable' instead of an error."""
    path = Path(path)
    meta = ckpt.read_meta(path)
    common = dict(name=path.name, path=path, saved=(path / "meta.json").stat().st_mtime,
                  has_weights=(path / "model.safetensors").is_file())
    try:
        history = meta.get("history") or {}
        vals = [v for v in history.get("eval_val", []) if isinstance(v, (int, float)) and math.isfinite(v)]
        return RunInfo(
            **common, status=run_status(meta, path, live or {}), step=int(meta.get("step", -1)),
            total_steps=int((meta.get("train_config") or {}).get("steps", 0)), best_val=min(vals) if vals else None,
            final_val=meta.get("final_val_loss"), wall_time=float(meta.get("wall_time") or 0.0),
            params=meta.get("params"), corpus=str(meta.get("corpus", "")), meta=meta)
    except (AttributeError, TypeError, ValueError):
        return RunInfo(**common, status="unreadable", step=-1, total_steps=0, best_val=None, final_val=None,
                       wall_time=0.0, params=None, corpus="")


def list_runs(root: Path | None = None, live: dict[str, str] | None = None) -> list[RunInfo]:
    """Every checkpoints/<name>/ with a meta.json, newest first."""
    root = Path(root or ckpt.CHECKPOINT_ROOT)
    if not root.is_dir():
        return []
    found = [read_run(p, live) for p in root.iterdir() if (p / "meta.json").is_file()]
    return sorted(found, key=lambda r: r.saved, reverse=True)


def runs_frame(runs: list[RunInfo]) -> pd.DataFrame:
    return pd.DataFrame({
        "run": [r.name for r in runs],
        "status": [r.status for r in runs],
        "steps": [f"{r.step + 1:,} / {r.total_steps + 1:,}" for r in runs],
        "best val (estimate)": [r.best_val for r in runs],
        "final val (whole split)": [r.final_val for r in runs],
        "wall time": [format_duration(r.wall_time) for r in runs],
        "params": [r.params for r in runs],
        "corpus": [r.corpus for r in runs],
        "saved": [datetime.fromtimestamp(int(r.saved)) for r in runs],
    })


def run_curves(runs: list[RunInfo], smoothing: float = 0.9) -> pd.DataFrame:
    """Long table (run, series, step, loss): smoothed train loss and val estimates of each run."""
    frames = []
    for r in runs:
        h = r.history
        if h.get("step"):
            frames.append(pd.DataFrame({"run": r.name, "series": "train (smoothed)", "step": h["step"],
                                        "loss": smooth(h["train_loss"], smoothing)}))
        if h.get("eval_step"):
            frames.append(pd.DataFrame({"run": r.name, "series": "val", "step": h["eval_step"],
                                        "loss": h["eval_val"]}))
    if not frames:
        return pd.DataFrame(columns=["run", "series", "step", "loss"])
    return pd.concat(frames, ignore_index=True)


def zip_run(path: Path) -> bytes:
    """The run folder as a zip whose entries sit under <name>/ (temporary files left out)."""
    path = Path(path)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for file in sorted(path.rglob("*")):
            if file.is_file() and not file.name.endswith(".tmp") and file.name != ckpt.LOCK:
                z.write(file, Path(path.name) / file.relative_to(path))
    return buffer.getvalue()


def suggest_name(base: str, root: Path | None = None, taken=()) -> str:
    """base-1, base-2, ...: the first name neither under root nor in taken (say, a live job's, whose thread may
    not have created its folder yet)."""
    root = Path(root or ckpt.CHECKPOINT_ROOT)
    base = ckpt.safe_name(base)
    n = 1
    while (root / f"{base}-{n}").exists() or f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def new_run_dir(name: str, root: Path | None = None) -> Path:
    directory = ckpt.checkpoint_dir(name, root)
    if directory.exists() and not ckpt.clear_abandoned(directory):  # (a server killed before its first save)
        raise ckpt.CheckpointError(f"a run named {directory.name!r} already exists; choose another name, "
                                   "or continue that run from the runs table")
    return directory


SHIPPED = "shipped-tiny"  # the model the repo ships so the inspector works on first launch


def _refuse_live(name: str, registry: JobRegistry, action: str) -> None:
    if name == SHIPPED:
        raise ckpt.CheckpointError(f"{name!r} ships with the app and cannot be renamed or deleted here")
    if name in registry.live():
        raise ckpt.CheckpointError(f"cannot {action} {name!r} while it is training; stop it first")


def _refuse_locked(path: Path, action: str) -> None:
    if (pid := ckpt.lock_holder(path)) is not None:
        raise ckpt.CheckpointError(f"cannot {action} {Path(path).name!r}: another process (pid {pid}, the command "
                                   "line?) is training it")


def rename_run(path: Path, new_name: str, registry: JobRegistry, root: Path | None = None) -> Path:
    _refuse_live(Path(path).name, registry, "rename")
    _refuse_locked(path, "rename")
    target = ckpt.rename_checkpoint(path, new_name, root)
    registry.rename(Path(path).name, target.name, run=target.name, out_dir=str(target))  # the sidebar and live panel
    return target


def delete_run(path: Path, registry: JobRegistry, root: Path | None = None) -> None:
    _refuse_live(Path(path).name, registry, "delete")
    _refuse_locked(path, "delete")
    ckpt.delete_checkpoint(path, root)


def resume_config(run: RunInfo, until_step: int) -> TrainConfig:
    """The run's own hyperparameters with a new last step."""
    if until_step <= run.step:
        raise ValueError(f"{run.name} is already at step {run.step:,}; train until a later step")
    return TrainConfig.from_dict({**(run.meta.get("train_config") or {}), "steps": int(until_step)})

