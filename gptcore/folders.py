"""Checkpoint folders by name, without loading torch: where they live, which names are usable, which exist, and
renaming or deleting one.

The app's first screen (the sidebar names the active checkpoint and any background job) needs only this much, so
it can draw before torch has loaded.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from .errors import UserError, printable

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT_ROOT = Path(os.environ.get("GPTCORE_CHECKPOINTS", PROJECT_ROOT / "checkpoints"))
SHIPPED = "starter"  # the model the repo ships so the inspector works on first launch
ACTIVE = ("starting", "running", "paused", "stopping")  # a job of this process is working on the run
MAX_NAME = 64
NAME_PATTERN = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_NAME - 1}}}$")


CACHE_ENV = "GPTCORE_CACHE"


def cache_dir() -> Path:
    """$GPTCORE_CACHE, else ~/.cache/gpt-explorer: what is fetched from outside (models, TinyStories), never inside
    the repository."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "gpt-explorer")


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot be saved or loaded, with a message naming the problem."""


def safe_name(name: str) -> str:
    """A checkpoint name that cannot escape the checkpoints folder: letters, digits, . _ - only (other characters
    become '-'); a name too long is refused, never cut."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name).strip()).strip("-.")
    if len(cleaned) > MAX_NAME:
        raise CheckpointError("checkpoint.long_name",
                              "a checkpoint name has at most {limit} characters; '{start}…' has {n:,}",
                              limit=MAX_NAME, start=cleaned[:24], n=len(cleaned))
    if not cleaned or not NAME_PATTERN.match(cleaned):
        raise CheckpointError("checkpoint.bad_name",
                              "'{name}' is not a usable checkpoint name (use letters, digits, '.', '_', '-')",
                              name=str(name))
    return cleaned


def root_folder(root: Path | None = None) -> Path:
    """root, or the checkpoints folder (read at each call, so a test or a server can point it elsewhere)."""
    return Path(root or CHECKPOINT_ROOT)


def checkpoint_dir(name: str, root: Path | None = None) -> Path:
    return root_folder(root) / safe_name(name)


def shown_name(path: Path) -> str:
    """A folder's name as it can be shown and used as a key: bytes that are not UTF-8 escaped (bad\\xffname)."""
    return printable(Path(path).name)


def list_checkpoints(root: Path | None = None) -> list[Path]:
    root = root_folder(root)
    if not root.is_dir():
        return []
    # (a name starting with "." is never a checkpoint's: safe_name refuses it; an import unpacks there)
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and (p / "model.safetensors").is_file())


def check_own_folder(directory: Path, root: Path | None = None) -> Path:
    """directory (made absolute) when it is a folder right inside root and not a link: deleting or renaming it
    then changes only that folder. Its last part is never resolved: a link named like a run may point anywhere."""
    directory, root = Path(os.path.abspath(directory)), root_folder(root).resolve()
    if directory.parent.resolve() != root or directory.name in ("", ".", ".."):
        raise CheckpointError("checkpoint.outside_root", "{path} is not inside {root}, so it is left as it is",
                              path=directory, root=root)
    if directory.is_symlink() or not directory.is_dir():
        raise CheckpointError("checkpoint.not_own_folder", "{path} is a link or a file, not a checkpoint folder: "
                              "it is left as it is", path=directory)
    return directory


def delete_checkpoint(directory: Path, root: Path | None = None) -> None:
    shutil.rmtree(check_own_folder(directory, root))


def rename_checkpoint(directory: Path, new_name: str, root: Path | None = None) -> Path:
    directory, target = check_own_folder(directory, root), checkpoint_dir(new_name, root)
    if target.exists() or target.is_symlink():
        raise CheckpointError("checkpoint.name_taken", "a checkpoint named '{name}' already exists", name=target.name)
    return directory.rename(target)
