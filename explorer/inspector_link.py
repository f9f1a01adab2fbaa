"""The Inspect page's view in its address (explorer.links): the checkpoint, the text, the position, the head and
the open tab, as `?ckpt=starter&text=…&pos=35&head=L3H2&tab=predictions`. What is at its default is left out (the
text the page starts with, the position it picks, the head that copies best, the first tab); a text longer than
LINK_CHARS keeps its beginning. A link whose checkpoint this server does not have opens the default one and says so.
"""
from __future__ import annotations

import streamlit as st

from gptcore.inspector import DEFAULT_TEXT

from . import links
from .links import HEAD, LINK_CHARS

VIEW = links.PageView("inspect", "inspector", ("ckpt", "text", "pos", "head", "tab"),
                      ("attention", "predictions", "finder", "compare", "training"))
TABS = VIEW.tabs
LATER = "inspect-link-later"  # a link's position and head, set once the text's forward pass is known
say_missing, tab_label, open_tab = VIEW.say_missing, VIEW.tab_label, VIEW.open_tab


def follow() -> None:
    """Before the page's widgets: what a link names (explorer.links.PageView.follow), its position and head kept for
    when the text's forward pass is known."""
    found = VIEW.follow()
    if found is not None:
        st.session_state[LATER] = (found.get("pos"), found.get("head"))


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


def keep(name: str, text: str, position: int, start: int, head: tuple[int, int], first_head: tuple[int, int]) -> None:
    """Write the view into the address, each value only where it differs from where the page starts."""
    tab = open_tab()
    links.keep(VIEW.page, {"ckpt": name, "text": None if text == DEFAULT_TEXT else text[:LINK_CHARS],
                           "pos": None if position == start else str(position),
                           "head": None if head == first_head else f"L{head[0]}H{head[1]}",
                                "tab": None if tab == TABS[0] else tab})
