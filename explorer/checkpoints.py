"""Opening a saved checkpoint on the Inspect and Trace pages: the picker (runs, and imported real models marked as
such, with a panel to import one: explorer/model_picker.py), the device, one cached load per file version and
device for the whole server (a class opening SmolLM2 holds its 540 MB of weights once), and a sentence (never a
traceback) for a checkpoint that cannot be read.

Folder names need not be UTF-8 (a folder copied from another system): the picker shows them escaped and the
cache is keyed by the path's bytes, which hash whatever the name is.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
import torch

from gptcore import checkpoint as ckpt
from gptcore.config import TrainConfig, settings
from gptcore.device import DeviceError, choices_here, describe, resolve
from gptcore.errors import UserError, printable
from gptcore.folders import CheckpointError, list_checkpoints, shown_name
from gptcore.model import GPT
from gptcore.tokenizer import Tokenizer

from . import model_picker
from .i18n import choice, help_text, label, say, t
from .ui import ACTIVE_CHECKPOINT, checkpoint_names, default_checkpoint

KEEP = "session"  # persist_state of the device choice: kept across pages
WeightsKey = tuple[bytes, float, str]  # (the weights file's path as bytes, its mtime, the device)
UNREADABLE = (CheckpointError, OSError)  # a damaged, missing or unreadable file: said, not raised


@st.cache_resource(max_entries=16, show_spinner=False)
def load_cached(path: bytes, mtime: float, where: str) -> tuple[GPT, Tokenizer, int]:
    """(model on the device `where`, tokenizer, step); mtime in the key reloads a file a new run overwrote."""
    model, tokenizer, step = ckpt.load_weights(Path(os.fsdecode(path)))
    return model.to(where), tokenizer, step


def weights_key(path: Path, device: torch.device | str) -> WeightsKey:
    return os.fsencode(path), path.stat().st_mtime, str(device)


def load(path: Path, device: torch.device | str) -> tuple[WeightsKey, GPT, Tokenizer, int]:
    """A weights file's cache key and what it holds; raises one of UNREADABLE."""
    key = weights_key(path, device)
    return (key, *load_cached(*key))


def reason(error: Exception) -> str:
    """Why a file could not be read, in the reader's language where the library worded it."""
    return say(error) if isinstance(error, UserError) else printable(error)  # (an OSError names the path)


def checkpoint_meta(folder: Path) -> dict:
    """meta.json's checked values (gptcore.checkpoint.read_meta), read once per version of the file; read only:
    the dict is shared by every session."""
    try:
        version = (folder / "meta.json").stat().st_mtime_ns
    except OSError:
        version = 0
    return _meta(os.fsencode(folder), version)


@st.cache_resource(max_entries=64, show_spinner=False)
def _meta(folder: bytes, version: int) -> dict:
    return ckpt.read_meta(Path(os.fsdecode(folder)))


def is_imported(folder: Path) -> bool:
    """Was this checkpoint imported (a real model converted by gptcore.hub) rather than trained here?"""
    return checkpoint_meta(folder).get("imported") is True


@dataclass(frozen=True)
class Opened:
    """The checkpoint a page works on."""
    folder: Path
    name: str  # as shown (bytes that are not UTF-8 escaped): also its name in files the page offers
    key: WeightsKey
    model: GPT
    tokenizer: Tokenizer
    step: int

    @property
    def device(self) -> str:
        return self.key[2]

    @property
    def imported(self) -> bool:
        return is_imported(self.folder)

    @property
    def tokens(self) -> bool:
        """Does the model read tokens (a BPE, a real model's tokenizer) rather than characters?"""
        return self.tokenizer.kind != "char"


def chosen_device(prefix: str) -> torch.device:
    """The device the models run on: a choice where this machine has an accelerator, the CPU otherwise."""
    device_setting = settings(TrainConfig)["device"]
    if len(choices_here()) > 2:
        st.selectbox(label(device_setting), choices_here(), key=f"{prefix}-device", persist_state=KEEP,
                     format_func={v: choice(device_setting, v) for v in choices_here()}.__getitem__,
                     help=help_text(device_setting))
    try:
        device = resolve(st.session_state.get(f"{prefix}-device", "cpu"))
    except DeviceError as e:  # a device this machine offered and no longer has
        st.error(say(e))
        st.stop()
    st.caption(t("device.inspects_on", device=describe(device)))
    return device


def choose_checkpoint(prefix: str, name: str) -> bool:
    """Make `name` the checkpoint the page with this widget prefix opens (and the session's active one), before the
    page draws its picker (a link names it); False when no checkpoint has that name."""
    if name not in checkpoint_names():
        return False
    st.session_state[f"{prefix}-checkpoint"] = st.session_state[ACTIVE_CHECKPOINT] = name
    return True


def open_checkpoint(catalog: str, prefix: str) -> Opened:
    """The checkpoint picker and the device choice, then the chosen checkpoint loaded (once per file version).

    Stops the page with a sentence when there is no checkpoint or the chosen one cannot be read. The texts are
    the catalog's `no_checkpoint`, `checkpoint`, `checkpoint_help` and `cannot_load`; widget keys start with prefix.
    Imported models are marked in the list, and a panel below imports one (model_picker).
    """
    folders = list_checkpoints()
    if not folders:
        st.info(t(f"{catalog}.no_checkpoint"))
        model_picker.real_model_panel(prefix)
        st.stop()
    names = [shown_name(p) for p in folders]
    picker = f"{prefix}-checkpoint"
    if (imported := st.session_state.pop(model_picker.PENDING, None)) in names:  # just imported: open it
        st.session_state[picker] = st.session_state[ACTIVE_CHECKPOINT] = imported
    if st.session_state.get(picker) not in names:  # first visit, or the checkpoint was deleted or renamed
        st.session_state[picker] = default_checkpoint(names)

    def remember_checkpoint() -> None:  # the sidebar and the other pages open the same one
        st.session_state[ACTIVE_CHECKPOINT] = st.session_state[picker]

    marked = {name: t("models.imported_mark", name=name) if is_imported(folder) else name
              for name, folder in zip(names, folders)}
    name = st.selectbox(t(f"{catalog}.checkpoint"), names, key=picker, on_change=remember_checkpoint,
                        format_func=marked.__getitem__, help=t(f"{catalog}.checkpoint_help"))
    folder = folders[names.index(name)]
    device = chosen_device(prefix)
    model_picker.real_model_panel(prefix)
    try:
        with st.spinner(t("models.opening", name=name)):  # (shown only when it takes a while: a first opening)
            key, model, tokenizer, step = load(folder / "model.safetensors", device)
    except UNREADABLE as e:
        st.error(t(f"{catalog}.cannot_load", name=name, error=reason(e)))
        st.stop()
    return Opened(folder, name, key, model, tokenizer, step)
