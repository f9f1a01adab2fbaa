"""How a run goes wrong, said to its user: a run that diverges, one that diverged, one that filled the disk.

Each message says what happened, what was kept and what to try; a kept checkpoint is marked in its meta.json,
so the runs table tells the same story later.
"""
from __future__ import annotations

import math
from pathlib import Path

from . import checkpoint as ckpt
from .errors import Message, UserError, message, message_record


class Diverged(UserError, RuntimeError):
    """The loss, the weights or the model's outputs became NaN or infinite."""


def diverging_above(vocab_size: int) -> float:
    """The loss past which a run is diverging: twice ln V, the loss of a uniform guess, and at least one nat above
    it. A fresh model starts near ln V and training only lowers it; the tutorial's run ends near 1.0 (ln 74 = 4.30)."""
    uniform = math.log(vocab_size)
    return uniform + max(1.0, uniform)


def diverging_message(info: dict) -> Message:
    """What a run's `diverging` record (step, loss, vocab) means, and what to try."""
    return message("train.diverging", "the run is diverging: its validation loss is {loss:,.1f} at step {step:,}, far "
                   "above ln V = {uniform:.2f}, the loss of a uniform guess over its {vocab:,} tokens. Try a smaller "
                   "learning rate, warmup or gradient clipping.", loss=info["loss"], step=info["step"],
                   uniform=math.log(info["vocab"]), vocab=info["vocab"])


def diverging_record(meta: dict) -> dict | None:
    """A run's meta.json `diverging` record when it is one diverging_message can say, else None."""
    info = meta.get("diverging")
    ok = isinstance(info, dict) and all(isinstance(info.get(k), int) and not isinstance(info.get(k), bool)
                                        for k in ("step", "vocab")) and info["vocab"] >= 1 and \
        isinstance(info.get("loss"), int | float) and not isinstance(info.get("loss"), bool) and \
        (isinstance(info["loss"], float) or abs(info["loss"]) <= 1e308)  # (10**400 cannot be formatted as a float)
    return info if ok else None


def last_checkpoint_step(directory: Path) -> int | None:
    meta = ckpt.read_meta(directory)
    return int(meta["step"]) if (Path(directory) / "model.safetensors").is_file() and "step" in meta else None


def diverged_message(error: Diverged, out_dir: Path | None) -> Message:
    """Say what blew up, what was kept, and what to try; mark the kept checkpoint as diverged."""
    kept = last_checkpoint_step(out_dir) if out_dir is not None else None
    if kept is None:
        saved = message("train.nothing_saved", "No checkpoint had been saved yet, so nothing was written.")
    else:
        saved = message("train.kept_good", "The last good checkpoint (step {step:,}) is kept in {path}.",
                        step=kept, path=out_dir)
    said = message("train.diverged", "Training diverged: {error}. {saved} Try a smaller learning rate, warmup, "
                   "gradient clipping or less weight decay.", error=error.message, saved=saved)
    if kept is not None:
        ckpt.update_meta(out_dir, status="diverged", message=message_record(said))
    return said


def what_was_kept(folder: Path) -> tuple[int | None, Message]:
    """(the step of the run's last whole checkpoint or None, a sentence saying so)."""
    kept = last_checkpoint_step(folder)
    if kept is None:
        return None, message("train.full_nothing_kept", "No checkpoint had been saved yet, so nothing was kept.")
    return kept, message("train.full_kept", "The checkpoint of step {step:,} is kept whole in {path}.", step=kept,
                         path=folder)


def disk_full(error: ckpt.DiskFull, out_dir: Path, step: int) -> ckpt.DiskFull:
    """The run cannot save at this step: say so and what was kept, and mark what was kept as failed."""
    kept, saved = what_was_kept(out_dir)
    said = message("train.disk_full", "The disk is full: the run stopped at step {step:,}, whose checkpoint "
                   "could not be written ({error}). {saved} Free some space, then continue the run.",
                   step=step, error=error.message, saved=saved)
    if kept is not None:
        try:
            ckpt.update_meta(out_dir, status="failed", message=message_record(said))
        except ckpt.CheckpointError:  # no space even for meta.json: the run stays listed as interrupted
            said = message("train.disk_full_unmarked", "{said} (There was no space left to mark it as failed "
                           "either: it is listed as interrupted.)", said=said)
    return ckpt.DiskFull.of(said)


def process_lost(error: BaseException, folder: Path, mark: bool) -> Message:
    """A run of several processes whose partner has gone (killed, crashed: the connection between them broke): say
    so and what was kept; with mark (process 0, which writes the folder), mark what was kept as interrupted."""
    text = str(error)
    reason = next((words for words in ("Connection reset by peer", "Connection closed by peer") if words in text),
                  text.splitlines()[0][:160] if text else type(error).__name__)
    kept, saved = what_was_kept(folder)
    said = message("train.process_lost", "Another process of this run has stopped ({reason}), so the run cannot go "
                   "on. {saved} Continue it with --resume.", reason=reason, saved=saved)
    if mark and kept is not None:
        ckpt.update_meta(folder, status="interrupted", message=message_record(said))
    return said
