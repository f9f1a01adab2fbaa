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
(weights metadata, meta.json) is checked before use; a value of the wrong kind is dropped and named (meta.json's
schema: gptcore.meta). Who trains into a folder is gptcore.locks; a checkpoint brought in as a zip, gptcore.archive.
"""
from __future__ import annotations

import errno
import json
import os
import platform
import re
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save, save_file

from . import fs
from .capacity import check_loadable, meta_model
from .config import ConfigError, GPTConfig
from .errors import Message, UserError, message
from .folders import CheckpointError
from .meta import checked_fields
from .model import GPT, rope_tables, scaled_frequencies
from .optim import state_slots
from .tokenizer import Tokenizer, TokenizerError, tokenizer_from_dict

FORMAT = "gptcore-checkpoint-1"


TIED = "head.weight"  # with tie_embeddings, the output head's weight is emb.weight itself


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
    """write(tmp) into a new temporary file beside path (gptcore.fs.write_temp); the temporary file's path.

    Write errors come out as OSError: safetensors reports them as SafetensorError ("… (os error 28)"), which is
    turned back into the OSError it was.
    """
    def checked(tmp: Path) -> None:
        try:
            write(str(tmp))
        except SafetensorError as e:
            if (code := re.search(r"os error (\d+)", str(e))) is None:
                raise
            number = int(code.group(1))
            raise OSError(number, os.strerror(number), str(tmp)) from None

    return fs.write_temp(path, checked)


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


def write_files(files: list[tuple[Path, object]]) -> None:
    """Write every (path, write) so that all of them change or none (gptcore.fs.replace_all: no signal cuts the
    renames in two). A full disk raises DiskFull, a refused write CheckpointError; either way the files as they were
    stay untouched."""
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
    fs.replace_all(written)


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


def make_folder(directory: Path) -> bool:
    """Create a run's folder (and the folders above it); True if this call made it, False if it was there. A file in
    the way, or no right to write, is said."""
    try:
        directory.mkdir(parents=True)
        return True
    except (FileExistsError, NotADirectoryError):
        if directory.is_dir():
            return False
        raise CheckpointError("checkpoint.file_in_the_way", "{path} cannot be a checkpoint folder: it, or a folder "
                              "above it, is a file", path=directory) from None
    except FileNotFoundError:  # (its parent is there, yet no folder can be made in it: /proc, say)
        raise CheckpointError("checkpoint.no_folder_here", "{path} cannot be a checkpoint folder: no folder can be "
                              "made there (a system folder such as /proc or /sys?)", path=directory) from None
    except OSError as e:
        if (error := write_error(directory, e)) is e:
            raise
        raise error from None


def _atomic_write(path: Path, write) -> None:
    """write(tmp_path) then rename over path: readers see the old file or the new one, never half."""
    write_files([(path, write)])


def _json_writer(data):
    return lambda tmp: Path(tmp).write_text(json.dumps(data, indent=1))


def write_json(path: Path, data) -> None:
    _atomic_write(path, _json_writer(data))


def _weights_metadata(model: GPT, tokenizer: Tokenizer, step: int) -> dict[str, str]:
    return {"format": FORMAT, "step": str(step), "config": json.dumps(model.cfg.to_dict()),
            "tokenizer": json.dumps(tokenizer.to_dict())}


def library_versions() -> dict[str, str]:
    import safetensors

    return {"python": platform.python_version(), "torch": torch.__version__, "safetensors": safetensors.__version__}


def _weights_writer(model: GPT, tokenizer: Tokenizer, step: int):
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()  # device-free files
               if not (k == TIED and model.cfg.tie_embeddings)}  # a tied head is the embedding: stored once
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


def read_safetensors(path: Path, tensors: bool = True) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
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
    return read_safetensors(Path(path), tensors=False)[1]


def _read_weights(path: Path):
    check_regular_file(path)
    tensors, metadata = read_safetensors(path)
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
        check_loadable(cfg)
    except ConfigError as e:
        raise CheckpointError("checkpoint.unbuildable", "{path}: {reason}", path=path, reason=e.message) from None
    if cfg.tie_embeddings and "emb.weight" in tensors:
        tensors[TIED] = tensors["emb.weight"]
    model = meta_model(cfg)
    check_shapes(path, tensors, {k: tuple(v.shape) for k, v in model.state_dict().items()})
    check_values(path, tensors)
    return holding(model, tensors).eval(), tokenizer, step


def holding(model: GPT, tensors: dict[str, torch.Tensor]) -> GPT:
    """A model built on the meta device, given the tensors as its weights: no random draw for weights that are
    about to be replaced, and no copy of them (134M parameters open in a second instead of ten)."""
    model.load_state_dict({k: v.float() for k, v in tensors.items()}, assign=True)  # (bfloat16 snapshots too)
    if model.cfg.tie_embeddings:  # assign gave the head a Parameter of its own: make it the embedding again
        model.head.weight = model.emb.weight
    if model.cfg.position == "rope":  # buffers that are not stored: computed as GPT() computes them
        model.rope_cos, model.rope_sin = rope_tables(torch.arange(model.cfg.context), model.cfg.d_head,
                                                     freq=scaled_frequencies(model.cfg))
    return model


def _shape(shape: tuple[int, ...]) -> str:
    return "×".join(map(str, shape)) or "()"


def _shape_differences(tensors: dict[str, torch.Tensor], needed: dict[str, tuple[int, ...]]) -> list[Message]:
    """Each tensor whose shape is not the one the config needs, or that only one of them has, in the model's order."""
    found = {name: tuple(t.shape) for name, t in tensors.items()}
    differences = []
    for name, shape in needed.items():
        if name not in found:
            differences.append(message("checkpoint.tensor_missing", "the file has no {name}, which the config needs "
                                       "({needed})", name=name, needed=_shape(shape)))
        elif found[name] != shape:
            differences.append(message("checkpoint.shape_differs", "{name} is {found} in the file but the config "
                                       "needs {needed}", name=name, found=_shape(found[name]), needed=_shape(shape)))
    differences += [message("checkpoint.tensor_extra", "the file holds {name} ({found}), which the config has no "
                            "place for", name=name, found=_shape(shape))
                    for name, shape in found.items() if name not in needed]
    return differences


