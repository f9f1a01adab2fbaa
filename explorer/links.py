"""A page's view in the URL, so that one link opens exactly that view: a teacher copies the address and hands it
to a class.

A page names its fields, one short URL parameter each, written as a reader can read it
(`?ckpt=starter&text=The+little+dog…&pos=35&head=L3H2&tab=predictions`). After each run the page writes its view
(`keep`), leaving out what is at its default, so a link stays short. Before the page draws its widgets it asks
whether the URL holds fields this session did not write (`arrived`): a link opened in a new tab, a reload, an
address edited by hand. Only then does it set its widgets from them, so a reader's own clicks are never undone by
a URL the page wrote a moment before.
"""
from __future__ import annotations

import streamlit as st


def arrived(page: str, names: tuple[str, ...]) -> dict[str, str] | None:
    """The page's fields in the URL, name → value, when this session did not write them itself; else None."""
    found = {name: st.query_params[name] for name in names if name in st.query_params}
    if not found or found == st.session_state.get(f"{page}-link"):
        return None
    return found


def keep(page: str, values: dict[str, str | None]) -> None:
    """Write the view into the URL: each field's value, or no parameter where the value is None (its default)."""
    for name, value in values.items():
        if value is None:
            if name in st.query_params:
                del st.query_params[name]
        elif st.query_params.get(name) != value:
            st.query_params[name] = value
    st.session_state[f"{page}-link"] = {name: value for name, value in values.items() if value is not None}
