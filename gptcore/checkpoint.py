"""Checkpoints as plain data: safetensors weights plus JSON, written atomically, loaded without pickle.

Layout of checkpoints/<name>/:
  model.safetensors      weights; its metadata holds the model config and tokenizer, so this one file
                         (renamed into place atomically) is always self-consistent
  optimizer.safetensors  optimizer state (AdamW moments, Muon momentum), for --resume
  meta.json              training metadata: step, loss history, corpus, wall time, versions
  config.json            the model config and tokenizer again, for people to read
  snapshots/step_NNNNNN.safetensors   optional intermediate weights (same format as model.safetensors)

A save writes every file under a temporary name first and renames them into place only once all are on disk:
a full disk or a failed write leaves the previous checkpoint as it was, whole. Everything read back from disk
(weights metadata, meta.json) is checked before use; a value of the wrong kind is dropped and named.
"""
from __future__ import annotations

import errno
import io
import json
import math
import os
import platform
import re
import shutil
import stat
import uuid
import zipfile
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save, save_file

from .config import ConfigError, GPTConfig
from .errors import Message, UserError, message, printable, stored_message
from .folders import CheckpointError, root_folder

# re-exported: callers name checkpoints through this module, which adds saving and loading to folders' naming rules
from .folders import checkpoint_dir as checkpoint_dir
from .folders import list_checkpoints as list_checkpoints
from .folders import safe_name as safe_name
from .folders import shown_name as shown_name
from .model import GPT, check_buildable, meta_model
from .optim import state_slots
from .tokenizer import Tokenizer, TokenizerError, tokenizer_from_dict

FORMAT = "gptcore-checkpoint-1"
class DiskFull(CheckpointError):
    """No space was left to write a checkpoint: nothing of it was switched in, the previous one is whole."""


@dataclass
class Checkpoint:
    model: GPT
    tokenizer: Tokenizer
    meta: dict = field(default_factory=dict)
    path: Path | None = None


FULL = (errno.ENOSPC, errno.EDQUOT)
REFUSED = (errno.EACCES, errno.EPERM, errno.EROFS)


