"""Checkpoints as plain data: safetensors weights plus JSON, written atomically, loaded without pickle.

Layout of checkpoints/<name>/:
  model.safetensors      weights; its metadata holds the model config and tokenizer, so this one file
                         (renamed into place atomically) is always self-consistent
  optimizer.safetensors  optimizer state (AdamW moments, Muon momentum), for --resume
  meta.json              training metadata: step, loss history, corpus, wall time, versions
  config.json            the model config and tokenizer again, for people to read
  snapshots/step_NNNNNN.safetensors   optional intermediate weights (same format as model.safetensors)
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import uuid
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from .config import ConfigError, GPTConfig
from .data import CharTokenizer
from .errors import UserError
from .model import GPT, check_buildable, meta_model

FORMAT = "gptcore-checkpoint-1"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT_ROOT = Path(os.environ.get("GPTCORE_CHECKPOINTS", PROJECT_ROOT / "checkpoints"))
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot be saved or loaded, with a message naming the problem."""


@dataclass
class Checkpoint:
    model: GPT
    tokenizer: CharTokenizer
    meta: dict = field(default_factory=dict)
    path: Path | None = None


def safe_name(name: str) -> str:
    """A checkpoint name that cannot escape the checkpoints folder: letters, digits, . _ - only."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name).strip()).strip("-.")[:64]
    if not cleaned or not NAME_PATTERN.match(cleaned):
        raise CheckpointError(f"{name!r} is not a usable checkpoint name (use letters, digits, '.', '_', '-')")
    return cleaned


def checkpoint_dir(name: str, root: Path | None = None) -> Path:
    return Path(root or CHECKPOINT_ROOT) / safe_name(name)


def list_checkpoints(root: Path | None = None) -> list[Path]:
    root = Path(root or CHECKPOINT_ROOT)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "model.safetensors").is_file())


def _atomic_write(path: Path, write) -> None:
    """write(tmp_path) then rename over path: readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    # created with 0o666 so it gets the umask's mode, like any new file (mkstemp's 0600 would hide it from other
    # users); kept after writing, since a writer may replace the file with its own mode
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    mode = tmp.stat().st_mode & 0o777
    try:
        write(str(tmp))
        os.chmod(tmp, mode)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())  # on disk before the rename makes it the file: a crash leaves old or new
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_json(path: Path, data) -> None:
    _atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(data, indent=1)))


def _weights_metadata(model: GPT, tokenizer: CharTokenizer, step: int) -> dict[str, str]:
    return {"format": FORMAT, "step": str(step), "config": json.dumps(model.cfg.to_dict()),
            "tokenizer": json.dumps(tokenizer.to_dict())}


def library_versions() -> dict[str, str]:
    import safetensors

    return {"python": platform.python_version(), "torch": torch.__version__, "safetensors": safetensors.__version__}


def save_weights(path: Path, model: GPT, tokenizer: CharTokenizer, step: int) -> None:
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    meta = _weights_metadata(model, tokenizer, step)
    _atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))


def save_checkpoint(directory: Path, model: GPT, tokenizer: CharTokenizer, meta: dict,
                    optimizer: torch.optim.Optimizer | None = None) -> Path:
    """Write (or overwrite) a checkpoint folder; weights first, since they are the source of truth."""
    directory = Path(directory)
    step = int(meta.get("step", 0))
    save_weights(directory / "model.safetensors", model, tokenizer, step)
    if optimizer is not None:
        state = optimizer_tensors(model, optimizer)
        _atomic_write(directory / "optimizer.safetensors", lambda tmp: save_file(state, tmp, {"step": str(step)}))
    _write_json(directory / "config.json", {"model": model.cfg.to_dict(), "tokenizer": tokenizer.to_dict()})
    _write_json(directory / "meta.json", {"versions": library_versions(), **meta})
    return directory


def save_snapshot(directory: Path, model: GPT, tokenizer: CharTokenizer, step: int) -> Path:
    path = Path(directory) / "snapshots" / f"step_{step:06d}.safetensors"
    save_weights(path, model, tokenizer, step)
    return path


def list_snapshots(directory: Path) -> list[tuple[int, Path]]:
    folder = Path(directory) / "snapshots"
    found = [(int(m.group(1)), p) for p in folder.glob("step_*.safetensors")
             if (m := re.fullmatch(r"step_(\d+)\.safetensors", p.name))]
    return sorted(found)


