"""Library tables as a reader sees them: headers from the page's catalog, library Messages in the tab's language.

The demos in gptcore return DataFrames whose columns are stable English names (tests and the command line read
them) and whose word-valued cells are `gptcore.errors.Message`s. A page shows such a frame through
`shown_table(frame, "<page>")`: each column `c` is headed by the catalog entry `<page>.columns.<c>` and each
Message cell is rendered with `say`, so numbers keep their types and formats.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st
from pandas.io.formats.style import Styler

from gptcore.errors import Message

from .i18n import say, t


def column_name(part: str, column: str) -> str:
    return t(f"{part}.columns.{column}")


def shown_table(frame: pd.DataFrame, part: str, formats: dict | None = None,
                precision: int | None = None) -> pd.DataFrame | Styler:
    """`frame` translated for display; with `formats` ({column: format} by the library's column names) or a
    `precision` for every number, a Styler that formats it (an empty cell of a formatted column as a dash)."""
    shown = frame.copy()
    for column in shown.select_dtypes(include="object").columns:
        shown[column] = shown[column].map(lambda v: say(v) if isinstance(v, Message) else v)
    shown = shown.rename(columns=lambda c: column_name(part, c))
    if formats is None and precision is None:
        return shown
    style = shown.style
    if precision is not None:  # first: a format without a subset applies to every cell
        style = style.format(precision=precision)
    if formats:
        style = style.format({column_name(part, c): f for c, f in formats.items()}, na_rep="—")
    return style


def pinned(part: str, column: str) -> dict:
    """A dataframe's column_config that keeps a table's key column in view while its other columns scroll sideways
    (a projector's narrow page)."""
    return {column_name(part, column): st.column_config.Column(pinned=True)}
