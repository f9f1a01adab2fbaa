"""Inside one prediction: the forward pass at one position, stage by stage.

`trace` lays out every intermediate tensor of one position (token id → … → next-token distribution), each with the
gptcore source line that computed it and keys naming its kind of step (a page words them in its language).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import torch

from ..errors import InputError
from ..generate import sample_next
from ..inspector import sampling_distribution
from ..model import GPT, Attention, Block, FeedForward, RMSNorm, apply_rope
from ..tokenizer import BPETokenizer, CharTokenizer, HFTokenizer, Tokenizer
from .capture import Capture, as_ids, capture, device_of

PROJECT_ROOT = Path(__file__).resolve().parents[2]


# --- where a stage was computed ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SourceLine:
    path: str  # relative to the project root
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def _source_at(function, lines: list[str], start: int, offset: int) -> SourceLine:
    path = Path(inspect.getsourcefile(function)).resolve()
    shown = path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path
    return SourceLine(shown.as_posix(), start + offset, lines[offset].strip())


@cache
def code_line(function, snippet: str) -> SourceLine:
    """The one line of function's source containing `snippet`, with its file and line number.

    Looked up with inspect at run time, so the line shown is always the line that runs; a snippet on no line or on
    two is a bug here (the code was edited without its entry in STAGE_LINES), caught by the tests."""
    lines, start = inspect.getsourcelines(function)
    found = [offset for offset, text in enumerate(lines) if snippet in text]
    if len(found) != 1:
        raise LookupError(f"{function.__qualname__} has {len(found)} lines containing {snippet!r}, not one")
    return _source_at(function, lines, start, found[0])


# Each step of a trace and where it is computed: (function, a piece of the one line of it that computes the step),
# in the order a token meets them. tests/test_interp.py checks that every entry still finds its one line.
STAGE_LINES: dict[str, list[tuple[Callable, str]]] = {
    "embed": [(GPT.forward, "x = self.hook_embed(self.emb(idx))")],
    "pos_embed": [(GPT.forward, "self.hook_pos_embed(self.pos_emb(")],
    "ln1": [(Block.forward, "attn_out = self.hook_attn_out(")],
    "rmsnorm": [(RMSNorm.forward, "torch.rsqrt(")],  # inside every RMSNorm's stage
    "qkv": [(Attention.project, "qkv = self.qkv(x)")],
    "qk_norm": [(Attention.project, "for norm, t in zip(self.qk_norm")],
    "rope": [(Attention.forward, "apply_rope(qk,"), (apply_rope, "pairs * torch.complex(cos, sin)")],
    "scores": [(Attention._explicit, "scores = (q @ k.transpose(-2, -1))"),
               (Attention._explicit, "scores.masked_fill(")],
    "pattern": [(Attention._explicit, ".softmax(-1)) @ v")],
    "z": [(Attention._explicit, ".softmax(-1)) @ v")],
    "result": [(Attention._per_head, "torch.einsum("), (Attention.forward, "return self.proj(")],
    "resid_mid": [(Block.forward, "x = self.hook_resid_mid(x + attn_out)")],
    "resid_mid_norm": [(Block.forward, "self.ln1(x + self.hook_attn_out(")],
    "ln2": [(Block.forward, "ffn_out = self.hook_mlp_out(")],
    "ffn_pre": [(FeedForward.forward, "self.act(self.hook_pre(self.w1(x)))")],
    "ffn_act": [(FeedForward.forward, "self.act(self.hook_pre(self.w1(x)))")],
    "ffn_gate": [(FeedForward.forward, "self.hook_pre_linear(self.w3(x))")],
    "ffn_hidden": [(FeedForward.forward, "self.hook_pre_linear(self.w3(x))")],
    "ffn_out": [(FeedForward.forward, "return self.w2(")],
    "resid_post": [(Block.forward, "return self.hook_resid_post(x + ffn_out)")],
    "resid_post_norm": [(Block.forward, "self.ln2(x + self.hook_mlp_out(")],
    "ln_f": [(GPT.forward, "self.head(self.hook_ln_f_out(")],
    "logits": [(GPT.forward, "self.head(self.hook_ln_f_out(")],
    "probs": [(sampling_distribution, "scaled = logits / temperature"),  # computed as generation computes it
              (sampling_distribution, "scaled.masked_fill("), (sampling_distribution, "scaled.softmax(-1)")],
    "next": [(sample_next, "scaled = logits / temperature"), (sample_next, "torch.multinomial("),
             (sample_next, "logits.argmax(-1, keepdim=True)")],  # how generation picks it
}
# the line computing attention when nothing observes its scores: the fused kernel a traced pass cannot use
FUSED_ATTENTION = (Attention.forward, "F.scaled_dot_product_attention(")
# the line that turns text into ids, for each tokenizer
ENCODE_LINES: dict[type, str] = {CharTokenizer: "self.stoi[c] for c in text", BPETokenizer: "self.hf.encode(text",
                                 HFTokenizer: "self.hf.encode(text"}


def stage_lines(step: str) -> list[SourceLine]:
    return [code_line(function, snippet) for function, snippet in STAGE_LINES[step]]


def encode_lines(tokenizer: Tokenizer | None) -> list[SourceLine]:
    """The tokenizer's encoding line (none for a tokenizer of another kind, or none given)."""
    return [code_line(kind.encode, snippet) for kind, snippet in ENCODE_LINES.items() if isinstance(tokenizer, kind)]


