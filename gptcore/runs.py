"""Training runs on disk: the folders under checkpoints/, what each one's state allows, and how runs record
their corpus.

A run is a folder checkpoints/<name>/ written by a Trainer from `new_run` or `continued_run` (which also record
where its corpus came from). Its meta.json is the source of truth for the runs table; a run whose meta.json still says
"running" while no job of this process trains it was cut off by a crash or restart, and is listed as
"interrupted" (its last checkpoint resumes it). A meta.json that cannot be read at all, or gives no step, is
"unreadable"; one with values of the wrong kind is "damaged" (those values are left out, the rest is listed).
A folder's name that is not UTF-8 is listed escaped (bad\\xffname), and the run under that name still works.
"""
from __future__ import annotations

import io
import json
import math
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import checkpoint as ckpt
from . import folders, locks
from .config import PLACE, ConfigError, GPTConfig, TrainConfig, TrainConfigError
from .ddp import Distributed
from .describe import describe_model
from .errors import Message, message, message_record, stored_message
from .failures import diverging_message, diverging_record
from .folders import ACTIVE, SHIPPED
from .sources import CorpusSource
from .train import Trainer, TrainingCorpus

ACTIONS = ("continue", "rename", "delete")


def corpus_record(corpus: TrainingCorpus, source: CorpusSource | None) -> dict:
    """What a run adds to its meta.json: how to load its corpus again, to continue it, and what that corpus is."""
    described = corpus.description
    return {"corpus_source": source.to_dict() if source else None,
            "corpus_message": message_record(described) if isinstance(described, Message) else None}


def new_run(model_cfg: GPTConfig, tc: TrainConfig, corpus: TrainingCorpus, source: CorpusSource | None,
            out_dir: Path | None, dist: Distributed | None = None) -> Trainer:
    """The app's and the CLI's new run, which records in meta.json where its corpus came from."""
    return Trainer.fresh(model_cfg, tc, corpus, out_dir, dist=dist, extra_meta=corpus_record(corpus, source))


def continued_run(folder: Path, tc: TrainConfig, corpus: TrainingCorpus, source: CorpusSource | None,
                  dist: Distributed | None = None) -> Trainer:
    """The run saved in folder, taken up again to train on to tc.steps (see Trainer.resume)."""
    return Trainer.resume(folder, tc, corpus, dist=dist, extra_meta=corpus_record(corpus, source))


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
    damaged: list[str] = field(default_factory=list)  # meta.json's entries of the wrong kind, left out of meta
    holder: int | None = None  # the pid of the other process training it (status "elsewhere")
    weights_problem: Message | None = None  # why its model.safetensors, there but no file, cannot be opened

    @property
    def owner(self) -> str | None:
        """Whose run it is: a learner's id, or None for the teacher's (a run without an owner: made before owners,
        by the command line, or by the teacher)."""
        owner = self.meta.get("owner")
        return owner if isinstance(owner, str) and owner else None

    def blocker(self, action: str, learner: str | None = None, waiting: bool = False) -> Message | None:
        """Why `action` (continue, rename or delete) is not possible for this run now; None when it is.

        learner: who asks, a learner's id; None for the teacher or the command line, who may change every run.
        waiting: whether the run waits in the queue to train. The app disables a button with this sentence, and the
        action itself refuses with it (refuse).
        """
        if reason := owner_blocker(self.owner, learner):
            return reason
        if waiting:
            return message("runs.waiting", "It is waiting to train: cancel that first.")
        if self.status in ACTIVE:
            return message("runs.training_now", "It is training now: stop it first.")
        if self.status == "elsewhere":
            return message("runs.elsewhere", "Another process (pid {pid}, the command line?) is training it now.",
                           pid=self.holder)
        if self.name == SHIPPED:
            if action == "continue":
                return message("runs.shipped_continue", "{name} ships with the app and stays as it is: continue a "
                               "copy of it from the command line (checkpoints/README.md shows how).", name=SHIPPED)
            return message("runs.shipped_fixed", "{name} ships with the app and cannot be renamed or deleted here.",
                           name=SHIPPED)
        if action == "continue" and not self.has_weights:
            return message("runs.no_weights", "It has no saved weights to continue from.")
        if action == "continue" and self.status == "unreadable":
            return message("runs.unreadable", "Its meta.json cannot be read, and the run's settings and history are "
                           "kept there.")
        if action == "continue" and {"train_config", "history"} & set(self.damaged):
            return message("runs.damaged", "Its meta.json is damaged ({fields}), and the run's settings and history "
                           "are kept there.", fields=", ".join(self.damaged))
        return None

    def refuse(self, action: str, learner: str | None = None, waiting: bool = False) -> None:
        """Raise CheckpointError with blocker's reason when `action` is not possible now."""
        if (reason := self.blocker(action, learner, waiting)) is None:
            return
        if action == "continue":
            raise folders.CheckpointError("runs.cannot_continue", "Cannot continue '{name}'. {reason}", name=self.name,
                                          reason=reason)
        if action == "rename":
            raise folders.CheckpointError("runs.cannot_rename", "Cannot rename '{name}'. {reason}", name=self.name,
                                          reason=reason)
        raise folders.CheckpointError("runs.cannot_delete", "Cannot delete '{name}'. {reason}", name=self.name,
                                      reason=reason)

    @property
    def diverging(self) -> Message | None:
        """The warning of a run whose last validation loss was far above a uniform guess's, or None."""
        info = diverging_record(self.meta)
        return None if info is None else diverging_message(info)

    @property
    def note(self) -> Message | str | None:
        """Why its weights cannot be opened, or what its meta.json says happened to it (a divergence, a full disk),
        in words; None when nothing."""
        if self.weights_problem is not None:
            return self.weights_problem
        said = self.meta.get("message")
        return stored_message(said) or (said if isinstance(said, str) and said else None)

    @property
    def history(self) -> dict:
        return self.meta.get("history") or {}

    @property
    def source(self) -> CorpusSource | None:
        return CorpusSource.from_dict(self.meta.get("corpus_source"))


