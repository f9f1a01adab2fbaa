"""The app's two languages: one TOML catalog per language, picked per browser tab.

Catalogs live in locales/<lang>.toml, one table per page or part ([train], [inspect], [sidebar], …), each
entry a named key with str.format placeholders: `t("train.start")`, `t("train.params", n=810_624)`.
TOML because it holds long multi-line prose readably, comments beside entries for translators, and Python
reads it with the standard library. Long prose may also live in locales/<lang>/<name>.md (`prose(name)`).

The language belongs to the tab: `?lang=zh` in the URL wins (so a teacher can hand out a link), then the
choice made in this tab, then the browser's language (any zh* → 中文), then English. It is kept in this
session's state, never installed process-wide, so two tabs in two languages never see each other's.
"""
from __future__ import annotations

import string
import tomllib
from functools import cache
from pathlib import Path

import streamlit as st

LOCALES = Path(__file__).resolve().parent.parent / "locales"
LANGUAGES = {"en": "English", "zh": "中文"}
DEFAULT = "en"
STATE_KEY = "lang"


@cache
def catalog(lang: str) -> dict[str, str]:
    """Every entry of a language as a flat {"table.key": text} dict."""
    with open(LOCALES / f"{lang}.toml", "rb") as f:
        return dict(_flatten(tomllib.load(f)))


def _flatten(table: dict, prefix: str = ""):
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def placeholders(text: str) -> set[str]:
    """The named fields of a str.format template: {'n', 'name'} for "{n:,} runs of {name}"."""
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}


def language() -> str:
    """This tab's language (see the module docstring for the order of precedence)."""
    wanted = st.query_params.get("lang")
    if wanted in LANGUAGES:
        st.session_state[STATE_KEY] = wanted
    if st.session_state.get(STATE_KEY) not in LANGUAGES:
        locale = (st.context.locale or "").lower()
        st.session_state[STATE_KEY] = "zh" if locale.startswith("zh") else DEFAULT
    return st.session_state[STATE_KEY]


def t(key: str, **values) -> str:
    """The entry `key` in this tab's language, formatted with `values`.

    A key missing from the catalog is a bug, so it raises KeyError rather than showing the key to a learner.
    """
    text = catalog(language())[key]
    return text.format(**values) if values else text


def prose(name: str) -> str:
    """A long Markdown text of this tab's language: locales/<lang>/<name>.md."""
    return (LOCALES / language() / f"{name}.md").read_text(encoding="utf-8")


def language_switch() -> None:
    """English / 中文 in the sidebar. The choice goes into the URL, so a reload or a shared link keeps it."""
    current = language()

    def switch():
        chosen = st.session_state["lang-switch"]
        if chosen in LANGUAGES:
            st.session_state[STATE_KEY] = chosen
            st.query_params["lang"] = chosen

    st.session_state["lang-switch"] = current
    st.segmented_control("Language / 语言", list(LANGUAGES), format_func=LANGUAGES.get, key="lang-switch",
                         on_change=switch, label_visibility="collapsed")
    if st.query_params.get("lang") != current:
        st.query_params["lang"] = current