def _write_temp(path: Path, write) -> Path:
    """write(tmp) into a new temporary file beside path, flushed to disk; the temporary file's path.

    Write errors come out as OSError: safetensors reports them as SafetensorError ("… (os error 28)"), which is
    turned back into the OSError it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    # created with 0o666 so it gets the umask's mode, like any new file (mkstemp's 0600 would hide it from other
    # users); kept after writing, since a writer may replace the file with its own mode
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    mode = tmp.stat().st_mode & 0o777
    try:
        try:
            write(str(tmp))
        except SafetensorError as e:
            if (code := re.search(r"os error (\d+)", str(e))) is None:
                raise
            number = int(code.group(1))
            raise OSError(number, os.strerror(number), str(tmp)) from None
        os.chmod(tmp, mode)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())  # on disk before the rename makes it the file: a crash leaves old or new
        return tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def usable_path(path: Path, flags: int = os.O_RDONLY):
    """A name of path that safetensors can read: the path itself, or, when it is not UTF-8 (which safetensors'
    Rust code refuses), the name /proc/self/fd/N of the file opened here (Linux)."""
    name = os.fspath(path)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        fd = os.open(path, flags)
        try:
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    yield name


def _safetensors_writer(tensors: dict[str, torch.Tensor], metadata: dict[str, str]):
    def write(tmp: str) -> None:
        try:
            tmp.encode("utf-8")
        except UnicodeEncodeError:  # safetensors writes to UTF-8 paths only: write its bytes from here
            Path(tmp).write_bytes(save(tensors, metadata))
            return
        save_file(tensors, tmp, metadata=metadata)
    return write


def _switch(written: list[tuple[Path, Path]]) -> None:
    """Rename every (temporary file, its final path) into place; a rename needs no space, so none fails for a
    full disk."""
    for tmp, path in written:
        os.replace(tmp, path)
    folders = {path.parent for _, path in written}
    for folder in folders:  # the renames themselves on disk
        with suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def write_files(files: list[tuple[Path, object]]) -> None:
    """Write every (path, write) so that all of them change or none: each goes to a temporary file, and only once
    all are written are they renamed into place. A full disk raises DiskFull, a refused write CheckpointError;
    either way the files as they were stay untouched."""
    written: list[tuple[Path, Path]] = []
    try:
        for path, write in files:
            written.append((_write_temp(Path(path), write), Path(path)))
    except OSError as e:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        raise write_error(Path(files[len(written)][0]), e) from None
    except BaseException:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        raise
    _switch(written)


def write_error(path: Path, error: OSError) -> OSError | CheckpointError:
    """The user's side of a failed write (a full disk, a folder they may not write to); any other OSError stays
    itself (a bug or a broken disk, with its traceback)."""
    if error.errno in FULL:
        return DiskFull("checkpoint.disk_full", "the disk is full: there is no space left to write {path}",
                        path=path)
    if error.errno in REFUSED:
        return CheckpointError("checkpoint.write_refused", "{path} could not be written: {reason}",
                               path=path, reason=error.strerror or str(error))
    return error


def _atomic_write(path: Path, write) -> None:
    """write(tmp_path) then rename over path: readers see the old file or the new one, never half."""
    write_files([(path, write)])


def _json_writer(data):
    return lambda tmp: Path(tmp).write_text(json.dumps(data, indent=1))


def _write_json(path: Path, data) -> None:
    _atomic_write(path, _json_writer(data))


def _weights_metadata(model: GPT, tokenizer: Tokenizer, step: int) -> dict[str, str]:
    return {"format": FORMAT, "step": str(step), "config": json.dumps(model.cfg.to_dict()),
            "tokenizer": json.dumps(tokenizer.to_dict())}


def library_versions() -> dict[str, str]:
    import safetensors

    return {"python": platform.python_version(), "torch": torch.__version__, "safetensors": safetensors.__version__}


def _weights_writer(model: GPT, tokenizer: Tokenizer, step: int):
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}  # device-free files
    meta = _weights_metadata(model, tokenizer, step)
    return _safetensors_writer(tensors, meta)


def save_weights(path: Path, model: GPT, tokenizer: Tokenizer, step: int) -> None:
    _atomic_write(path, _weights_writer(model, tokenizer, step))


def save_checkpoint(directory: Path, model: GPT, tokenizer: Tokenizer, meta: dict,
                    optimizer: torch.optim.Optimizer | None = None) -> Path:
    """Write (or overwrite) a checkpoint folder, all of its files or none (see write_files)."""
    directory = Path(directory)
    step = int(meta.get("step", 0))
    files = [(directory / "model.safetensors", _weights_writer(model, tokenizer, step))]
    if optimizer is not None:
        state = optimizer_tensors(model, optimizer)
        files.append((directory / "optimizer.safetensors", _safetensors_writer(state, {"step": str(step)})))
    files.append((directory / "config.json",
                  _json_writer({"model": model.cfg.to_dict(), "tokenizer": tokenizer.to_dict()})))
    files.append((directory / "meta.json", _json_writer({"versions": library_versions(), **meta})))
    write_files(files)
    return directory


def save_snapshot(directory: Path, model: GPT, tokenizer: Tokenizer, step: int) -> Path:
    path = Path(directory) / "snapshots" / f"step_{step:06d}.safetensors"
    save_weights(path, model, tokenizer, step)
    return path


def list_snapshots(directory: Path) -> list[tuple[int, Path]]:
    folder = Path(directory) / "snapshots"
    found = [(int(m.group(1)), p) for p in folder.glob("step_*.safetensors")
             if (m := re.fullmatch(r"step_(\d+)\.safetensors", p.name)) and p.is_file()]  # (never a FIFO)
    return sorted(found)


def _read_safetensors(path: Path, tensors: bool = True) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(tensors, header metadata) of a safetensors file (tensors={} when not asked for); never unpickles."""
    try:
        with usable_path(path) as name:
            with safe_open(name, framework="pt") as f:
                metadata = f.metadata() or {}
            return (load_file(name) if tensors else {}), metadata
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError("checkpoint.unreadable", "{path} is not a readable safetensors file ({reason})",
                              path=path, reason=str(e)) from None


def check_regular_file(path: Path) -> None:
    """A file to read must be a regular file: a link to a device would read forever, a FIFO block."""
    try:
        mode = path.stat().st_mode  # (follows a link to what it points to)
    except FileNotFoundError:
        if path.is_symlink():
            raise CheckpointError("checkpoint.dangling_link", "{path} is a link to {target}, which does not exist",
                                  path=path, target=os.readlink(path)) from None
        raise CheckpointError("checkpoint.missing_file", "{path} does not exist", path=path) from None
    except OSError as e:
        raise CheckpointError("checkpoint.cannot_read", "cannot read {path}: {reason}", path=path,
                              reason=e.strerror or str(e)) from None
    if not stat.S_ISREG(mode):
        raise CheckpointError("checkpoint.not_regular", "{path} is not a regular file but {kind}: weights are a file "
                              "written by this program", path=path, kind=_kind(mode))


