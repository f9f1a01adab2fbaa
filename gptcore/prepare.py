"""Corpora larger than memory: tokenize a text file once into a memory-mapped token file, and train from it.

`python -m gptcore prepare --data big.txt --out data/big` streams the file (never holding it whole) into
  data/big/tokens.bin       the token ids, uint16 when the vocabulary fits (≤ 65,536), else uint32
  data/big/tokenizer.json   the tokenizer (as stored in checkpoints)
  data/big/header.json      counts, dtype and the train/validation split point; written last, so a folder
                            with a header is complete
The split is the in-memory one: the first 90% of the characters train, the rest validate. A character
vocabulary is every character of the file; a BPE is trained on (the beginning of) the training part only.
Training opens tokens.bin with np.memmap and copies out only the windows of each batch, so memory stays flat
however large the file is.
"""
from __future__ import annotations

import codecs
import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import fs
from .data import CorpusError
from .errors import Message, message
from .tokenizer import (
    BPETokenizer,
    CharTokenizer,
    Tokenizer,
    TokenizerError,
    check_bpe_vocab,
    last_cut,
    text_blocks,
    tokenizer_from_dict,
)

FORMAT = "gptcore-tokens-1"
HEADER, TOKENS, TOKENIZER = "header.json", "tokens.bin", "tokenizer.json"
TRAIN_FRACTION = 0.9
READ_BYTES = 8 << 20
BPE_SAMPLE_CHARS = 100_000_000  # a BPE learns its merges from at most this much of the training part
MAX_CHAR_VOCAB = 100_000  # GPTConfig's vocabulary limit
CHECK_TOKENS = 1 << 24  # ids read at a time when a token file's range is checked (32 MB of uint16)

Progress = Callable[[str, int, int], None]  # (phase, bytes done, bytes in all)


class TokenArray:
    """A stretch [start, end) of a token file, read on demand: a slice or a batch of windows is copied out as
    int64 ids. The file is mapped afresh for each read and unmapped right after (as nanoGPT does), so the pages
    a long run touches never pile up in the process's resident memory, however large the file is."""

    def __init__(self, path: Path, dtype: np.dtype, size: int, start: int, end: int):
        self.path, self.dtype, self.size, self.start, self.end = Path(path), np.dtype(dtype), size, start, end

    def __len__(self) -> int:
        return self.end - self.start

    def _tokens(self) -> np.ndarray:
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=(self.size,))

    def __getitem__(self, key: slice) -> torch.Tensor:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a TokenArray is read in contiguous slices")
        lo, hi, _ = key.indices(len(self))
        return torch.from_numpy(self._tokens()[self.start + lo:self.start + max(lo, hi)].astype(np.int64))

    def windows(self, starts: torch.Tensor, length: int) -> torch.Tensor:
        """(len(starts), length) ids: the window of `length` tokens at each start."""
        at = self.start + starts.numpy()[:, None] + np.arange(length)
        return torch.from_numpy(self._tokens()[at].astype(np.int64))


@dataclass
class PreparedCorpus:
    path: Path
    header: dict
    tokenizer: Tokenizer
    train: TokenArray
    val: TokenArray

    @property
    def whole(self) -> TokenArray:
        return TokenArray(self.train.path, self.train.dtype, self.train.size, 0, self.train.size)

    @property
    def description(self) -> Message:
        return message("prepare.description", "prepared {name} ({source}, {tokens:,} tokens, {tokenizer})",
                       name=self.path.name, source=self.header.get("source_name", ""), tokens=self.header["tokens"],
                       tokenizer=self.tokenizer.describe())


def is_prepared(path: str | os.PathLike) -> bool:
    return (Path(path) / HEADER).is_file()


