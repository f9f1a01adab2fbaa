"""A run as a Hugging Face model folder, which `transformers`' AutoModelForCausalLM and AutoTokenizer load as they
are: `export_hf(checkpoint, out)`, `python -m gptcore export`, the Train page's download.

The folder holds config.json (LlamaForCausalLM; Qwen3ForCausalLM for a run with QK-norm, which Llama has no place
for), model.safetensors under Hugging Face's tensor names, generation_config.json, and tokenizer.json with
tokenizer_config.json: for characters, a tokenizer written here that gives our ids; for our BPE or an imported
model's tokenizer, its own JSON. Two conventions differ between the two sides, and the export converts both:

- One qkv matrix here, three projections (q_proj, k_proj, v_proj) there, cut along the rows.
- Our RoPE rotates adjacent channel pairs (x[2i], x[2i+1]); Hugging Face's rotates (x[i], x[i + d_head/2])
  ("rotate half"). The rows of W_q and W_k are reordered head by head, and their biases and QK-norm gains with
  them (gptcore.rope_layout, which says why that computes the same model).

A run with a setting no target can express (post-norm, LayerNorm, learned or no positions, a two-matrix
feed-forward, no √d_head scaling, no causal mask) is refused with a sentence naming that setting. The folder is
written under a temporary name beside the destination and renamed into place once whole (gptcore.fs.write_folder):
a failure leaves nothing.
"""
from __future__ import annotations

import io
import json
import os
import re
import tempfile
import zipfile
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

from . import checkpoint as ckpt
from . import fs
from .config import GPTConfig
from .errors import Message, UserError, message
from .rope_layout import to_rotate_half
from .tokenizer import END_OF_TEXT, CharTokenizer, Tokenizer

TOKENIZER_KINDS = ("char", "bpe", "hf")  # the tokenizers that have a Hugging Face form (hf: an imported model's)


class ExportError(UserError, ValueError):
    """A run that cannot be written as a Hugging Face model, or a destination that cannot take it."""


# ---------------------------------------------------------------- which runs a target can express

def unsupported(cfg: GPTConfig) -> Message | None:
    """Why no Hugging Face architecture we write can compute what this model computes, naming the setting; None
    when one can."""
    if cfg.norm_placement != "pre":
        return message("export.post_norm", "it normalizes after each sub-block (norm_placement = post), and "
                       "Llama-family models normalize before it")
    if cfg.norm != "rms":
        return message("export.layer_norm", "it uses LayerNorm (norm = layer), and Llama-family models use RMSNorm")
    if cfg.position == "learned":
        return message("export.learned_positions", "it adds a learned vector per position (position = learned), "
                       "and Llama-family models rotate queries and keys instead (RoPE)")
    if cfg.position != "rope":
        return message("export.no_positions", "it has no position signal but the causal mask (position = none), "
                       "and Llama-family models always apply RoPE")
    if cfg.ffn != "swiglu":
        return message("export.ffn", "its feed-forward block is {ffn} (ffn = {value}), and Llama-family models use "
                       "SwiGLU", ffn={"relu": "ReLU", "gelu": "GELU", "relu2": "ReLU²"}[cfg.ffn], value=cfg.ffn)
    if not cfg.scale_attention:
        return message("export.unscaled", "it does not divide q·k by √d_head (scale_attention = false), and "
                       "Llama-family models always do")
    if not cfg.causal:
        return message("export.not_causal", "it has no causal mask (causal = false), and a causal language model "
                       "never lets a token see the ones after it")
    return None


def architecture(cfg: GPTConfig) -> str:
    """The transformers class that computes what the model does: Llama, or Qwen3 for per-head q/k norms."""
    return "Qwen3ForCausalLM" if cfg.qk_norm else "LlamaForCausalLM"


def problem(cfg: GPTConfig, tokenizer_kind: str) -> Message | None:
    """Why a run of this model and tokenizer cannot be exported, as a sentence; None when it can."""
    if (reason := unsupported(cfg)) is not None:
        return message("export.unsupported", "this run cannot be written as a Hugging Face model: {reason}",
                       reason=reason)
    if tokenizer_kind not in TOKENIZER_KINDS:
        return message("export.tokenizer", "its tokenizer ({kind}) has no Hugging Face form", kind=str(tokenizer_kind))
    return None


def run_problem(checkpoint_dir: Path | str) -> Message | None:
    """problem() of the run in checkpoint_dir, read from its weights' header alone (no tensor is read), or why
    that header cannot be read."""
    try:
        header = ckpt.weights_metadata(Path(checkpoint_dir) / "model.safetensors")
        cfg = GPTConfig.from_dict(json.loads(header["config"]))
        kind = json.loads(header["tokenizer"]).get("type")
    except UserError as e:
        return e.message
    except (KeyError, ValueError, AttributeError):  # no config or tokenizer a model can be built from
        return message("export.unreadable", "its weights do not say which model and tokenizer they belong to")
    return problem(cfg, kind)


# ---------------------------------------------------------------- weights

