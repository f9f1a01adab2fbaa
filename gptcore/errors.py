"""The one line between a user's mistake and a bug, and the messages that cross it.

Every problem a person can cause and fix (a bad file, setting, name or checkpoint; a job already running;
a run that diverged under their hyperparameters) raises a `UserError`. The CLI and the app show its message;
anything else is a bug and keeps its traceback.

A message is written where it is raised, with a named key, its English template and the values to fill in:

    raise CorpusError("corpus.too_short", "the corpus has {n:,} characters; it needs at least {need:,}",
                      n=len(text), need=need)

The CLI prints the English. The app looks the key up in its catalogs (`messages.corpus.too_short` in
locales/<lang>/messages/<module>.toml) and fills in the same values, so a learner reads it in their language;
tests/test_i18n.py checks every key used in the code against the catalogs. Values are numbers, names, paths or
other Messages (a range, a reason), never English words that would need translating.
"""
from __future__ import annotations

import os
import re
import string


class Message(str):
    """A sentence for a person: a catalog key, its English template and the values it needs.

    It is the English sentence itself (a str), so the command line prints it, a log records it and a test
    searches it as it would any text, while the app translates it by its key. Values that are text (a name, a
    path) are shown with any byte that is not UTF-8 escaped (`bad\\xffname`), so a file name never breaks a page.
    """
    key: str
    template: str
    params: dict
    stored: bool  # read back from a file (stored_message): data, whose key the catalogs may not know

    def __new__(cls, key: str, template: str, params: dict | None = None, stored: bool = False):
        params = dict(params or {})
        self = super().__new__(cls, template.format(**english(params)))
        self.key, self.template, self.params, self.stored = key, template, params, stored
        return self

    def __reduce__(self):  # copies and pickles with its key and values, not just its English
        return Message, (self.key, self.template, self.params, self.stored)

    def __repr__(self) -> str:
        return f"Message({self.key!r}, {str(self)!r})"


def message(key: str, template: str, **params) -> Message:
    return Message(key, template, params)


def printable(text) -> str:
    """A name or path as text that can be shown anywhere: bytes that are not UTF-8 (which Python keeps as lone
    surrogates in file names) written as \\xNN escapes."""
    text = os.fspath(text) if isinstance(text, os.PathLike) else str(text)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no file name decodes to
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def shown(value):
    """A message's value as it is shown: text made printable, numbers as they are (format specs apply)."""
    return printable(value) if isinstance(value, str | os.PathLike) and not isinstance(value, Message) else value


def english(params: dict) -> dict:
    """The values with every nested Message rendered in English and every text made printable."""
    return {k: str(v) if isinstance(v, Message) else shown(v) for k, v in params.items()}


def message_record(msg: Message) -> dict:
    """A Message as JSON (nested Messages too), so that a run's meta.json can say what happened in any language."""
    return {"key": msg.key, "template": msg.template,
            "params": {k: message_record(v) if isinstance(v, Message) else os.fspath(v) if isinstance(v, os.PathLike)
                       else v for k, v in msg.params.items()}}


# What a stored template may ask of a value: at most a sign, a width and a precision of two digits, thousands
# separators and a type; so formatting it never builds more than about a hundred characters per field.
STORED_SPEC = re.compile(r"[+\- ]?\d{0,2},?(?:\.\d{1,2})?[deEfFgG%]?")
STORED_DEPTH = 8  # Messages nested in a stored Message, at most (ours nest two or three)


def plain_template(template: str) -> bool:
    """Does the template only name values ({n}, {n:,}, {loss:.3f}, {kind!r}), never their attributes, items or
    a spec that could build a huge string ({a:>300000000})? Checked before a template read from a file is used."""
    try:
        fields = [(name, spec) for _, name, spec, _ in string.Formatter().parse(template) if name is not None]
    except ValueError:  # an unmatched brace
        return False
    return all(name.isidentifier() and STORED_SPEC.fullmatch(spec) for name, spec in fields)


def stored_message(record, depth: int = 0) -> Message | None:
    """The Message a meta.json holds (see message_record); None when the record is not one, or its template is
    not a plain one (plain_template): a meta.json may come from anyone, in a checkpoint zip."""
    if not (isinstance(record, dict) and isinstance(record.get("key"), str) and isinstance(record.get("template"), str)
            and isinstance(record.get("params", {}), dict)) or depth > STORED_DEPTH \
            or not plain_template(record["template"]):
        return None
    params = {}
    for k, v in record.get("params", {}).items():
        params[k] = stored_message(v, depth + 1) if isinstance(v, dict) else v
        if isinstance(v, dict) and params[k] is None:
            return None
    try:
        return Message(record["key"], record["template"], params, stored=True)
    except (KeyError, IndexError, ValueError, TypeError):  # a template its values do not fill
        return None


class UserError(Exception):
    """A mistake the user can fix; str(error) is an English sentence for a person, error.message its Message."""

    def __init__(self, key: str, template: str, **params):
        self.message = Message(key, template, params)
        super().__init__(str(self.message))

    @classmethod
    def of(cls, msg: Message) -> UserError:
        return cls(msg.key, msg.template, **msg.params)

    def __reduce__(self):  # copies and pickles with its message (Exception's default keeps only args)
        return _rebuild, (type(self), self.message)


def _rebuild(cls, msg: Message) -> UserError:
    return cls.of(msg)


class InputError(UserError, ValueError):
    """A text, prompt or sampling setting that cannot be used as given."""
