"""Where a run's text comes from, recorded with the run so that it can be loaded again to continue it.

The app reads "a file on the server" only inside the folders it is allowed to (`server_folders`: the project
folder and the data folder, $GPTCORE_DATA or data/ in the project), and never a hidden file or one in a hidden
folder there (.git, .streamlit, .cache: settings and credentials): whoever opens the page must not be able to
read, and have the model echo, anything the server's user can read. It loads with `confine=True`. Uploads bring
any other file. The command line reads whatever path it is given.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from .config import setting, settings
from .corpus import MAX_DRILLS
from .data import Corpus, CorpusError
from .errors import Message, message
from .folders import PROJECT_ROOT
from .texts import (
    DOWNLOAD_CACHE,
    TINYSTORIES_VALID_URL,
    builtin_corpus,
    decode_corpus,
    download_tinystories_valid,
    load_corpus,
)

KINDS = ("builtin", "upload", "file", "tinystories")
BUILTIN_MAX_CHARS = 50_000_000


@dataclass(frozen=True)
class BuiltinStories:
    """The built-in stories' sizes, their limits written once: the Train page's widgets and the command line's
    --builtin-* flags both take them from here (gptcore.config.settings)."""
    builtin_chars: int = setting(1_000_000, "Characters", "how many characters of stories to generate",
                                 low=1, high=BUILTIN_MAX_CHARS, step=100_000)
    builtin_drills: float = setting(0.0, "Copy drills", "share of the built-in corpus given to copy drills, lines of "
                                    "random characters said again", low=0.0, high=MAX_DRILLS, step=0.05)
    builtin_retellings: float = setting(0.0, "Retellings", "share of the built-in corpus given to spans of ordinary "
                                        "text said again right after, put inside the stories", low=0.0,
                                        high=MAX_DRILLS, step=0.05)


def builtin_problem(**values) -> Message | None:
    """Why a size of the built-in stories (builtin_chars=..., builtin_drills=...) is out of its range; None when
    none is."""
    table = settings(BuiltinStories)
    return next((found for name, value in values.items() if (found := table[name].problem(value))), None)


@dataclass(frozen=True)
class CorpusSource:
    """A corpus choice: our generated stories, an uploaded file, a file on the server, or TinyStories' val split.

    Each kind reads only its own fields: builtin (chars, seed, drills, retellings), file (path), upload (name; the
    bytes come separately) and tinystories. max_chars keeps only the beginning of a file, upload or download.
    """
    kind: str
    chars: int = 1_000_000
    seed: int = 0
    drills: float = 0.0  # share of copy drills in the built-in corpus
    retellings: float = 0.0  # share of spans said again (corpus.retelling) in the built-in corpus
    path: str = ""
    name: str = ""
    max_chars: int | None = None

    @property
    def reloadable(self) -> bool:
        """Can it be loaded again later (to continue a run) without the user's help?"""
        return self.kind in ("builtin", "file", "tinystories")

    def to_dict(self) -> dict:
        """The fields this kind uses, as recorded in a run's meta.json."""
        used = {"builtin": ("chars", "seed", "drills", "retellings"), "file": ("path", "max_chars"),
                "upload": ("name", "max_chars"), "tinystories": ("max_chars",)}.get(self.kind, ())
        values = asdict(self)
        return {"kind": self.kind, **{key: values[key] for key in used}}

    @classmethod
    def from_dict(cls, data) -> CorpusSource | None:
        """A source read back from meta.json; None when the record is missing or not understood (a field of the
        wrong kind included: meta.json may have been written by hand, or come in a checkpoint zip)."""
        if not isinstance(data, dict) or data.get("kind") not in KINDS:
            return None
        found = {key: data[key] for key in ("chars", "seed", "drills", "retellings", "path", "name", "max_chars")
                 if data.get(key) is not None}
        whole = all(isinstance(found[key], int) and not isinstance(found[key], bool)
                    for key in ("chars", "seed", "max_chars") if key in found)
        share = all(isinstance(found.get(key, 0.0), (int, float)) and not isinstance(found.get(key), bool)
                    for key in ("drills", "retellings"))
        if not (whole and share) or not all(isinstance(found[key], str) for key in ("path", "name") if key in found):
            return None
        return cls(data["kind"], **found)

    def load(self, upload: bytes | None = None, progress: Callable[[int, int | None], None] | None = None, *,
             confine: bool = False) -> Corpus:
        """The corpus it describes; every problem with it becomes a CorpusError. confine: read a file only inside
        the app's folders (allowed_path), as the app must; the command line reads any file it is given."""
        if self.kind == "builtin":
            if builtin_problem(builtin_chars=self.chars):
                raise CorpusError("sources.builtin_size", "the built-in corpus size must be from 1 to {limit:,} "
                                  "characters", limit=BUILTIN_MAX_CHARS)
            return builtin_corpus(self.chars, self.seed, self.drills, self.retellings)
        if self.kind == "file":
            if not str(self.path).strip():
                raise CorpusError("sources.no_path", "enter the path of a UTF-8 text file on the server")
            path = allowed_path(self.path.strip()) if confine else self.path.strip()
            return load_corpus(str(path), self.max_chars)
        if self.kind == "upload":
            if upload is None:
                raise CorpusError("sources.no_upload", "choose a text file to upload")
            corpus = Corpus(decode_corpus(upload, self.name or "upload"),
                            message("sources.upload", "upload {name}", name=self.name))
        elif self.kind == "tinystories":
            path = download_tinystories_valid(cache_dir=DOWNLOAD_CACHE, progress=progress)
            corpus = Corpus(load_corpus(str(path), None).text,
                            message("sources.tinystories", "TinyStories validation split"))
        else:
            raise CorpusError("sources.unknown_kind", "unknown corpus source '{kind}'", kind=str(self.kind))
        return corpus if self.max_chars is None else corpus.first(self.max_chars)


def data_folder() -> Path:
    """The folder besides the project's whose files the app may train on: $GPTCORE_DATA, or data/ in the project."""
    return Path(os.environ.get("GPTCORE_DATA") or PROJECT_ROOT / "data").expanduser().resolve()


def server_folders() -> list[Path]:
    return [PROJECT_ROOT.resolve(), data_folder()]


def allowed_path(path: str) -> Path:
    """The file a server path names, with every link followed, when it lies inside server_folders() and neither
    it nor a folder it is in there is hidden (a name starting with '.'); CorpusError otherwise (a link counts where
    it leads). A relative path is taken from the project folder, whatever the server's working folder."""
    resolved = (PROJECT_ROOT / Path(path).expanduser()).resolve()  # (an absolute path stays itself)
    inside = [resolved.relative_to(folder) for folder in server_folders() if resolved.is_relative_to(folder)]
    if not inside:
        raise CorpusError("sources.outside_folders", "{path} is outside the folders this app reads files from "
                          "({folders}): copy it into one of them, or upload it", path=path,
                          folders=", ".join(str(f) for f in server_folders()))
    if all(any(part.startswith(".") for part in within.parts) for within in inside):
        raise CorpusError("sources.hidden", "{path} is hidden, or inside a hidden folder (a name starting with '.', "
                          "such as .git, which holds settings and credentials): this app never reads those. Copy the "
                          "text to a visible file, or upload it", path=path)
    return resolved


def tinystories_cached() -> bool:
    """Is TinyStories' validation split already downloaded (so loading it needs no network)?"""
    target = DOWNLOAD_CACHE / Path(TINYSTORIES_VALID_URL).name
    return target.is_file() and target.stat().st_size > 0
