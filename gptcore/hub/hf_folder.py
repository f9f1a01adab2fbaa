"""A Hugging Face model folder read as our model: config.json, the safetensors weights (one file or shards listed in
model.safetensors.index.json), tokenizer.json, and tokenizer_config.json for the chat template and special tokens.

Families: LlamaForCausalLM (Llama 2 and 3.x with their RoPE scaling, SmolLM, SmolLM2, TinyLlama),
MistralForCausalLM, Qwen2ForCausalLM (q/k/v biases) and Qwen3ForCausalLM (per-head q/k norms, a free head width).
Hugging Face stores q and k rows for rotate-half RoPE; they are re-ordered for our adjacent pairs here.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..checkpoint import read_safetensors
from ..config import ConfigError, GPTConfig
from ..folders import CheckpointError
from ..rope_layout import to_adjacent_pairs
from ..tokenizer import HFTokenizer
from .common import (
    SUPPORTED,
    UNSAID_CONTEXT,
    WEIGHTS,
    Imported,
    ImportFailure,
    Opened,
    Progress,
    capped_context,
    read_json,
    weight_names,
)

ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
# their names -> ours, per layer and for the whole model (q, k, v are concatenated into qkv)
LAYER_TENSORS = {"input_layernorm.weight": "ln1.weight", "self_attn.o_proj.weight": "attn.proj.weight",
                 "self_attn.q_norm.weight": "attn.qk_norm.0.weight", "self_attn.k_norm.weight": "attn.qk_norm.1.weight",
                 "post_attention_layernorm.weight": "ln2.weight", "mlp.gate_proj.weight": "ffn.w1.weight",
                 "mlp.up_proj.weight": "ffn.w3.weight", "mlp.down_proj.weight": "ffn.w2.weight"}
MODEL_TENSORS = {"model.embed_tokens.weight": "emb.weight", "model.norm.weight": "ln_f.weight",
                 "lm_head.weight": "head.weight"}
QKV = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")


def open_hf_folder(folder: Path, max_context: int) -> Opened:
    """A Hugging Face folder's config and tokenizer, and how to read its float32 weights (which need not be there
    yet: a model fetched by name brings them once its config is known to fit); ImportFailure for an architecture or
    a setting the model here cannot express, a missing or damaged file."""
    folder = Path(folder)
    config = read_json(folder / "config.json", required=True)
    architecture = (config.get("architectures") or [config.get("model_type", "?")])[0]
    if architecture not in ARCHITECTURES:
        raise ImportFailure("hub.hf_architecture", "{path} holds a {arch} model; the importer reads {supported}",
                            path=folder, arch=architecture, supported=SUPPORTED)
    try:
        cfg = hf_config(config, architecture, folder, max_context)
    except KeyError as e:
        raise ImportFailure("hub.hf_config_key", "{path}/config.json has no {entry}, which the model needs",
                            path=folder, entry=e.args[0]) from None
    tokenizer = hf_tokenizer(folder, config, cfg.vocab_size)

    def read(progress: Progress) -> Imported:
        return Imported(cfg, hf_tensors(folder, cfg, progress), tokenizer, architecture,
                        int(config.get("max_position_embeddings", UNSAID_CONTEXT)), tokenizer.chat_template)

    return Opened(cfg, read)


def unsupported(folder: Path, setting: str):
    return ImportFailure("hub.hf_setting", "{path}: its config sets {setting}, which the model here cannot express",
                         path=folder, setting=setting)


def hf_config(config: dict, architecture: str, folder: Path, max_context: int) -> GPTConfig:
    """Our GPTConfig for a config.json (its context capped at max_context, and at a sliding window shorter than
    that, within which sliding attention is plain attention)."""
    if config.get("hidden_act", "silu") != "silu":
        raise unsupported(folder, f"hidden_act = {config['hidden_act']}")
    for flag in ("mlp_bias", "attention_bias"):  # Llama's attention_bias also puts a bias on o_proj
        if config.get(flag):
            raise unsupported(folder, f"{flag} = true")
    d_model, n_head = config["hidden_size"], config["num_attention_heads"]
    n_kv_head = config.get("num_key_value_heads") or n_head
    head_dim = config.get("head_dim") or d_model // n_head
    context = config.get("max_position_embeddings", UNSAID_CONTEXT)
    if (window := config.get("sliding_window")) and config.get("use_sliding_window", True):
        context = min(context, window)
    settings = dict(vocab_size=config["vocab_size"], d_model=d_model, n_layer=config["num_hidden_layers"],
                    n_head=n_head, n_kv_head=n_kv_head if n_kv_head != n_head else 0,
                    head_dim=head_dim if head_dim * n_head != d_model else 0, d_ff=config["intermediate_size"],
                    context=capped_context(context, max_context), norm_eps=config.get("rms_norm_eps", 1e-6),
                    qkv_bias=architecture == "Qwen2ForCausalLM", qk_norm=architecture == "Qwen3ForCausalLM",
                    tie_embeddings=bool(config.get("tie_word_embeddings", False)), **hf_rope(config, folder))
    try:
        return GPTConfig(**settings)
    except (ConfigError, TypeError) as e:
        raise ImportFailure("hub.unbuildable", "{path} describes a model the one here cannot build: {reason}",
                            path=folder, reason=getattr(e, "message", str(e))) from None


def hf_rope(config: dict, folder: Path) -> dict:
    """θ and scaling, from rope_theta and rope_scaling (older files) or rope_parameters (newer ones)."""
    parameters = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling") or parameters
    theta = config.get("rope_theta") or parameters.get("rope_theta") or 10000.0
    kind = scaling.get("rope_type") or scaling.get("type") or "default"
    if kind == "default":
        return dict(rope_theta=float(theta))
    if kind == "linear":
        return dict(rope_theta=float(theta), rope_scaling="linear", rope_factor=float(scaling["factor"]))
    if kind == "llama3":
        return dict(rope_theta=float(theta), rope_scaling="llama3", rope_factor=float(scaling["factor"]),
                    rope_low_freq_factor=float(scaling["low_freq_factor"]),
                    rope_high_freq_factor=float(scaling["high_freq_factor"]),
                    rope_original_context=int(scaling["original_max_position_embeddings"]))
    raise unsupported(folder, f"rope_scaling {kind}")


def hf_tokenizer(folder: Path, config: dict, vocab_size: int) -> HFTokenizer:
    """tokenizer.json as it is, with the special tokens and chat template of tokenizer_config.json."""
    from tokenizers import Tokenizer

    path = folder / "tokenizer.json"
    if not path.is_file():
        raise ImportFailure("hub.no_tokenizer", "{path} has no tokenizer.json (the importer reads the tokenizers "
                            "JSON format only, not a sentencepiece tokenizer.model)", path=folder)
    try:
        hf = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception for a file it cannot parse
        raise ImportFailure("hub.bad_tokenizer", "{path} cannot be read as a tokenizer ({reason})", path=path,
                            reason=str(e)) from None
    settings = read_json(folder / "tokenizer_config.json")
    template = settings.get("chat_template")
    if isinstance(template, list):  # several named templates: the default one
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    if template is None and (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    bos = special_id(hf, settings.get("bos_token"), config.get("bos_token_id"))
    add_bos = settings.get("add_bos_token")
    if not isinstance(add_bos, bool):  # unsaid: whether the tokenizer's own post-processor puts BOS first
        add_bos = bos is not None and hf.encode("a").ids[:1] == [bos]
    return HFTokenizer(hf, vocab_size, bos, special_id(hf, settings.get("eos_token"), config.get("eos_token_id")),
                       add_bos, template if isinstance(template, str) else None)


def special_id(hf, token, fallback) -> int | None:
    """The id of a special token named in tokenizer_config.json (a string or {"content": ...}), else config.json's."""
    if isinstance(token, dict):
        token = token.get("content")
    if isinstance(token, str) and (found := hf.token_to_id(token)) is not None:
        return found
    if isinstance(fallback, list):  # several end tokens: the first
        fallback = fallback[0] if fallback else None
    return fallback if isinstance(fallback, int) else None


