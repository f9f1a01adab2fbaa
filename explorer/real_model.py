"""The "In a real model" panel of the concept pages: a published model's own numbers beside the tutorial's, in a
bordered box that looks the same on every page (its words: locales/<lang>/real_model.toml; its numbers:
gptcore.demos.real_models)."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
import streamlit as st

from gptcore.demos import real_models as rm
from gptcore.folders import list_checkpoints, shown_name
from gptcore.published import PUBLISHED

from .i18n import say, t
from .tables import column_name, shown_table

PERCENT = "{:.1%}"
# a model's name on one line (a table's cells would break SmolLM2-135M at its hyphen)
KEEP_NAMES_WHOLE = [{"selector": "th.row_heading, th.row_heading *", "props": "white-space: nowrap"}]


def exponent(value: float) -> str:
    """1e-5 rather than Python's 1e-05: an ε as papers and config files write it."""
    return f"{value:g}".replace("e-0", "e-").replace("e+0", "e+")


def check_mark(value: bool) -> str:
    return "✓" if value else "—"


@contextmanager
def real_model_panel(key: str) -> Iterator[None]:
    """A bordered box headed "In a real model", its sources under it; the page writes its numbers inside."""
    with st.container(border=True, key=key):
        st.markdown(f"**:material/travel_explore: {t('real_model.title')}**")
        yield
        links = ", ".join(f"[{m.name}]({m.source})" for m in PUBLISHED.values())
        st.caption(t("real_model.sources", models=links))


def models_table(frame: pd.DataFrame, formats: dict) -> None:
    """One row per model, headed from the shared catalog. A static table, whose headers wrap: it fits the width of
    the page at 1024 px, where a scrolling grid would hide its last columns."""
    rows = frame.assign(model=[say(name) for name in frame["model"]]).set_index("model").rename_axis(None)
    st.table(shown_table(rows, "real_model", formats).set_table_styles(KEEP_NAMES_WHOLE))


def side_by_side_table(frame: pd.DataFrame, formats: dict) -> None:
    """One column per model and one row per quantity, each row in its own format."""
    def formatted(column: str) -> pd.Series:
        form = formats.get(column, "{}")
        return frame[column].map(form if callable(form) else form.format)

    shown = pd.DataFrame({column_name("real_model", c): formatted(c) for c in frame.columns if c != "model"})
    shown.index = [say(name) for name in frame["model"]]
    # numbers as text, aligned as numbers (a table aligns text left, in the cell's own style)
    st.table(shown.T.style.set_table_styles([{"selector": "td", "props": "text-align: right !important"}]))


@st.cache_data(ttl=60, show_spinner=False)
def converted_counts() -> tuple[str, dict] | None:
    """(folder name, counts from its weights) of a converted SmolLM2 under checkpoints/, or None; looked up at most
    once a minute, since an import may finish while the app runs."""
    found = rm.converted_copy(list_checkpoints())
    return None if found is None else (shown_name(found[0]), found[1])
