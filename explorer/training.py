"""The Train page's parts: the training runs (each a process of its own: explorer.jobs), the runs waiting for
them, the runs table and the loss figures."""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gptcore import folders, runs
from gptcore.config import TrainConfig
from gptcore.describe import format_duration, format_step
from gptcore.errors import Message, message
from gptcore.failures import diverging_message
from gptcore.queue import QueuedRun, QueueError

from . import i18n
from .i18n import t
from .jobs import TRAIN, Job, JobRegistry, JobState

JOB_KIND = TRAIN
LIVE_POINTS = 600  # per curve: about one per pixel of the live chart; the browser redraws it every refresh


def smoothing_window(n: int) -> int:
    """An odd window of about a fifteenth of the curve (5 to 401 points): wide enough to see through the batch
    noise, narrow enough to follow the fast first drop."""
    return min(401, max(5, (n // 15) | 1))


def smooth(values: list[float], window: int | None = None) -> list[float]:
    """Savitzky–Golay smoothing: a parabola fitted to each centred window, evaluated at its middle; the first and
    last half-windows are read off the parabola of the first and last window.

    A centred window has no lag, where an exponential average of a falling loss trails behind it, above the raw
    and the validation curves. A parabola, unlike a plain mean, also follows the curve's bend, so the steep start
    is not lifted either.
    """
    y = np.asarray(values, dtype=float)
    n, window = len(y), window or smoothing_window(len(y))
    if n < 3:
        return y.tolist()
    if n <= window:
        x = np.arange(n)
        return np.polyval(np.polyfit(x, y, 2), x).tolist()
    half, x = window // 2, np.arange(window)
    weights = np.linalg.pinv(np.vander(x - half, 3))[-1]  # least-squares parabola's value at the centre
    out = np.empty(n)
    out[half:n - half] = np.convolve(y, weights[::-1], mode="valid")
    out[:half] = np.polyval(np.polyfit(x, y[:window], 2), x[:half])
    out[n - half:] = np.polyval(np.polyfit(x, y[-window:], 2), x[window - half:])
    return out.tolist()


def thin(xs: list, ys: list, limit: int = 2000) -> tuple[list, list]:
    """Every k-th point (always keeping the last) so a chart never ships more than ~limit points."""
    if len(xs) <= limit:
        return xs, ys
    k = math.ceil(len(xs) / limit)
    keep = list(range(0, len(xs) - 1, k)) + [len(xs) - 1]
    return [xs[i] for i in keep], [ys[i] for i in keep]


def work(params: int, tc: TrainConfig, context: int, steps: int) -> float:
    """What a run computes, parameters × tokens per step × steps: its duration is this over the machine's rate."""
    return float(params) * tc.batch_size * context * steps


def training_rate(registry: JobRegistry) -> float | None:
    """The work per second (see `work`) a training run does on this machine now, as the active runs measure it;
    None before any has measured its speed."""
    rates = []
    for name in registry.live(JOB_KIND):
        d = job.snapshot().data if (job := registry.get(name)) else {}
        if d.get("tokens_per_s") and d.get("params"):
            rates.append(d["params"] * d["tokens_per_s"])
    return sum(rates) / len(rates) if rates else None


def waiting_times(registry: JobRegistry, waiting: list[QueuedRun]) -> list[tuple[float | None, float | None]]:
    """(seconds until it starts, seconds it trains) of each waiting run, None where not known: each starts when
    the first slot frees (an active run's ETA, then the expected durations of the waiting runs before it)."""
    rate = training_rate(registry)
    etas = [job.snapshot().data.get("eta_s") for name in registry.live(JOB_KIND) if (job := registry.get(name))]
    free = sorted(math.inf if eta is None else eta for eta in etas)[:registry.slots]  # (a run just started: none)
    free += [0.0] * (registry.slots - len(free))
    found = []
    for run in waiting:
        slot = min(range(len(free)), key=free.__getitem__)
        duration = run.work / rate if rate else None
        starts = free[slot] if math.isfinite(free[slot]) else None
        found.append((starts, duration))
        free[slot] = starts + duration if starts is not None and duration is not None else math.inf
    return found


def waiting_runs(registry: JobRegistry) -> list[QueuedRun]:
    """The waiting runs; none when the queue's file cannot be read (the page says why, above its tabs)."""
    try:
        return registry.waiting.runs()
    except QueueError:
        return []


def pending_row(name: str, status: str, owner: str | None, total_steps: int, since: float,
                root: Path) -> runs.RunInfo:
    """A run with nothing to show yet, as a row of the runs table: waiting (status "queued"), or a job still
    making its trainer (with the job's status)."""
    return runs.RunInfo(name=name, path=root / name, status=status, step=-1, total_steps=total_steps, best_val=None,
                        final_val=None, wall_time=0.0, params=None, corpus="", saved=since, has_weights=False,
                        meta={"owner": owner})


def shown_job(registry: JobRegistry, owner: str | None) -> Job | None:
    """The training job the live panel follows: the visitor's own active run, else their latest (so a run of
    theirs that failed when its turn came says why), else the latest active one, else the latest to have run."""
    live = [job for name in registry.live(JOB_KIND) if (job := registry.get(name)) is not None]
    own = [job for job in registry.all(JOB_KIND) if job.state.data.get("owner") == owner]
    own_live = [job for job in own if job in live]
    return max(own_live or own or live, key=lambda job: job.state.started, default=None) or registry.latest(JOB_KIND)


def rename_run(run: runs.RunInfo, new_name: str, registry: JobRegistry) -> Path:
    """Rename a run and tell the registry, so the sidebar and the live panel follow it. A name a run waiting to
    train will take is refused, like a folder's."""
    if new_name.strip() in {waiting.name for waiting in waiting_runs(registry)}:
        raise folders.CheckpointError("runs.name_waiting", "a run named '{name}' is waiting to train: choose another "
                                      "name", name=new_name.strip())
    target = runs.rename_run(run, new_name)
    registry.rename(run.name, target.name, run=target.name, out_dir=str(target))
    return target


def status_message(snap: JobState) -> tuple[str, Message] | None:
    """(Streamlit call, message) saying how an ended, paused or finishing run stands; None while it trains or once
    it failed.

    Built from the job's data each time it is drawn, so it reads in the page's language of the moment."""
    d = snap.data
    where = format_step(d.get("step", -1), d["total_steps"])
    final_val = d.get("final_val", float("nan"))
    if (doing := phase(snap)) == "evaluating":
        return "info", message("training.evaluating", "All {steps:,} steps are done: now the loss over the whole "
                               "validation split, then a last sample and the checkpoint…", steps=d["total_steps"])
    if doing == "saving":
        return "info", message("training.saving", "Loss over the whole validation split: **{val:.4f}**. Now a last "
                               "sample and the checkpoint…", val=final_val)
    if snap.status == "paused":
        return "info", message("training.paused", "Paused at {where}. Resume carries on exactly where it stopped.",
                               where=where)
    if snap.status == "stopping":
        return "info", message("training.stopping", "Stopping: scoring the whole validation split and saving a "
                               "checkpoint…")
    if snap.status == "finished":
        return "success", message("training.finished", "Finished {where} in {elapsed}. Loss on the whole validation "
                                  "split: **{val:.4f}** (bigram {bigram:.3f}, uniform guess {uniform:.3f}).",
                                  where=where, elapsed=format_duration(d.get("elapsed_s")), val=final_val,
                                  bigram=d["bigram"], uniform=d["uniform"])
    if snap.status == "stopped":
        return "warning", message("training.stopped", "Stopped at {where}; the checkpoint is saved (whole-split val "
                                  "{val:.4f}). Continue it from the runs table below.", where=where, val=final_val)
    if snap.status == "interrupted":
        return "warning", snap.message
    return None


def phase(snap: JobState) -> str:
    """What a run is doing, as the live panel says it: its status, except after its last step. Its process then
    reports nothing until the loss over the whole validation split (the final_eval event), and nothing again until
    it ends (a last sample and the checkpoint written): "evaluating", then "saving", rather than running with no
    time left."""
    d = snap.data
    if snap.status != "running" or d.get("step", -1) < d.get("total_steps", math.inf):
        return snap.status
    evaluates = d.get("train", {}).get("final_eval", True)
    return "saving" if "final_val" in d or not evaluates else "evaluating"


FINISHING = ("evaluating", "saving")  # the phases of a run after its last step


def shown_status(snap: JobState) -> str:
    """A job's status in words, as the live panel and the sidebar say it: a run finishing says which phase."""
    doing = phase(snap)
    return t(f"training.live.{doing}") if doing in FINISHING else t(f"ui.status.{snap.status}")


def queue_state(registry: JobRegistry) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the waiting runs' ids, next first; the names of the runs training): what changes when a run joins or leaves
    the queue, starts or ends."""
    return tuple(run.id for run in waiting_runs(registry)), tuple(sorted(registry.live(JOB_KIND)))


def damaged_warning(run: runs.RunInfo) -> Message:
    return message("training.damaged", "Its meta.json is damaged: {fields} could not be used and are left out.",
                   fields=", ".join(run.damaged))


def diverging_warning(snap: JobState) -> Message | None:
    """The warning of a run whose validation loss went far above a uniform guess's (see train.diverging_above)."""
    info = snap.data.get("diverging")
    return diverging_message(info) if info else None


def run_gone(snap: JobState) -> bool:
    """Did the run of this ended job save its folder, which has since been renamed away or deleted?"""
    saved = snap.status in ("finished", "stopped") or "checkpoint_step" in snap.data
    return not snap.active and saved and not Path(snap.data.get("out_dir", "")).exists()


def live_run(snap: JobState, on_disk: runs.RunInfo | None) -> runs.RunInfo:
    """A training job's run as it stands this second: its live step, losses and status over what its folder
    says (if it has saved anything yet)."""
    d = snap.data
    evals = d.get("evals", [])
    vals = [e["val"] for e in evals if math.isfinite(e["val"])]
    history = {"step": d.get("curve_step", []), "train_loss": d.get("curve_loss", []),
               "eval_step": [e["step"] for e in evals], "eval_train": [e["train"] for e in evals],
               "eval_val": [e["val"] for e in evals]}
    path = Path(d["out_dir"])
    meta = {**(on_disk.meta if on_disk else {}), "history": history, "train_config": d["train"],
            "owner": d.get("owner")}
    return runs.RunInfo(name=snap.name, path=path, status=snap.status, step=d.get("step", -1),
                        total_steps=d["total_steps"], best_val=min(vals) if vals else None,
                        final_val=d.get("final_val"), wall_time=d.get("elapsed_s") or 0.0, params=d.get("params"),
                        corpus=d.get("corpus", ""), saved=time.time(),
                        has_weights=(path / "model.safetensors").is_file(), meta=meta)


def listed_runs(registry: JobRegistry) -> list[runs.RunInfo]:
    """Every run on disk, newest first, after the ones training now, at their live step (even before they have
    saved anything), and the runs waiting to train, next to start first. A saved run waiting to be continued is
    listed once, as queued."""
    live = registry.live(JOB_KIND)
    listed = runs.list_runs(live=live)
    training = []
    root = registry.waiting.root
    for name in live:
        if (job := registry.get(name)) is None:
            continue
        snap, on_disk = job.snapshot(), next((r for r in listed if r.name == name), None)
        if "total_steps" in snap.data:  # (its thread has published its set-up)
            training.append(live_run(snap, on_disk))
        else:
            training.append(replace(on_disk, status=snap.status) if on_disk else pending_row(
                name, snap.status, snap.data.get("owner"), snap.data.get("planned_steps", 0), snap.started, root))
    waiting = {run.name: run for run in waiting_runs(registry)}
    queued = [replace(next(r for r in listed if r.name == run.name), status="queued")
              if run.action == "continue" and any(r.name == run.name for r in listed)
              else pending_row(run.name, "queued", run.owner, int(run.train.get("steps") or 0), run.queued_at, root)
              for run in waiting.values()]
    names = {r.name for r in training} | set(waiting)
    return training + queued + [r for r in listed if r.name not in names]


def english(key: str, **values) -> str:
    """A catalog entry in English, for callers outside a page (the command line's tests, a log)."""
    return i18n.catalog("en")[key].format(**{k: str(v) for k, v in values.items()})


def status_word(status: str, words: Callable[..., str] = english) -> str:
    """A run's or job's status in words; a status no version of this app writes (a hand-edited meta.json) as is."""
    key = f"ui.status.{status}"
    return words(key) if key in i18n.catalog("en") else status


def run_status(run: runs.RunInfo, words: Callable[..., str] = english) -> str:
    """A run's status for the table, flagged when its loss is diverging (a run that diverged says so already)."""
    status = status_word(run.status, words)
    if run.diverging is None or run.status == "diverged":
        return status
    return words("training.runs.status_diverging", status=status)


COLUMNS = ("run", "owner", "status", "progress", "best_val", "final_val", "wall_time", "params", "corpus", "saved")


def column(key: str, words: Callable[..., str] = english) -> str:
    return words(f"training.runs.columns.{key}")


def runs_frame(listed: list[runs.RunInfo], show: Callable[[Message | str], str] = str,
               words: Callable[..., str] = english,
               whose: Callable[[str | None], str] = lambda owner: "") -> pd.DataFrame:
    """The runs table, headed and worded by `words` (i18n.t on the page) with each message rendered by `show`
    (i18n.say) and each owner named by `whose`. Names arrive printable."""
    cells = {
        "run": [r.name for r in listed],
        "owner": [whose(r.owner) for r in listed],
        "status": [run_status(r, words) for r in listed],
        "progress": [show(format_step(r.step, r.total_steps)) for r in listed],
        "best_val": [r.best_val for r in listed],
        "final_val": [r.final_val for r in listed],
        "wall_time": [show(format_duration(r.wall_time)) for r in listed],
        "params": [r.params for r in listed],
        "corpus": [show(r.corpus) for r in listed],
        "saved": [datetime.fromtimestamp(int(r.saved)) for r in listed],
    }
    return pd.DataFrame({column(key, words): cells[key] for key in COLUMNS})


def run_curves(listed: list[runs.RunInfo]) -> pd.DataFrame:
    """Long table (run, series, step, loss): smoothed train loss and val estimates of each run."""
    frames = []
    for r in listed:
        h = r.history
        if h.get("step"):
            frames.append(pd.DataFrame({"run": r.name, "series": "train (smoothed)", "step": h["step"],
                                        "loss": smooth(h["train_loss"])}))
        if h.get("eval_step"):
            frames.append(pd.DataFrame({"run": r.name, "series": "val", "step": h["eval_step"],
                                        "loss": h["eval_val"]}))
    if not frames:
        return pd.DataFrame(columns=["run", "series", "step", "loss"])
    return pd.concat(frames, ignore_index=True)


def hover() -> str:
    """The loss charts' hover text: the curve, its step and its loss, in the tab's language."""
    return f"%{{fullData.name}}<br>{t('training.chart.step')} %{{x:,}}<br>{t('training.chart.loss_short')} " \
        "%{y:.3f}<extra></extra>"


def loss_figure(d: dict) -> go.Figure:
    steps, losses = d.get("curve_step", []), d.get("curve_loss", [])
    fig = go.Figure()
    raw_x, raw_y = thin(steps, losses, LIVE_POINTS)
    fig.add_scatter(x=raw_x, y=raw_y, name=t("training.chart.train_raw"), mode="lines",
                    line=dict(color="#9ecae1", width=1))
    fig.add_scatter(x=raw_x, y=thin(steps, smooth(losses), LIVE_POINTS)[1], name=t("training.chart.train_smoothed"),
                    mode="lines", line=dict(color="#1f77b4", width=2))
    evals = d.get("evals", [])
    fig.add_scatter(x=[e["step"] for e in evals], y=[e["val"] for e in evals], name=t("training.chart.val_estimate"),
                    mode="lines+markers", line=dict(color="#ff7f0e", width=2))
    if d.get("final_val") is not None:
        fig.add_scatter(x=[d["step"]], y=[d["final_val"]], name=t("training.chart.val_whole"), mode="markers",
                        marker=dict(symbol="star", size=14, color="#d62728"))
    fig.update_traces(hovertemplate=hover())
    for key, dash in (("uniform", "dash"), ("bigram", "dot")):
        fig.add_hline(y=d[key], line=dict(color="#888", dash=dash, width=1),
                      annotation_text=t(f"training.chart.{key}", loss=d[key]), annotation_position="top right")
    finite = [v for v in losses if v == v and abs(v) != float("inf")]
    top = min(max(finite[:5] + [d["uniform"]]) + 0.3, 2 * d["uniform"])
    bottom = max(0.0, min(finite + [d["bigram"]]) - 0.3)
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=30, b=10), xaxis_title=t("training.chart.step"),
                      yaxis_title=t("training.chart.loss"), legend=dict(orientation="h", y=1.12),
                      xaxis_range=[0, 1.02 * max(d["total_steps"], 1)], yaxis_range=[bottom, top])
    return fig


SERIES = {"train (smoothed)": "training.chart.train_smoothed", "val": "training.chart.val_estimate"}  # run_curves'


def overlay_figure(frame) -> go.Figure:
    fig = go.Figure()
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
    for i, (run, part) in enumerate(frame.groupby("run", sort=False)):
        for series, rows in part.groupby("series"):
            val = series == "val"
            fig.add_scatter(x=rows["step"], y=rows["loss"], name=f"{run} · {t(SERIES[series])}",
                            mode="lines+markers" if val else "lines", hovertemplate=hover(),
                            line=dict(color=colors[i % len(colors)], width=2 if val else 1,
                                      dash=None if val else "dot"))
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=30, b=10), xaxis_title=t("training.chart.step"),
                      yaxis_title=t("training.chart.loss"))
    return fig


