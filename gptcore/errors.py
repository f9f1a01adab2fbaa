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

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Message:
    """A sentence for a person: a catalog key, its English template and the values it needs."""
    key: str
    template: str
    params: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.template.format(**english(self.params))


def message(key: str, template: str, **params) -> Message:
    return Message(key, template, params)


def english(params: dict) -> dict:
    """The values with every nested Message rendered in English."""
    return {k: str(v) if isinstance(v, Message) else v for k, v in params.items()}


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
