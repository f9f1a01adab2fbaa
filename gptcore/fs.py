"""Writing files so that a reader, a crash or a second Ctrl-C never sees half of one: the one way this project
replaces a file.

Every file is written under a temporary name beside its own (`.NAME.PID.XXXXXXXX.tmp`), flushed to disk, and
only then renamed over the old one: a rename is atomic, so the old file or the new one is there, never a mix.
Several files that belong together (a checkpoint's weights, optimizer state and meta.json) are all written first
and renamed together, with Ctrl-C and SIGTERM held back until the last rename is done. A process killed while
writing leaves its temporary files; whoever takes the folder next removes them (`clear_temp_files`). A folder
written as a whole (an export, an imported model) is filled under a temporary name and renamed once complete
(`write_folder`).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import threading
import uuid
from collections.abc import Callable
from contextlib import contextmanager, suppress
from pathlib import Path

TEMP = re.compile(r"^\..+\.\d+\.[0-9a-f]{8}\.tmp$")  # the names temp_path makes
Writer = Callable[[Path], None]  # writes a whole file at the path it is given


def temp_path(path: Path) -> Path:
    """A new temporary name beside path, its own to this process and call."""
    path = Path(path)
    return path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"


def write_new(path: Path, write: Writer) -> None:
    """write(path) into a file that must not exist yet, with the mode any new file gets, on disk when this returns.
    Whatever stops the write removes the file."""
    # created 0o666 so that it gets the umask's mode, like any new file (mkstemp's 0600, or safetensors' own, would
    # hide it from other users), and given that mode again after writing, since a writer may replace the file
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        mode = path.stat().st_mode & 0o777
        write(path)
        os.chmod(path, mode)
        with open(path, "rb") as f:
            os.fsync(f.fileno())  # on disk before a rename makes it the file: a crash leaves old or new
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def write_temp(path: Path, write: Writer) -> Path:
    """write(tmp) into a new temporary file beside path, on disk when this returns; the temporary file's path.
    Whatever stops the write removes the temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    write_new(tmp, write)
    return tmp


@contextmanager
def signals_held():
    """Hold Ctrl-C and SIGTERM until the block ends, then act on them: the renames of one save are never cut in
    two. (Only the main thread receives signals in Python; elsewhere this holds nothing.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.signal(sig, lambda number, frame: caught.append(number)) for sig in held}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for sig in caught:
            signal.raise_signal(sig)


def replace_all(written: list[tuple[Path, Path]]) -> None:
    """Rename every (temporary file, its path) into place, none of them cut off by a signal, and put the renames
    themselves on disk. A rename needs no space, so a full disk cannot stop one half way."""
    with signals_held():
        for tmp, path in written:
            os.replace(tmp, path)
    for folder in {Path(path).parent for _, path in written}:
        sync_folder(folder)


def sync_folder(folder: Path) -> None:
    with suppress(OSError):  # (a file system that cannot sync a folder has nothing more to do)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_all(files: list[tuple[Path, Writer]]) -> None:
    """Write every (path, write) so that all of them change or none: each to a temporary file first, then all
    renamed at once. An error (OSError: a full disk, a refused write) leaves every file as it was."""
    written: list[tuple[Path, Path]] = []
    try:
        for path, write in files:
            written.append((write_temp(Path(path), write), Path(path)))
    except BaseException:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        raise
    replace_all(written)


def atomic_write(path: Path, content: bytes | str | Writer) -> None:
    """Replace path with content (bytes, UTF-8 text, or a function that writes the file at the path it is given):
    readers see the old file or the new one, never half."""
    if isinstance(content, str):
        content = content.encode("utf-8")
    write = (lambda tmp: Path(tmp).write_bytes(content)) if isinstance(content, bytes) else content
    write_all([(Path(path), write)])


def write_folder(folder: Path, fill: Callable[[Path], None], replace: bool = False) -> None:
    """A whole folder at once: fill(tmp) writes its files into a new temporary folder beside `folder`; once they are
    all on disk it is renamed to `folder`, so a reader finds the old folder or the new one, and a failure at any
    point leaves only what was there. An empty folder in its place is replaced; one with files only when asked."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(folder)
    tmp.mkdir()
    try:
        fill(tmp)
        for path in tmp.iterdir():  # (a writer that is not write_new may have left its file in the page cache)
            if path.is_file():
                with open(path, "rb") as f:
                    os.fsync(f.fileno())
        sync_folder(tmp)
        with signals_held():
            if replace and folder.is_dir() and any(folder.iterdir()):
                old = temp_path(folder)
                os.rename(folder, old)
                os.rename(tmp, folder)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, folder)  # (a rename replaces an empty folder, and refuses one with files)
        sync_folder(folder.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def clear_temp_files(folder: Path) -> list[Path]:
    """Remove the temporary files a killed writer left in folder (only whoever holds the folder may: another
    writer's files would go too); the files removed."""
    removed = []
    with suppress(OSError):
        for path in Path(folder).iterdir():
            if TEMP.match(path.name) and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed
