"""What the GGUF and Hugging Face readers share: what reading a model gives, its errors and its progress, and
the files of a Hugging Face folder (which fetching a model by name needs too)."""
from __future__ import annotations

import hashlib
import json
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
MAX_CONTEXT_CAP = 8192  # the highest cap a person may ask for
UNSAID_CONTEXT = 2048  # a model's context when its file does not state it (transformers' LlamaConfig default)
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


@dataclass
class Opened:
    """A model file or folder read as far as its config (no weight yet): enough to refuse a model too large before
    its weights are fetched, hashed or read. read(progress) reads the rest."""
    cfg: GPTConfig
    read: Callable[[Progress], Imported]


def ignore_progress(done: int, total: int, stage: str) -> None:
    """The progress callback that reports nowhere."""


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def capped_context(model_context: int, max_context: int) -> int:
    """The context an imported model gets: its own, capped to bound the memory of its attention and RoPE tables."""
    return max(1, min(int(model_context), int(max_context)))


# A Hugging Face model folder: its weights, one file or shards that an index lists, and the small files beside them,
# fetched first for a model asked for by name, so that its config is checked before any weight is fetched
WEIGHTS, INDEX = "model.safetensors", "model.safetensors.index.json"
SMALL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja", INDEX)


def read_json(path: Path, required: bool = False) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if required:
            raise ImportFailure("hub.missing_file", "{path} is missing: a Hugging Face model folder has config.json, "
                                "its *.safetensors weights and tokenizer.json", path=path) from None
        return {}
    except (OSError, ValueError) as e:
        raise ImportFailure("hub.bad_json", "{path} cannot be read as JSON ({reason})", path=path,
                            reason=str(e)) from None
    if not isinstance(data, dict):
        raise ImportFailure("hub.bad_json", "{path} cannot be read as JSON ({reason})", path=path,
                            reason="not an object")
    return data


def weight_names(folder: Path) -> list[str]:
    """The model's safetensors files, as transformers reads them: the shards model.safetensors.index.json lists
    (read before they are fetched), else model.safetensors."""
    index = folder / INDEX
    if not index.is_file():
        return [WEIGHTS]
    weight_map = read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ImportFailure("hub.bad_json", "{path} cannot be read as JSON ({reason})", path=index,
                            reason="no weight_map")
    return sorted(set(weight_map.values()))
