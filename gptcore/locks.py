"""Which process trains into a run folder, and which folders a new run may take.

A run folder is trained by one process at a time, whichever program started it (the app's runs and the command
line's are all processes of their own): `training_lock` holds an exclusive `flock` on the folder's lock file, and
writes its pid there so that others can name it. The kernel releases a flock when its process ends, however it
ends (a kill -9, the out-of-memory killer), so a lock is never left behind: a lock file whose lock nobody holds is
free. A new run goes only into a folder that is free (`check_new_folder`).
"""
from __future__ import annotations

import errno
import fcntl
import os
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from . import fs
from .folders import CheckpointError, shown_name

LOCK = ".training.lock"  # the pid of the process training into a run folder, which holds its flock
UNREADABLE = -1  # the holder of a lock whose file does not say who it is (the holder is writing it this instant)
TAKE_TRIES_S = 0.5  # how long taking a lock retries: a reader checking it holds it for a few microseconds


def _try_flock(fd: int, exclusive: bool) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise


def take(path: Path, wait: float = TAKE_TRIES_S) -> int | None:
    """Take the exclusive lock of path (created if need be); its open file descriptor, which holds the lock until
    it is closed (in this process and in every child that inherits it), or None when another holds it."""
    deadline = time.monotonic() + wait
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if _try_flock(fd, exclusive=True):
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:  # (its holder removed it as we opened it: the next one is the lock)
                same = False
            if same:
                return fd
        os.close(fd)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


def release(path: Path, fd: int) -> None:
    """Remove the lock file and let go of its lock (removed first: whoever opens the name next gets a new file)."""
    with suppress(FileNotFoundError):
        os.unlink(path)
    os.close(fd)


def held(path: Path) -> bool:
    """Does some process, this one included, hold path's lock now?"""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        if _try_flock(fd, exclusive=False):
            return False
        return True
    finally:
        os.close(fd)  # (closing lets go of the shared lock a free file gave us)


def _holder_pid(path: Path) -> int:
    try:
        text = path.read_text().strip()
    except (OSError, ValueError):  # (ValueError: bytes that are not UTF-8)
        return UNREADABLE
    return int(text) if text.isascii() and text.isdigit() and 0 < int(text) < 1 << 31 else UNREADABLE


def lock_owner(directory: Path) -> int | None:
    """The pid of the process, this one included, training into directory now (UNREADABLE when its lock file does
    not say); None when nobody is."""
    lock = Path(directory) / LOCK
    return _holder_pid(lock) if held(lock) else None


def lock_holder(directory: Path) -> int | None:
    """The pid of another process training into directory (UNREADABLE: one that has not written its pid yet), or
    None."""
    owner = lock_owner(directory)
    return None if owner in (None, os.getpid()) else owner


def busy_error(directory: Path, owner: int | None) -> CheckpointError:
    """Why a run cannot train into directory, whose lock `owner` holds (see lock_owner; None: someone took it
    a moment ago)."""
    if owner == os.getpid():
        return CheckpointError("checkpoint.busy_here", "{path} is being trained by another job of this program; "
                               "stop it first", path=directory)
    if owner is not None and owner != UNREADABLE:
        return CheckpointError("checkpoint.busy_pid", "{path} is being trained by another process (pid {pid}); "
                               "stop it first", path=directory, pid=owner)
    return CheckpointError("checkpoint.busy", "{path} is being trained by another process; stop it first",
                           path=directory)


@contextmanager
def training_lock(directory: Path):
    """Claim directory for one training run, against every other process and every other run of this one. Taking
    it removes the temporary files a killed save left. On release, removes what a run that saved no checkpoint
    leaves behind (its snapshots, which nothing can open without the model), and then the folder if this run made it
    and left it empty (a folder that was there, say the current one, is never removed)."""
    from .checkpoint import make_folder, write_error  # (torch: only where a run trains, not where a lock is read)

    directory = Path(directory)
    made = make_folder(directory)
    lock = directory / LOCK
    try:
        fd = take(lock)
        if fd is not None:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
    except OSError as e:
        if (error := write_error(lock, e)) is e:
            raise
        raise error from None
    if fd is None:
        raise busy_error(directory, lock_owner(directory))
    fs.clear_temp_files(directory)
    fs.clear_temp_files(directory / "snapshots")
    try:
        yield
    finally:
        release(lock, fd)
        clear_abandoned(directory, remove_folder=made)


def check_new_folder(directory: Path) -> None:
    """A new run may only go into a folder that does not exist, is empty or holds an abandoned run's leftovers:
    never into one another process trains, over a checkpoint or over anyone's files (the command line writes
    wherever it is asked to). The app, the command line and the Trainer all check here."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise CheckpointError("checkpoint.out_is_file", "{path} is a file, not a folder: choose a folder for the "
                              "checkpoint", path=directory)
    if (owner := lock_owner(directory)) is not None:
        raise busy_error(directory, owner)
    if (directory / "model.safetensors").exists():
        raise CheckpointError("checkpoint.holds_model", "{path} already holds a trained model; continue it with "
                              "--resume on the command line or from the runs table in the app, or choose another "
                              "name for the new run", path=directory)
    if directory.exists() and not clear_abandoned(directory):
        if (owner := lock_owner(directory)) is not None:
            raise busy_error(directory, owner)
        entries = sorted(shown_name(p) for p in directory.iterdir())  # (what clearing the leftovers left)
        raise CheckpointError("checkpoint.not_empty", "{path} already holds files this run did not write ({names}): "
                              "choose a new or empty folder, so that nothing in it is overwritten", path=directory,
                              names=", ".join(entries[:5]) + (f" … (+{len(entries) - 5})" if len(entries) > 5 else ""))


def clear_abandoned(directory: Path, remove_folder: bool = False) -> bool:
    """Remove what a run that never saved a checkpoint left in directory (its snapshots, which nothing can open
    without the model, its temporary files and its lock file), and with remove_folder the folder itself if that
    emptied it (only the run that made a folder may remove it); True if the folder is now empty or gone."""
    directory = Path(directory)
    if (directory / "model.safetensors").exists():
        return False
    if not directory.is_dir():
        return not directory.exists()
    try:
        fd = take(directory / LOCK, wait=0)  # (held while clearing: no run starts in the folder meanwhile)
    except OSError:  # a folder this process may not write into holds nothing of its runs
        return not any(directory.iterdir())
    if fd is None:
        return False
    from .checkpoint import list_snapshots

    try:
        fs.clear_temp_files(directory)
        for _, path in list_snapshots(directory):
            path.unlink(missing_ok=True)
    finally:
        release(directory / LOCK, fd)
    for folder in (directory / "snapshots", directory) if remove_folder else (directory / "snapshots",):
        with suppress(OSError):  # not empty (other files are not ours to delete), or already gone
            folder.rmdir()
    return not directory.exists() or not any(directory.iterdir())
