"""A GGUF file (llama.cpp's format) read as our model: config from its metadata, float32 weights from its (possibly
quantized) tensors, and a `tokenizers` BPE rebuilt from the vocabulary and merges it stores.

Architectures: llama (Llama 2 and 3, SmolLM2, TinyLlama, Mistral), qwen2 and qwen3. llama.cpp's converter stores the
llama architecture's q and k rows already in our adjacent-pair RoPE layout; qwen2 and qwen3 run NEOX RoPE and keep
Hugging Face's rotate-half rows, which are re-ordered here.
"""
from __future__ import annotations

import math
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..config import ConfigError, GPTConfig
from ..rope_layout import to_adjacent_pairs
from ..tokenizer import HFTokenizer
from .common import SUPPORTED, UNSAID_CONTEXT, Imported, ImportFailure, Opened, Progress, capped_context

ARCHITECTURES = ("llama", "qwen2", "qwen3")
ROTATE_HALF = ("qwen2", "qwen3")  # NEOX RoPE in llama.cpp: Hugging Face's row order

# llama.cpp's tensor names -> ours, per block and for the whole model (q, k, v are concatenated into qkv)
BLOCK_TENSORS = {"attn_norm.weight": "ln1.weight", "attn_output.weight": "attn.proj.weight",
                 "attn_q_norm.weight": "attn.qk_norm.0.weight", "attn_k_norm.weight": "attn.qk_norm.1.weight",
                 "ffn_norm.weight": "ln2.weight", "ffn_gate.weight": "ffn.w1.weight", "ffn_up.weight": "ffn.w3.weight",
                 "ffn_down.weight": "ffn.w2.weight"}
MODEL_TENSORS = {"token_embd.weight": "emb.weight", "output_norm.weight": "ln_f.weight", "output.weight": "head.weight"}
QKV = ("attn_q", "attn_k", "attn_v")

# llama.cpp's pre-tokenizer names (tokenizer.ggml.pre) -> how text is split before the merges, as in the model's own
# tokenizer.json. GPT-2's split is ByteLevel's own regex.
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS = {
    **dict.fromkeys(("gpt-2", "gpt2", "mpt", "olmo"), "gpt2"),
    **dict.fromkeys(("smollm", "starcoder", "refact", "command-r", "codeshell"), "digits+gpt2"),  # one digit a token
    **dict.fromkeys(("llama-bpe", "llama3", "llama-v3", "smaug-bpe", "falcon3", "dbrx"), "llama3"),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), "qwen2"),
}
CONTROL, USER_DEFINED, UNUSED = 3, 4, 5  # tokenizer.ggml.token_type: special tokens, added tokens, padding rows


def open_gguf(path: Path, max_context: int) -> Opened:
    """A GGUF file's config from its metadata, and how to read its tokenizer and float32 weights; ImportFailure for
    a file that is damaged, of another architecture, or quantized in a way `gguf` cannot expand."""
    file = GGUFFile(path)
    arch = file.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise ImportFailure("hub.gguf_architecture", "{path} holds a {arch} model; the importer reads {supported}",
                            path=path, arch=arch, supported=SUPPORTED)
    cfg = gguf_config(file, arch, max_context)

    def read(progress: Progress) -> Imported:
        return Imported(cfg, gguf_tensors(file, cfg, arch, progress), gguf_tokenizer(file, cfg.vocab_size), arch,
                        file.get(f"{arch}.context_length", UNSAID_CONTEXT), file.get("tokenizer.chat_template", None))

    return Opened(cfg, read)


# GGUF's value types: struct formats of the numbers, then string (8) and array (9)
NUMBERS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
FLOAT32, STRING, ARRAY = 6, 8, 9


