"""The model shipped with the repository, as the concept pages use it: loaded once per server and file version."""
from __future__ import annotations

import streamlit as st

from gptcore import checkpoint as ckpt
from gptcore.folders import SHIPPED, checkpoint_dir

from .i18n import t


@st.cache_resource(max_entries=2, show_spinner=False)
def _load(folder: str, mtime: float) -> ckpt.Checkpoint:
    return ckpt.load_checkpoint(folder)


def shipped_version() -> tuple[str, float] | None:
    """(folder, its weights' mtime): a cache key that changes when the shipped weights do; None when missing."""
    folder = checkpoint_dir(SHIPPED)
    weights = folder / "model.safetensors"
    return (str(folder), weights.stat().st_mtime) if weights.is_file() else None


def shipped_checkpoint() -> ckpt.Checkpoint | None:
    """The shipped checkpoint, or None when its folder is missing (a CheckpointError when it is unreadable)."""
    version = shipped_version()
    return None if version is None else _load(*version)


def shipped_or_notice() -> ckpt.Checkpoint | None:
    """The shipped checkpoint for a page's section that reads it, or None after saying on the page why not (missing
    or unreadable), so the section can be left out."""
    try:
        shipped = shipped_checkpoint()
    except ckpt.CheckpointError as e:
        st.error(t("shipped.unreadable", reason=e.message))
        return None
    if shipped is None:
        st.info(t("shipped.missing"))
    return shipped
