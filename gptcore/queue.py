"""The runs waiting to train and the runs training, for every process that serves or trains one checkpoints folder.

The app trains as many runs at once as it has slots for (one by default); a Start while they are all taken puts
the run here, and whichever process has a free slot takes the first waiting run (`claim`) and trains it in a
process of its own (gptcore.worker). Two app servers on one folder, or a server and a `python -m gptcore worker`,
share the queue: a claim is one SQLite transaction, so a run starts once.

Everything lives in the checkpoints folder's `.jobs/` (a name starting with "." is never a run's):
  queue.sqlite3     the queue and the jobs, in SQLite (standard library, WAL: readers never wait for a writer)
  <id>/run.json     each run as it was queued: what it takes to start it, and whose it is
  <id>/upload       the corpus it was given as an upload, until it starts
  <id>/lock         held (flock) by the process that trains it, for as long as it lives: the kernel lets go when
                    that process ends, however it ends, so a run whose lock is free has ended
  <id>/events.jsonl, control.json, output.log   what its process reports and is told (gptcore.worker)
The database is an index of these folders: one that is damaged is set aside and rebuilt from them, and the page
says so (`notice`).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import sqlite3
import time
import uuid
from contextlib import closing, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import fs, locks
from .errors import Message, UserError, message
from .folders import root_folder, safe_name

log = logging.getLogger(__name__)

JOBS = ".jobs"
DATABASE = "queue.sqlite3"
REBUILT = "rebuilt.json"  # the last rebuild, for every server over the folder to say, not only the one that did it
NOTICE_S = 3600  # how long after a rebuild a server's pages say it
ACTIONS = ("new", "continue")
ID = re.compile(r"^[0-9a-f]{12}$")
KEEP_ENDED = 100  # ended jobs kept (their events say why a run failed), newest first
SCHEMA = """CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,      -- the order of the queue
    name TEXT NOT NULL,        -- the run folder it trains into (follows a rename)
    state TEXT NOT NULL,       -- waiting | started | ended
    record TEXT NOT NULL,      -- the QueuedRun, as JSON
    started_at REAL,
    ended_at REAL,
    launcher TEXT              -- host:pid of the process that started it
)"""


class QueueError(UserError, ValueError):
    """A run that cannot join the queue, or a queue that cannot be read or written."""


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
    upload: bool = False  # its corpus was uploaded and waits in .jobs/<id>/upload
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    queued_at: float = field(default_factory=time.time)

    @classmethod
    def from_dict(cls, data) -> QueuedRun:
        """A run read back from the store or its run.json, checked (anyone may have edited them)."""
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


@dataclass(frozen=True)
class JobRecord:
    """A run that has started (or ended: state), as the store has it."""
    run: QueuedRun
    name: str
    state: str
    started_at: float
    ended_at: float | None
    folder: Path  # .jobs/<id>

    @property
    def id(self) -> str:
        return self.run.id


@dataclass
class Claim:
    """A run this process has taken from the queue to train: `lock` is the open file that holds its job lock,
    to hand to the process that trains it (then closed here)."""
    run: QueuedRun
    folder: Path
    lock: int


class RunQueue:
    """The queue of a checkpoints folder (root; None: the app's, read at each call). Every method reads the store
    afresh, so any number of RunQueue objects, in any number of processes, over one folder agree."""

    def __init__(self, root: Path | None = None):
        self._root = root
        self._made = False  # (this object has seen the store's table made)

    @property
    def root(self) -> Path:
        """The checkpoints folder its runs train into."""
        return root_folder(self._root)

    @property
    def folder(self) -> Path:
        return self.root / JOBS

    @property
    def path(self) -> Path:
        return self.folder / DATABASE

    def job_folder(self, run_id: str) -> Path:
        return self.folder / run_id

    # ------------------------------------------------------------ the database

    def _connect(self) -> sqlite3.Connection:
        """A connection to the store (made, in WAL mode, by the first; WAL stays the file's mode)."""
        self._made = self._made and self.path.exists()  # (deleted meanwhile: made again)
        if not self._made:
            self.folder.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)  # (transactions said explicitly)
        try:
            # NORMAL: a commit is on disk at the next checkpoint; a power cut may lose the last change, never the file
            connection.execute("PRAGMA synchronous=NORMAL")
            if not self._made:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute(SCHEMA)
                self._made = True
        except BaseException:
            connection.close()
            raise
        return connection

    def _do(self, work, write: bool = False):
        """work(connection)'s result, in one transaction when write (BEGIN IMMEDIATE: one writer at a time, in any
        process). A damaged database is set aside and rebuilt from the job folders, and the work done again; a
        store that cannot be opened or written is a QueueError."""
        for attempt in (1, 2):
            try:
                with closing(self._connect()) as connection:
                    if not write:
                        return work(connection)
                    connection.execute("BEGIN IMMEDIATE")
                    try:
                        result = work(connection)
                    except BaseException:
                        connection.execute("ROLLBACK")
                        raise
                    connection.execute("COMMIT")
                    return result
            except (sqlite3.OperationalError, OSError) as e:
                raise QueueError("queue.unwritable", "The queue of waiting runs, {path}, cannot be read or written "
                                 "({reason}): it is left as it was.", path=self.path, reason=str(e)) from None
            except sqlite3.DatabaseError as e:  # (not a database, or a malformed one)
                if attempt == 2 or isinstance(e, sqlite3.IntegrityError):
                    raise
                self._rebuild(str(e))

    def _rebuild(self, reason: str) -> None:
        """Set the damaged database aside and make a new one from the job folders: each run.json is a waiting run,
        or a started one when its folder shows that a process took it."""
        fd = locks.take(self.folder / "rebuild.lock", wait=30)  # (one process rebuilds; None: it took too long)
        try:
            with suppress(sqlite3.DatabaseError), closing(self._connect()) as connection:
                connection.execute("SELECT count(*) FROM jobs").fetchone()
                return  # (another process has rebuilt it meanwhile)
            kept = self.folder / f"{DATABASE}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
            for suffix in ("", "-wal", "-shm"):
                with suppress(FileNotFoundError):
                    os.replace(f"{self.path}{suffix}", f"{kept}{suffix}")
            runs = []
            for run_file in self.folder.glob("*/run.json"):
                try:
                    runs.append(QueuedRun.from_dict(json.loads(run_file.read_text(encoding="utf-8"))))
                except (OSError, ValueError, TypeError):
                    log.warning("left out of the rebuilt queue: %s", run_file)
            runs.sort(key=lambda run: run.queued_at)
            self._made = False
            with closing(self._connect()) as connection:
                for seq, run in enumerate(runs, 1):
                    folder = self.job_folder(run.id)
                    started = (folder / "lock").exists() or (folder / "events.jsonl").exists()
                    connection.execute("INSERT INTO jobs (id, seq, name, state, record, started_at) VALUES "
                                       "(?, ?, ?, ?, ?, ?)", (run.id, seq, run.name, "started" if started else
                                                              "waiting", json.dumps(asdict(run)), run.queued_at))
            waiting = sum(1 for run in runs if not (self.job_folder(run.id) / "lock").exists())
        finally:
            if fd is not None:
                locks.release(self.folder / "rebuild.lock", fd)
        fs.atomic_write(self.folder / REBUILT, json.dumps({"at": time.time(), "reason": reason[:200],
                                                          "kept": kept.name, "waiting": waiting}))
        log.warning("%s", self.notice)

    @property
    def notice(self) -> Message | None:
        """The store's last rebuild, for an hour after it: whichever server or process found it damaged."""
        try:
            told = json.loads((self.folder / REBUILT).read_text(encoding="utf-8"))
            if time.time() - told["at"] > NOTICE_S:
                return None
            return message("queue.rebuilt", "The queue's database, {path}, was damaged ({reason}): it is kept as "
                           "{kept} and a new one was made from the run folders, with {waiting} waiting run(s).",
                           path=self.path, reason=told["reason"], kept=told["kept"], waiting=told["waiting"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # ------------------------------------------------------------ waiting runs

    def runs(self) -> list[QueuedRun]:
        """The waiting runs, first to start first."""
        return self._do(_waiting) if self.path.exists() else []

    def add(self, run: QueuedRun, per_learner: int, upload: bytes | None = None) -> int:
        """Put run at the end of the queue; its place (1: next to start). A learner (queued_by not None) may have
        per_learner runs waiting at once; the teacher any number. upload: the bytes of its uploaded corpus. A run
        whose name is waiting or training already is refused."""
        folder = self.job_folder(run.id)
        if upload is not None:
            run = QueuedRun(**{**asdict(run), "upload": True})
        try:
            folder.mkdir(parents=True)
            if upload is not None:
                fs.atomic_write(folder / "upload", upload)
            fs.atomic_write(folder / "run.json", json.dumps(asdict(run), indent=1))
        except OSError as e:
            shutil.rmtree(folder, ignore_errors=True)
            raise QueueError("queue.upload_unwritable", "The run cannot be kept until it starts ({reason}): free "
                             "some disk space and start it again.", reason=e.strerror or str(e)) from None

        def add(db: sqlite3.Connection) -> int:
            self._reap(db)
            if db.execute("SELECT 1 FROM jobs WHERE name = ? AND state = 'started'", (run.name,)).fetchone():
                raise QueueError("queue.name_training", "'{name}' is training now: a new run needs another name, "
                                 "and this one can be continued once it ends", name=run.name)
            waiting = _waiting(db)
            check_room(run, waiting, per_learner)
            db.execute("INSERT INTO jobs (id, seq, name, state, record) VALUES (?, (SELECT coalesce(max(seq), 0) + 1 "
                       "FROM jobs), ?, 'waiting', ?)", (run.id, run.name, json.dumps(asdict(run))))
            return len(waiting) + 1

        try:
            return self._do(add, write=True)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def cancel(self, run_id: str) -> QueuedRun | None:
        """Take a waiting run out of the queue, with its folder; None when it is no longer waiting."""
        def cancel(db: sqlite3.Connection) -> list[QueuedRun]:
            found = [run for run in _waiting(db) if run.id == run_id]
            db.execute("DELETE FROM jobs WHERE id = ? AND state = 'waiting'", (run_id,))
            return found

        found = self._do(cancel, write=True)
        for run in found:
            shutil.rmtree(self.job_folder(run.id), ignore_errors=True)
        return next(iter(found), None)

    def clear(self) -> list[QueuedRun]:
        """Cancel every waiting run (the teacher's button), and so mend a queue holding a record that is not a
        run's; the runs cancelled (those that could be read)."""
        def clear(db: sqlite3.Connection) -> list[tuple[str, str]]:
            rows = db.execute("SELECT id, record FROM jobs WHERE state = 'waiting' ORDER BY seq").fetchall()
            db.execute("DELETE FROM jobs WHERE state = 'waiting'")
            return rows

        cancelled = []
        for run_id, record in self._do(clear, write=True):
            shutil.rmtree(self.job_folder(run_id), ignore_errors=True)
            with suppress(ValueError, TypeError):
                cancelled.append(QueuedRun.from_dict(json.loads(record)))
        return cancelled

    def upload_of(self, run: QueuedRun) -> bytes | None:
        """The uploaded corpus a run trains on (None: its corpus is not an upload)."""
        if not run.upload:
            return None
        try:
            return (self.job_folder(run.id) / "upload").read_bytes()
        except FileNotFoundError:
            raise QueueError("queue.upload_gone", "the uploaded corpus of '{name}' is gone from {folder}: upload it "
                             "again and start the run anew", name=run.name, folder=self.job_folder(run.id)) from None

    def drop_upload(self, run: QueuedRun) -> None:
        (self.job_folder(run.id) / "upload").unlink(missing_ok=True)

    # ------------------------------------------------------------ runs that start, train and end

    def claim(self, slots: int) -> Claim | None:
        """Take the first waiting run whose name is not training now, when fewer than `slots` runs train (in any
        process over this folder); None when none may start. Its job lock is held by the Claim's open file."""
        def claim(db: sqlite3.Connection) -> Claim | None:
            self._reap(db)
            training = {name for name, in db.execute("SELECT name FROM jobs WHERE state = 'started'")}
            if len(training) >= slots:
                return None
            for run in _waiting(db):
                if run.name in training or (lock := locks.take(self.job_folder(run.id) / "lock", wait=0)) is None:
                    continue
                try:
                    db.execute("UPDATE jobs SET state = 'started', started_at = ?, launcher = ? WHERE id = ?",
                               (time.time(), f"{socket.gethostname()}:{os.getpid()}", run.id))
                except BaseException:
                    os.close(lock)
                    raise
                return Claim(run, self.job_folder(run.id), lock)
            return None

        return self._do(claim, write=True)

    def unclaim(self, run_id: str) -> None:
        """Put a claimed run whose process could not be started back in its place in the queue."""
        self._do(lambda db: db.execute("UPDATE jobs SET state = 'waiting', started_at = NULL, launcher = NULL WHERE "
                                       "id = ? AND state != 'waiting'", (run_id,)), write=True)

    def jobs(self) -> list[JobRecord]:
        """The runs that have started, training or ended (the last KEEP_ENDED of those), first started first."""
        if not self.path.exists():
            return []
        rows = self._do(lambda db: db.execute("SELECT record, name, state, started_at, ended_at FROM jobs WHERE "
                                              "state != 'waiting' ORDER BY started_at").fetchall())
        found = []
        for record, name, state, started_at, ended_at in rows:
            run = QueuedRun.from_dict(json.loads(record))
            found.append(JobRecord(run, name, state, started_at or run.queued_at, ended_at, self.job_folder(run.id)))
        return found

    def reap(self) -> None:
        """Mark as ended the started runs whose process has ended."""
        self._do(self._reap, write=True)

    def _reap(self, db: sqlite3.Connection) -> None:
        for run_id, in db.execute("SELECT id FROM jobs WHERE state = 'started'").fetchall():
            if not locks.held(self.job_folder(run_id) / "lock"):
                db.execute("UPDATE jobs SET state = 'ended', ended_at = ? WHERE id = ?", (time.time(), run_id))
        for run_id, in db.execute("SELECT id FROM jobs WHERE state = 'ended' ORDER BY ended_at DESC LIMIT -1 "
                                  "OFFSET ?", (KEEP_ENDED,)).fetchall():
            db.execute("DELETE FROM jobs WHERE id = ?", (run_id,))
            shutil.rmtree(self.job_folder(run_id), ignore_errors=True)

    def rename(self, old: str, new: str) -> None:
        """The ended jobs of run `old` now name its folder `new` (a run is renamed only while nothing trains it)."""
        self._do(lambda db: db.execute("UPDATE jobs SET name = ? WHERE name = ? AND state = 'ended'", (new, old)),
                 write=True)


def _waiting(db: sqlite3.Connection) -> list[QueuedRun]:
    """The waiting runs, in the queue's order. A record that is not a run's (the store edited by hand) is a
    QueueError: the queue cannot be trusted until it is mended or cleared."""
    rows = db.execute("SELECT record FROM jobs WHERE state = 'waiting' ORDER BY seq").fetchall()
    try:
        return [QueuedRun.from_dict(json.loads(record)) for record, in rows]
    except (ValueError, TypeError) as e:
        raise QueueError("queue.unreadable", "The queue of waiting runs cannot be read ({reason}): no waiting run "
                         "starts until the teacher clears it.", reason=str(e)[:200]) from None


def check_room(run: QueuedRun, waiting: list[QueuedRun], per_learner: int) -> None:
    """Refuse a run whose name is waiting already, or whose learner has per_learner runs waiting."""
    if any(other.name == run.name for other in waiting):
        raise QueueError("queue.name_waiting", "a run named '{name}' is already waiting to train: choose "
                         "another name, or cancel that one first", name=run.name)
    theirs = [other.name for other in waiting if run.queued_by is not None and other.queued_by == run.queued_by]
    if len(theirs) >= per_learner:
        raise QueueError("queue.limit", "Each learner may have {limit} run(s) waiting to train, and yours "
                         "are waiting already ({names}): cancel one, or wait until it starts, to add another.",
                         limit=per_learner, names=", ".join(theirs))
