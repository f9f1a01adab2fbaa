"""What the GGUF and Hugging Face readers share: the result of reading a model, its errors, and RoPE's two layouts."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError

if TYPE_CHECKING:  # (annotations only: `import gptcore.hub` stays light, without torch, for the app's start page)
    import torch

    from ..config import GPTConfig
    from ..tokenizer import HFTokenizer

# progress(done, total, stage): `done` of `total` units of one stage ("download", "verify", "extract", "read",
# "convert", "write"); the app draws a bar from it, the CLI a line
Progress = Callable[[int, int, str], None]

DEFAULT_MAX_CONTEXT = 2048  # an imported model's context is capped here: RoPE tables and attention stay small
SUPPORTED = "LlamaForCausalLM (Llama 2 and 3, SmolLM, SmolLM2, TinyLlama), MistralForCausalLM, Qwen2ForCausalLM, " \
            "Qwen3ForCausalLM; GGUF files of the llama, qwen2 and qwen3 architectures"


class ImportFailure(UserError, ValueError):
    """A model that cannot be imported as given: an unsupported architecture, a damaged file, no network."""


@dataclass
class Imported:
    """A model read from a file or folder: its config, its weights under our names (float32, head.weight left out
    when tied), its tokenizer, and what meta.json records about where it came from."""
    cfg: GPTConfig
    tensors: dict[str, torch.Tensor]
    tokenizer: HFTokenizer
    architecture: str  # the source's own name for it: "llama", "Qwen2ForCausalLM"
    model_context: int  # the context the model was trained for, before our cap
    chat_template: str | None = None
    source: dict = field(default_factory=dict)  # kind, path or name, sha256 of each file read


def ignore_progress(done: int, total: int, stage: str) -> None:
    """The progress callback that reports nowhere."""


def to_adjacent_pairs(w: torch.Tensor, n_heads: int, d_head: int) -> torch.Tensor:
    """Rows (or a bias, or a per-head norm's gains) laid out for rotate-half RoPE, which pairs channel i with
    i + d_head/2 within each head (Hugging Face, llama.cpp's NEOX models), re-ordered for ours, which turns
    adjacent channels 2i, 2i+1 together (Meta's original layout). Within a head, row j·2 + h of the result is row
    h·d_head/2 + j of w."""
    return w.reshape(n_heads, 2, d_head // 2, -1).transpose(1, 2).reshape(w.shape)


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def capped_context(model_context: int, max_context: int) -> int:
    """The context an imported model gets: its own, capped to bound the memory of its attention and RoPE tables."""
    return max(1, min(int(model_context), int(max_context)))