class GGUFFile:
    """A GGUF file parsed from its bytes: the metadata as Python values, each tensor as a view of its bytes in the
    memory-mapped file. (gguf's own GGUFReader makes a numpy view of every string of the vocabulary, seconds for
    SmolLM2's 98,000; this reads them in one pass. Its dequantize expands the tensors.)"""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.bytes = np.memmap(self.path, dtype=np.uint8, mode="r")
            self.metadata, self.tensors = self._parse()
        except (struct.error, ValueError, UnicodeDecodeError, OverflowError, OSError) as e:
            raise ImportFailure("hub.gguf_unreadable", "{path} is not a readable GGUF file ({reason})",
                                path=self.path, reason=str(e) or type(e).__name__) from None

    def get(self, key: str, default=KeyError):
        if key not in self.metadata:
            if default is KeyError:
                raise ImportFailure("hub.gguf_missing_key", "{path} has no {entry} in its metadata, which the "
                                    "import needs", path=self.path, entry=key)
            return default
        return self.metadata[key]

    def _parse(self):
        if bytes(self.bytes[:4]) != b"GGUF":
            raise ValueError("it does not start with GGUF")
        self.pos = 4
        version, n_tensors, n_values = self._read("<I"), self._read("<Q"), self._read("<Q")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version}; versions 2 and 3 are read")
        metadata = {}
        for _ in range(n_values):
            key = self._string()
            metadata[key] = self._value(self._read("<I"))
        infos = [(self._string(), [self._read("<Q") for _ in range(self._read("<I"))], self._read("<I"),
                  self._read("<Q")) for _ in range(n_tensors)]
        alignment = metadata.get("general.alignment", 32)
        start = -(-self.pos // alignment) * alignment
        return metadata, {name: self._tensor(name, dims, kind, start + offset) for name, dims, kind, offset in infos}

    def _read(self, fmt: str):
        value = struct.unpack_from(fmt, self.bytes, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return value

    def _string(self) -> str:
        n = self._read("<Q")
        if self.pos + n > len(self.bytes):
            raise ValueError("it ends inside its metadata")
        text = bytes(self.bytes[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return text

    def _value(self, kind: int):
        if kind == FLOAT32:  # the decimal it was written from (1e-05, not 9.999999747378752e-06)
            return float(str(np.float32(self._read(NUMBERS[kind]))))
        if kind in NUMBERS:
            return self._read(NUMBERS[kind])
        if kind == STRING:
            return self._string()
        if kind != ARRAY:
            raise ValueError(f"unknown value type {kind}")
        item, n = self._read("<I"), self._read("<Q")
        if item == STRING:
            return [self._string() for _ in range(n)]
        if item in NUMBERS and item != 7:
            values = np.frombuffer(self.bytes, NUMBERS[item], n, self.pos)
            self.pos += values.nbytes
            return values.tolist()
        return [self._value(item) for _ in range(n)]

    def _tensor(self, name: str, dims: list[int], kind: int, offset: int) -> GGUFTensor:
        import gguf

        try:
            qtype = gguf.GGMLQuantizationType(kind)
            block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise ImportFailure("hub.gguf_quantization", "{path}: {name} is stored as {kind}, which the gguf package "
                                "cannot expand to float32", path=self.path, name=name, kind=f"type {kind}") from None
        shape = tuple(reversed(dims))  # GGUF lists the innermost dimension first
        row_bytes = shape[-1] // block * block_bytes if shape else 0
        rows = math.prod(shape[:-1])
        if shape[-1] % block or offset + rows * row_bytes > len(self.bytes):
            raise ValueError(f"{name} ends past the end of the file")
        return GGUFTensor(name, shape, qtype, self.bytes[offset:offset + rows * row_bytes].reshape(rows, row_bytes))


@dataclass
class GGUFTensor:
    name: str
    shape: tuple[int, ...]  # torch's order
    qtype: object  # gguf.GGMLQuantizationType
    data: np.ndarray  # (rows, bytes per row), as gguf.quants.dequantize takes it


def gguf_config(file: GGUFFile, arch: str, max_context: int) -> GPTConfig:
    """Our GPTConfig for the model the metadata describes (its context capped at max_context)."""
    d_model, n_head = file.get(f"{arch}.embedding_length"), file.get(f"{arch}.attention.head_count")
    n_kv_head = file.get(f"{arch}.attention.head_count_kv", n_head)
    if not isinstance(n_head, int) or not isinstance(n_kv_head, int):  # a list: a different count in each block
        raise ImportFailure("hub.gguf_head_counts", "{path} gives each block its own number of heads, which the "
                            "model here cannot express", path=file.path)
    head_dim = file.get(f"{arch}.attention.key_length", d_model // n_head)
    if file.get(f"{arch}.rope.dimension_count", head_dim) != head_dim:
        raise ImportFailure("hub.partial_rope", "{path} rotates only part of each head with RoPE, which the model "
                            "here cannot express", path=file.path)
    tensors = file.tensors
    vocab_size = tensors["token_embd.weight"].shape[0] if "token_embd.weight" in tensors else \
        len(file.get("tokenizer.ggml.tokens"))
    settings = dict(vocab_size=vocab_size, d_model=d_model, n_layer=file.get(f"{arch}.block_count"),
                    n_head=n_head, n_kv_head=n_kv_head if n_kv_head != n_head else 0,
                    head_dim=head_dim if head_dim * n_head != d_model else 0,
                    d_ff=file.get(f"{arch}.feed_forward_length"),
                    context=capped_context(file.get(f"{arch}.context_length", UNSAID_CONTEXT), max_context),
                    norm_eps=file.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5),
                    rope_theta=file.get(f"{arch}.rope.freq_base", 10000.0),
                    qkv_bias="blk.0.attn_q.bias" in tensors, qk_norm="blk.0.attn_q_norm.weight" in tensors,
                    tie_embeddings="output.weight" not in tensors, **rope_scaling(file, arch))
    try:
        return GPTConfig(**settings)
    except ConfigError as e:
        raise ImportFailure("hub.unbuildable", "{path} describes a model the one here cannot build: {reason}",
                            path=file.path, reason=e.message) from None


def rope_scaling(file: GGUFFile, arch: str) -> dict:
    """GPTConfig's RoPE scaling fields. llama.cpp keeps Llama 3.1's scaling only as the divisor of each pair's speed
    (the tensor rope_freqs); it is taken as Llama 3's rule with the factors Meta's models use, and checked."""
    kind = file.get(f"{arch}.rope.scaling.type", "none")
    factor = file.get(f"{arch}.rope.scaling.factor", 1.0)
    if "rope_freqs.weight" in file.tensors:
        divisors = dequantized(file.tensors["rope_freqs.weight"], file.path)
        original = file.get(f"{arch}.rope.scaling.original_context_length", 8192)  # Llama 3.1's, when unsaid
        settings = dict(rope_scaling="llama3", rope_factor=float(divisors.max()), rope_low_freq_factor=1.0,
                        rope_high_freq_factor=4.0, rope_original_context=original)
        if not llama3_divisors_match(file, arch, divisors, settings):
            raise ImportFailure("hub.rope_freqs", "{path} scales RoPE by a table of divisors that Llama 3's rule "
                                "with factors 1 and 4 does not give", path=file.path)
        return settings
    if kind in ("none", "") or factor == 1.0:
        return {}
    if kind == "linear":
        return dict(rope_scaling="linear", rope_factor=float(factor))
    raise ImportFailure("hub.rope_scaling", "{path} scales RoPE by the {kind} rule, which the model here cannot "
                        "express (it knows linear and Llama 3's)", path=file.path, kind=kind)


def llama3_divisors_match(file: GGUFFile, arch: str, divisors: torch.Tensor, settings: dict) -> bool:
    from ..model import rope_frequencies, scaled_frequencies

    d_model, n_head = file.get(f"{arch}.embedding_length"), file.get(f"{arch}.attention.head_count")
    d_head = file.get(f"{arch}.attention.key_length", d_model // n_head)
    theta = file.get(f"{arch}.rope.freq_base", 10000.0)
    probe = GPTConfig(d_model=d_head, n_head=1, rope_theta=theta, **settings)
    ratio = rope_frequencies(d_head, theta) / scaled_frequencies(probe)
    return divisors.shape == ratio.shape and torch.allclose(divisors, ratio.float(), rtol=1e-3)


def gguf_tensors(file: GGUFFile, cfg: GPTConfig, arch: str, progress: Progress) -> dict[str, torch.Tensor]:
    """Our state dict (head.weight left out when tied) from the file's tensors, expanded to float32."""
    by_name, path = file.tensors, file.path
    expected = set(MODEL_TENSORS) | {"rope_freqs.weight"} | {
        f"blk.{i}.{name}" for i in range(cfg.n_layer)
        for name in [*BLOCK_TENSORS, *(f"{p}.weight" for p in QKV), *(f"{p}.bias" for p in QKV)]}
    if unexpected := sorted(set(by_name) - expected):
        raise ImportFailure("hub.gguf_unexpected", "{path} holds tensors the model here has no place for ({names}); "
                            "it reads {supported}", path=path, names=", ".join(unexpected[:4]), supported=SUPPORTED)
    needed = [*(n for n in MODEL_TENSORS if n in by_name),
              *(f"blk.{i}.{n}" for i in range(cfg.n_layer) for n in BLOCK_TENSORS if f"blk.{i}.{n}" in by_name),
              *(f"blk.{i}.{p}.{kind}" for i in range(cfg.n_layer) for p in QKV
                for kind in (("weight", "bias") if cfg.qkv_bias else ("weight",)))]
    if missing := [n for n in needed if n not in by_name]:
        raise ImportFailure("hub.gguf_missing_tensor", "{path} has no tensor {name}, which the model needs",
                            path=path, name=missing[0])
    values = expanded([by_name[n] for n in needed], path, progress)
    tensor = values.pop
    rotate = arch in ROTATE_HALF
    D = cfg.d_head
    out = {ours: tensor(theirs) for theirs, ours in MODEL_TENSORS.items() if theirs in by_name}
    for i in range(cfg.n_layer):
        block = f"blk.{i}."
        for theirs, ours in BLOCK_TENSORS.items():
            if block + theirs in by_name:
                out[f"blocks.{i}.{ours}"] = tensor(block + theirs)
        for kind in ("weight", "bias") if cfg.qkv_bias else ("weight",):
            q, k, v = (tensor(f"{block}{p}.{kind}") for p in QKV)
            if rotate:
                q, k = to_adjacent_pairs(q, D), to_adjacent_pairs(k, D)
            out[f"blocks.{i}.attn.qkv.{kind}"] = torch.cat([q, k, v])
        if rotate and cfg.qk_norm:
            for j in (0, 1):
                name = f"blocks.{i}.attn.qk_norm.{j}.weight"
                out[name] = to_adjacent_pairs(out[name], D)
    return out


def expanded(tensors: list[GGUFTensor], path: Path, progress: Progress) -> dict[str, torch.Tensor]:
    """{name: float32 tensor}, expanded on every core (numpy lets go of the interpreter while it works)."""
    out = {}
    with ThreadPoolExecutor(max(1, min(len(os.sched_getaffinity(0)), 8))) as pool:
        for done, (t, value) in enumerate(zip(tensors, pool.map(lambda t: dequantized(t, path), tensors)), 1):
            out[t.name] = value
            progress(done, len(tensors), "convert")
    return out


def dequantized(t: GGUFTensor, path: Path) -> torch.Tensor:
    """One GGUF tensor as float32, in torch's order of dimensions."""
    import gguf

    try:
        values = gguf.quants.dequantize(t.data, t.qtype)
    except NotImplementedError:
        raise ImportFailure("hub.gguf_quantization", "{path}: {name} is stored as {kind}, which the gguf package "
                            "cannot expand to float32", path=path, name=t.name, kind=t.qtype.name) from None
    values = np.asarray(values, dtype=np.float32).reshape(t.shape)
    return torch.from_numpy(values if values.flags.writeable else values.copy())


def gguf_tokenizer(file: GGUFFile, vocab_size: int) -> HFTokenizer:
    """The model's tokenizer, rebuilt as a `tokenizers` BPE from the vocabulary, merges and token types stored in the
    metadata, with the split before the merges that llama.cpp applies for its tokenizer.ggml.pre."""
    kind = file.get("tokenizer.ggml.model")
    tokens = file.get("tokenizer.ggml.tokens")
    types = file.get("tokenizer.ggml.token_type", [1] * len(tokens))
    while tokens and types[len(tokens) - 1] == UNUSED:  # rows that pad the vocabulary: no token of the tokenizer
        tokens = tokens[:-1]
    if kind == "gpt2":
        hf = byte_level_bpe(file, tokens)
        add_bos = file.get("tokenizer.ggml.add_bos_token", False)
    elif kind == "llama":
        hf = sentencepiece_bpe(file, tokens)
        add_bos = file.get("tokenizer.ggml.add_bos_token", True)
    else:
        raise ImportFailure("hub.gguf_tokenizer", "{path} has a {kind} tokenizer; the importer reads byte-level BPE "
                            "(gpt2) and sentencepiece BPE (llama) vocabularies", path=file.path, kind=kind)
    add_special_tokens(hf, tokens, types, byte_level=kind == "gpt2")
    bos = file.get("tokenizer.ggml.bos_token_id", None)
    if add_bos and bos is not None and bos < len(tokens):
        start_with(hf, tokens[bos], bos)
    return HFTokenizer(hf, vocab_size, bos, file.get("tokenizer.ggml.eos_token_id", None), add_bos,
                       file.get("tokenizer.chat_template", None))


def start_with(hf, token: str, token_id: int) -> None:
    """The tokenizer puts the BOS first when asked for special tokens, as the model's own tokenizer.json does
    (Llama 2's "<s> $A"): an exported copy, loaded by transformers' AutoTokenizer, then gives the model's ids."""
    from tokenizers import processors

    hf.post_processor = processors.TemplateProcessing(single=f"{token} $A", pair=f"{token} $A {token} $B",
                                                      special_tokens=[(token, token_id)])


def byte_level_bpe(file: GGUFFile, tokens: list[str]):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    pre = file.get("tokenizer.ggml.pre", "gpt-2")
    split = PRE_TOKENIZERS.get(pre)
    if split is None:
        raise ImportFailure("hub.gguf_pre_tokenizer", "{path} splits text the {pre} way before its merges, which the "
                            "importer does not know (it knows {known})", path=file.path, pre=pre,
                            known=", ".join(PRE_TOKENIZERS))
    merges = [tuple(m.split(" ", 1)) for m in file.get("tokenizer.ggml.merges")]
    hf = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, ignore_merges=split == "llama3"))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split in ("gpt2", "digits+gpt2"))
    if split == "digits+gpt2":
        hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif split in ("llama3", "qwen2"):
        regex = Regex(LLAMA3_SPLIT if split == "llama3" else QWEN2_SPLIT)
        hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(regex, "isolated"), byte_level])
    else:
        hf.pre_tokenizer = byte_level
    if split == "qwen2":
        hf.normalizer = normalizers.NFC()
    hf.decoder = decoders.ByteLevel()
    return hf