def hf_tensors(model) -> dict[str, torch.Tensor]:
    """The model's weights under Hugging Face's names, q and k rows in rotate-half order."""
    cfg = model.cfg
    H, G, D = cfg.n_head, cfg.kv_heads, cfg.d_head
    ours = {name: p.detach().float().cpu() for name, p in model.state_dict().items()}
    out = {"model.embed_tokens.weight": ours["emb.weight"], "model.norm.weight": ours["ln_f.weight"]}
    if not cfg.tie_embeddings:
        out["lm_head.weight"] = ours["head.weight"]
    for i in range(cfg.n_layer):
        ib, hf = f"blocks.{i}.", f"model.layers.{i}."
        out[hf + "input_layernorm.weight"] = ours[ib + "ln1.weight"]
        out[hf + "post_attention_layernorm.weight"] = ours[ib + "ln2.weight"]
        parts = ("weight", "bias") if cfg.qkv_bias else ("weight",)
        for part in parts:
            q, k, v = ours[f"{ib}attn.qkv.{part}"].split([H * D, G * D, G * D])
            out[f"{hf}self_attn.q_proj.{part}"] = to_rotate_half(q, D)
            out[f"{hf}self_attn.k_proj.{part}"] = to_rotate_half(k, D)
            out[f"{hf}self_attn.v_proj.{part}"] = v
        out[hf + "self_attn.o_proj.weight"] = ours[ib + "attn.proj.weight"]
        if cfg.qkv_bias:  # Hugging Face's attention_bias gives W_O a bias too; ours has none, so it is zero
            out[hf + "self_attn.o_proj.bias"] = torch.zeros(cfg.d_model)
        if cfg.qk_norm:
            out[hf + "self_attn.q_norm.weight"] = to_rotate_half(ours[ib + "attn.qk_norm.0.weight"], D)
            out[hf + "self_attn.k_norm.weight"] = to_rotate_half(ours[ib + "attn.qk_norm.1.weight"], D)
        out[hf + "mlp.gate_proj.weight"] = ours[ib + "ffn.w1.weight"]
        out[hf + "mlp.up_proj.weight"] = ours[ib + "ffn.w3.weight"]
        out[hf + "mlp.down_proj.weight"] = ours[ib + "ffn.w2.weight"]
    return {name: t.contiguous() for name, t in out.items()}


# ---------------------------------------------------------------- config

def rope_scaling(cfg: GPTConfig) -> dict | None:
    if cfg.rope_scaling == "linear":
        return {"rope_type": "linear", "factor": cfg.rope_factor}
    if cfg.rope_scaling == "llama3":
        return {"rope_type": "llama3", "factor": cfg.rope_factor, "low_freq_factor": cfg.rope_low_freq_factor,
                "high_freq_factor": cfg.rope_high_freq_factor,
                "original_max_position_embeddings": cfg.rope_original_context}
    return None


def hf_config(cfg: GPTConfig, special_ids: dict[str, int | None]) -> dict:
    """config.json. The token ids are written even when None: left out, Llama's defaults (1 and 2) would name two
    ordinary tokens of ours."""
    name = architecture(cfg)
    config = {
        "architectures": [name], "model_type": "qwen3" if cfg.qk_norm else "llama",
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.d_model, "intermediate_size": cfg.d_ff,
        "num_hidden_layers": cfg.n_layer, "num_attention_heads": cfg.n_head, "num_key_value_heads": cfg.kv_heads,
        "head_dim": cfg.d_head, "hidden_act": "silu", "rms_norm_eps": cfg.norm_eps, "rope_theta": cfg.rope_theta,
        "max_position_embeddings": cfg.context, "tie_word_embeddings": cfg.tie_embeddings,
        "attention_bias": cfg.qkv_bias, "attention_dropout": 0.0, "torch_dtype": "float32", "use_cache": True,
        **special_ids,
    }
    if name == "LlamaForCausalLM":
        config["mlp_bias"] = False
    else:
        config["use_sliding_window"] = False
    if scaling := rope_scaling(cfg):
        config["rope_scaling"] = scaling
    return config


def generation_config(special_ids: dict[str, int | None]) -> dict:
    """Sampling as `python -m gptcore sample` does by default: temperature 1 from the whole distribution (top_k 0
    turns off transformers' own default of 50)."""
    return {**special_ids, "do_sample": True, "temperature": 1.0, "top_k": 0}


# ---------------------------------------------------------------- tokenizer

def hf_tokenizer(tokenizer: Tokenizer):
    """The tokenizer as a `tokenizers.Tokenizer` that gives our ids and our text back.

    A character vocabulary becomes a BPE whose vocabulary is the characters and which has no merges: with no
    pre-tokenizer each character is one token, a character outside the vocabulary is dropped (no unk token), as
    ours does, and the Fuse decoder joins the pieces without the spaces a plain decode would put between them."""
    from tokenizers import Tokenizer as TokenizersJSON
    from tokenizers import decoders, models

    if isinstance(tokenizer, CharTokenizer):
        hf = TokenizersJSON(models.BPE(vocab={c: i for i, c in enumerate(tokenizer.chars)}, merges=[]))
        hf.decoder = decoders.Fuse()
        return hf
    return tokenizer.hf


