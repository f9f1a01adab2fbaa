"""Background jobs for the app: one CPU-heavy job at a time (or as many training runs as there are slots),
readable from any thread, and the training runs waiting for a slot.

The app keeps one JobRegistry per server process (st.cache_resource). A job's function runs in a daemon
thread and reports through `Job.update`; pages poll `Job.snapshot()` from fragments. Nothing here calls
Streamlit, so the training thread never touches st.*.

A training run is never refused for want of a slot: it waits in the registry's RunQueue (gptcore.queue, on disk),
and whenever a job ends the first waiting run starts. A registry made over a folder whose queue holds runs (the
server restarted) starts them as soon as it exists: the first page anyone opens makes it.
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

from gptcore.errors import Message, UserError, message
from gptcore.folders import ACTIVE
from gptcore.queue import QueuedRun, QueueError, RunQueue

log = logging.getLogger(__name__)


JOB_NICENESS = 10  # 0 is normal, 19 the lowest priority
TRAIN = "train"  # the kind of job a training run is
SLOTS_VARIABLE = "GPTCORE_TRAINING_SLOTS"  # training runs at once (1 when unset): each more shares the same cores


def training_slots() -> int:
    """How many training runs may train at once, from the environment (at least 1)."""
    text = os.environ.get(SLOTS_VARIABLE, "").strip() or "1"
    if not text.isdigit() or int(text) < 1:
        raise QueueError("jobs.bad_slots", "{variable} must be a whole number of training runs at once, 1 or more; "
                         "it is '{value}'", variable=SLOTS_VARIABLE, value=text)
    return int(text)


def yield_to_the_ui() -> None:
    """Lower the calling thread's CPU priority, so the server's threads win whenever both want a core.

    On Linux nice values belong to threads, and the OpenMP workers this thread starts inherit it:
    the job still gets every idle cycle, but a click no longer queues behind matrix multiplies.
    Elsewhere PRIO_PROCESS would take the id for a process id, so this does nothing there.
    """
    if sys.platform.startswith("linux"):
        me = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, me, max(os.getpriority(os.PRIO_PROCESS, me), JOB_NICENESS))
        except OSError:
            pass


def release_memory() -> None:
    """Hand the memory a finished job freed back to the system. glibc keeps freed blocks for reuse, so after
    encoding a large corpus the server stayed hundreds of MB above where it started; malloc_trim returns them."""
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
    def blocked_by(busy: Job) -> JobRefused:
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
    status: str = "starting"  # starting | running | paused | stopping | finished | stopped | failed
    message: Message | str = ""  # why it failed (a Message, shown with i18n.say); a job's own progress note
    traceback: str = ""  # set only when a bug (not a user error) ended the job
    progress: float = 0.0  # 0..1
    data: dict = field(default_factory=dict)  # job-specific live data (curves, samples, ...)
    started: float = field(default_factory=time.time)
    ended: float | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


class Job:
    """A function run in its own thread: fn(job) reads job.control and writes through job.update()."""

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
            self._fn = None  # what it held (a trainer, its corpus's ids) goes with it; the registry keeps the state
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


class JobRegistry:
    """Process-wide list of jobs; refuses a second active job and names the one that blocks it, except for training
    runs, which wait in the queue (`waiting`) for one of the `slots` and start in turn."""

    def __init__(self, slots: int | None = None, waiting: RunQueue | None = None):
        self._lock = threading.Lock()
        self._starting = threading.Lock()  # one start_waiting at a time: each waiting run starts once
        self.jobs: dict[str, Job] = {}
        self.slots = slots or training_slots()
        self.waiting = waiting or RunQueue()
        if self.waiting.path.exists():  # (the server restarted with runs waiting; torch loads in that thread)
            threading.Thread(target=self._after_job, name="queue-resume", daemon=True).start()

    def active(self) -> Job | None:
        with self._lock:
            return next((j for j in self.jobs.values() if j.state.active), None)

    def start(self, name: str, kind: str, fn: Callable[[Job], str | None], threads: int = 0) -> Job:
        with self._lock:
            busy = next((j for j in self.jobs.values() if j.state.active), None)
            if busy is not None:
                raise JobRefused.blocked_by(busy)
            job = Job(name, kind, fn, threads, on_end=self._after_job)
            self.jobs[name] = job
        return job.start()

    def enqueue(self, run: QueuedRun, per_learner: int, upload: bytes | None = None) -> int | None:
        """Queue a training run and start what can start now: its place in the queue (1: next), or None when it
        started at once. QueueError when the learner has as many runs waiting as they may, or when a run of that
        name is training now (a page drawn before it started may still offer it)."""
        if run.name in self.live():
            raise QueueError("queue.name_training", "'{name}' is training now: a new run needs another name, and "
                             "this one can be continued once it ends", name=run.name)
        self.waiting.add(run, per_learner, upload)
        self.start_waiting()
        return self.place(run.id)

    def place(self, run_id: str) -> int | None:
        """A waiting run's place in the queue (1: next to start); None once it has started or was cancelled."""
        ids = [run.id for run in self.waiting.runs()]
        return ids.index(run_id) + 1 if run_id in ids else None

    def start_waiting(self) -> list[Job]:
        """Start the first waiting runs, one for each free slot; the jobs started. A run whose name is training
        already (a continue asked for twice, with two slots) waits until that job ends."""
        started = []
        with self._starting:
            while True:
                with self._lock:
                    if not self._slot_free():
                        break
                    training = {name for name, job in self.jobs.items() if job.state.active}
                    run = next((r for r in self.waiting.runs() if r.name not in training), None)
                    if run is None:
                        break
                    job = self._job_for(run)
                    if self.waiting.remove(run.id) is None:
                        continue  # (cancelled a moment ago)
                    self.jobs[run.name] = job
                started.append(job.start())
        return started

    def _job_for(self, run: QueuedRun) -> Job:
        """The job that trains a waiting run (made before the run leaves the queue: a failure here keeps it)."""
        from .training import queued_job  # (torch: only once a run is to start)

        job = Job(run.name, TRAIN, queued_job(run, self.waiting), int(run.train.get("threads") or 0),
                  on_end=self._after_job)
        job.update(data={"owner": run.owner, "queued_by": run.queued_by,
                         "planned_steps": int(run.train.get("steps") or 0)})
        return job

    def slot_free(self) -> bool:
        """May a training run start now?"""
        with self._lock:
            return self._slot_free()

    def _slot_free(self) -> bool:
        """May a training run start now: no other kind of job active, fewer training runs than slots? (Called with
        self._lock held.)"""
        active = [j for j in self.jobs.values() if j.state.active]
        return len(active) < self.slots and all(j.state.kind == TRAIN for j in active)

    def _after_job(self) -> None:
        """A job ended (or the registry was made): start the next waiting runs. A queue file that cannot be read is
        said on the Train page, which reads the queue too, and the page tries again; anything else is a bug, logged
        with its traceback."""
        try:
            self.start_waiting()
        except QueueError as e:
            log.error("the waiting runs cannot start: %s", e)
        except Exception:  # (in a job's thread: nothing above it would report it)
            log.exception("the waiting runs could not start")

    def rename(self, old: str, new: str, **data) -> None:
        """Follow a renamed run: the job of `old` (if any) is listed and shown as `new`, with data updated."""
        with self._lock:
            job = self.jobs.pop(old, None)
            if job is not None:
                self.jobs[new] = job
        if job is not None:
            job.update(name=new, data=data)

    def get(self, name: str) -> Job | None:
        with self._lock:
            return self.jobs.get(name)

    def live(self, kind: str | None = None) -> dict[str, str]:
        """{name: status} of the active jobs (of one kind)."""
        with self._lock:
            return {n: j.state.status for n, j in self.jobs.items()
                    if j.state.active and (kind is None or j.state.kind == kind)}

    def all(self, kind: str | None = None) -> list[Job]:
        """Every job this server has run (of one kind), active or ended."""
        with self._lock:
            return [j for j in self.jobs.values() if kind is None or j.state.kind == kind]

    def latest(self, kind: str | None = None) -> Job | None:
        with self._lock:
            jobs = [j for j in self.jobs.values() if kind is None or j.state.kind == kind]
        return max(jobs, key=lambda j: j.state.started, default=None)