def open_prepared(path: str | os.PathLike) -> PreparedCorpus:
    """Open a prepared folder; its token file is mapped, not read, once its ids are checked against the vocabulary.
    Every problem becomes a CorpusError that says which folder to prepare again."""
    path = Path(path)
    header = read_json(path / HEADER, path)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CorpusError("prepare.not_header", "{path} is not a gptcore token header (no '{format}' format)",
                          path=str(path / HEADER), format=FORMAT)
    try:
        tokenizer = tokenizer_from_dict(read_json(path / TOKENIZER, path))
    except TokenizerError as e:
        raise CorpusError("prepare.bad_tokenizer", "{path}: {reason}", path=str(path / TOKENIZER),
                          reason=e.message) from None
    dtype, n, split = header_counts(header, path)
    size = (path / TOKENS).stat().st_size if (path / TOKENS).is_file() else -1
    if size != n * dtype.itemsize or not 0 < split < n:
        raise CorpusError("prepare.size_mismatch", "{path} holds {size:,} bytes, but the header announces {n:,} "
                          "{dtype} tokens split at {split:,}: prepare the corpus again", path=str(path / TOKENS),
                          size=size, n=n, dtype=dtype.name, split=split)
    if tokenizer.vocab_size != header.get("vocab_size"):
        raise CorpusError("prepare.vocab_mismatch", "{path}: the tokenizer has {n:,} tokens, the header says "
                          "{announced}", path=str(path), n=tokenizer.vocab_size, announced=header.get("vocab_size"))
    if (largest := largest_id(path / TOKENS, dtype)) >= tokenizer.vocab_size:  # (an embedding lookup would fail)
        raise CorpusError("prepare.id_out_of_range", "{path} holds token id {id:,}, but its tokenizer has only {n:,} "
                          "tokens: prepare {folder} again", path=str(path / TOKENS), id=largest,
                          n=tokenizer.vocab_size, folder=str(path))
    return PreparedCorpus(path, header, tokenizer, TokenArray(path / TOKENS, dtype, n, 0, split),
                          TokenArray(path / TOKENS, dtype, n, split, n))


def read_json(file: Path, folder: Path):
    """The JSON in one of a prepared folder's files; a missing, unreadable or broken file is said in a sentence."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorpusError("prepare.missing_file", "{folder} has no {name}: prepare the corpus again",
                          folder=str(folder), name=file.name) from None
    except OSError as e:
        raise CorpusError("prepare.unreadable", "cannot read {path}: {reason}", path=str(file),
                          reason=e.strerror or str(e)) from None
    except ValueError:  # (not UTF-8, or not JSON)
        raise CorpusError("prepare.not_json", "{path} is not valid JSON: prepare the corpus again",
                          path=str(file)) from None


def header_counts(header: dict, folder: Path) -> tuple[np.dtype, int, int]:
    """(token dtype, tokens, training tokens) from a header; an entry missing or unusable is named."""
    for field in ("dtype", "tokens", "train_tokens"):
        value = header.get(field)
        usable = value in ("uint16", "uint32") if field == "dtype" else \
            isinstance(value, int) and not isinstance(value, bool)
        if not usable:
            raise CorpusError("prepare.damaged", "{path} lacks a usable '{field}' entry: prepare the corpus again",
                              path=str(folder / HEADER), field=field)
    return np.dtype(header["dtype"]), header["tokens"], header["train_tokens"]


def largest_id(tokens: Path, dtype: np.dtype) -> int:
    """The largest id in a token file, read a chunk at a time (nothing stays mapped or held)."""
    largest = 0
    with open(tokens, "rb") as f:
        while len(chunk := np.fromfile(f, dtype=dtype, count=CHECK_TOKENS)):
            largest = max(largest, int(chunk.max()))
    return largest


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def read_text(path: Path, progress: Progress | None = None, phase: str = "reading",
              stop_at_chars: int | None = None) -> Iterator[str]:
    """The file's text in pieces of a few MB, decoded as strict UTF-8 on the way (CorpusError naming the offset
    of a bad byte); stops after stop_at_chars characters."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    done, chars = 0, 0
    try:
        size, f = path.stat().st_size, open(path, "rb")
    except OSError as e:
        raise CorpusError("prepare.cannot_read", "cannot read {path}: {reason}", path=str(path),
                          reason=e.strerror or str(e)) from None
    with f:
        while raw := f.read(READ_BYTES):
            if done == 0:
                check_beginning(raw, path)
            try:
                text = decoder.decode(raw)
            except UnicodeDecodeError as e:
                raise CorpusError("prepare.not_utf8", "{path} is not UTF-8 text (invalid byte at offset {offset:,})",
                                  path=str(path), offset=done + e.start) from None
            done += len(raw)
            if progress:
                progress(phase, done, size)
            if stop_at_chars is not None and chars + len(text) >= stop_at_chars:
                yield text[:stop_at_chars - chars]
                return
            chars += len(text)
            yield text
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise CorpusError("prepare.cut_character", "{path} is not UTF-8 text (it ends inside a character)",
                          path=str(path)) from None


