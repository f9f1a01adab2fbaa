"""The runs waiting to train: a queue kept on disk beside the runs, so that a restarted server still has it.

The app trains as many runs at once as it has slots for (one by default); a Start while they are all taken puts
the run here, and the app starts the first waiting run whenever a slot frees. The queue is one JSON file in the
checkpoints folder, `.queue.json`, written whole to a temporary file and renamed over the old one, so a killed
server never leaves half of it. An uploaded corpus waits beside it, in `.queue-uploads/`, until its run starts.
A name starting with "." is never a run's, so neither is listed as one. One server process uses a checkpoints
folder's queue: within it a lock keeps each change whole.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import UserError
from .folders import root_folder, safe_name

QUEUE_FILE = ".queue.json"
UPLOADS = ".queue-uploads"
ACTIONS = ("new", "continue")
ID = re.compile(r"^[0-9a-f]{12}$")
_lock = threading.RLock()  # (reentrant: take_next reads and writes under one hold)


class QueueError(UserError, ValueError):
    """A run that cannot join the queue, or a queue file that cannot be read."""


@dataclass(frozen=True)
class QueuedRun:
    """One waiting run: what it takes to start it after a restart, and whose it is.

    owner is whose run it is and queued_by who asked for it (None: the teacher); they differ when the teacher
    continues a learner's run, which stays the learner's. work is what it computes, parameters × tokens per step ×
    steps to go: divided by the rate the machine trains at, its expected duration."""
    name: str
    action: str  # "new" (model: the GPTConfig's fields) or "continue" (the run's own model)
    train: dict  # the TrainConfig's fields
    source: dict  # the CorpusSource's fields
    work: float
    owner: str | None = None
    queued_by: str | None = None
    model: dict | None = None
    upload: bool = False  # its corpus was uploaded and waits in UPLOADS/<id>
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    queued_at: float = field(default_factory=time.time)

    @classmethod
    def from_dict(cls, data) -> QueuedRun:
        """An entry read back from the file, checked (the file is the app's, but anyone may have edited it)."""
        try:
            run = cls(**data)
        except TypeError as e:
            raise ValueError(f"an entry with other fields than a queued run's ({e})") from None
        ok = (ID.match(str(run.id)) and run.action in ACTIONS and isinstance(run.train, dict)
              and isinstance(run.source, dict) and (run.model is None or isinstance(run.model, dict))
              and isinstance(run.work, int | float) and isinstance(run.queued_at, int | float)
              and all(who is None or isinstance(who, str) for who in (run.owner, run.queued_by)))
        if not ok or safe_name(run.name) != run.name:
            raise ValueError(f"an entry of the wrong kind: {data!r}"[:300])
        return run


class RunQueue:
    """The queue of a checkpoints folder (root; None: the app's, read at each call). Every method reads the
    file afresh, so two RunQueue objects over one folder (a server before and after a restart) agree."""

    def __init__(self, root: Path | None = None):
        self._root = root

    @property
    def root(self) -> Path:
        """The checkpoints folder its runs train into."""
        return root_folder(self._root)

    @property
    def path(self) -> Path:
        return self.root / QUEUE_FILE

    def runs(self) -> list[QueuedRun]:
        """The waiting runs, first to start first."""
        with _lock:
            try:
                text = self.path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return []
            try:
                return [QueuedRun.from_dict(entry) for entry in json.loads(text)]
            except (ValueError, TypeError) as e:  # (json.JSONDecodeError is a ValueError)
                raise QueueError("queue.unreadable", "The queue of waiting runs, {path}, cannot be read ({reason}): "
                                 "no waiting run starts until it is mended or deleted.", path=self.path,
                                 reason=str(e)[:200]) from None

    def _write(self, runs: list[QueuedRun]) -> None:
        path = self.path
        temporary = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump([asdict(run) for run in runs], f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, path)
        except OSError as e:  # (a full disk, a folder made read-only: the queue as it was stays)
            raise QueueError("queue.unwritable", "The queue of waiting runs, {path}, cannot be written ({reason}): "
                             "it is left as it was.", path=path, reason=e.strerror or str(e)) from None
        finally:
            temporary.unlink(missing_ok=True)

    def add(self, run: QueuedRun, per_learner: int, upload: bytes | None = None) -> int:
        """Put run at the end of the queue; its place (1: next to start). A learner (queued_by not None) may have
        per_learner runs waiting at once; the teacher any number. upload: the bytes of its uploaded corpus."""
        with _lock:
            waiting = self.runs()
            if any(other.name == run.name for other in waiting):
                raise QueueError("queue.name_waiting", "a run named '{name}' is already waiting to train: choose "
                                 "another name, or cancel that one first", name=run.name)
            theirs = [other.name for other in waiting if run.queued_by is not None and other.queued_by == run.queued_by]
            if len(theirs) >= per_learner:
                raise QueueError("queue.limit", "Each learner may have {limit} run(s) waiting to train, and yours "
                                 "are waiting already ({names}): cancel one, or wait until it starts, to add another.",
                                 limit=per_learner, names=", ".join(theirs))
            if upload is not None:
                folder = self.root / UPLOADS
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                    (folder / run.id).write_bytes(upload)
                except OSError as e:
                    (folder / run.id).unlink(missing_ok=True)
                    raise QueueError("queue.upload_unwritable", "The uploaded corpus cannot be kept until the run "
                                     "starts ({reason}): free some disk space and start it again.",
                                     reason=e.strerror or str(e)) from None
                run = QueuedRun(**{**asdict(run), "upload": True})
            self._write([*waiting, run])
            return len(waiting) + 1

    def remove(self, run_id: str) -> QueuedRun | None:
        """Take a run out of the queue (cancelled, or about to start); None when it is no longer there. Its
        uploaded corpus, if any, stays until drop_upload."""
        with _lock:
            waiting = self.runs()
            found = next((run for run in waiting if run.id == run_id), None)
            if found is not None:
                self._write([run for run in waiting if run.id != run_id])
            return found

    def cancel(self, run_id: str) -> QueuedRun | None:
        """Remove a run that will never start, with its uploaded corpus."""
        if (found := self.remove(run_id)) is not None:
            self.drop_upload(found)
        return found

    def clear(self) -> list[QueuedRun]:
        """Cancel every waiting run (the teacher's button), and mend a file that cannot be read; the runs
        cancelled (none known from a damaged file, whose uploads all go)."""
        with _lock:  # (held throughout: a run added meanwhile keeps its upload)
            try:
                waiting = self.runs()
            except QueueError:
                waiting = None
            self._write([])
            if waiting is None:
                for upload in (self.root / UPLOADS).glob("*"):
                    upload.unlink()
                return []
            for run in waiting:
                self.drop_upload(run)
            return waiting

    def upload_of(self, run: QueuedRun) -> bytes | None:
        """The uploaded corpus a waiting run trains on (None: its corpus is not an upload)."""
        if not run.upload:
            return None
        try:
            return (self.root / UPLOADS / run.id).read_bytes()
        except FileNotFoundError:
            raise QueueError("queue.upload_gone", "the uploaded corpus of '{name}' is gone from {folder}: upload it "
                             "again and start the run anew", name=run.name, folder=self.root / UPLOADS) from None

    def drop_upload(self, run: QueuedRun) -> None:
        if run.upload:
            (self.root / UPLOADS / run.id).unlink(missing_ok=True)
