"""Each run is a process of its own: killed with SIGKILL, out of memory or raising, it is interrupted and the
server (the job registry, as the pages ask it) answers within a second throughout; two processes over one
checkpoints folder start each run once; a damaged queue store is said and rebuilt from the run folders.

These tests start real processes (`python -m gptcore worker ...`), a second or two each for Python and torch to
load; the app's other tests train in threads of the test process (tests/run_helpers.py).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from run_helpers import wait_until

from explorer import training
from explorer.jobs import JobRegistry
from gptcore import checkpoint as ckpt
from gptcore import folders, runs
from gptcore.config import GPTConfig, TrainConfig
from gptcore.queue import DATABASE, JOBS, QueuedRun, QueueError, RunQueue
from gptcore.worker import EVENTS, read_events

ROOT = Path(__file__).resolve().parent.parent
TINY = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=48, context=16)
SOURCE = {"kind": "builtin", "chars": 20_000, "seed": 0}
ANSWER_S = 1.0  # the longest any look at the registry may take while a run is killed, runs out of memory or raises


@pytest.fixture(autouse=True)
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    return tmp_path


def queued(name: str, steps: int = 1_000_000, by: str | None = "learner-a", **train) -> QueuedRun:
    tc = TrainConfig(steps=steps, batch_size=4, eval_every=10, checkpoint_every=20, threads=1, sample_chars=20,
                     final_eval=steps < 1000, **train)
    return QueuedRun(name=name, action="new", model=TINY.to_dict(), train=tc.to_dict(), source=SOURCE, work=1.0,
                     owner=by, queued_by=by)


class Prober(threading.Thread):
    """Asks the registry what the Train page asks it (live runs, the runs table, the live panel's run) every 20 ms,
    and keeps the longest answer's time."""

    def __init__(self, registry: JobRegistry, name: str):
        super().__init__(daemon=True)
        self.registry, self.name, self.slowest, self.done = registry, name, 0.0, threading.Event()

    def run(self):
        while not self.done.is_set():
            began = time.perf_counter()
            self.registry.live()
            training.listed_runs(self.registry)
            if (job := self.registry.get(self.name)) is not None:
                job.snapshot()
            self.slowest = max(self.slowest, time.perf_counter() - began)
            time.sleep(0.02)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join()


def checkpoint_at(registry: JobRegistry, name: str, step: int) -> int:
    """Wait until the run has saved a checkpoint at or after step (and trained on past it); that step."""
    return wait_until(lambda: (d := registry.get(name).snapshot().data).get("checkpoint_step", -1) >= step
                      and d.get("step", -1) > d["checkpoint_step"] and d["checkpoint_step"])


def listed(registry: JobRegistry, name: str) -> runs.RunInfo:
    return next(run for run in training.listed_runs(registry) if run.name == name)


def stop_all(registry: JobRegistry) -> None:
    registry.waiting.clear()
    for name in registry.live():
        registry.get(name).stop()
    for job in registry.all():
        job.join(60)


# ---------------------------------------------------------------- a run's process killed, out of memory, raising

def test_a_run_killed_with_sigkill_mid_step_is_interrupted_and_continues_from_its_last_checkpoint(root):
    registry = JobRegistry(slots=1)
    try:
        registry.enqueue(queued("killed"), per_learner=1)
        kept = checkpoint_at(registry, "killed", 20)
        pid = registry.get("killed").snapshot().data["pid"]
        assert pid != os.getpid()
        with Prober(registry, "killed") as prober:
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not registry.get("killed").state.active)
            listed(registry, "killed")
        assert prober.slowest < ANSWER_S, f"a look took {prober.slowest:.2f} s"
        job = registry.get("killed").snapshot()
        assert job.status == "interrupted" and not job.traceback
        assert str(job.message).startswith("The run stopped before its end: its process was killed by the signal "
                                           "SIGKILL")
        saved = ckpt.read_meta(root / "killed")["step"]
        assert saved >= kept and f"Its last checkpoint, step {saved:,}, is kept" in job.message
        run = listed(registry, "killed")
        assert run.status == "interrupted" and run.blocker("continue") is None
        more = runs.resume_config(run, saved + 10)
        registry.enqueue(QueuedRun(name="killed", action="continue", train=more.to_dict(), source=SOURCE, work=1.0,
                                   owner="learner-a", queued_by="learner-a"), per_learner=1)
        wait_until(lambda: registry.get("killed").snapshot().status == "finished", timeout=120)
        meta = ckpt.read_meta(root / "killed")
        assert meta["step"] == saved + 10 and meta["history"]["step"][-11:] == list(range(saved, saved + 11))
    finally:
        stop_all(registry)


# The run's own process, started by the test in place of the app's launcher: a fault is made at step 25, after
# the checkpoint of step 20. Out of memory: the process may then use only 64 MB more than it has, and asks for 1 GB.
FAULTS = {
    "memory": """
import resource
pages = int(open("/proc/self/statm").read().split()[0])
limit = pages * os.sysconf("SC_PAGE_SIZE") + (64 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
torch.empty(1 << 28)
""",
    "raise": """
raise RuntimeError("a bug in the step")
""",
}
CHILD = """
import os, sys
import torch
from gptcore import train
from gptcore.cli import main

update = train.Trainer._update
def faulty(self, step, *args):
    if step == 25:
{fault}
    return update(self, step, *args)
train.Trainer._update = faulty
sys.exit(main(["worker", "--job", sys.argv[1]]))
"""