def hf_tensors(folder: Path, cfg: GPTConfig, progress: Progress) -> dict[str, torch.Tensor]:
    """Our state dict (head.weight left out when tied) from the folder's safetensors, as float32."""
    files = weight_files(folder)
    total, done = len(files), 0
    out: dict[str, torch.Tensor] = {}
    D = cfg.d_head
    wanted = dict(MODEL_TENSORS) | {f"model.layers.{i}.{theirs}": f"blocks.{i}.{ours}"
                                    for i in range(cfg.n_layer) for theirs, ours in LAYER_TENSORS.items()}
    raw: dict[str, torch.Tensor] = {}
    for path in files:
        for name, tensor in float_tensors(path).items():
            if name in wanted:
                out[wanted[name]] = tensor
            elif name.removesuffix(".weight").removesuffix(".bias").endswith(QKV):
                raw[name] = tensor
            elif not name.endswith("rotary_emb.inv_freq"):  # (older files keep RoPE's table)
                raise ImportFailure("hub.hf_unexpected", "{path} holds {name}, which the model here has no place "
                                    "for", path=path, name=name)
        done += 1
        progress(done, total, "convert")
    if cfg.tie_embeddings:
        out.pop("head.weight", None)
    for i in range(cfg.n_layer):
        for kind in ("weight", "bias") if cfg.qkv_bias else ("weight",):
            q, k, v = (raw.pop(f"model.layers.{i}.{p}.{kind}", None) for p in QKV)
            if q is None or k is None or v is None:
                raise ImportFailure("hub.hf_missing_tensor", "{path} has no {name}, which the model needs",
                                    path=folder, name=f"model.layers.{i}.self_attn.q/k/v_proj.{kind}")
            out[f"blocks.{i}.attn.qkv.{kind}"] = torch.cat([to_adjacent_pairs(q, D), to_adjacent_pairs(k, D), v])
        if cfg.qk_norm:
            for j in (0, 1):
                name = f"blocks.{i}.attn.qk_norm.{j}.weight"
                if name in out:
                    out[name] = to_adjacent_pairs(out[name], D)
    if raw:
        raise ImportFailure("hub.hf_unexpected", "{path} holds {name}, which the model here has no place for",
                            path=folder, name=sorted(raw)[0])
    return out


def weight_files(folder: Path) -> list[Path]:
    """The paths of weight_names, each of which must be there."""
    files = [folder / name for name in weight_names(folder)]
    if files == [folder / WEIGHTS] and not files[0].is_file():
        raise ImportFailure("hub.no_weights", "{path} has no model.safetensors (a PyTorch .bin file is not read: "
                            "it would run code to load)", path=folder)
    if missing := [p for p in files if not p.is_file()]:
        raise ImportFailure("hub.missing_file", "{path} is missing: a Hugging Face model folder has config.json, "
                            "its *.safetensors weights and tokenizer.json", path=missing[0])
    return files


def float_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of one safetensors file as float32 (gptcore.checkpoint's reader: it never unpickles)."""
    try:
        tensors, _ = read_safetensors(path)
    except CheckpointError as e:
        raise ImportFailure.of(e.message) from None
    return {name: t.float() for name, t in tensors.items()}
