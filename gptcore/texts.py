"""Where a corpus's text comes from: a file checked to be UTF-8 text, the built-in stories, or TinyStories'
validation split downloaded once."""
from __future__ import annotations

import os
import socket
import stat
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from . import fs
from .corpus import builtin_description, generate_stories
from .data import Corpus, CorpusError
from .errors import Message, message
from .folders import cache_dir

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
TINYSTORIES_VALID_URL = (
    "https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main/TinyStoriesV2-GPT4-valid.txt"
)
DOWNLOAD_CACHE = cache_dir()


def decode_corpus(raw: bytes, name: str, max_bytes: int = DEFAULT_MAX_BYTES, cut: bool = False) -> str:
    """Validate raw bytes as a UTF-8 text corpus and return the text (cut: raw is a prefix of the file, which
    may end inside a multi-byte character)."""
    if not raw:
        raise CorpusError("data.empty", "{name} is empty", name=name)
    if len(raw) > max_bytes:
        raise CorpusError("data.too_large", "{name} is {size:,} bytes, over the limit of {limit:,} bytes", name=name,
                          size=len(raw), limit=max_bytes)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise CorpusError("data.utf16", "{name} is UTF-16 text; save it as UTF-8", name=name)
    if b"\x00" in raw[:1_000_000]:
        raise CorpusError("data.binary", "{name} looks binary (it contains NUL bytes), not a text file", name=name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if not (cut and e.reason == "unexpected end of data"):
            raise CorpusError("data.not_utf8", "{name} is not UTF-8 text (invalid byte at offset {offset:,})",
                              name=name, offset=e.start) from None
        text = raw[:e.start].decode("utf-8")
    if not text or text.isspace():  # (not text.strip(), which copies a text that may be 60 MB)
        raise CorpusError("data.whitespace", "{name} contains only whitespace", name=name)
    return text


def read_corpus_file(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES, max_chars: int | None = None) -> str:
    """The file's text; with max_chars, only its beginning is read (at most max_bytes of it), so a file over
    max_bytes is fine when only its first characters are wanted."""
    path = Path(path)
    try:
        found = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise CorpusError("data.no_file", "no such file: {path}", path=path) from None
    except OSError as e:  # (a folder on the way that may not be entered)
        raise CorpusError("data.cannot_read", "cannot read {path}: {reason}", path=path,
                          reason=e.strerror or str(e)) from None
    if not stat.S_ISREG(found.st_mode):
        raise CorpusError("data.not_regular", "{path} is not a regular file (a folder or a device?)", path=path)
    size = found.st_size
    if max_chars is None and size > max_bytes:  # checked before reading, so a huge file is never loaded
        raise CorpusError("data.too_large", "{name} is {size:,} bytes, over the limit of {limit:,} bytes",
                          name=path, size=size, limit=max_bytes)
    # UTF-8 takes at most 4 bytes per character
    wanted = size if max_chars is None else min(size, 4 * max_chars, max_bytes)
    try:
        with open(path, "rb") as f:
            raw = f.read(wanted)
    except OSError as e:
        raise CorpusError("data.cannot_read", "cannot read {path}: {reason}", path=path,
                          reason=e.strerror or str(e)) from None
    text = decode_corpus(raw, str(path), max_bytes, cut=wanted < size)
    if max_chars is not None and len(text) < max_chars and wanted == max_bytes < size:
        raise CorpusError("data.prefix_too_large", "the first {n:,} characters of {path} take more than the limit "
                          "of {limit:,} bytes: ask for fewer", n=max_chars, path=path, limit=max_bytes)
    return text


def builtin_corpus(n_chars: int = 1_000_000, seed: int = 0, drills: float = 0.0, retellings: float = 0.0) -> Corpus:
    return Corpus(generate_stories(n_chars, seed, drills, retellings),
                  builtin_description(n_chars, seed, drills, retellings))


def load_corpus(source: str, max_chars: int | None = None, builtin_chars: int = 1_000_000,
                builtin_seed: int = 0, max_bytes: int = DEFAULT_MAX_BYTES, builtin_drills: float = 0.0,
                builtin_retellings: float = 0.0) -> Corpus:
    """'builtin' for our generated stories, otherwise a path to a UTF-8 text file."""
    for name, value in (("max_chars", max_chars), ("builtin_chars", builtin_chars)):
        if value is not None and value < 1:
            raise CorpusError("data.size_below_one", "{name} must be at least 1, got {value:,}", name=name,
                              value=value)
    if source == "builtin":
        corpus = builtin_corpus(builtin_chars, builtin_seed, builtin_drills, builtin_retellings)
    else:
        corpus = Corpus(read_corpus_file(source, max_bytes, max_chars),
                        message("data.file_corpus", "file {name}", name=Path(source).name))
    return corpus if max_chars is None else corpus.first(max_chars)


def download_tinystories_valid(url: str = TINYSTORIES_VALID_URL, cache_dir: Path = DOWNLOAD_CACHE,
                               progress: Callable[[int, int | None], None] | None = None,
                               timeout: float = 30.0) -> Path:
    """Fetch TinyStories' validation split once into cache_dir; progress(done_bytes, total_or_None)."""
    cache_dir = Path(cache_dir)
    target = cache_dir / Path(url.split("?")[0]).name
    if target.is_file() and target.stat().st_size > 0:
        return target

    def fetch(partial: Path) -> None:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(partial, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            done = 0
            while chunk := response.read(1 << 16):
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)
        if total is not None and done != total:
            raise CorpusError("data.download_cut", "download of {url} stopped after {done:,} of {total:,} bytes",
                              url=url, done=done, total=total)

    try:  # (a file of its own for each download: two tabs may fetch at once; renamed into place only when whole)
        fs.atomic_write(target, fetch)
    except OSError as e:
        raise CorpusError.of(download_failure(url, target, e)) from None
    return target


def download_failure(url: str, target: Path, error: OSError) -> Message:
    """What went wrong with a download, in words, and what the person can do about it."""
    reason = getattr(error, "reason", error)  # urllib wraps the socket's error in a URLError
    if isinstance(error, urllib.error.HTTPError):
        why = message("data.http_error", "the server answered {code} {reason}", code=error.code,
                      reason=str(error.reason))
    elif isinstance(reason, socket.gaierror):
        why = message("data.offline", "{host} could not be found, so this machine seems to be offline",
                      host=urlsplit(url).hostname or url)
    elif isinstance(reason, TimeoutError | socket.timeout):
        why = message("data.timeout", "the server did not answer in time")
    elif isinstance(error, urllib.error.URLError):
        why = message("data.connection_failed", "the connection failed ({reason})", reason=str(reason))
    else:
        why = message("data.download_unwritable", "the file could not be written ({reason})", reason=str(error))
    return message("data.download_failed", "could not download {url}: {why}. Connect to the internet and try again, "
                   "or fetch that file on another machine and copy it to {target}, where it is picked up without a "
                   "network. The built-in stories need no download.", url=url, why=why, target=target)


