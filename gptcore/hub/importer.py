"""import_model: a real model (SmolLM2, a .gguf file, a Hugging Face folder or name) becomes an ordinary checkpoint
folder, written whole or not at all."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from .. import fs
from ..capacity import check_loadable, meta_model
from ..checkpoint import TIED, check_shapes, save_checkpoint
from ..config import ConfigError, GPTConfig
from ..folders import CheckpointError
from .common import (
    DEFAULT_MAX_CONTEXT,
    MAX_CONTEXT_CAP,
    SMALL_FILES,
    Imported,
    ImportFailure,
    Opened,
    Progress,
    file_sha256,
    ignore_progress,
    weight_names,
)
from .fetch import (
    HF_NAME,
    SMOLLM2,
    SMOLLM2_PACKAGE,
    SMOLLM2_SHA256,
    cached_hf_snapshot,
    fetch_smollm2,
    hf_small_files,
    hf_weights,
)
from .gguf_file import open_gguf
from .hf_folder import open_hf_folder, weight_files


def import_model(source: str | Path, out_dir: str | Path, max_context: int = DEFAULT_MAX_CONTEXT,
                 progress: Progress | None = None) -> Path:
    """Convert `source` into a checkpoint folder at out_dir and return its path; out_dir unchanged when it already
    holds this import (same source files, same cap). ImportFailure (a UserError) for anything a person can fix.

    The cheap checks come first: the destination, then the model's config against the memory it would take; only
    then are weights fetched (a model named on the Hub), hashed and read."""
    progress = progress or ignore_progress
    out_dir = Path(out_dir)
    if not isinstance(max_context, int) or isinstance(max_context, bool) or not 1 <= max_context <= MAX_CONTEXT_CAP:
        raise ImportFailure("hub.max_context", "the context cap must be a whole number from 1 to {cap:,}, got "
                            "{value!r}", cap=MAX_CONTEXT_CAP, value=max_context)
    if not imported_meta(out_dir):  # (an earlier import may be this one: that needs the hashes, below)
        check_out_dir(out_dir)
    kind, path, name = locate(source, progress)
    opened = open_source(kind, path, max_context)
    check_fits(opened.cfg)
    if kind == "hf" and name and not all((path / file).is_file() for file in weight_names(path)):
        hf_weights(name, path, progress)
    record = {"kind": kind, "path": str(path), **({"name": name} if name else {}), "sha256": source_hashes(kind, path)}
    if already_imported(out_dir, record, max_context):
        return out_dir
    check_out_dir(out_dir)
    progress(0, 1, "read")
    imported = opened.read(progress)
    imported.source = record
    progress(1, 1, "read")
    write_import(imported, out_dir, max_context, progress)
    return out_dir


def locate(source: str | Path, progress: Progress) -> tuple[str, Path, str | None]:
    """(kind, the file or folder to read, the name it was asked by): SmolLM2 (fetched when not cached or not whole),
    a .gguf file, a Hugging Face folder, or a Hugging Face name found in its cache or, online, fetched (its config
    and tokenizer only: the weights follow once the config is known to fit)."""
    text = os.fspath(source)
    if text.lower() == SMOLLM2:
        return SMOLLM2, fetch_smollm2(progress), SMOLLM2_PACKAGE
    path = Path(text).expanduser()
    if path.is_file():
        if not is_gguf(path):
            raise ImportFailure("hub.not_gguf", "{path} is not a GGUF file; a Hugging Face model is imported from "
                                "its folder (config.json, *.safetensors, tokenizer.json)", path=path)
        return "gguf", path, None
    if path.is_dir():
        return "hf", path, None
    is_name = HF_NAME.fullmatch(text) is not None
    if is_name and (cached := cached_hf_snapshot(text)) is not None:
        return "hf", cached, text
    if looks_like_a_path(text):
        raise ImportFailure("hub.no_path", "{path} does not exist (a Hugging Face name is written organisation/model)",
                            path=path)
    if is_name:
        return "hf", hf_small_files(text, progress), text
    raise ImportFailure("hub.no_source", "{source} is neither smollm2, a .gguf file, a Hugging Face model folder nor "
                        "a Hugging Face model name (organisation/model)", source=text)


def looks_like_a_path(text: str) -> bool:
    """A mistyped path rather than a Hub name: it starts like a path (./ ../ / ~), or the folder it names first is
    here (checkpoints/smolm2)."""
    if text.startswith(("./", "../", "/", "~")):
        return True
    parent = Path(text).parent
    return parent != Path(".") and parent.is_dir()


def is_gguf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def open_source(kind: str, path: Path, max_context: int) -> Opened:
    return open_hf_folder(path, max_context) if kind == "hf" else open_gguf(path, max_context)


def check_fits(cfg: GPTConfig) -> None:
    """A model too large for this server's memory is refused from its config, before a weight is fetched or read."""
    try:
        check_loadable(cfg)
    except ConfigError as e:
        raise ImportFailure.of(e.message) from None