def owner_blocker(owner: str | None, learner: str | None) -> Message | None:
    """Why `learner` (a learner's id; None: the teacher or the command line) may not change a run, or control a
    training, of `owner`'s (None: the teacher's); None when they may. Anyone may watch, inspect and download."""
    if learner is None or owner == learner:
        return None
    if owner is None:
        return message("runs.teachers_run", "It is the teacher's run: only the teacher can change it.")
    return message("runs.others_run", "It is another learner's run: only they and the teacher can change it.")


def model_summary(run: RunInfo) -> Message | str:
    """describe_model of the config in the weights' own header, which the model is built from ('' if it cannot
    be read)."""
    try:
        metadata = ckpt.weights_metadata(run.path / "model.safetensors")
        return describe_model(GPTConfig.from_dict(json.loads(metadata.get("config", ""))))
    except (folders.CheckpointError, ConfigError, json.JSONDecodeError):
        return ""


def run_status(meta: dict, path: Path, live: dict[str, str], holder: int | None) -> str:
    if folders.shown_name(path) in live:
        return live[folders.shown_name(path)]
    if holder is not None:
        return "elsewhere"  # another process (the command line?) is training it
    status = str(meta.get("status", "unknown"))
    return "interrupted" if status == "running" else status


def total_steps(meta: dict) -> int:
    steps = (meta.get("train_config") or {}).get("steps", 0)
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0 else 0


def corpus_of(meta: dict) -> Message | str:
    """What the run was trained on, as its meta.json says (in any language when it recorded the Message)."""
    return stored_message(meta.get("corpus_message")) or meta.get("corpus", "")


def weights_problem(weights: Path) -> Message | None:
    """Why a weights file that is there cannot be opened (a link to a device or to nothing, a FIFO: Inspect leaves
    such a run out); None when it is a file, or not there at all."""
    if not (weights.exists() or weights.is_symlink()):
        return None
    try:
        ckpt.check_regular_file(weights)
    except folders.CheckpointError as e:
        return e.message
    return None


