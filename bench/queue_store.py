"""The queue's store: SQLite (gptcore.queue) against the one JSON file it replaced, and two processes claiming.

    python -m bench.queue_store [--runs 30] [--rounds 20] [--processes 2]

Per operation, the median over rounds, both stores on the same folder kind with `--runs` runs waiting:
  add      a run joins the queue (SQLite: its run.json and a row, in one transaction; JSON: the whole file read,
           checked and written again through a temporary file, fsync'd, as gptcore.queue did until it moved)
  list     the waiting runs, as every Train page draws them
  claim    the first waiting run taken to start (SQLite: one BEGIN IMMEDIATE transaction, with the job's lock;
           JSON: read, remove, write, under a lock that holds only within one process)
Then `--processes` processes claim from one queue of `--runs` runs at once: every run must be taken once, and each
claim's time is reported. A JSON file with a process-local lock cannot be shared so; SQLite's transactions can.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from gptcore import fs
from gptcore.queue import QueuedRun, RunQueue

RUN = {"action": "new", "model": {"d_model": 16}, "train": {"steps": 20, "batch_size": 4},
       "source": {"kind": "builtin", "chars": 20_000}, "work": 1.0}


class JsonQueue:
    """The queue as one JSON file, read whole and written whole (what gptcore.queue was)."""

    def __init__(self, root: Path):
        self.path, self.lock = root / ".queue.json", threading.RLock()

    def runs(self) -> list[QueuedRun]:
        try:
            return [QueuedRun.from_dict(entry) for entry in json.loads(self.path.read_text())]
        except FileNotFoundError:
            return []

    def _write(self, runs: list[QueuedRun]) -> None:
        fs.atomic_write(self.path, json.dumps([asdict(run) for run in runs], indent=1))

    def add(self, run: QueuedRun) -> None:
        with self.lock:
            self._write([*self.runs(), run])

    def claim(self) -> QueuedRun | None:
        with self.lock:
            waiting = self.runs()
            if waiting:
                self._write(waiting[1:])
            return waiting[0] if waiting else None


def run(name: str) -> QueuedRun:
    return QueuedRun(name=name, owner=name, queued_by=name, **RUN)


def median_ms(times: list[float]) -> float:
    return 1000 * statistics.median(times)


def per_operation(runs: int, rounds: int) -> dict[str, dict[str, float]]:
    """{store: {operation: median ms}} with `runs` runs waiting, each round on a fresh folder."""
    found = {"SQLite (gptcore.queue)": {"add": [], "list": [], "claim": []},
             "one JSON file": {"add": [], "list": [], "claim": []}}
    for r in range(rounds):
        for store in found if r % 2 else reversed(list(found)):
            with tempfile.TemporaryDirectory() as folder:
                queue = RunQueue(Path(folder)) if store.startswith("SQLite") else JsonQueue(Path(folder))
                for i in range(runs - 1):
                    queue.add(run(f"r{i}"), per_learner=1) if isinstance(queue, RunQueue) else queue.add(run(f"r{i}"))
                t0 = time.perf_counter()
                queue.add(run("last"), per_learner=1) if isinstance(queue, RunQueue) else queue.add(run("last"))
                t1 = time.perf_counter()
                queue.runs()
                t2 = time.perf_counter()
                claimed = queue.claim(slots=1) if isinstance(queue, RunQueue) else queue.claim()
                t3 = time.perf_counter()
                if isinstance(queue, RunQueue):
                    os.close(claimed.lock)
                found[store]["add"].append(t1 - t0)
                found[store]["list"].append(t2 - t1)
                found[store]["claim"].append(t3 - t2)
    return {store: {op: median_ms(times) for op, times in ops.items()} for store, ops in found.items()}


def claimer(folder: str, start: float, out) -> None:
    """Claim runs until none is left (each claimed run's lock let go at once, so its slot frees)."""
    queue, taken = RunQueue(Path(folder)), []
    while time.time() < start:
        time.sleep(0.001)
    while True:
        t0 = time.perf_counter()
        claim = queue.claim(slots=1_000)
        spent = time.perf_counter() - t0
        if claim is None:
            break
        os.close(claim.lock)
        taken.append((claim.run.name, spent))
    out.put(taken)


def contention(runs: int, processes: int) -> tuple[int, int, float, float]:
    """(runs taken, distinct runs taken, median and max ms a claim took) with `processes` claiming at once."""
    with tempfile.TemporaryDirectory() as folder:
        queue = RunQueue(Path(folder))
        for i in range(runs):
            queue.add(run(f"r{i}"), per_learner=1)
        context = multiprocessing.get_context("spawn")
        out, start = context.Queue(), time.time() + 2.0
        workers = [context.Process(target=claimer, args=(folder, start, out)) for _ in range(processes)]
        for worker in workers:
            worker.start()
        taken = [item for _ in workers for item in out.get()]
        for worker in workers:
            worker.join()
    names = [name for name, _ in taken]
    times = [spent for _, spent in taken]
    return len(names), len(set(names)), median_ms(times), 1000 * max(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.queue_store")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"{args.runs} runs waiting, median of {args.rounds} rounds; load average {os.getloadavg()}")
    for store, ops in per_operation(args.runs, args.rounds).items():
        print(f"  {store:<24} " + "  ".join(f"{op} {ms:6.2f} ms" for op, ms in ops.items()))
    taken, distinct, median, worst = contention(args.runs, args.processes)
    print(f"{args.processes} processes claiming {args.runs} runs at once: {taken} claims, {distinct} distinct runs; "
          f"a claim {median:.2f} ms median, {worst:.1f} ms at most")
    return 0 if taken == distinct == args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
