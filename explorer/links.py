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

import inspect
import math
import re
from dataclasses import dataclass
from typing import Any

import streamlit as st

from gptcore.inspector import DEFAULT_TEXT

from .checkpoints import choose_checkpoint
from .i18n import LANGUAGES, catalog, t


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


# ---------------------------------------------------------------- a lab page's view (Inspect, Trace)

LINK_CHARS = 500  # the most characters of a text a link keeps (its beginning)
HEAD = re.compile(r"L(\d+)H(\d+)")  # a head in a link: L3H2


@dataclass(frozen=True)
class PageView:
    """What Inspect and Trace share in their links: a checkpoint, a text, a tab. `page` prefixes the page's session
    keys (`inspect-text`, `inspect-tab`), `part` its catalog entries (`inspector.tabs.attention`)."""
    page: str
    part: str
    fields: tuple[str, ...]
    tabs: tuple[str, ...]

    @property
    def missing(self) -> str:  # (the checkpoint a link asked for and this server lacks, the one opened instead)
        return f"{self.page}-link-missing"

    @property
    def opened_tab(self) -> str:  # the open tab's name, kept while the reader is on another page (the widget's is not)
        return f"{self.page}-open-tab"

    def follow(self) -> dict[str, str] | None:
        """Before the page's widgets: when the address comes from a link, open its checkpoint, text and tab, and
        give back what it names (None when it is no link); what a link leaves out is at its default."""
        found = arrived(self.page, self.fields)
        if found is None:
            return None
        state = st.session_state
        if "ckpt" in found and not choose_checkpoint(self.page, found["ckpt"]):
            state[self.missing] = (found["ckpt"], None)
        state[f"{self.page}-text"] = found.get("text", DEFAULT_TEXT)
        state[self.opened_tab] = found.get("tab") if found.get("tab") in self.tabs else self.tabs[0]
        state[f"{self.page}-tab"] = self.tab_label(state[self.opened_tab])
        return found

    def say_missing(self, opened) -> None:
        """The sentence for a link whose checkpoint is not here, for as long as the one opened instead stays open."""
        missing = st.session_state.get(self.missing)
        if missing is None:
            return
        name, shown = missing
        if shown is None:
            st.session_state[self.missing] = name, shown = name, opened.name
        if opened.name == shown:
            st.warning(t(f"{self.part}.link.missing_checkpoint", name=name, shown=shown))
        else:
            del st.session_state[self.missing]

    def tab_label(self, tab: str) -> str:
        return t(f"{self.part}.tabs.{tab}")

    def open_tab(self) -> str:
        """The open tab's name: from the tabs widget, which holds its label in the language it was drawn in, or
        when the page comes back from another, the one it had."""
        label = st.session_state.get(f"{self.page}-tab")
        shown = (tab for tab in self.tabs for lang in LANGUAGES if catalog(lang)[f"{self.part}.tabs.{tab}"] == label)
        return next(shown, st.session_state.get(self.opened_tab, self.tabs[0]))


# ---------------------------------------------------------------- a concept page's controls

SEEDED = "links-seeded"  # the keys of the linked widgets this session has already set from the URL


@dataclass
class Control:
    """What a widget accepts, read from the arguments it is drawn with: its choices or its range, and its default."""
    default: Any
    options: list | None = None  # a choice widget's options; their str() is what the URL holds
    many: bool = False  # a multiselect: the URL repeats the parameter, once a choice
    low: Any = None
    high: Any = None
    step: Any = None
    max_chars: int | None = None

    @classmethod
    def of(cls, widget, args: tuple, kwargs: dict) -> Control:
        bound = inspect.signature(widget).bind(*args, **kwargs)
        step = bound.arguments.get("step")  # (only a step given is checked: a number input's own is 0.01)
        bound.apply_defaults()
        a = bound.arguments
        if "options" in a:
            options = list(a["options"])
            if "index" in a:  # selectbox, radio
                return cls(None if a["index"] is None else options[a["index"]], options)
            if "value" in a:  # select_slider
                return cls(options[0] if a["value"] is None else a["value"], options)
            if a.get("selection_mode", "multi") == "multi":  # multiselect, a multi-select segmented control
                return cls(list(a["default"] or []), options, many=True)
            return cls(a["default"], options)  # segmented control
        if "min_value" in a:  # slider, number input
            default = a["min_value"] if a["value"] in (None, "min") else a["value"]
            return cls(default, low=a["min_value"], high=a["max_value"], step=step)
        if "max_chars" in a:  # text input
            return cls(a["value"] or "", max_chars=a["max_chars"])
        return cls(bool(a["value"]))  # toggle, checkbox

    def parse(self, texts: list[str]):
        """The value the URL's texts name, or None where they name none this widget accepts."""
        if not texts:
            return None
        if self.options is not None:
            by_name = {str(option): option for option in self.options}
            if self.many:
                names = [] if texts == [""] else texts
                ok = len(set(names)) == len(names) and all(name in by_name for name in names)
                return [by_name[name] for name in names] if ok else None
            return by_name.get(texts[0]) if len(texts) == 1 else None
        text = texts[0]
        if isinstance(self.default, bool):
            return {"true": True, "false": False}.get(text)
        if isinstance(self.default, str):
            return text if self.max_chars is None or len(text) <= self.max_chars else None
        return self._number(text)

    def _number(self, text: str):
        kind = float if float in {type(v) for v in (self.default, self.low, self.high, self.step)} else int
        try:
            value = kind(text)
        except ValueError:
            return None
        inside = math.isfinite(value) and (self.low is None or value >= self.low) and \
            (self.high is None or value <= self.high)
        if self.step is not None and inside:
            steps = (value - (self.low or 0)) / self.step
            inside = abs(steps - round(steps)) < 1e-9
        return value if inside else None

    def texts(self, value) -> list[str] | None:
        """The URL's texts for a value, None at the default (a link stays short)."""
        if value == self.default:
            return None
        if self.many:
            return [str(v) for v in value] or [""]
        return ["true" if value else "false"] if isinstance(value, bool) else [str(value)]


def linked(widget, *args, key: str, start: Any = None, **kwargs):
    """Draw `widget` (st.slider, a column's selectbox, …) with its value kept in the URL under its key, and return
    its value. The first time this session draws it, a value the URL holds sets it, if the widget accepts it (one
    of its options, inside its range and on its step, a text within its length); anything else is passed over and
    the widget keeps its own value. Each run writes the value back, or removes it at its default: the widget's own,
    or `start` where the page starts it elsewhere (a preset's value). Choices are written as their values' str(),
    never their shown names, so a link works in either language. A disabled widget follows others: never kept."""
    control = Control.of(widget, args, {"key": key, **kwargs})
    if start is not None:
        control.default = start
    seeded = st.session_state.setdefault(SEEDED, set())
    if key not in seeded and not kwargs.get("disabled"):
        seeded.add(key)
        value = control.parse(st.query_params.get_all(key))
        if value is not None:
            st.session_state[key] = value
    value = widget(*args, key=key, **kwargs)
    texts = None if kwargs.get("disabled") else control.texts(value)
    if texts is None:
        if key in st.query_params:
            del st.query_params[key]
    elif st.query_params.get_all(key) != texts:
        st.query_params[key] = texts if len(texts) > 1 else texts[0]
    return value


def from_url(key: str, options) -> Any:
    """The option a URL names under key, or None: for a page that sets other widgets from this one before drawing
    it (a preset)."""
    return Control(None, options=list(options)).parse(st.query_params.get_all(key))