def _kind(mode: int) -> Message:
    if stat.S_ISDIR(mode):
        return message("checkpoint.kind_folder", "a folder")
    if stat.S_ISFIFO(mode):
        return message("checkpoint.kind_fifo", "a FIFO (a named pipe)")
    return message("checkpoint.kind_device", "a device or a socket")


def weights_metadata(path: Path) -> dict[str, str]:
    """The header metadata of a safetensors file, without reading its tensors."""
    check_regular_file(Path(path))
    return _read_safetensors(Path(path), tensors=False)[1]


def _read_weights(path: Path):
    check_regular_file(path)
    tensors, metadata = _read_safetensors(path)
    if metadata.get("format") != FORMAT:
        raise CheckpointError("checkpoint.foreign", "{path} is not a gptcore checkpoint (no '{format}' metadata)",
                              path=path, format=FORMAT)
    return tensors, metadata


def load_weights(path: Path) -> tuple[GPT, Tokenizer, int]:
    """Rebuild the model a weights file describes; every failure becomes a CheckpointError."""
    tensors, metadata = _read_weights(Path(path))
    for entry in ("config", "tokenizer"):
        if entry not in metadata:
            raise CheckpointError("checkpoint.metadata_missing", "{path} has no '{entry}' in its metadata, so the "
                                  "model cannot be rebuilt from it", path=path, entry=entry)
    step = header_step(path, metadata)
    try:
        cfg = GPTConfig.from_dict(json.loads(metadata["config"]))
        tokenizer = tokenizer_from_dict(json.loads(metadata["tokenizer"]))
    except (json.JSONDecodeError, ConfigError, TokenizerError) as e:
        raise CheckpointError("checkpoint.bad_metadata", "{path} has unusable metadata: {reason}", path=path,
                              reason=e.message if isinstance(e, UserError) else str(e)) from None
    if tokenizer.vocab_size != cfg.vocab_size:
        raise CheckpointError("checkpoint.vocab_mismatch", "{path}: tokenizer has {chars} tokens but the model "
                              "expects a vocabulary of {vocab}", path=path, chars=tokenizer.vocab_size,
                              vocab=cfg.vocab_size)
    try:
        check_buildable(cfg)
    except ConfigError as e:
        raise CheckpointError("checkpoint.unbuildable", "{path}: {reason}", path=path, reason=e.message) from None
    expected = {k: tuple(v.shape) for k, v in meta_model(cfg).state_dict().items()}
    found = {k: tuple(v.shape) for k, v in tensors.items()}
    if expected != found:
        diff = sorted(set(expected.items()) ^ set(found.items()))[:4]
        raise CheckpointError("checkpoint.shape_mismatch", "{path}: weights do not match the model config (first "
                              "differences: {diff})", path=path, diff=str(diff))
    check_values(path, tensors)
    model = GPT(cfg)
    model.load_state_dict(tensors)
    model.eval()
    return model, tokenizer, step


def header_step(path: Path, metadata: dict[str, str]) -> int:
    """The training step a weights file's header metadata records (0 when it records none)."""
    step = metadata.get("step", "0")
    if not (step.isascii() and step.isdigit()):
        raise CheckpointError("checkpoint.bad_step", "{path} records the step {step!r}, not a whole number",
                              path=path, step=step)
    return int(step)


