"""Background jobs for the app: training runs, each a process of its own, and the short CPU-heavy jobs of the
concept pages and the model importer, each a thread of the server; readable from any thread.

The app keeps one JobRegistry per server process (st.cache_resource). Pages poll `job.snapshot()` from fragments;
nothing here calls Streamlit.

A training run is never refused for want of a slot: it waits in the checkpoints folder's queue (gptcore.queue,
shared by every server and worker over that folder), and whenever a slot frees the first waiting run starts, in a
process of its own (gptcore.worker), which this server watches through the run's job folder: its progress and
samples from events.jsonl, its pause and stop through control.json. A run whose process dies, however, is
interrupted: the server and every session go on answering. A registry made over a folder whose queue holds runs
(the server restarted) starts them as soon as it exists: the first page anyone opens makes it.
"""
from __future__ import annotations

import copy
import ctypes
import gc
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field

from gptcore import locks
from gptcore.errors import Message, UserError, message, stored_message
from gptcore.folders import ACTIVE
from gptcore.queue import JobRecord, QueuedRun, QueueError, RunQueue
from gptcore.worker import ENDINGS, EVENTS, NICENESS, exit_message, launch, read_control, read_events, training_slots
from gptcore.worker import write_control as _write_control

log = logging.getLogger(__name__)

TRAIN = "train"  # the kind of job a training run is
SYNC_S = 0.5  # how long the registry trusts its list of runs before reading the queue's store again


def yield_to_the_ui() -> None:
    """Lower the calling thread's CPU priority, so the server's threads win whenever both want a core.

    On Linux nice values belong to threads, and the OpenMP workers this thread starts inherit it:
    the job still gets every idle cycle, but a click no longer queues behind matrix multiplies.
    Elsewhere PRIO_PROCESS would take the id for a process id, so this does nothing there.
    """
    if sys.platform.startswith("linux"):
        me = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, me, max(os.getpriority(os.PRIO_PROCESS, me), NICENESS))
        except OSError:
            pass


def release_memory() -> None:
    """Hand the memory a finished job freed back to the system: glibc keeps freed blocks for reuse, and
    malloc_trim returns them (an imported model passes its weights through buffers it no longer needs)."""
    gc.collect()
    if sys.platform.startswith("linux"):
        with suppress(OSError, AttributeError):  # (a libc without malloc_trim, such as musl)
            ctypes.CDLL("libc.so.6").malloc_trim(0)


# What each kind of job is called in a message (the pages name their kinds; an unknown kind is shown as it is).
KIND_NAMES = {"train": message("jobs.kind_train", "train"), "concept demo": message("jobs.kind_demo", "concept demo"),
              "norm race": message("jobs.kind_norm_race", "norm race"),
              "norm type race": message("jobs.kind_norm_type_race", "norm type race"),
              "ladder race": message("jobs.kind_ladder_race", "speedrun rung race")}


class JobRefused(UserError, RuntimeError):
    """A job could not start because another one is active."""

    @staticmethod
    def blocked_by(busy: Job | RunJob) -> JobRefused:
        state = busy.state
        kind = KIND_NAMES.get(state.kind, state.kind)
        if state.status == "paused":
            return JobRefused("jobs.paused", "'{name}' ({kind}) is paused, not finished; stop it, or resume it and "
                              "wait for it to finish, before starting another job.", name=state.name, kind=kind)
        return JobRefused("jobs.running", "'{name}' ({kind}) is already running; stop it or wait for it to finish "
                          "before starting another job.", name=state.name, kind=kind)


@dataclass
class JobState:
    name: str
    kind: str
    status: str = "starting"  # starting | running | paused | stopping | finished | stopped | failed | interrupted
    message: Message | str = ""  # why it failed or was interrupted (a Message, shown with i18n.say)
    traceback: str = ""  # set only when a bug (not a user error) ended the job
    progress: float = 0.0  # 0..1
    data: dict = field(default_factory=dict)  # job-specific live data (curves, samples, ...)
    started: float = field(default_factory=time.time)
    ended: float | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


