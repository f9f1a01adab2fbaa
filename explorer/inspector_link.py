"""The Inspect page's view in its address (explorer.links): the checkpoint, the text, the position, the head and
the open tab, as `?ckpt=starter&text=…&pos=35&head=L3H2&tab=predictions`. What is at its default is left out (the
text the page starts with, the position it picks, the head that copies best, the first tab); a text longer than
LINK_CHARS keeps its beginning. A link whose checkpoint this server does not have opens the default one and says so.
"""
from __future__ import annotations

import re

import streamlit as st

from gptcore.inspector import DEFAULT_TEXT

from . import links
from .checkpoints import Opened, choose_checkpoint
from .i18n import LANGUAGES, catalog, t

PAGE = "inspect"
FIELDS = ("ckpt", "text", "pos", "head", "tab")
TABS = ("attention", "predictions", "finder", "compare", "training")
LINK_CHARS = 500  # the most characters of the text a link keeps
HEAD = re.compile(r"L(\d+)H(\d+)")
LATER = "inspect-link-later"  # a link's position and head, set once the text's forward pass is known
MISSING = "inspect-link-missing"  # (the checkpoint a link asked for and this server lacks, the one opened instead)
OPEN = "inspect-open-tab"  # the open tab's name, kept while the reader is on another page (the widget's is not)


def follow() -> None:
    """Before the page's widgets: when the address comes from a link, open what it names (what it leaves out at its
    default)."""
    found = links.arrived(PAGE, FIELDS)
    if found is None:
        return
    state = st.session_state
    if "ckpt" in found and not choose_checkpoint(PAGE, found["ckpt"]):
        state[MISSING] = (found["ckpt"], None)
    state["inspect-text"] = found.get("text", DEFAULT_TEXT)
    state[OPEN] = found.get("tab") if found.get("tab") in TABS else TABS[0]
    state["inspect-tab"] = tab_label(state[OPEN])
    state[LATER] = (found.get("pos"), found.get("head"))


def say_missing(opened: Opened) -> None:
    """The sentence for a link whose checkpoint is not here, for as long as the one opened instead stays open."""
    missing = st.session_state.get(MISSING)
    if missing is None:
        return
    name, shown = missing
    if shown is None:
        st.session_state[MISSING] = name, shown = name, opened.name
    if opened.name == shown:
        st.warning(t("inspector.link.missing_checkpoint", name=name, shown=shown))
    else:
        del st.session_state[MISSING]


def position_and_head(n_tokens: int, n_layer: int, n_head: int, query_key: str) -> None:
    """A link's position and head, once the page knows the text's length and the model's shape; a value outside
    them is left at the page's own choice."""
    position, head = st.session_state.pop(LATER, (None, None))
    if position is not None and position.isdigit() and int(position) < n_tokens:
        st.session_state[query_key] = int(position)
    if head is not None and (match := HEAD.fullmatch(head)):
        layer, index = int(match[1]), int(match[2])
        if layer < n_layer and index < n_head:
            st.session_state["inspect-layer"], st.session_state["inspect-head"] = layer, index


def tab_label(tab: str) -> str:
    return t(f"inspector.tabs.{tab}")


def open_tab() -> str:
    """The open tab's name: from the tabs widget, which holds its label in the language it was drawn in, or when
    the page comes back from another, the one it had."""
    label = st.session_state.get("inspect-tab")
    return next((tab for tab in TABS for lang in LANGUAGES if catalog(lang)[f"inspector.tabs.{tab}"] == label),
                st.session_state.get(OPEN, TABS[0]))


def keep(name: str, text: str, position: int, start: int, head: tuple[int, int], first_head: tuple[int, int]) -> None:
    """Write the view into the address, each value only where it differs from where the page starts."""
    tab = open_tab()
    links.keep(PAGE, {"ckpt": name, "text": None if text == DEFAULT_TEXT else text[:LINK_CHARS],
                      "pos": None if position == start else str(position),
                      "head": None if head == first_head else f"L{head[0]}H{head[1]}",
                      "tab": None if tab == TABS[0] else tab})
