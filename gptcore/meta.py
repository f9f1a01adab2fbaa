"""The schema of a run's meta.json, checked value by value: a value of the wrong kind is dropped and named.

meta.json can be edited by hand or arrive in a checkpoint zip, so nothing read from it is trusted: each known entry
has a check here, and `checked_fields` keeps only the entries that pass (checkpoint.checked_meta reads the file).
"""
from __future__ import annotations

import math

from .errors import printable, stored_message


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _duration(v) -> bool:
    return _number(v) and math.isfinite(v) and v >= 0


def _optional(check):
    return lambda v: v is None or check(v)


def _list_of(check):
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def _table(v) -> bool:
    return isinstance(v, dict)


def _text(v) -> bool:
    return isinstance(v, str)


HISTORY_FIELDS = {"step": _list_of(_count), "train_loss": _list_of(_number), "lr": _list_of(_number),
                  "time": _list_of(_number), "eval_step": _list_of(_count), "eval_train": _list_of(_number),
                  "eval_val": _list_of(_number), "final_val": _optional(_number)}


# Series recorded together, one entry per step and one per evaluation: (the two drawn against each other, which
# go together even when one is missing, and the others, which a run of another version may not have recorded).
TOGETHER = ((("step", "train_loss"), ("lr", "time")), (("eval_step", "eval_val"), ("eval_train",)))


def _history(v) -> bool:
    """Every known series of the right kind, and the ones recorded together of the same length."""
    return isinstance(v, dict) and all(check(v[k]) for k, check in HISTORY_FIELDS.items() if k in v) and \
        all(len({len(v.get(k, [])) for k in drawn} | {len(v[k]) for k in others if k in v}) == 1
            for drawn, others in TOGETHER)


def _stored_message(v) -> bool:
    return isinstance(v, str) or stored_message(v) is not None


META_FIELDS = {"step": _count, "status": _text, "history": _history, "train_config": _table, "corpus": _text,
               "wall_time": _duration, "final_val_loss": _optional(_number), "params": _optional(_count),
               "tokenizer": _text, "message": _stored_message, "corpus_source": _optional(_table),
               "versions": _table, "hardware": _table, "diverging": _optional(_table)}


def checked_fields(meta: dict) -> tuple[dict, list[str]]:
    """(meta's entries that passed their checks, the names of those that did not)."""
    damaged = sorted(k for k, check in META_FIELDS.items() if k in meta and not check(meta[k]))
    checked = {k: v for k, v in meta.items() if k not in damaged}
    for key in ("status", "corpus", "tokenizer", "message"):  # texts to show: a file name that is not UTF-8 escaped
        if isinstance(checked.get(key), str):
            checked[key] = printable(checked[key])
    return checked, damaged