# --- the trace ----------------------------------------------------------------------------------------------------

SECTIONS = ("input", "attention", "ffn", "output")  # the part of the model a stage belongs to


@dataclass
class Stage:
    """One step of the forward pass at the traced position.

    `step` names the kind of step ("qkv", "scores", "ln2", …) and `description` the sentence that explains it
    (both are keys: a page looks up their words in its catalog); `kind` decides how the value is drawn.
    """
    key: str  # unique within a trace: "token", "L1.scores", "ln_f", …
    step: str
    section: str  # one of SECTIONS
    kind: str
    value: torch.Tensor  # the stage's tensor for the traced position
    description: str
    sources: list[SourceLine]
    layer: int | None = None
    hook: str | None = None  # the hook point the value was read at
    parts: dict[str, torch.Tensor] = field(default_factory=dict)  # the step's inputs, for drawing it
    # the line that computes the same value when nothing observes the attention scores: the fused SDPA kernel,
    # which the traced pass could not use (its scores and weights never exist as tensors there)
    unobserved: SourceLine | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)


@dataclass
class Trace:
    ids: torch.Tensor  # (T,)
    position: int
    stages: list[Stage]
    logits: torch.Tensor  # (V,) the model's own logits at position
    probs: torch.Tensor  # (V,) after temperature and top-k

    def index(self, key: str) -> int:
        return next(i for i, s in enumerate(self.stages) if s.key == key)

    def __getitem__(self, key: str) -> Stage:
        return self.stages[self.index(key)]


def _norm_stage(norm, x: torch.Tensor, out: torch.Tensor, key: str, step: str, section: str, hook: str,
                sources: list[SourceLine], layer: int | None = None, description: str | None = None) -> Stage:
    """A norm's stage: its input vector, what it subtracts and divides by, and its gain, for drawing the step."""
    parts = {"input": x, "gain": norm.weight.detach().cpu()}
    if isinstance(norm, RMSNorm):
        parts["mean"] = torch.zeros(())
        parts["scale"] = x.square().mean().add(norm.eps).sqrt()
        sources = [*sources, *stage_lines("rmsnorm")]
        description = description or "norm"
    else:
        parts["mean"] = x.mean()
        parts["scale"] = x.var(unbiased=False).add(norm.eps).sqrt()
        parts["shift"] = norm.bias.detach().cpu()
        description = description or "layernorm"
    return Stage(key, step, section, "norm", out, description, sources, layer, hook, parts)