@pytest.mark.parametrize("fault", ["memory", "raise"])
def test_a_run_out_of_memory_or_raising_is_interrupted_and_may_continue(root, fault):
    queue = RunQueue(root)
    queue.add(queued(fault), per_learner=1)
    claim = queue.claim(slots=1)
    code = CHILD.format(fault="\n".join(" " * 8 + line for line in FAULTS[fault].strip().splitlines()))
    process = subprocess.Popen([sys.executable, "-c", code, str(claim.folder)], pass_fds=(claim.lock,), cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(claim.lock)
    registry = JobRegistry(slots=1)  # the server, watching the run through the store and its job folder
    try:
        with Prober(registry, fault) as prober:
            assert process.wait(120) == (4 if fault == "memory" else 1)
            wait_until(lambda: not registry.get(fault).state.active)
        assert prober.slowest < ANSWER_S, f"a look took {prober.slowest:.2f} s"
        job = registry.get(fault).snapshot()
        if fault == "memory":
            assert job.status == "interrupted" and str(job.message).startswith(
                "The run stopped before its end: it ran out of memory at step 25 (RuntimeError: ")
            assert "allocate" in job.message and job.message.endswith("). Its last checkpoint, step 20, is kept: "
                                                                      "continue it from the runs table.")
        else:
            assert job.status == "failed" and job.message == "An unexpected error stopped it: RuntimeError: a bug in " \
                                                              "the step"
            assert "in faulty" in job.traceback
        run = listed(registry, fault)
        assert (run.status, run.step, run.blocker("continue")) == ("interrupted", 20, None)
    finally:
        stop_all(registry)


# ---------------------------------------------------------------- two processes over one folder

def test_two_starts_at_once_from_two_servers_train_the_run_once(root):
    """Two servers (two registries, each with its own connection to the store) click Start for the same name at
    the same instant: one run is queued and trained, the other Start is refused with a sentence."""
    servers = [JobRegistry(slots=1), JobRegistry(slots=1)]
    together, said = threading.Barrier(2), []

    def start(registry, who):
        together.wait()
        try:
            said.append(registry.enqueue(queued("same", steps=30, by=who), per_learner=1))
        except QueueError as e:
            said.append(str(e))

    try:
        clicks = [threading.Thread(target=start, args=(server, who)) for server, who in zip(servers, "ab")]
        for click in clicks:
            click.start()
        for click in clicks:
            click.join()
        assert said.count(None) == 1  # one started at once
        [refused] = [words for words in said if words is not None]
        assert refused in ("'same' is training now: a new run needs another name, and this one can be continued once "
                           "it ends", "a run named 'same' is already waiting to train: choose another name, or "
                           "cancel that one first")
        wait_until(lambda: (job := servers[1].get("same")) is not None and job.state.status == "finished",
                   timeout=120)
        started = [event for folder in (root / JOBS).iterdir() if folder.is_dir()
                   for event in read_events(folder / EVENTS)[0] if event["event"] == "started"]
        assert len(started) == 1 and ckpt.read_meta(root / "same")["history"]["step"] == list(range(31))
    finally:
        for server in servers:
            stop_all(server)


def test_a_worker_process_and_a_server_share_the_queue_and_train_each_run_once(root):
    queue = RunQueue(root)
    for name in ("one", "two"):
        queue.add(queued(name, steps=30, by=name), per_learner=1)
    worker = subprocess.Popen([sys.executable, "-m", "gptcore", "worker", "--checkpoints", str(root), "--slots", "1"],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = JobRegistry(slots=1)
    try:
        ended = lambda record: any(e["event"] == "done" for e in read_events(record.folder / EVENTS)[0])  # noqa: E731
        wait_until(lambda: len(jobs := queue.jobs()) == 2 and all(ended(record) for record in jobs), timeout=180)
        spans = []
        for record in queue.jobs():
            events = read_events(record.folder / EVENTS)[0]
            assert [e["event"] for e in events].count("started") == 1
            spans.append((events[0]["time"], next(e["time"] for e in events if e["event"] == "done")))
        spans.sort()
        assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:]))  # one slot in all
    finally:
        worker.send_signal(signal.SIGINT)
        assert worker.wait(60) == 0
        stop_all(server)


# ---------------------------------------------------------------- a damaged store

def test_a_damaged_queue_store_is_said_and_rebuilt_from_the_run_folders(root):
    queue = RunQueue(root)
    first, second = queued("first", by="a"), queued("second", by="b")
    queue.add(first, per_learner=1)
    queue.add(second, per_learner=1)
    (root / JOBS / DATABASE).write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (root / JOBS / f"{DATABASE}{suffix}").unlink(missing_ok=True)
    again = RunQueue(root)
    assert [run.name for run in again.runs()] == ["first", "second"] and again.runs()[1] == second
    kept = next((root / JOBS).glob(f"{DATABASE}.damaged-*"))
    assert kept.read_bytes().startswith(b"this is not a database")
    assert str(again.notice) == (f"The queue's database, {root / JOBS / DATABASE}, was damaged (file is not a "
                                 f"database): it is kept as {kept.name} and a new one was made from the run folders, "
                                 "with 2 waiting run(s).")
    assert RunQueue(root).notice == again.notice  # (another server over the folder says it too)
    assert again.add(queued("third", by="c"), per_learner=1) == 3  # and it works on
