"""A checkpoint brought in as a zip (as runs.zip_run makes it), kept as a run only once every check passes."""
from __future__ import annotations

import io
import os
import re
import shutil
import stat
import uuid
import zipfile
from pathlib import Path

from .checkpoint import (
    checked_meta,
    list_snapshots,
    load_weights,
    make_folder,
    read_safetensors,
    write_error,
    write_json,
)
from .errors import message
from .folders import CheckpointError, checkpoint_dir

IMPORT_LIMIT = 256 * 2**20  # bytes a checkpoint zip may hold unpacked (the tutorial's model with snapshots: ~25 MB)
CHECKPOINT_FILES = ("model.safetensors", "optimizer.safetensors", "meta.json", "config.json")
SNAPSHOT_FILE = re.compile(r"snapshots/step_\d+\.safetensors")


def _is_checkpoint_file(name: str) -> bool:
    return name in CHECKPOINT_FILES or SNAPSHOT_FILE.fullmatch(name) is not None


def _zip_members(z: zipfile.ZipFile, limit: int) -> tuple[str | None, dict[str, zipfile.ZipInfo]]:
    """(the folder the zip's files sit in, or None when they sit at its top; {file inside the checkpoint: entry}).

    Every entry must be a checkpoint's own file, plainly stored or deflated, under one folder or none: a name that
    could point anywhere else (absolute, with '..', a drive or a backslash), a link or any other file refuses the
    whole zip before anything is written."""
    folders, files = set(), {}
    for info in z.infolist():
        name = info.filename
        parts = name.rstrip("/").split("/")
        if name.startswith("/") or "\\" in name or ":" in parts[0] or any(p in ("", ".", "..") for p in parts):
            raise CheckpointError("checkpoint.zip_unsafe_name", "the zip holds '{member}', a name that could point "
                                  "outside its folder: refused", member=name)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise CheckpointError("checkpoint.zip_link", "the zip holds a link ({member}): refused", member=name)
        if info.is_dir():
            continue
        if _is_checkpoint_file(name):
            folder, inside = None, name
        elif len(parts) > 1 and _is_checkpoint_file("/".join(parts[1:])):
            folder, inside = parts[0], "/".join(parts[1:])
        else:
            raise CheckpointError("checkpoint.zip_foreign_file", "the zip holds {member}, which is not a file of a "
                                  "checkpoint (model.safetensors, optimizer.safetensors, meta.json, config.json, "
                                  "snapshots/step_NNNNNN.safetensors): refused", member=name)
        folders.add(folder)
        if len(folders) > 1:
            raise CheckpointError("checkpoint.zip_folders", "the zip holds the files of more than one checkpoint "
                                  "({folders}): give one at a time", folders=", ".join(sorted(f or "." for f in
                                                                                            folders)))
        if inside in files:
            raise CheckpointError("checkpoint.zip_twice", "the zip holds {member} twice: refused", member=inside)
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise CheckpointError("checkpoint.zip_packing", "{member} in the zip is encrypted or packed in a way this "
                                  "app does not read: make the zip with Download checkpoint", member=name)
        files[inside] = info
    for needed in ("model.safetensors", "meta.json"):
        if needed not in files:
            raise CheckpointError("checkpoint.zip_missing", "the zip holds no {file}: a checkpoint zip, as Download "
                                  "checkpoint makes it, has model.safetensors and meta.json", file=needed)
    if sum(info.file_size for info in files.values()) > limit:
        raise CheckpointError("checkpoint.zip_too_big", "the checkpoint unpacks to more than {limit:,} bytes: refused",
                              limit=limit)
    return next(iter(folders)), files


def _unpack(z: zipfile.ZipFile, files: dict[str, zipfile.ZipInfo], folder: Path) -> None:
    """Write the files into folder. zipfile never hands out more than an entry's stated size (and checks its CRC),
    so the sum _zip_members checked bounds what is written."""
    for inside, info in files.items():
        target = folder / inside
        target.parent.mkdir(parents=True, exist_ok=True)
        with z.open(info) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)


def _check_unpacked(folder: Path) -> None:
    """The checks a checkpoint passes before it is kept: weights and snapshots load (format, shapes, finite values),
    the optimizer state is safetensors, meta.json is a JSON object. config.json is written again from the weights,
    which are what the model is built from."""
    model, tokenizer, _ = load_weights(folder / "model.safetensors")
    for _, snapshot in list_snapshots(folder):
        load_weights(snapshot)
    if (folder / "optimizer.safetensors").exists():
        read_safetensors(folder / "optimizer.safetensors", tensors=False)
    if checked_meta(folder)[1] is None:
        raise CheckpointError("checkpoint.zip_meta", "the zip's meta.json is not a JSON object, so the run's step, "
                              "history and settings cannot be read from it")
    write_json(folder / "config.json", {"model": model.cfg.to_dict(), "tokenizer": tokenizer.to_dict()})


def _said_of_the_zip(error: CheckpointError, folder: Path, files: dict[str, zipfile.ZipInfo]) -> CheckpointError:
    """error with each file of the hidden folder the zip was unpacked into named as the zip names it."""
    members = {folder / inside: info.filename for inside, info in files.items()}
    params = {key: message("checkpoint.zip_member", "{member} in the zip", member=members[value])
              if isinstance(value, Path) and value in members else value for key, value in error.message.params.items()}
    return type(error)(error.message.key, error.message.template, **params)


def import_checkpoint_zip(data: bytes, name: str | None = None, root: Path | None = None,
                          limit: int = IMPORT_LIMIT) -> Path:
    """Unpack a checkpoint zip (as runs.zip_run makes it: <name>/model.safetensors, …) into root/<name>/ and
    return that folder; `name` overrides the zip's own folder name.

    Nothing in it is executed or unpickled: only a checkpoint's own files are taken (see _zip_members), at most
    `limit` bytes of them, into a hidden folder beside the checkpoints; the weights must load with load_weights
    before the folder is renamed into place. A zip that fails any check leaves nothing behind.
    """
    if len(data) > limit:
        raise CheckpointError("checkpoint.zip_too_big", "the checkpoint unpacks to more than {limit:,} bytes: refused",
                              limit=limit)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            folder_name, files = _zip_members(z, limit)
            wanted = (name or "").strip() or folder_name
            if not wanted:
                raise CheckpointError("checkpoint.zip_no_name", "give the checkpoint a name: its zip has no folder "
                                      "to take one from")
            target = checkpoint_dir(wanted, root)
            if target.exists():
                raise CheckpointError("checkpoint.name_taken", "a checkpoint named '{name}' already exists",
                                      name=target.name)
            unpacked = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.import"
            try:
                make_folder(unpacked)
                _unpack(z, files, unpacked)
                try:
                    _check_unpacked(unpacked)
                except CheckpointError as e:
                    raise _said_of_the_zip(e, unpacked, files) from None
                if target.exists():  # (made while this one was unpacking)
                    raise CheckpointError("checkpoint.name_taken", "a checkpoint named '{name}' already exists",
                                          name=target.name)
                os.rename(unpacked, target)
            except OSError as e:
                if (error := write_error(target, e)) is e:
                    raise
                raise error from None
            finally:
                shutil.rmtree(unpacked, ignore_errors=True)  # (gone already once it became the checkpoint)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
        raise CheckpointError("checkpoint.not_zip", "this is not a readable zip file ({reason})",
                              reason=str(e)) from None
    return target