def read_run(path: Path, live: dict[str, str] | None = None) -> RunInfo:
    """A run's row; a meta.json that cannot be understood gives status 'unreadable' (no step) or 'damaged' (some
    values of the wrong kind, left out) instead of an error, and so do weights that are no file ('unreadable')."""
    path = Path(path)
    meta, damaged = ckpt.checked_meta(path)
    meta_file = path / "meta.json"  # (a run whose job has just started has none yet)
    holder = locks.lock_holder(path)  # (read once: the row's status and its blocker's pid say the same)
    problem = weights_problem(path / "model.safetensors")
    common = dict(name=folders.shown_name(path), path=path, has_weights=(path / "model.safetensors").is_file(),
                  saved=meta_file.stat().st_mtime if meta_file.is_file() else 0.0, holder=holder,
                  weights_problem=problem)
    status = run_status(meta, path, live or {}, holder)
    if damaged is None or "step" in damaged:
        return RunInfo(**common, status=status if status in (*ACTIVE, "elsewhere") else "unreadable", step=-1,
                       total_steps=0, best_val=None, final_val=None, wall_time=0.0, params=None, corpus="",
                       damaged=["meta.json"] if damaged is None else damaged)
    vals = [v for v in meta.get("history", {}).get("eval_val", []) if math.isfinite(v)]
    if status not in (*ACTIVE, "elsewhere"):  # what a live job says stands; else a fault of the folder shows
        status = "unreadable" if problem else "damaged" if damaged else status
    return RunInfo(**common, status=status,
                   step=meta.get("step", -1), total_steps=total_steps(meta), best_val=min(vals) if vals else None,
                   final_val=meta.get("final_val_loss"), wall_time=meta.get("wall_time", 0.0),
                   params=meta.get("params"), corpus=corpus_of(meta), meta=meta, damaged=damaged)


def list_runs(root: Path | None = None, live: dict[str, str] | None = None) -> list[RunInfo]:
    """Every checkpoints/<name>/ with a meta.json, newest first."""
    root = folders.root_folder(root)
    if not root.is_dir():
        return []
    # (a name starting with "." is never a run's: an imported checkpoint is unpacked and checked there)
    found = [read_run(p, live) for p in root.iterdir() if not p.name.startswith(".") and (p / "meta.json").is_file()]
    return sorted(found, key=lambda r: r.saved, reverse=True)


def zip_run(path: Path) -> bytes:
    """The run folder as a zip whose entries sit under <name>/ (temporary files left out)."""
    path = Path(path)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for file in sorted(path.rglob("*")):
            if file.is_file() and not file.name.endswith(".tmp") and file.name != locks.LOCK:
                z.write(file, Path(path.name) / file.relative_to(path))
    return buffer.getvalue()


def suggest_name(base: str, root: Path | None = None, taken=()) -> str:
    """base-1, base-2, ...: the first name neither under root nor in taken (say, a live job's, whose thread may
    not have created its folder yet). A base too long for its number is cut, so the name is always usable."""
    root = folders.root_folder(root)
    base = folders.safe_name(base)
    n = 1
    while (root / (name := numbered(base, n))).exists() or name in taken:
        n += 1
    return name


def numbered(base: str, n: int) -> str:
    return f"{base[:folders.MAX_NAME - len(f'-{n}')]}-{n}"


def new_run_dir(name: str, root: Path | None = None) -> Path:
    """The folder of a new run named `name`, which must be free (see locks.check_new_folder)."""
    directory = folders.checkpoint_dir(name, root)
    locks.check_new_folder(directory)
    return directory


def rename_run(run: RunInfo, new_name: str, root: Path | None = None) -> Path:
    """Rename a run's folder; `run` must come from list_runs/read_run with this process's live jobs."""
    run.refuse("rename")
    return folders.rename_checkpoint(run.path, new_name, root)


def delete_run(run: RunInfo, root: Path | None = None) -> None:
    run.refuse("delete")
    folders.delete_checkpoint(run.path, root)


def resume_config(run: RunInfo, until_step: int) -> TrainConfig:
    """The run's own hyperparameters with a new last step (and this machine's device: auto)."""
    run.refuse("continue")
    if until_step <= run.step:
        raise TrainConfigError("runs.already_there", "{name} is already at step {step:,}; train until a later step",
                               name=run.name, step=run.step)
    own = {k: v for k, v in (run.meta.get("train_config") or {}).items() if k not in PLACE}
    return TrainConfig.from_dict({**own, "steps": int(until_step)})