def _read_safetensors(path: Path, tensors: bool = True) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(tensors, header metadata) of a safetensors file (tensors={} when not asked for); never unpickles."""
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
        return (load_file(str(path)) if tensors else {}), metadata
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path} is not a readable safetensors file ({e})") from None


def _read_weights(path: Path):
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist")
    tensors, metadata = _read_safetensors(path)
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a gptcore checkpoint (no '{FORMAT}' metadata)")
    return tensors, metadata


def load_weights(path: Path) -> tuple[GPT, CharTokenizer, int]:
    """Rebuild the model a weights file describes; every failure becomes a CheckpointError."""
    tensors, metadata = _read_weights(Path(path))
    try:
        cfg = GPTConfig.from_dict(json.loads(metadata["config"]))
        tokenizer = CharTokenizer.from_dict(json.loads(metadata["tokenizer"]))
        step = int(metadata.get("step", 0))
    except (KeyError, ValueError, TypeError, ConfigError) as e:
        raise CheckpointError(f"{path} has unusable metadata: {e}") from None
    if tokenizer.vocab_size != cfg.vocab_size:
        raise CheckpointError(f"{path}: tokenizer has {tokenizer.vocab_size} characters but the model "
                              f"expects a vocabulary of {cfg.vocab_size}")
    try:
        check_buildable(cfg)
    except ConfigError as e:
        raise CheckpointError(f"{path}: {e}") from None
    expected = {k: tuple(v.shape) for k, v in meta_model(cfg).state_dict().items()}
    found = {k: tuple(v.shape) for k, v in tensors.items()}
    if expected != found:
        diff = sorted(set(expected.items()) ^ set(found.items()))[:4]
        raise CheckpointError(f"{path}: weights do not match the model config (first differences: {diff})")
    check_values(path, tensors)
    model = GPT(cfg)
    model.load_state_dict(tensors)
    model.eval()
    return model, tokenizer, step


def check_values(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Weights must be floating point and finite: integers would be cast silently, NaN only fails later."""
    for name, t in tensors.items():
        if not t.is_floating_point():
            raise CheckpointError(f"{path}: {name} holds {t.dtype} values, not floating-point weights")
        if not torch.isfinite(t).all():
            raise CheckpointError(f"{path}: {name} contains NaN or infinite values (a diverged run?)")


def load_checkpoint(directory: Path | str) -> Checkpoint:
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"no checkpoint folder at {directory}")
    model, tokenizer, step = load_weights(directory / "model.safetensors")
    meta = read_meta(directory)
    meta["step"] = step  # the weights file is authoritative if meta.json lags behind
    return Checkpoint(model, tokenizer, meta, directory)


def read_meta(directory: Path) -> dict:
    path = Path(directory) / "meta.json"
    try:
        meta = json.loads(path.read_text())
        return meta if isinstance(meta, dict) else {}
    except (OSError, ValueError):
        return {}


def update_meta(directory: Path, **changes) -> None:
    _write_json(Path(directory) / "meta.json", {**read_meta(directory), **changes})


def optimizer_tensors(model: GPT, optimizer: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """Optimizer state (AdamW moments, Muon momentum) keyed by parameter name, so it can be stored without pickle."""
    names = {id(p): n for n, p in model.named_parameters()}
    out = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            for key, value in optimizer.state.get(p, {}).items():
                out[f"{names[id(p)]}::{key}"] = torch.as_tensor(value).detach().clone().reshape(-1) \
                    if key == "step" else value.detach().contiguous()
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
            raise CheckpointError(f"{path}: optimizer state for unknown parameter {name!r}")
        p = params[name]
        if value.numel() != (1 if slot == "step" else p.numel()) or not value.is_floating_point():
            raise CheckpointError(f"{path}: {key} has {value.numel():,} {value.dtype} values; "
                                  f"it needs {1 if slot == 'step' else p.numel():,} floats")
        state[(p, slot)] = value.reshape(()) if slot == "step" else value.reshape(p.shape)
    for (p, slot), value in state.items():  # only once every entry has passed
        optimizer.state[p][slot] = value
    return True


LOCK = ".training.lock"  # holds the pid of the process training into a run folder


def lock_holder(directory: Path) -> int | None:
    """The pid of another live process training into directory, or None."""
    try:
        pid = int((Path(directory) / LOCK).read_text())
    except (OSError, ValueError):  # no lock, or one still being written: its writer holds it for an instant
        return None
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    return None if pid == os.getpid() else pid


def _claim(lock: Path) -> bool:
    """Create the lock file with our pid, atomically; False if it exists."""
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(str(os.getpid()))
    return True


@contextmanager
def training_lock(directory: Path):
    """Claim directory for one training process (the app's and the command line's runs are separate processes);
    a lock left by a process that died is taken over. On release, removes what a run that saved no checkpoint
    leaves behind (its snapshots, which nothing can open without the model), and then the folder if empty."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    lock = directory / LOCK
    if not _claim(lock):
        if (pid := lock_holder(directory)) is not None:
            raise CheckpointError(f"{directory} is being trained by another process (pid {pid}); stop it first")
        lock.unlink(missing_ok=True)  # stale
        if not _claim(lock):  # someone else took it over in between
            raise CheckpointError(f"{directory} is being trained by another process; stop it first")
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
        clear_abandoned(directory)


def clear_abandoned(directory: Path) -> bool:
    """Remove what a run that never saved a checkpoint left in directory (its snapshots, which nothing can open
    without the model, and a stale lock), then the folder if that emptied it; True if the folder is gone."""
    directory = Path(directory)
    if (directory / "model.safetensors").exists() or lock_holder(directory) is not None:
        return False
    for path in [p for _, p in list_snapshots(directory)] + [directory / LOCK]:
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
        raise CheckpointError(f"{Path(directory) / 'meta.json'} is missing or damaged: the run's training settings "
                              "and loss history are kept there, so it cannot be continued (it can still be inspected)")
    return meta


def delete_checkpoint(directory: Path, root: Path | None = None) -> None:
    directory, root = Path(directory).resolve(), Path(root or CHECKPOINT_ROOT).resolve()
    if directory.parent != root:
        raise CheckpointError(f"refusing to delete {directory}: it is not inside {root}")
    shutil.rmtree(directory)


def rename_checkpoint(directory: Path, new_name: str, root: Path | None = None) -> Path:
    target = checkpoint_dir(new_name, root)
    if target.exists():
        raise CheckpointError(f"a checkpoint named {target.name!r} already exists")
    return Path(directory).rename(target)