def source_hashes(kind: str, path: Path) -> dict[str, str]:
    """sha256 of each file the import reads, for meta.json: a GGUF file, or a folder's small files and the weight
    files its index names. (SmolLM2's was checked against the pinned one as it was fetched.)"""
    if kind == SMOLLM2:
        return {path.name: SMOLLM2_SHA256}
    if kind == "gguf":
        return {path.name: file_sha256(path)}
    files = [path / name for name in SMALL_FILES if (path / name).is_file()] + weight_files(path)
    return {file.name: file_sha256(file) for file in files}


def imported_meta(out_dir: Path) -> dict | None:
    """The meta.json of an import at out_dir, or None when out_dir holds none."""
    try:
        meta = json.loads((out_dir / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("imported") is True else None


def already_imported(out_dir: Path, record: dict, max_context: int) -> bool:
    meta = imported_meta(out_dir)
    return meta is not None and (out_dir / "model.safetensors").is_file() \
        and meta.get("source", {}).get("sha256") == record["sha256"] and meta.get("max_context") == max_context


def check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not (out_dir.is_dir() and not any(out_dir.iterdir())):
        raise ImportFailure("hub.out_exists", "{path} already exists and holds something else: choose another "
                            "folder for the imported model, or remove it first", path=out_dir)


def assembled(imported: Imported, path: Path):
    """The GPT over the imported tensors, built on the meta device so that no weight is drawn or copied."""
    model = meta_model(imported.cfg)
    tensors = dict(imported.tensors)
    if imported.cfg.tie_embeddings:
        tensors[TIED] = tensors["emb.weight"]
    try:
        check_shapes(path, tensors, {k: tuple(v.shape) for k, v in model.state_dict().items()})
    except CheckpointError as e:
        raise ImportFailure.of(e.message) from None
    model.load_state_dict(tensors, assign=True)
    return model


def import_meta(imported: Imported, max_context: int) -> dict:
    tokenizer = imported.tokenizer
    return {"step": 0, "status": "imported", "imported": True, "source": imported.source,
            "architecture": imported.architecture, "model_context": imported.model_context,
            "max_context": max_context, "chat_template": imported.chat_template, "bos_id": tokenizer.bos_id,
            "eos_id": tokenizer.eos_id, "params": imported.cfg.n_params, "tokenizer": tokenizer.describe()}


def write_import(imported: Imported, out_dir: Path, max_context: int, progress: Progress) -> None:
    """Write the checkpoint as a whole folder (gptcore.fs.write_folder): a failure at any point leaves nothing at
    out_dir."""
    model = assembled(imported, Path(imported.source.get("path", out_dir)))
    progress(0, 1, "write")
    with torch.no_grad():
        fs.write_folder(out_dir, lambda tmp: save_checkpoint(tmp, model, imported.tokenizer,
                                                             import_meta(imported, max_context)))
    progress(1, 1, "write")