class Job:
    """A function run in a thread of the server (a concept page's demo, a model import): fn(job) reads
    job.control and writes through job.update()."""

    def __init__(self, name: str, kind: str, fn: Callable[[Job], str | None], threads: int = 0,
                 on_end: Callable[[], None] | None = None):
        # (torch: loaded with the first job, not with the sidebar)
        from gptcore.threads import use_threads
        from gptcore.train import TrainControl

        self.state = JobState(name, kind)
        self.control = TrainControl()
        self._fn, self._use_threads, self._on_end = fn, lambda: use_threads(threads), on_end
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name=f"job-{name}", daemon=True)

    name = property(lambda self: self.state.name)
    kind = property(lambda self: self.state.kind)
    started = property(lambda self: self.state.started)
    active = property(lambda self: self.state.active)

    def start(self) -> Job:
        self._thread.start()
        return self

    def _main(self):
        yield_to_the_ui()
        # Thread counts are per thread in torch: this must run here, not in the thread that started the job.
        self._use_threads()
        self._move("starting", status="running")  # a pause or stop clicked before this line wins
        try:
            final = self._fn(self) or ("stopped" if self.control.stop.is_set() else "finished")
            self.update(status=final, ended=time.time())
        except UserError as e:  # bad corpus, divergence, a busy folder...: the message is for the user
            self.update(status="failed", message=e.message, ended=time.time())
        except Exception as e:  # a bug: keep the whole story, for the log and behind the UI's short message
            log.exception("job %r (%s) failed", self.state.name, self.state.kind)
            self.update(status="failed", message=message("jobs.bug", "An unexpected error stopped it: {error}",
                                                         error=f"{type(e).__name__}: {e}"),
                        traceback=traceback.format_exc(), ended=time.time())
        finally:
            self._fn = None  # what it held (a model, its data) goes with it; the registry keeps the state
            release_memory()
            if self._on_end is not None:
                self._on_end()

    def update(self, **changes) -> None:
        with self._lock:
            data = changes.pop("data", None)
            for key, value in changes.items():
                setattr(self.state, key, value)
            if data:
                self.state.data.update(data)

    def append(self, key: str, *values) -> None:
        """Append values to the list state.data[key] (created on first use)."""
        with self._lock:
            self.state.data.setdefault(key, []).extend(values)

    def snapshot(self) -> JobState:
        """A deep copy, safe to read while the job keeps writing."""
        with self._lock:
            return copy.deepcopy(self.state)

    def _move(self, *from_statuses: str, **changes) -> bool:
        """Apply changes only while the status is one of from_statuses; True if applied."""
        with self._lock:
            if self.state.status not in from_statuses:
                return False
            for key, value in changes.items():
                setattr(self.state, key, value)
            return True

    # A finished job must stay finished: a late click on Pause would otherwise mark it active forever.
    def pause(self):
        if self._move("starting", "running", status="paused"):
            self.control.pause()

    def resume(self):
        if self._move("paused", status="running"):
            self.control.resume()

    def stop(self):
        if self._move("starting", "running", "paused", status="stopping"):
            self.control.request_stop()

    def join(self, timeout: float | None = None):
        self._thread.join(timeout)


MESSAGES = ("corpus", "model_summary", "train_summary", "unknown")  # the set-up's values that are Messages


