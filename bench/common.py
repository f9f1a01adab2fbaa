"""What every benchmark shares: interleaved timing, medians, and a line on how busy the machine is.

The machine may be shared, so absolute timings drift from minute to minute. Every comparison is therefore made
inside one process, with the candidates interleaved call by call on the same inputs, and reported as a ratio of
medians measured in the same run.
"""
from __future__ import annotations

import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import torch

ROOT = Path(__file__).resolve().parent.parent
TINYSTORIES = ROOT.parent / "shared" / "data" / "tinystories-1M.txt"  # benchmark data, not part of the project
ARTIFACTS = ROOT / "artifacts"


def interleave(candidates: dict[str, Callable[[int], object]], rounds: int, warmup: int = 2) -> dict[str, list[float]]:
    """Seconds per call of each candidate. Each round calls every candidate once (argument: the round), in an
    order that rotates from round to round, so a burst of load elsewhere hits all of them alike."""
    names = list(candidates)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(warmup + rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            candidates[name](r)
            if r >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def time_calls(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of fn() over repeats calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return median(times)


def thread_summary() -> str:
    in_new_thread = []
    worker = threading.Thread(target=lambda: in_new_thread.append(torch.get_num_threads()))
    worker.start()
    worker.join()
    return (f"threads: {torch.get_num_threads()} here, {in_new_thread[0]} in a new thread, {os.cpu_count()} cores; "
            f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}")


def cpu_name() -> str:
    """The CPU's model name, for a benchmark's header."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def load_summary() -> str:
    try:
        return "load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average: unavailable"


def add_model_arguments(parser) -> None:
    """The flags of the benchmarks that build the tutorial's model at some size."""
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = every core)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=76, help="76 = tinystories-1M.txt's characters")


class AppServer(NamedTuple):
    url: str
    pid: int


@contextmanager
def app_server(app: Path = ROOT, env: dict | None = None, flags: tuple[str, ...] = (),
               timeout: float = 120.0) -> Iterator[AppServer]:
    """`streamlit run app.py` of the checkout `app` on a free loopback port, with `env` added to the environment and
    more `flags` for streamlit; yields its URL and pid once it answers, and stops it afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false", *flags], cwd=app, env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start: {proc.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.2)
        yield AppServer(url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
