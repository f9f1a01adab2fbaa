"""DataFrames whose cells may be library Messages (translatable labels), kept as Messages.

pandas stores a column of text as its own string type, which keeps each cell's English and drops the rest of a
`gptcore.errors.Message` — its key, and with it the app's translation. Columns holding Messages are therefore
stored as plain objects.
"""
from __future__ import annotations

import pandas as pd

from ..errors import Message


def message_frame(rows: list, columns: list[str] | None = None) -> pd.DataFrame:
    """pd.DataFrame(rows, columns=columns) (rows are dicts, or tuples in the order of columns), with every column
    that holds a Message kept as objects."""
    table = pd.DataFrame(rows, columns=columns)
    for i, column in enumerate(table.columns):
        values = [row[column] if isinstance(row, dict) else row[i] for row in rows]
        if any(isinstance(v, Message) for v in values):
            table[column] = pd.Series(values, index=table.index, dtype=object)
    return table


def messages(values, index=None) -> pd.Series:
    """A column of labels (some of them Messages) as objects."""
    return pd.Series(list(values), index=index, dtype=object)
