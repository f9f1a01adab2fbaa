"""The app's two languages: TOML catalogs with named keys, picked per browser tab.

Each language is a folder, locales/<lang>/. Every `<part>.toml` in it holds the entries of one page or shared
part under that name: `t("rope.title")` is the key `title` of locales/<lang>/rope.toml; nested tables and
subfolders nest the key (`t("train.errors.no_corpus")`; locales/<lang>/messages/data.toml holds
`messages.data.…`). Entries are `str.format` templates with named placeholders: `t("train.params", n=810_624)`
for `params = "{n:,} parameters"`. Long prose may live as Markdown, locales/<lang>/<name>.md, read with
`prose(name)`.

TOML, because it holds long multi-line prose readably with comments beside it for translators, needs no build
step (gettext's .mo files do) and is read by Python's standard library. Two kinds of English are not written in
the English catalog, because they are written once in the library, where the command line reads them too:
- the config settings' labels, help and choice names (gptcore.config's field tables), as `settings.<field>.*`;
- the training presets' names and descriptions (gptcore.recipes), as `training.recipes.<preset>.*`;
- the messages of gptcore's errors (gptcore.errors.Message), as `messages.<key>`.
The Chinese catalog translates both: locales/zh/settings.toml, and locales/zh/messages/<first part of the
key>.toml (the key `data.too_short` lives in messages/data.toml as `too_short`).

The language belongs to the tab: `?lang=zh` in the URL wins (so a teacher can hand out a link), then the
choice made in this tab, then the browser's language (any zh* → 中文), then English. It is kept in the
session's state, never installed process-wide, so two tabs in two languages never see each other's.
"""
from __future__ import annotations

import string
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path

import streamlit as st
from streamlit.errors import StreamlitAPIException

from gptcore.config import GPTConfig, Setting, TrainConfig, settings
from gptcore.errors import Message, UserError, shown
from gptcore.recipes import RECIPES

LOCALES = Path(__file__).resolve().parent.parent / "locales"
LANGUAGES = {"en": "English", "zh": "中文"}
DEFAULT = "en"
STATE_KEY = "lang"


# ---------------------------------------------------------------- catalogs

@cache
def catalog(lang: str) -> dict[str, str]:
    """Every entry of a language as a flat {"part.key": text} dict (English: with the library's settings)."""
    entries = dict(settings_entries()) if lang == "en" else {}
    folder = LOCALES / lang
    for path in sorted(folder.rglob("*.toml")):
        prefix = ".".join(path.relative_to(folder).with_suffix("").parts) + "."
        with open(path, "rb") as f:
            entries.update(_flatten(tomllib.load(f), prefix))
    return entries


def _flatten(table: dict, prefix: str = ""):
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def settings_entries():
    """The English of every config field, from gptcore.config's field tables, and of every training preset."""
    for cls in (GPTConfig, TrainConfig):
        for s in settings(cls).values():
            yield f"settings.{s.name}.label", s.label
            yield f"settings.{s.name}.help", s.help
            for value, name in (s.choices or {}).items():
                yield f"settings.{s.name}.choices.{value}", name
    for key, recipe in RECIPES.items():
        yield f"training.recipes.{key}.name", recipe.name
        yield f"training.recipes.{key}.description", recipe.description


def placeholders(text: str) -> set[str]:
    """The named fields of a str.format template: {'n', 'name'} for "{n:,} runs of {name}"."""
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}


# ---------------------------------------------------------------- this tab's language

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
    """The entry `key` in this tab's language, formatted with `values` (nested Messages are translated too).

    A key missing from the catalog is a bug, so it raises KeyError rather than showing the key to a learner.
    """
    text = catalog(language())[key]
    return text.format(**{k: say(v) if isinstance(v, Message) else shown(v) for k, v in values.items()}) if values \
        else text


def scoped(part: str) -> Callable[..., str]:
    """t() for the entries of one part: with `tr = scoped("rope")`, `tr("grid.title")` is `t("rope.grid.title")`."""
    def tr(key: str, **values) -> str:
        return t(f"{part}.{key}", **values)
    return tr


def say(item: Message | UserError | str) -> str:
    """A library Message (or a UserError's) in this tab's language; plain text passes through.

    A Message read back from a file (a run's meta.json: stored) is data, written by another version or by anyone:
    it is shown in its own English when this catalog has no entry for its key, or one that asks for other values.
    A Message the code builds must be in the catalog (tests/test_i18n.py checks), so for it a missing key is a bug.
    """
    if isinstance(item, UserError):
        item = item.message
    if not isinstance(item, Message):
        return str(item)
    if language() == "en" or item.stored and not translatable(item):
        return str(item)
    return t(f"messages.{item.key}", **item.params)


def translatable(item: Message) -> bool:
    """Does this tab's catalog have an entry for the message that its values fill, as they filled its own
    template: the same names, each with no format spec or one the template gave it too?"""
    entry = catalog(language()).get(f"messages.{item.key}")
    if entry is None:
        return False
    own = {(name, spec) for _, name, spec, _ in string.Formatter().parse(item.template) if name}
    wanted = {(name, spec) for _, name, spec, _ in string.Formatter().parse(entry) if name}
    return {name for name, _ in wanted} == {name for name, _ in own} and \
        all(not spec or (name, spec) in own for name, spec in wanted)


def prose(name: str) -> str:
    """A long Markdown text of this tab's language: locales/<lang>/<name>.md."""
    return (LOCALES / language() / f"{name}.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------- settings

def label(s: Setting) -> str:
    return t(f"settings.{s.name}.label")


def help_text(s: Setting) -> str:
    return t(f"settings.{s.name}.help")


def choice(s: Setting, value) -> str:
    return t(f"settings.{s.name}.choices.{value}") if value in (s.choices or {}) else str(value)


# ---------------------------------------------------------------- the switch

def keep_widget_values() -> None:
    """Set every kept value again from Python, so the page redraws with the same choices in the new language.

    The browser holds a select box's or radio's choice as the text it shows and sends that text back; under the
    new language's names it would match nothing and fall back to the default. A value set from Python wins
    over the browser's and is shown under its new name. Only choices are set: a button's True/False, an upload or
    a table's selection cannot be set (the widget would refuse to draw), and a toggle's True/False reads the same
    in any language.
    """
    for key in list(st.session_state.keys()):
        if key == "lang-switch" or not _is_choice(st.session_state[key]):
            continue
        try:
            st.session_state[key] = st.session_state[key]
        except StreamlitAPIException:
            pass


def _is_choice(value) -> bool:
    """A value a select box, radio, slider, segmented control, multiselect or number input holds."""
    if isinstance(value, (list, tuple)):
        return all(_is_choice(v) for v in value)
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def language_switch() -> None:
    """English / 中文 in the sidebar. The choice goes into the URL, so a reload or a shared link keeps it."""
    current = language()

    def switch():
        chosen = st.session_state["lang-switch"]
        if chosen in LANGUAGES:
            keep_widget_values()
            st.session_state[STATE_KEY] = chosen
            st.query_params["lang"] = chosen

    st.session_state["lang-switch"] = current
    st.segmented_control("Language / 语言", list(LANGUAGES), format_func=LANGUAGES.get, key="lang-switch",
                         on_change=switch, label_visibility="collapsed")
    if st.query_params.get("lang") != current:
        st.query_params["lang"] = current
