"""The Trace page's view in its address (explorer.links): the checkpoint, the text, the traced position, the stage
Step through shows (which names its layer), the head the open tab looks at (Attribution's head by source, the
receiver of Activation patching: L3H2 names layer and head) and the open tab, as
`?ckpt=starter&text=…&pos=35&stage=12&head=L3H2&tab=attribution`. What is at its default is left out (the text the
page starts with, the position it picks, the first stage, the head the tab picks, the first tab); a text longer than
LINK_CHARS keeps its beginning. A link whose checkpoint this server does not have opens the default one and says so.
"""
from __future__ import annotations

import streamlit as st

from gptcore.inspector import DEFAULT_TEXT

from . import links
from .links import HEAD, LINK_CHARS

VIEW = links.PageView("trace", "trace", ("ckpt", "text", "pos", "stage", "head", "tab"),
                      ("step", "lens", "attribution", "ablation", "patching"))
TABS = VIEW.tabs
LATER = "trace-link-later"  # a link's position, stage and head, set once the text and the model are known
HEAD_SHOWN = "trace-link-head"  # the head the open tab shows, when the reader chose it (None: the tab's own pick)
HEAD_ASKED = "trace-link-head-asked"  # a link's head, waiting for the tab that shows heads to take it
KEPT = "trace-link-view"  # (checkpoint, text, position, the page's start): what a fragment's rerun writes again
say_missing, tab_label, open_tab = VIEW.say_missing, VIEW.tab_label, VIEW.open_tab


def follow() -> None:
    """Before the page's widgets: what a link names (explorer.links.PageView.follow), its position, stage and head
    kept for when the text and the model are known."""
    found = VIEW.follow()
    if found is not None:
        st.session_state[LATER] = (found.get("pos"), found.get("stage"), found.get("head"))
        st.session_state.pop("trace-position", None)  # (the link's position, or the page's own pick for its text)


def position_stage_and_head(n_tokens: int, n_layer: int, n_head: int) -> None:
    """A link's position, stage and head once the page knows the text's length and the model's shape; a value
    outside them is left at the page's own choice. (The stage is checked against the pass when it is drawn.)"""
    position, stage, head = st.session_state.pop(LATER, (None, None, None))
    if position is not None and position.isdigit() and int(position) < n_tokens:
        st.session_state["trace-position"] = int(position)
    if stage is not None and stage.isdigit() and int(stage) >= 1:
        st.session_state["trace-stage"] = int(stage) - 1
    if head is not None and (match := HEAD.fullmatch(head)) and int(match[1]) < n_layer and int(match[2]) < n_head:
        st.session_state[HEAD_ASKED] = head


def asked_head() -> str | None:
    """The head a link named, once: the tab that shows heads takes it."""
    return st.session_state.pop(HEAD_ASKED, None)


def keep(name: str, text: str, position: int, start: int) -> None:
    """Write the view into the address, each value only where it differs from where the page starts; kept, so that
    a fragment that changes a stage or a head writes it again (keep_again)."""
    st.session_state[KEPT] = name, text, position, start
    tab = open_tab()
    stage = st.session_state.get("trace-stage", 0)
    links.keep(VIEW.page, {"ckpt": name, "text": None if text == DEFAULT_TEXT else text[:LINK_CHARS],
                           "pos": None if position == start else str(position),
                           "stage": str(stage + 1) if tab == "step" and stage else None,
                           "head": st.session_state.get(HEAD_SHOWN) if tab in ("attribution", "patching") else None,
                           "tab": None if tab == TABS[0] else tab})


def keep_again() -> None:
    """After a fragment's own rerun (a stage stepped, a receiver chosen): the address with what it changed."""
    if KEPT in st.session_state:
        keep(*st.session_state[KEPT])