def check_beginning(raw: bytes, path: Path) -> None:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise CorpusError("prepare.utf16", "{path} is UTF-16 text; save it as UTF-8", path=str(path))
    if b"\x00" in raw[:1_000_000]:
        raise CorpusError("prepare.binary", "{path} looks binary (it contains NUL bytes), not a text file",
                          path=str(path))


def survey(path: Path, progress: Progress | None) -> tuple[int, list[str]]:
    """One pass over the file: its number of characters and its distinct characters, sorted."""
    chars, seen = 0, set()
    for text in read_text(path, progress, "counting characters"):
        chars += len(text)
        seen.update(text)
    return chars, sorted(seen)


def whole_blocks(texts: Iterator[str]) -> Iterator[str]:
    """The same text re-cut only where a BPE pre-token ends (tokenizer.last_cut), never at a read's arbitrary end."""
    carry = ""
    for text in texts:
        carry += text
        if (cut := last_cut(carry, len(carry) - len(text) - 1, len(carry))) is not None:
            yield carry[:cut]
            carry = carry[cut:]
        elif len(carry) > 8 * READ_BYTES:  # no line break or space for 64 MB: cut anyway, memory matters more
            yield carry
            carry = ""
    if carry:
        yield carry


def split_at(texts: Iterator[str], boundary: int) -> Iterator[tuple[str, bool]]:
    """(piece, in the training part) for the pieces of texts, cut at character `boundary`."""
    seen = 0
    for text in texts:
        if seen < boundary < seen + len(text):
            yield text[:boundary - seen], True
            yield text[boundary - seen:], False
        else:
            yield text, seen + len(text) <= boundary
        seen += len(text)


class CharEncoder:
    """Characters to ids with numpy: code points looked up in the sorted vocabulary (all are in it)."""

    def __init__(self, chars: list[str]):
        self.points = np.array([ord(c) for c in chars], dtype=np.uint32)

    def __call__(self, text: str) -> np.ndarray:
        return np.searchsorted(self.points, np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32))