def check_values(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Weights must be floating point and finite: integers would be cast silently, NaN only fails later."""
    for name, t in tensors.items():
        if not t.is_floating_point():
            raise CheckpointError("checkpoint.not_float", "{path}: {name} holds {dtype} values, not floating-point "
                                  "weights", path=path, name=name, dtype=str(t.dtype))
        if not torch.isfinite(t).all():
            raise CheckpointError("checkpoint.not_finite", "{path}: {name} contains NaN or infinite values (a "
                                  "diverged run?)", path=path, name=name)


def load_checkpoint(directory: Path | str) -> Checkpoint:
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError("checkpoint.no_folder", "no checkpoint folder at {path}", path=directory)
    model, tokenizer, step = load_weights(directory / "model.safetensors")
    meta = read_meta(directory)
    meta["step"] = step  # the weights file is authoritative if meta.json lags behind
    return Checkpoint(model, tokenizer, meta, directory)


# ---------------------------------------------------------------- meta.json, checked value by value

def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _duration(v) -> bool:
    return _number(v) and math.isfinite(v) and v >= 0


def _optional(check):
    return lambda v: v is None or check(v)


def _list_of(check):
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def _table(v) -> bool:
    return isinstance(v, dict)


def _text(v) -> bool:
    return isinstance(v, str)


HISTORY_FIELDS = {"step": _list_of(_count), "train_loss": _list_of(_number), "lr": _list_of(_number),
                  "time": _list_of(_number), "eval_step": _list_of(_count), "eval_train": _list_of(_number),
                  "eval_val": _list_of(_number), "final_val": _optional(_number)}


# Series recorded together, one entry per step and one per evaluation: (the two drawn against each other, which
# go together even when one is missing, and the others, which a run of another version may not have recorded).
TOGETHER = ((("step", "train_loss"), ("lr", "time")), (("eval_step", "eval_val"), ("eval_train",)))


def _history(v) -> bool:
    """Every known series of the right kind, and the ones recorded together of the same length."""
    return isinstance(v, dict) and all(check(v[k]) for k, check in HISTORY_FIELDS.items() if k in v) and \
        all(len({len(v.get(k, [])) for k in drawn} | {len(v[k]) for k in others if k in v}) == 1
            for drawn, others in TOGETHER)


def _stored_message(v) -> bool:
    return isinstance(v, str) or stored_message(v) is not None


META_FIELDS = {"step": _count, "status": _text, "history": _history, "train_config": _table, "corpus": _text,
               "wall_time": _duration, "final_val_loss": _optional(_number), "params": _optional(_count),
               "tokenizer": _text, "message": _stored_message, "corpus_source": _optional(_table),
               "versions": _table, "hardware": _table, "diverging": _optional(_table)}


def _read_object(path: Path) -> dict | None:
    """meta.json as it is on disk: {} when there is none, None when it is not a JSON object."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def checked_meta(directory: Path) -> tuple[dict, list[str] | None]:
    """(the values of meta.json that passed their checks, the names of those that did not); the list is None when
    the file is not a JSON object at all. Values a reader relies on (numbers to format, lists to plot) are only
    ever taken from here."""
    meta = _read_object(Path(directory) / "meta.json")
    if meta is None:
        return {}, None
    damaged = sorted(k for k, check in META_FIELDS.items() if k in meta and not check(meta[k]))
    checked = {k: v for k, v in meta.items() if k not in damaged}
    for key in ("status", "corpus", "tokenizer", "message"):  # texts to show: a file name that is not UTF-8 escaped
        if isinstance(checked.get(key), str):
            checked[key] = printable(checked[key])
    return checked, damaged


def read_meta(directory: Path) -> dict:
    """meta.json's values that passed their checks (see checked_meta); {} when there is none."""
    return checked_meta(directory)[0]


def update_meta(directory: Path, **changes) -> None:
    """Change some of meta.json's entries, keeping the others as they are on disk."""
    path = Path(directory) / "meta.json"
    _write_json(path, {**(_read_object(path) or {}), **changes})


def optimizer_tensors(model: GPT, optimizer: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """Optimizer state (AdamW moments, Muon momentum) keyed by parameter name, so it can be stored without pickle."""
    names = {id(p): n for n, p in model.named_parameters()}
    out = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            for key, value in optimizer.state.get(p, {}).items():
                out[f"{names[id(p)]}::{key}"] = torch.as_tensor(value).detach().cpu().clone().reshape(-1) \
                    if key == "step" else value.detach().cpu().contiguous()
    return out


def load_optimizer_state(directory: Path, model: GPT, optimizer: torch.optim.Optimizer, step: int) -> bool:
    """Restore the optimizer state saved with the weights of `step`; False when there is none for that step
    (no file, or one left from an earlier step by an interrupted save: the optimizer then starts fresh)."""
    path = Path(directory) / "optimizer.safetensors"
    if not path.is_file() or _read_safetensors(path, tensors=False)[1].get("step") != str(step):
        return False
    tensors, _ = _read_safetensors(path)
    params = dict(model.named_parameters())
    state = {}
    for key, value in tensors.items():
        name, _, slot = key.partition("::")
        if name not in params:
            raise CheckpointError("checkpoint.unknown_parameter", "{path}: optimizer state for unknown parameter "
                                  "'{name}'", path=path, name=name)
        p = params[name]
        if value.numel() != (1 if slot == "step" else p.numel()) or not value.is_floating_point():
            raise CheckpointError("checkpoint.optimizer_shape", "{path}: {entry} has {n:,} {dtype} values; it needs "
                                  "{need:,} floats", path=path, entry=key, n=value.numel(), dtype=str(value.dtype),
                                  need=1 if slot == "step" else p.numel())
        state[(p, slot)] = value.reshape(()) if slot == "step" else value.reshape(p.shape).to(p.device)
    check_complete(path, optimizer, params, list(tensors))
    # torch's fused (and capturable) AdamW keeps its step counts on the parameters' device, other optimizers on the CPU
    on_device = {id(p) for g in optimizer.param_groups if g.get("fused") or g.get("capturable") for p in g["params"]}
    for (p, slot), value in state.items():  # only once every entry has passed
        if slot == "step" and id(p) in on_device:
            value = value.to(p.device)
        optimizer.state[p][slot] = value
    return True


def check_complete(path: Path, optimizer: torch.optim.Optimizer, params: dict[str, torch.nn.Parameter],
                   keys: list[str]) -> None:
    """The saved state of each parameter (keys: "<name>::<slot>") must be all that the optimizer keeps for it:
    a step would fail on a parameter with only some of it."""
    slots: dict[str, set[str]] = {}
    for key in keys:
        name, _, slot = key.partition("::")
        slots.setdefault(name, set()).add(slot)
    group_of = {id(p): group for group in optimizer.param_groups for p in group["params"]}
    for name, found in slots.items():
        if found != (needed := state_slots(group_of[id(params[name])])):
            raise CheckpointError("checkpoint.optimizer_incomplete", "{path}: the optimizer state of {name} holds "
                                  "{found} where it needs {needed}: delete that file to continue with a fresh "
                                  "optimizer", path=path, name=name, found=", ".join(sorted(found)),
                                  needed=", ".join(sorted(needed)))


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
    folder if empty."""
    directory = Path(directory)
    make_folder(directory)
    lock = directory / LOCK
    if not _claim(lock):
        owner = lock_owner(directory)
        if owner is not None or not (_remove_stale(lock) and _claim(lock)):
            raise busy_error(directory, owner)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
        clear_abandoned(directory)


def make_folder(directory: Path) -> None:
    """Create a run's folder (and the folders above it); a file in the way, or no right to write, is said."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise CheckpointError("checkpoint.file_in_the_way", "{path} cannot be a checkpoint folder: it, or a folder "
                              "above it, is a file", path=directory) from None
    except OSError as e:
        if (error := write_error(directory, e)) is e:
            raise
        raise error from None


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


def clear_abandoned(directory: Path) -> bool:
    """Remove what a run that never saved a checkpoint left in directory (its snapshots, which nothing can open
    without the model, and a stale lock), then the folder if that emptied it; True if the folder is gone."""
    directory = Path(directory)
    if (directory / "model.safetensors").exists() or lock_owner(directory) is not None or \
            not _remove_stale(directory / LOCK):
        return False
    for _, path in list_snapshots(directory):
        path.unlink(missing_ok=True)
    for folder in (directory / "snapshots", directory):
        with suppress(OSError):  # not empty (other files are not ours to delete), or already gone
            folder.rmdir()
    return not directory.exists()


def resumable_meta(directory: Path) -> dict:
    """meta.json of a run that can be continued: its training settings and loss history must be readable."""
    meta = read_meta(directory)
    history = meta.get("history")
    if not isinstance(meta.get("train_config"), dict) or not isinstance(history, dict) or \
            not all(isinstance(history.get(key, []), list) for key in ("step", "train_loss", "eval_step", "eval_val")):
        raise CheckpointError("checkpoint.not_resumable", "{path} is missing or damaged: the run's training settings "
                              "and loss history are kept there, so it cannot be continued (it can still be "
                              "inspected)", path=Path(directory) / "meta.json")
    return meta


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


# ---------------------------------------------------------------- a checkpoint brought in as a zip

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
        _read_safetensors(folder / "optimizer.safetensors", tensors=False)
    if checked_meta(folder)[1] is None:
        raise CheckpointError("checkpoint.zip_meta", "the zip's meta.json is not a JSON object, so the run's step, "
                              "history and settings cannot be read from it")
    _write_json(folder / "config.json", {"model": model.cfg.to_dict(), "tokenizer": tokenizer.to_dict()})


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
                _check_unpacked(unpacked)
                if target.exists():  # (made while this one was unpacking)
                    raise CheckpointError("checkpoint.name_taken", "a checkpoint named '{name}' already exists",
                                          name=target.name)
                os.rename(unpacked, target)
            except OSError as e:
                if (error := write_error(unpacked, e)) is e:
                    raise
                raise error from None
            finally:
                shutil.rmtree(unpacked, ignore_errors=True)  # (gone already once it became the checkpoint)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
        raise CheckpointError("checkpoint.not_zip", "this is not a readable zip file ({reason})",
                              reason=str(e)) from None
    return target