def special_ids(tokenizer: Tokenizer, hf) -> dict[str, int | None]:
    """{"bos_token_id": …, "eos_token_id": …}, None where the tokenizer has no such token: an imported model's own
    (its tokenizer keeps them), else GPT-2's <|endoftext|> for our BPE, which separates the corpus's stories (so it
    both ends one and is what the next one follows)."""
    if tokenizer.kind == "hf":
        return {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id}
    end = hf.token_to_id(END_OF_TEXT) if tokenizer.kind == "bpe" else None
    return {"bos_token_id": end, "eos_token_id": end}


def tokenizer_config(tokenizer: Tokenizer, hf, ids: dict[str, int | None], context: int) -> dict:
    """tokenizer_config.json: the generic fast tokenizer, which takes tokenizer.json exactly as written (a model
    type's own class would rebuild the pipeline its way), decoding that gives the text back unchanged, the special
    tokens by their text, and an imported model's chat template."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": context,
              "clean_up_tokenization_spaces": False}
    for role in ("bos_token", "eos_token"):
        if ids[f"{role}_id"] is not None and (text := hf.id_to_token(ids[f"{role}_id"])) is not None:
            config[role] = text
    if template := getattr(tokenizer, "chat_template", None):
        config["chat_template"] = template
    return config


# ---------------------------------------------------------------- the folder

def save_weights(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """model.safetensors ("format": "pt" is what transformers asks of a file's metadata), with the mode of the
    folder's other files (fs.write_new: safetensors itself writes 0600); a failed write comes out as the OSError it
    was (safetensors reports it as "… (os error 28)")."""
    def write(tmp: Path) -> None:
        try:
            save_file(tensors, str(tmp), metadata={"format": "pt"})
        except SafetensorError as e:
            if (code := re.search(r"os error (\d+)", str(e))) is None:
                raise
            raise OSError(int(code.group(1)), os.strerror(int(code.group(1))), str(path)) from None

    fs.write_new(path, write)


def write_export(folder: Path, model, tokenizer: Tokenizer) -> None:
    """Every file of the Hugging Face folder, into folder (which exists)."""
    cfg = model.cfg
    hf = hf_tokenizer(tokenizer)
    ids = special_ids(tokenizer, hf)
    save_weights(folder / "model.safetensors", hf_tensors(model))
    hf.save(str(folder / "tokenizer.json"))
    for name, data in (("config.json", hf_config(cfg, ids)), ("generation_config.json", generation_config(ids)),
                       ("tokenizer_config.json", tokenizer_config(tokenizer, hf, ids, cfg.context))):
        (folder / name).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def check_destination(out: Path, checkpoint_dir: Path, overwrite: bool) -> None:
    """The destination must be new, an empty folder, or (asked for) a folder to replace; never the run's own
    folder, one inside it (its zip would then hold foreign files) or one around it (replacing it would delete the
    run)."""
    mine, theirs = out.resolve(), checkpoint_dir.resolve()
    if mine == theirs or theirs in mine.parents or mine in theirs.parents:
        raise ExportError("export.own_folder", "{path} is the run's folder, or inside or around it: export to a "
                          "folder of its own", path=out)
    if out.is_symlink() or out.exists() and not out.is_dir():
        raise ExportError("export.not_a_folder", "{path} is there and is not a folder: choose another destination",
                          path=out)
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ExportError("export.not_empty", "{path} already holds files: choose a new or empty folder, or ask to "
                          "replace it (--overwrite)", path=out)


def export_hf(checkpoint_dir: Path | str, out_dir: Path | str, overwrite: bool = False) -> Path:
    """Write the run in checkpoint_dir as a Hugging Face model folder out_dir, whole or not at all; out_dir."""
    out = Path(out_dir)
    check_destination(out, Path(checkpoint_dir), overwrite)
    loaded = ckpt.load_checkpoint(checkpoint_dir)
    if (said := problem(loaded.model.cfg, loaded.tokenizer.kind)) is not None:
        raise ExportError.of(said)
    try:
        fs.write_folder(out, lambda tmp: write_export(tmp, loaded.model, loaded.tokenizer), replace=overwrite)
    except OSError as e:
        raise ckpt.write_error(out, e) from None
    return out


def export_zip(checkpoint_dir: Path | str, name: str) -> bytes:
    """The export as a zip whose files sit under <name>/, made in a temporary folder that is then removed. The
    weights are stored, not deflated: float32 noise barely compresses, and deflating it would take seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = export_hf(checkpoint_dir, Path(tmp) / name)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as z:
            for file in sorted(folder.iterdir()):
                packed = zipfile.ZIP_STORED if file.suffix == ".safetensors" else zipfile.ZIP_DEFLATED
                z.write(file, f"{name}/{file.name}", compress_type=packed)
        return buffer.getvalue()