def prepare(source: str | os.PathLike, out: str | os.PathLike, kind: str = "char", vocab_size: int | None = None,
            bpe_sample_chars: int = BPE_SAMPLE_CHARS, progress: Progress | None = None) -> dict:
    """Tokenize the text file `source` into the folder `out` (see the module's docstring); returns the header."""
    source, out = Path(source), Path(out)
    try:
        found = source.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise CorpusError("prepare.no_file", "no such file: {path}", path=str(source)) from None
    except OSError as e:  # (a folder on the way that may not be entered)
        raise CorpusError("prepare.cannot_read", "cannot read {path}: {reason}", path=str(source),
                          reason=e.strerror or str(e)) from None
    if not stat.S_ISREG(found.st_mode):
        raise CorpusError("prepare.not_file", "{path} is not a regular file", path=str(source))
    if found.st_size == 0:
        raise CorpusError("prepare.empty", "{path} is empty", path=str(source))
    if out.exists() and not out.is_dir():
        raise CorpusError("prepare.out_is_file", "{path} is a file, not a folder: choose a folder for the prepared "
                          "corpus", path=str(out))
    if is_prepared(out):
        raise CorpusError("prepare.exists", "{path} already holds a prepared corpus: delete it or choose another "
                          "--out", path=str(out))
    if kind not in ("char", "bpe"):
        raise CorpusError("prepare.kind", "tokenizer must be char or bpe, got {kind!r}", kind=kind)
    if kind == "bpe":
        check_bpe_vocab(vocab_size)
    chars, alphabet = survey(source, progress)
    if not "".join(alphabet).strip():
        raise CorpusError("prepare.whitespace", "{path} contains only whitespace", path=str(source))
    boundary = int(TRAIN_FRACTION * chars)
    if kind == "char":
        if len(alphabet) > MAX_CHAR_VOCAB:
            raise CorpusError("prepare.too_many_chars", "{path} uses {n:,} distinct characters, over the limit of "
                              "{limit:,}: use --tokenizer bpe", path=str(source), n=len(alphabet),
                              limit=MAX_CHAR_VOCAB)
        tokenizer, encode = CharTokenizer(alphabet), CharEncoder(alphabet)
    else:
        sample = read_text(source, progress, "training the BPE", stop_at_chars=min(boundary, bpe_sample_chars))
        tokenizer = BPETokenizer.train((b for text in whole_blocks(sample) for b in text_blocks(text, 1 << 20)),
                                       vocab_size)

        def encode(text: str) -> np.ndarray:
            return np.fromiter((i for ids in tokenizer.encode_batch(list(text_blocks(text))) for i in ids),
                               dtype=np.int64)
    dtype = token_dtype(tokenizer.vocab_size)
    counted = {"tokens": 0, "train": 0}

    def write_tokens(partial: Path) -> None:
        with open(partial, "wb") as f:
            for text, in_train in split_at(whole_blocks(read_text(source, progress, "tokenizing")), boundary):
                ids = encode(text).astype(dtype)
                ids.tofile(f)
                counted["tokens"] += len(ids)
                counted["train"] += len(ids) if in_train else 0
        if not 0 < counted["train"] < counted["tokens"]:
            raise CorpusError("prepare.too_short", "{path} is too short to split: {n:,} tokens", path=str(source),
                              n=counted["tokens"])

    try:  # the tokens first, each file written whole (gptcore.fs): the header, last, says the folder is ready
        fs.atomic_write(out / TOKENS, write_tokens)
        header = {"format": FORMAT, "source": str(source.resolve()), "source_name": source.name,
                  "source_bytes": source.stat().st_size, "chars": chars, "tokens": counted["tokens"],
                  "train_tokens": counted["train"], "dtype": dtype.name, "vocab_size": tokenizer.vocab_size,
                  "tokenizer": tokenizer.kind}
        fs.atomic_write(out / TOKENIZER, json.dumps(tokenizer.to_dict()))
        fs.atomic_write(out / HEADER, json.dumps(header, indent=1))
    except OSError as e:
        raise CorpusError("prepare.write", "cannot write the prepared corpus into {path}: {error}", path=str(out),
                          error=e.strerror or str(e)) from None
    return header


class ProgressLine:
    """'tokenizing: 1.2 / 4.0 GB, 85 MB/s, ETA 33s' on stderr, rewritten on a terminal, every 10 s in a log."""

    def __init__(self, stream=sys.stderr):
        self.stream, self.tty, self.last = stream, stream.isatty(), 0.0
        self.phase, self.began = None, time.monotonic()

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if phase != self.phase:
            self.phase, self.began, self.last = phase, now, now
        if now - self.last < (0.5 if self.tty else 10.0) and done < total:
            return
        self.last = now
        rate = done / max(now - self.began, 1e-3)
        line = (f"{phase}: {done / 1e6:,.1f} / {total / 1e6:,.1f} MB, {rate / 1e6:,.0f} MB/s, "
                f"ETA {(total - done) / max(rate, 1):.0f}s")
        self.stream.write(f"\r{line:<70}" if self.tty else line + "\n")
        if self.tty and done >= total:
            self.stream.write("\n")
        self.stream.flush()