class RunJob:
    """A training run in a process of its own (gptcore.worker), as this server sees it: its state is folded from
    the events its process writes, read from where the last look stopped; its status from whether the process
    still holds the job's lock. Pause, resume and stop are written to its control file."""

    kind = TRAIN

    def __init__(self, record: JobRecord, queue: RunQueue):
        self.id, self.folder, self.queue = record.id, record.folder, queue
        run = record.run
        self._state = JobState(record.name, TRAIN, started=record.started_at, data={
            "owner": run.owner, "queued_by": run.queued_by, "planned_steps": int(run.train.get("steps") or 0)})
        self._lock = threading.Lock()
        self._offset, self._set_up, self._ending = 0, False, None
        self.waiter: threading.Thread | None = None  # (this server's thread waiting for the process it started)
        self.store_ended = record.state == "ended"  # (no process of it lives: its events need reading only once)
        self.follow(record.name)

    @property
    def name(self) -> str:
        return self._state.name

    @property
    def started(self) -> float:
        return self._state.started

    @property
    def active(self) -> bool:
        """Is it training (or starting, paused, stopping)? Cheap: asks only whether its process lives."""
        return self._ending is None and not self.store_ended and self.alive()

    def follow(self, name: str) -> None:
        """The run's folder is called name (it was renamed)."""
        with self._lock:
            self._state.name = name
            self._state.data.update(run=name, out_dir=str(self.queue.root / name))

    @property
    def state(self) -> JobState:
        """The state as of now (read it, never change it: it is the registry's)."""
        with self._lock:
            self._refresh()
            return self._state

    def snapshot(self) -> JobState:
        """A deep copy of the state as of now, safe to keep."""
        with self._lock:
            self._refresh()
            return copy.deepcopy(self._state)

    def alive(self) -> bool:
        """Does a process (the one training it, or the one starting it) still hold the run?"""
        return locks.held(self.folder / "lock")

    def _refresh(self) -> None:
        if self._ending is not None:
            return
        self._read()
        if self._ending is not None:
            return
        if self.alive():
            wanted = read_control(self.folder)
            self._state.status = "stopping" if wanted["stop"] else "paused" if wanted["pause"] else \
                "running" if self._set_up else "starting"
            return
        self._read()  # (what it wrote just before it ended)
        told_soon = self.waiter is not None and self.waiter.is_alive()  # (this server's waiter writes how it ended)
        if self._ending is None and not told_soon:  # gone without a word, and its starter too (kill -9 of both)
            self._end({"event": "exit", "code": None})

    def _read(self) -> None:
        events, self._offset = read_events(self.folder / EVENTS, self._offset)
        for event in events:
            self._apply(event)

    def _apply(self, event: dict) -> None:
        d, kind = self._state.data, event["event"]
        if kind == "started":
            d["pid"] = event.get("pid")
        elif kind == "setup":
            d.update({key: stored_message(value) if key in MESSAGES and isinstance(value, dict) else value
                      for key, value in event.items() if key != "event"})
            d["samples"] = []
            self._set_up = True
        elif kind == "step":
            done = event["step"] - d.get("start_step", 0) + 1
            self._state.progress = done / max(1, d.get("total_steps", 0) - d.get("start_step", 0) + 1)
            d.update(step=event["step"], loss=event["loss"], tokens_per_s=event["tokens_per_s"],
                     eta_s=event["eta_s"], elapsed_s=event["elapsed_s"])
            d.setdefault("curve_step", []).append(event["step"])
            d.setdefault("curve_loss", []).append(event["loss"])
        elif kind == "eval":
            d.setdefault("evals", []).append({"step": event["step"], "train": event["train"], "val": event["val"]})
            d["diverging"] = event.get("diverging")
        elif kind == "sample":
            d.setdefault("samples", []).append({"step": event["step"], "text": event["text"]})
        elif kind == "checkpoint":
            d["checkpoint_step"] = event["step"]
        elif kind == "final_eval":
            d.update(final_val=event["val"], diverging=event.get("diverging"))
        elif kind == "diverging":
            d["diverging"] = event.get("diverging")
        elif kind in ENDINGS:
            self._end(event)

    def _end(self, event: dict) -> None:
        """How the run ended: finished or stopped (done), failed (a sentence; a bug's traceback), or interrupted
        (out of memory, or its process killed): the folder keeps its last checkpoint, to continue from."""
        from gptcore.failures import last_checkpoint_step

        self._ending, s, kind = event, self._state, event["event"]
        s.ended = event.get("time") or time.time()
        if kind == "done":
            s.status = event["status"]
            s.data.update(elapsed_s=event["elapsed_s"], checkpoint_step=event["step"], eta_s=0.0)
            return
        said = stored_message(event.get("message")) or ""
        if kind == "failed":
            s.status, s.message, s.traceback = "failed", said, event.get("traceback", "")
            if event.get("diverged"):
                s.data["diverged"] = True
            return
        s.status = "interrupted"
        kept = last_checkpoint_step(self.queue.root / s.name)
        saved = message("jobs.kept", "Its last checkpoint, step {step:,}, is kept: continue it from the runs "
                        "table.", step=kept) if kept is not None else \
            message("jobs.none_kept", "It had saved no checkpoint yet.")
        why = said or exit_message(event.get("code"))
        s.message = message("jobs.interrupted", "The run stopped before its end: {why}. {saved}", why=why, saved=saved)

    def _control(self, *from_statuses: str, pause: bool, stop: bool) -> None:
        if self.state.status in from_statuses:
            _write_control(self.folder, pause, stop)

    # A finished run must stay finished: a late click on Pause changes nothing.
    def pause(self):
        self._control("starting", "running", pause=True, stop=False)

    def resume(self):
        self._control("paused", pause=False, stop=False)

    def stop(self):
        self._control("starting", "running", "paused", pause=False, stop=True)

    def join(self, timeout: float | None = None) -> None:
        """Wait until its process has ended (and this server has started whatever could start after it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.alive() and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.05)
        if self.waiter is not None:
            self.waiter.join(None if deadline is None else max(0.0, deadline - time.monotonic()))


class JobRegistry:
    """Every job of this server's folder: the training runs of the queue (this server's and any other's over the
    same folder) and this server's thread jobs. A thread job is refused while another job is active, naming it;
    a training run waits in the queue (`waiting`) for one of the `slots` and starts in turn."""

    def __init__(self, slots: int | None = None, waiting: RunQueue | None = None):
        self._lock = threading.Lock()
        self._starting = threading.Lock()  # one start_waiting at a time in this server (the store: across them)
        self._threads: dict[str, Job] = {}
        self._runs: dict[str, RunJob] = {}  # by job id
        self._synced = 0.0
        self.slots = slots or training_slots()
        self.waiting = waiting or RunQueue()
        if self.waiting.path.exists():  # (the server restarted with runs waiting)
            threading.Thread(target=self._after_job, name="queue-resume", daemon=True).start()

    # ------------------------------------------------------------ what there is

    def _sync(self, force: bool = False) -> list[RunJob]:
        """The runs of the store (read again at most every SYNC_S, unless forced), first started first."""
        with self._lock:
            if force or time.monotonic() - self._synced > SYNC_S:
                records = self.waiting.jobs()
                for record in records:
                    if (job := self._runs.get(record.id)) is None:
                        self._runs[record.id] = RunJob(record, self.waiting)
                        continue
                    job.store_ended = record.state == "ended"
                    if job.name != record.name:
                        job.follow(record.name)
                known = {record.id for record in records}
                self._runs = {i: job for i, job in self._runs.items() if i in known}
                self._synced = time.monotonic()
            return sorted(self._runs.values(), key=lambda job: job.started)

    @property
    def jobs(self) -> dict[str, Job | RunJob]:
        """{name: job}: the latest job of each name."""
        found: dict[str, Job | RunJob] = {job.name: job for job in self._sync()}
        with self._lock:
            found.update(self._threads)
        return found

    def active(self) -> Job | RunJob | None:
        return next((job for job in self.jobs.values() if job.active), None)

    def get(self, name: str) -> Job | RunJob | None:
        return self.jobs.get(name)

    def live(self, kind: str | None = None) -> dict[str, str]:
        """{name: status} of the active jobs (of one kind)."""
        return {name: job.state.status for name, job in self.jobs.items()
                if job.active and (kind is None or job.kind == kind) and job.state.active}

    def all(self, kind: str | None = None) -> list[Job | RunJob]:
        """Every job this server knows of (of one kind), active or ended."""
        with self._lock:
            threads = list(self._threads.values())
        return [job for job in self._sync() + threads if kind is None or job.kind == kind]

    def latest(self, kind: str | None = None) -> Job | RunJob | None:
        return max(self.all(kind), key=lambda job: job.started, default=None)

    # ------------------------------------------------------------ thread jobs

    def start(self, name: str, kind: str, fn: Callable[[Job], str | None], threads: int = 0) -> Job:
        """Start a thread job now; JobRefused names the job in the way."""
        with self._starting:
            if (busy := self.active()) is not None:
                raise JobRefused.blocked_by(busy)
            job = Job(name, kind, fn, threads, on_end=self._after_job)
            with self._lock:
                self._threads[name] = job
        return job.start()

    # ------------------------------------------------------------ training runs

    def enqueue(self, run: QueuedRun, per_learner: int, upload: bytes | None = None) -> int | None:
        """Queue a training run and start what can start now: its place in the queue (1: next), or None when it
        started at once. QueueError when the learner has as many runs waiting as they may, or when a run of that
        name is training now (a page drawn before it started may still offer it)."""
        self.waiting.add(run, per_learner, upload)
        self.start_waiting()
        return self.place(run.id)

    def place(self, run_id: str) -> int | None:
        """A waiting run's place in the queue (1: next to start); None once it has started or was cancelled."""
        ids = [run.id for run in self.waiting.runs()]
        return ids.index(run_id) + 1 if run_id in ids else None

    def start_waiting(self) -> list[RunJob]:
        """Start the first waiting runs, one for each free slot (no thread job active here); the runs started. A
        run whose name is training already (a continue asked for twice, with two slots) waits until it ends."""
        started = []
        with self._starting:
            while not any(job.active for job in self._threads.values()):
                if (claim := self.waiting.claim(self.slots)) is None:
                    break
                job = RunJob(JobRecord(claim.run, claim.run.name, "started", time.time(), None, claim.folder),
                             self.waiting)
                try:
                    job.waiter = launch(claim, on_end=self._after_job)
                except BaseException:  # (no process could be started: the run keeps its place)
                    self.waiting.unclaim(claim.run.id)
                    raise
                with self._lock:
                    self._runs[claim.run.id] = job
                started.append(job)
        return started

    def slot_free(self) -> bool:
        """May a training run start now: no thread job active, fewer training runs than slots?"""
        return not any(job.active for job in self._threads.values()) and \
            sum(job.active for job in self._sync()) < self.slots

    def _after_job(self) -> None:
        """A job ended (or the registry was made): start the next waiting runs. A queue that cannot be read is
        said on the Train page, which reads the queue too, and the page tries again; anything else is a bug,
        logged with its traceback."""
        try:
            self.start_waiting()
        except QueueError as e:
            log.error("the waiting runs cannot start: %s", e)
        except Exception:  # (in a job's thread: nothing above it would report it)
            log.exception("the waiting runs could not start")

    def rename(self, old: str, new: str, **data) -> None:
        """Follow a renamed run: its ended jobs are listed and shown as `new`."""
        self.waiting.rename(old, new)
        self._sync(force=True)
