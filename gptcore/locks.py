"""Which process trains into a run folder, and which folders a new run may take.

A run folder is trained by one process at a time, in this process or any other (the app's and the command line's
runs are separate processes): `training_lock` holds a lock file with the trainer's pid and start time, and a lock
left by a process that died is taken over. A new run goes only into a folder that is free (`check_new_folder`).
"""
from __future__ import annotations

import os
import re
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path

from .checkpoint import list_snapshots, make_folder, write_error
from .folders import CheckpointError, shown_name

LOCK = ".training.lock"  # "<pid> <start time>" of the process training into a run folder
UNREADABLE = -1  # the owner of a lock that cannot be read: held, by whom is unknown


def _started(pid: int) -> str | None:
    """When process pid started (clock ticks after boot, from Linux's /proc); None where that is not known."""
    try:
        line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return line.rpartition(")")[2].split()[19]  # field 22, counted after the name, which may hold spaces and ')'


def _owner_of(lock: Path) -> int | None:
    """The pid of the live process, this one included, that wrote the lock file; None when there is no lock or
    its process has died. A pid the system has given to another process since (its start time differs) holds
    nothing. A lock that cannot be read counts as held (UNREADABLE): _claim only ever makes whole ones."""
    try:
        text = lock.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError):  # (ValueError: bytes that are not UTF-8)
        return UNREADABLE
    if (found := re.fullmatch(r"([1-9]\d{0,8})(?: (\d+))?", text.strip())) is None:
        return UNREADABLE
    pid, started = int(found.group(1)), found.group(2)
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    if started is not None and _started(pid) not in (None, started):
        return None
    return pid


def lock_owner(directory: Path) -> int | None:
    """Who holds directory's training lock (see _owner_of): a pid, UNREADABLE or None."""
    return _owner_of(Path(directory) / LOCK)


def lock_holder(directory: Path) -> int | None:
    """The pid of another live process training into directory, or None."""
    owner = lock_owner(directory)
    return None if owner in (None, UNREADABLE, os.getpid()) else owner


def _claim(lock: Path) -> bool:
    """Create the lock with our pid and start time, atomically and whole: written to a file of its own, then
    linked to the lock's name, which fails when the lock exists (False)."""
    mine = lock.with_name(f"{lock.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        mine.write_text(f"{os.getpid()} {_started(os.getpid()) or ''}".strip())
        os.link(mine, lock)
    except FileExistsError:
        return False
    except OSError as e:
        if (error := write_error(lock, e)) is e:
            raise
        raise error from None
    finally:
        mine.unlink(missing_ok=True)
    return True


def _remove_stale(lock: Path) -> bool:
    """Remove a lock whose process has died; False, leaving it, when it is held. The lock is moved aside and
    judged there, so that one another process has just put in its place is put back, never removed."""
    aside = lock.with_name(f"{lock.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.stale")
    try:
        os.rename(lock, aside)
    except FileNotFoundError:
        return True
    try:
        if _owner_of(aside) is None:
            return True
        with suppress(FileExistsError):  # (taken by a third process meanwhile: it holds it)
            os.link(aside, lock)
        return False
    finally:
        aside.unlink()


def busy_error(directory: Path, owner: int | None) -> CheckpointError:
    """Why a run cannot train into directory, whose lock `owner` holds (see lock_owner; None: someone took it
    over a moment ago)."""
    if owner == UNREADABLE:
        return CheckpointError("checkpoint.lock_unreadable", "{path} holds a training lock ({lock}) that cannot be "
                               "read: if no process is training into it, delete that file", path=directory, lock=LOCK)
    if owner == os.getpid():
        return CheckpointError("checkpoint.busy_here", "{path} is being trained by another job of this program; "
                               "stop it first", path=directory)
    if owner is not None:
        return CheckpointError("checkpoint.busy_pid", "{path} is being trained by another process (pid {pid}); "
                               "stop it first", path=directory, pid=owner)
    return CheckpointError("checkpoint.busy", "{path} is being trained by another process; stop it first",
                           path=directory)


@contextmanager
def training_lock(directory: Path):
    """Claim directory for one training run, in this process or any other (the app's and the command line's runs
    are separate processes); a lock left by a process that died is taken over. On release, removes what a run that
    saved no checkpoint leaves behind (its snapshots, which nothing can open without the model), and then the
    folder if this run made it and left it empty (a folder that was there, say the current one, is never removed)."""
    directory = Path(directory)
    made = make_folder(directory)
    lock = directory / LOCK
    if not _claim(lock):
        owner = lock_owner(directory)
        if owner is not None or not (_remove_stale(lock) and _claim(lock)):
            raise busy_error(directory, owner)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
        clear_abandoned(directory, remove_folder=made)



def check_new_folder(directory: Path) -> None:
    """A new run may only go into a folder that does not exist, is empty or holds an abandoned run's leftovers:
    never over a checkpoint or over anyone's files (the command line writes wherever it is asked to). The app, the
    command line and the Trainer all check here."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise CheckpointError("checkpoint.out_is_file", "{path} is a file, not a folder: choose a folder for the "
                              "checkpoint", path=directory)
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
    without the model, and a stale lock), and with remove_folder the folder itself if that emptied it (only the run
    that made a folder may remove it); True if the folder is now empty or gone."""
    directory = Path(directory)
    if (directory / "model.safetensors").exists() or lock_owner(directory) is not None or \
            not _remove_stale(directory / LOCK):
        return False
    for _, path in list_snapshots(directory):
        path.unlink(missing_ok=True)
    for folder in (directory / "snapshots", directory) if remove_folder else (directory / "snapshots",):
        with suppress(OSError):  # not empty (other files are not ours to delete), or already gone
            folder.rmdir()
    return not directory.exists() or not any(directory.iterdir())
