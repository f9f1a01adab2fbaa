"""Training runs for the tests: in a thread of the test process, or watched while a fault is made.

A run the app starts is a process of its own (gptcore.worker). `launch_in_thread` trains it in a thread of the
test process instead, through the same job folder, lock and events, so the registry and the pages see it exactly as
they see a run's process; a monkeypatch reaches it; and it starts in milliseconds, where a new Python loading torch
takes a second or more. The tests of the processes themselves (tests/test_run_processes.py, the browser tests) start
real ones.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from gptcore.worker import train_folder


def launch_in_thread(claim, on_end=None) -> threading.Thread:
    """gptcore.worker.launch, in a thread: the claim's job lock is held until the run has ended."""
    def work():
        try:
            train_folder(claim.folder)
        finally:
            os.close(claim.lock)
            if on_end is not None:
                on_end()

    thread = threading.Thread(target=work, name=f"run-{claim.run.name}", daemon=True)
    thread.start()
    return thread


def wait_until(condition, timeout: float = 60, every: float = 0.05):
    """condition()'s first true value, asked every `every` seconds; AssertionError after timeout."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(every)
    return found


@contextmanager
def lock_held(folder, pid: int | None = None):
    """The run folder's training lock held from this process on a file of its own, as another process training
    into it holds it, its file naming pid (nothing: a holder that has not written it yet)."""
    from gptcore import locks

    fd = locks.take(Path(folder) / locks.LOCK)
    assert fd is not None, f"{folder} is locked already"
    try:
        if pid is not None:
            os.write(fd, str(pid).encode())
        yield
    finally:
        os.close(fd)  # (the file stays, as a process that died leaves it)
