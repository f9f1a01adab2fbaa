"""A corpus's text as ids, the 90/10 split and random batches. Reading files, the built-in stories and downloads
live in texts.py, the tokenizers in tokenizer.py."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .errors import Message, UserError, message

if TYPE_CHECKING:
    from .tokenizer import CharTokenizer

class CorpusError(UserError, ValueError):
    """A corpus that cannot be trained on, with a message naming the problem."""


@dataclass
class Corpus:
    text: str
    description: Message  # what it is, for a person: "file stories.txt, first 1,000,000 chars"

    def first(self, max_chars: int) -> Corpus:
        """Its first max_chars characters (itself when it is no longer)."""
        if len(self.text) <= max_chars:
            return self
        return Corpus(self.text[:max_chars], message("data.first_chars", "{corpus}, first {n:,} chars",
                                                     corpus=self.description, n=max_chars))


def unknown_warning(unknown: Counter) -> Message | None:
    """A one-line warning naming the characters the model does not know, or None."""
    if not unknown:
        return None
    shown = ", ".join(f"{c!r}×{n}" for c, n in unknown.most_common(8))
    more = message("data.unknown_more", " and {n} more", n=len(unknown) - 8) if len(unknown) > 8 else ""
    return message("data.unknown_chars", "{n} character(s) not in the model's vocabulary were skipped: {shown}{more}",
                   n=sum(unknown.values()), shown=shown, more=more)


ENCODE_CHUNK = 1 << 20  # characters encoded at a time


def encode_chars(tokenizer: CharTokenizer, text: str) -> tuple[torch.Tensor, Counter]:
    """(ids of text's known characters, the unknown ones counted), a chunk at a time.

    The same ids as `torch.tensor(tokenizer.encode(text))`, without its list of one Python int per character,
    which for a 60 MB text takes gigabytes: each chunk's code points are looked up in a table indexed by code point.
    """
    codes = torch.tensor([ord(c) for c in tokenizer.chars], dtype=torch.long)
    table = torch.full((max(0x110000, int(codes.max()) + 1 if len(codes) else 0),), -1, dtype=torch.long)
    table[codes] = torch.arange(len(codes))
    ids, n, unknown = torch.empty(len(text), dtype=torch.long), 0, Counter()
    for start in range(0, len(text), ENCODE_CHUNK):
        chunk = text[start:start + ENCODE_CHUNK]
        points = torch.frombuffer(bytearray(chunk.encode("utf-32-le", "surrogatepass")), dtype=torch.int32)
        found = table[points.long()]
        known = found >= 0
        if not bool(known.all()):
            unknown.update(c for c in chunk if c not in tokenizer.stoi)
            found = found[known]
        ids[n:n + len(found)] = found
        n += len(found)
    return ids[:n], unknown


def split_ids(ids: torch.Tensor, train_fraction: float = 0.9):
    """First 90% for training, last 10% for validation (a contiguous split, as in the tutorial)."""
    n = int(train_fraction * len(ids))
    return ids[:n], ids[n:]


def check_trainable(n_tokens: int, context: int, chars: bool = True) -> None:
    """Both halves of the 90/10 split must hold at least one full window plus its target (chars: the tokens are
    characters, as with the char tokenizer, and the message says so)."""
    need = 10 * (context + 2)
    if n_tokens < need and chars:
        raise CorpusError("data.too_short", "corpus has {n:,} usable characters; context {context} needs at least "
                          "{need:,} so that the 10% validation split still holds one window of {window} characters",
                          n=n_tokens, context=context, need=need, window=context + 1)
    if n_tokens < need:
        raise CorpusError("data.too_short_tokens", "corpus has {n:,} tokens; context {context} needs at least "
                          "{need:,} so that the 10% validation split still holds one window of {window} tokens",
                          n=n_tokens, context=context, need=need, window=context + 1)


def get_batch(data, context: int, batch_size: int, generator: torch.Generator | None = None,
              rows: slice | None = None):
    """Random windows x and their targets y = x shifted left by one position.

    data is a tensor of ids or a prepared token file's TokenArray (read window by window). rows keeps only those
    rows of the batch, after every start has been drawn: each process of a distributed run takes its slice of
    the same global batch, so the random stream, and the batch as a whole, match a single process's.
    """
    starts = torch.randint(len(data) - context - 1, (batch_size,), generator=generator)
    if rows is not None:
        starts = starts[rows]
    if not isinstance(data, torch.Tensor):
        windows = data.windows(starts, context + 1)
        return windows[:, :-1], windows[:, 1:]
    offsets = torch.arange(context)
    x = data[starts[:, None] + offsets]
    return x, data[starts[:, None] + offsets + 1]