def check_shapes(path: Path, tensors: dict[str, torch.Tensor], needed: dict[str, tuple[int, ...]]) -> None:
    """The weights must be exactly the tensors the config builds: the first difference is named, the rest counted."""
    if not (differences := _shape_differences(tensors, needed)):
        return
    if len(differences) == 1:
        raise CheckpointError("checkpoint.shape_mismatch", "{path}: the weights do not match the model config: "
                              "{difference}", path=path, difference=differences[0])
    raise CheckpointError("checkpoint.shape_mismatches", "{path}: the weights do not match the model config: "
                          "{difference}, and {more:,} more tensors differ", path=path, difference=differences[0],
                          more=len(differences) - 1)


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
        if not torch.isfinite(t.sum()) and not torch.isfinite(t).all():  # (the sum first: one cheap pass)
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


# ---------------------------------------------------------------- meta.json (its schema: gptcore.meta)

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
    return checked_fields(meta)


def read_meta(directory: Path) -> dict:
    """meta.json's values that passed their checks (see checked_meta); {} when there is none."""
    return checked_meta(directory)[0]


def update_meta(directory: Path, **changes) -> None:
    """Change some of meta.json's entries, keeping the others as they are on disk."""
    path = Path(directory) / "meta.json"
    write_json(path, {**(_read_object(path) or {}), **changes})


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
    if not path.is_file() or read_safetensors(path, tensors=False)[1].get("step") != str(step):
        return False
    tensors, _ = read_safetensors(path)
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