def sentencepiece_bpe(file: GGUFFile, tokens: list[str]):
    """A Llama 2-style vocabulary: ▁ for a space (one put before the text), <0xNN> for bytes no token spells."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    if (stored := file.get("tokenizer.ggml.merges", None)) is not None:
        merges = [tuple(m.split(" ", 1)) for m in stored]
    else:
        merges = merges_from_scores(tokens, file.get("tokenizer.ggml.scores"))
    hf = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, fuse_unk=True, byte_fallback=True))
    prefix = file.get("tokenizer.ggml.add_space_prefix", True)
    hf.pre_tokenizer = pre_tokenizers.Metaspace("▁", "first" if prefix else "never", split=False)
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    *([decoders.Strip(" ", 1, 0)] if prefix else [])])
    return hf


def merges_from_scores(tokens: list[str], scores: list[float]) -> list[tuple[str, str]]:
    """The merges a sentencepiece vocabulary implies: every split of a token into two tokens, ranked by the merged
    token's score (sentencepiece merges the pair whose result scores highest), ties as Hugging Face's converter
    breaks them (the longer left piece, then the longer right one, then the order of the vocabulary)."""
    index = {t: i for i, t in enumerate(tokens)}
    found = []
    for token, score in zip(tokens, scores):
        splits = [(token[:k], token[k:]) for k in range(1, len(token)) if token[:k] in index and token[k:] in index]
        found += [(score, left, right) for left, right in sorted(splits, key=lambda p: (index[p[0]], index[p[1]]))]
    found.sort(key=lambda m: (m[0], len(m[1]), len(m[2])), reverse=True)  # (a stable sort, also reversed)
    return [(left, right) for _, left, right in found]


def add_special_tokens(hf, tokens: list[str], types: list[int], byte_level: bool) -> None:
    """Tokens marked control become special tokens, user-defined ones added tokens: both matched whole in text.
    In a byte-level vocabulary a control token spelled outside the byte alphabet is a mislabel and is left as is."""
    from tokenizers import AddedToken

    from ..tokenizer import byte_alphabet

    alphabet = byte_alphabet()
    control = [t for t, kind in zip(tokens, types)
               if kind == CONTROL and (not byte_level or all(c in alphabet for c in t))]
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    hf.add_tokens([AddedToken(t, special=False, normalized=False) for t, kind in zip(tokens, types)
                   if kind == USER_DEFINED])
