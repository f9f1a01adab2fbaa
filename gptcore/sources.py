"""Where a run's text comes from, recorded with the run so that it can be loaded again to continue it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from .data import (
    DOWNLOAD_CACHE,
    TINYSTORIES_VALID_URL,
    Corpus,
    CorpusError,
    builtin_corpus,
    decode_corpus,
    download_tinystories_valid,
    load_corpus,
)

KINDS = ("builtin", "upload", "file", "tinystories")
BUILTIN_MAX_CHARS = 50_000_000


@dataclass(frozen=True)
class CorpusSource:
    """A corpus choice: our generated stories, an uploaded file, a file on the server, or TinyStories' val split.

    Each kind reads only its own fields: builtin (chars, seed), file (path), upload (name; the bytes come
    separately) and tinystories. max_chars keeps only the beginning of a file, upload or download.
    """
    kind: str
    chars: int = 1_000_000
    seed: int = 0
    path: str = ""
    name: str = ""
    max_chars: int | None = None

    @property
    def reloadable(self) -> bool:
        """Can it be loaded again later (to continue a run) without the user's help?"""
        return self.kind in ("builtin", "file", "tinystories")

    def to_dict(self) -> dict:
        """The fields this kind uses, as recorded in a run's meta.json."""
        used = {"builtin": ("chars", "seed"), "file": ("path", "max_chars"), "upload": ("name", "max_chars"),
                "tinystories": ("max_chars",)}.get(self.kind, ())
        values = asdict(self)
        return {"kind": self.kind, **{key: values[key] for key in used}}

    @classmethod
    def from_dict(cls, data) -> CorpusSource | None:
        """A source read back from meta.json; None when the record is missing or not understood."""
        if not isinstance(data, dict) or data.get("kind") not in KINDS:
            return None
        try:
            return cls(**{key: data[key] for key in ("kind", "chars", "seed", "path", "name", "max_chars")
                          if data.get(key) is not None})
        except TypeError:
            return None

    def load(self, upload: bytes | None = None,
             progress: Callable[[int, int | None], None] | None = None) -> Corpus:
        """The corpus it describes; every problem with it becomes a CorpusError."""
        if self.kind == "builtin":
            if not isinstance(self.chars, int) or not 1 <= self.chars <= BUILTIN_MAX_CHARS:
                raise CorpusError(f"the built-in corpus size must be from 1 to {BUILTIN_MAX_CHARS:,} characters")
            return builtin_corpus(self.chars, self.seed)
        if self.kind == "file":
            if not str(self.path).strip():
                raise CorpusError("enter the path of a UTF-8 text file on the server")
            return load_corpus(str(self.path).strip(), self.max_chars)
        if self.kind == "upload":
            if upload is None:
                raise CorpusError("choose a text file to upload")
            corpus = Corpus(decode_corpus(upload, self.name or "the upload"), f"upload {self.name}")
        elif self.kind == "tinystories":
            path = download_tinystories_valid(cache_dir=DOWNLOAD_CACHE, progress=progress)
            corpus = Corpus(load_corpus(str(path), None).text, "TinyStories validation split")
        else:
            raise CorpusError(f"unknown corpus source {self.kind!r}")
        if self.max_chars is not None and len(corpus.text) > self.max_chars:
            corpus = Corpus(corpus.text[:self.max_chars], f"{corpus.description}, first {self.max_chars:,} chars")
        return corpus


def tinystories_cached() -> bool:
    """Is TinyStories' validation split already downloaded (so loading it needs no network)?"""
    target = DOWNLOAD_CACHE / Path(TINYSTORIES_VALID_URL).name
    return target.is_file() and target.stat().st_size > 0