def _kv_groups(cfg) -> dict[str, torch.Tensor]:
    """{"kv_head": (H,) the key/value head of each query head} with grouped-query attention, else nothing."""
    if cfg.kv_heads == cfg.n_head:
        return {}
    return {"kv_head": torch.arange(cfg.n_head) // (cfg.n_head // cfg.kv_heads)}


def _owned(stage: Stage) -> Stage:
    """The stage with its own copies of its tensors: slices of a Capture would keep all of it alive."""
    stage.value = stage.value.clone()
    stage.parts = {name: part.clone() for name, part in stage.parts.items()}
    return stage


def _block_stages(model: GPT, cap: Capture, layer: int, pos: int) -> list[Stage]:
    """The stages of one block at position pos, in the order the block computes them."""
    cfg, block = model.cfg, model.blocks[layer]
    p = f"blocks.{layer}."
    a = cap.acts
    pre = cfg.norm_placement == "pre"
    keys = slice(0, pos + 1)  # the positions this query can see

    def stage(step, section, kind, hook, value, description, sources, unobserved=None, **parts):
        return Stage(f"L{layer}.{step}", step, section, kind, value, description, sources, layer, hook, parts,
                     unobserved)

    def norm(step, module, x, hook, section, description=None):
        return _norm_stage(module, x, a[hook][pos], f"L{layer}.{step}", step, section, hook, stage_lines(step), layer,
                           description)

    stages = []
    resid = a[p + "hook_resid_pre"][pos]
    if pre:
        stages.append(norm("ln1", block.ln1, resid, p + "hook_ln1_out", "attention"))
    qkv_lines = stage_lines("qkv") + (stage_lines("qk_norm") if cfg.qk_norm else [])
    grouped = _kv_groups(cfg)  # which key/value head each query head reads, when they are shared
    description = ("qkv_norm" if cfg.qk_norm else "qkv") + ("_gqa" if grouped else "")
    stages.append(stage("qkv", "attention", "qkv", p + "attn.hook_q", a[p + "attn.hook_q"][pos], description,
                        qkv_lines, k=a[p + "attn.hook_k"][pos], v=a[p + "attn.hook_v"][pos], **grouped))
    if cfg.position == "rope":
        stages.append(stage("rope", "attention", "rope", p + "attn.hook_rot_q", a[p + "attn.hook_rot_q"][pos], "rope",
                            stage_lines("rope"),
                            q=a[p + "attn.hook_q"][pos], k=a[p + "attn.hook_k"][pos],
                            rot_k=a[p + "attn.hook_rot_k"][pos], **grouped))
    stages.append(stage("scores", "attention", "scores", p + "attn.hook_attn_scores",
                        a[p + "attn.hook_attn_scores"][:, pos, keys], "scores",
                        stage_lines("scores"), **grouped))
    stages.append(stage("pattern", "attention", "pattern", p + "attn.hook_pattern",
                        a[p + "attn.hook_pattern"][:, pos, keys], "pattern",
                        stage_lines("pattern"), **grouped))
    stages.append(stage("z", "attention", "heads", p + "attn.hook_z", a[p + "attn.hook_z"][pos], "z",
                        stage_lines("z"), code_line(*FUSED_ATTENTION),
                        v=a[p + "attn.hook_v"][keys], pattern=a[p + "attn.hook_pattern"][:, pos, keys]))
    stages.append(stage("result", "attention", "result", p + "attn.hook_result", a[p + "attn.hook_result"][pos],
                        "result", stage_lines("result"),
                        total=a[p + "hook_attn_out"][pos]))
    if pre:
        stages.append(stage("resid_mid", "attention", "residual", p + "hook_resid_mid", a[p + "hook_resid_mid"][pos],
                            "resid_attn", stage_lines("resid_mid"), before=resid, added=a[p + "hook_attn_out"][pos]))
        mid = a[p + "hook_resid_mid"][pos]
        stages.append(norm("ln2", block.ln2, mid, p + "hook_ln2_out", "ffn"))
    else:  # post-norm: the sum itself is normed, and that is the stream
        stages.append(norm("resid_mid_norm", block.ln1, resid + a[p + "hook_attn_out"][pos], p + "hook_resid_mid",
                           "attention", "resid_attn_post"))
        mid = a[p + "hook_resid_mid"][pos]
    stages.append(stage("ffn_pre", "ffn", "vector", p + "mlp.hook_pre", a[p + "mlp.hook_pre"][pos], "ffn_pre",
                        stage_lines("ffn_pre")))
    stages.append(stage("ffn_act", "ffn", "activation", p + "mlp.hook_act", a[p + "mlp.hook_act"][pos],
                        f"ffn_act_{cfg.ffn}", stage_lines("ffn_act"), input=a[p + "mlp.hook_pre"][pos]))
    if cfg.ffn == "swiglu":
        stages.append(stage("ffn_gate", "ffn", "vector", p + "mlp.hook_pre_linear", a[p + "mlp.hook_pre_linear"][pos],
                            "ffn_gate", stage_lines("ffn_gate")))
        stages.append(stage("ffn_hidden", "ffn", "product", p + "mlp.hook_post", a[p + "mlp.hook_post"][pos],
                            "ffn_hidden", stage_lines("ffn_hidden"),
                            act=a[p + "mlp.hook_act"][pos], gate=a[p + "mlp.hook_pre_linear"][pos]))
    stages.append(stage("ffn_out", "ffn", "vector", p + "hook_mlp_out", a[p + "hook_mlp_out"][pos], "ffn_out",
                        stage_lines("ffn_out")))
    if pre:
        stages.append(stage("resid_post", "ffn", "residual", p + "hook_resid_post", a[p + "hook_resid_post"][pos],
                            "resid_ffn", stage_lines("resid_post"), before=mid, added=a[p + "hook_mlp_out"][pos]))
    else:
        stages.append(norm("resid_post_norm", block.ln2, mid + a[p + "hook_mlp_out"][pos], p + "hook_resid_post",
                           "ffn", "resid_ffn_post"))
    return stages


def trace(model: GPT, ids, position: int, cap: Capture | None = None, tokenizer: Tokenizer | None = None,
          temperature: float = 1.0, top_k: int | None = None) -> Trace:
    """Every stage of the forward pass at `position` of ids (T,), read from the model's hook points.

    Pass the Capture of ids to reuse one forward pass for many positions (it is all a trace reads).
    """
    ids = as_ids(ids)
    if not 0 <= position < len(ids):
        raise InputError("interp.position", "position must be between 0 and {last}, got {position}",
                         last=len(ids) - 1, position=position)
    cap = capture(model, ids) if cap is None else cap
    a, cfg, pos = cap.acts, model.cfg, position
    stages = [
        Stage("token", "token", "input", "token", ids[pos], "token", encode_lines(tokenizer)),
        Stage("embed", "embed", "input", "vector", a["hook_embed"][pos], "embed", stage_lines("embed"),
              hook="hook_embed"),
    ]
    if cfg.position == "learned":
        stages.append(Stage("pos_embed", "pos_embed", "input", "residual", a["blocks.0.hook_resid_pre"][pos],
                            "pos_embed", stage_lines("pos_embed"), hook="hook_pos_embed",
                            parts={"before": a["hook_embed"][pos], "added": a["hook_pos_embed"][pos]}))
    for layer in range(cfg.n_layer):
        stages += _block_stages(model, cap, layer, pos)
    if cfg.norm_placement == "pre":
        final = a[f"blocks.{cfg.n_layer - 1}.hook_resid_post"][pos]
        stages.append(_norm_stage(model.ln_f, final, a["hook_ln_f_out"][pos], "ln_f", "ln_f", "output",
                                  "hook_ln_f_out", stage_lines("ln_f"),
                                  description="final_norm" if isinstance(model.ln_f, RMSNorm) else "layernorm"))
    logits = cap.logits[pos]
    probs = sampling_distribution(logits, temperature, top_k)
    stages += [
        Stage("logits", "logits", "output", "logits", logits, "logits_tied" if cfg.tie_embeddings else "logits",
              stage_lines("logits")),
        Stage("probs", "probs", "output", "probs", probs, "probs", stage_lines("probs")),
        Stage("next", "next", "output", "next", probs.argmax(), "next", stage_lines("next"), parts={"probs": probs}),
    ]
    return Trace(ids, pos, [_owned(stage) for stage in stages], logits.clone(), probs)


def rebuild_logits(model: GPT, tr: Trace) -> torch.Tensor:
    """The logits at the traced position recomputed from the traced values alone (pre-norm models).

    The residual stream is the embedding plus every head's output after W_O plus every FFN's output; the final
    norm and the head then give the logits. A test holds this against the model's own logits.
    """
    resid = tr["embed"].value.clone()
    if "pos_embed" in {s.key for s in tr.stages}:
        resid = tr["pos_embed"].value.clone()
    for layer in range(model.cfg.n_layer):
        resid += tr[f"L{layer}.result"].value.sum(0) + tr[f"L{layer}.ffn_out"].value
    with torch.no_grad():
        return model.head(model.ln_f(resid.to(device_of(model)))).cpu()

