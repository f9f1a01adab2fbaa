"""Inside one prediction: a position's forward pass stage by stage, and four ways to ask what the model relies on.

- `trace` lays out every intermediate tensor of one position (token id → … → next-token distribution), each with
  the gptcore source line that computed it and keys naming its kind of step (a page words them in its language).
- `logit_lens` reads the residual stream after the embedding, after each attention sublayer and after each block
  through the final norm and the head, as if the model stopped there.
- `logit_attribution` splits a logit difference (the next token against a foil) into what the embedding, each head
  and each FFN wrote straight into the stream: the direct path only.
- `ablate` / `ablation_sweep` switch heads and FFNs off (to zero, or to their mean over a fixed reference text);
  `patched_logits` and the `patch_*` sweeps copy activations from a clean prompt into a corrupted one and measure how
  much of the clean answer comes back. gptcore.circuits builds on these: direct against total effects, a head's
  output split by source position, and patching one side (query, key or value) of a head.

Everything is read or changed through the model's hook points (gptcore.model.HookPoint); the model itself is
never special-cased. Pure torch and pandas: no streamlit, no plotly.
"""
from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

from .errors import InputError
from .generate import sample_next
from .inspector import MODEL_LOCK, sampling_distribution
from .model import GPT, Attention, Block, FeedForward, RMSNorm, RMSNormFunction, apply_rope
from .tokenizer import Tokenizer

Progress = Callable[[int, int], None]  # (done, total)
PROJECT_ROOT = Path(__file__).resolve().parent.parent
UNBATCHED = {"hook_pos_embed"}  # the same position rows go into every sequence: (T, d_model), no batch dimension


# --- running the model with every hook point observed ------------------------------------------------------------

@dataclass
class Capture:
    """One forward pass over one sequence with every hook point's activation (batch dimension dropped)."""
    ids: torch.Tensor  # (T,)
    logits: torch.Tensor  # (T, V)
    acts: dict[str, torch.Tensor]

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.acts[name]


def as_ids(ids) -> torch.Tensor:
    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    if ids.numel() == 0:
        raise InputError("interp.no_tokens", "the text has no token the model knows")
    return ids


def check_length(model: GPT, ids: torch.Tensor) -> None:
    if len(ids) > model.cfg.context:
        raise InputError("interp.too_long", "the text is {n} tokens long; the model's context is {context}",
                         n=len(ids), context=model.cfg.context)


@torch.no_grad()
def capture(model: GPT, ids) -> Capture:
    """Forward pass over ids (T,) observing every hook point, on the model's device; what it keeps is on the CPU."""
    ids = as_ids(ids)
    check_length(model, ids)
    with MODEL_LOCK:  # hooks live on the (possibly shared) model object: one hooked pass at a time
        logits, acts = model.run_with_cache(ids[None].to(device_of(model)), list(model.hook_points()))
    return Capture(ids, logits[0].cpu(), {name: (a if name in UNBATCHED else a[0]).cpu() for name, a in acts.items()})


def device_of(model: GPT) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def run_hooked(model: GPT, ids: torch.Tensor, edits: dict[str, Callable[[torch.Tensor], torch.Tensor]]) -> torch.Tensor:
    """Logits (B, T, V) of ids (B, T) with each named hook point's activation replaced by edits[name](activation).

    The edits see CPU tensors, like the Capture they copy from, whatever device the model runs on.
    """
    with MODEL_LOCK, model.hooks(list(edits), lambda name, act: edits[name](act.cpu()).to(act.device)):
        logits, _ = model(ids.to(device_of(model)))
    return logits.cpu()


# --- where a stage was computed ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SourceLine:
    path: str  # relative to the project root
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


MARKER = re.compile(r"#\s*trace:\s*([\w, ]+?)\s*$")  # "# trace: ln_f, logits", ending a line or alone above it


def _marked(text: str) -> list[str]:
    """The names a line's `# trace:` comment gives (none when it has none)."""
    found = MARKER.search(text)
    return [name.strip() for name in found.group(1).split(",")] if found else []


def _code(text: str) -> str:
    return MARKER.sub("", text).strip()


def _source_at(function, lines: list[str], start: int, offset: int) -> SourceLine:
    path = Path(inspect.getsourcefile(function)).resolve()
    shown = path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path
    return SourceLine(shown.as_posix(), start + offset, _code(lines[offset]))


@cache
def code_line(function, snippet: str) -> SourceLine:
    """The one line of function's source containing `snippet`: for code outside the model, which has no markers."""
    lines, start = inspect.getsourcelines(function)
    found = [offset for offset, text in enumerate(lines) if snippet in _code(text)]
    if len(found) != 1:
        raise LookupError(f"{function.__qualname__} has {len(found)} lines containing {snippet!r}, not one")
    return _source_at(function, lines, start, found[0])


@cache
def source_line(function, name: str) -> SourceLine:
    """The line of function's source that computes the stage `name`, with its file and line number.

    The line says so with a comment, `# trace: <name>` at its end or alone on the line above it, so editing the code
    around it never moves what a page shows. Looked up with inspect at run time, so the line shown is always the
    line that runs; a name missing or given twice is a bug here (the model was edited), caught by the tests.
    """
    lines, start = inspect.getsourcelines(function)
    found = [offset + (not _code(text)) for offset, text in enumerate(lines) if name in _marked(text)]
    if len(found) != 1:
        raise LookupError(f"{function.__qualname__} has {len(found)} lines marked '# trace: {name}', not one")
    return _source_at(function, lines, start, found[0])


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
        sources = [*sources, source_line(RMSNormFunction.forward, "norm")]
        description = description or "norm"
    else:
        parts["mean"] = x.mean()
        parts["scale"] = x.var(unbiased=False).add(norm.eps).sqrt()
        parts["shift"] = norm.bias.detach().cpu()
        description = description or "layernorm"
    return Stage(key, step, section, "norm", out, description, sources, layer, hook, parts)


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

    def fwd(marker):
        return [source_line(Block.forward, marker)]

    def norm(step, module, x, hook, section, marker, description=None):
        return _norm_stage(module, x, a[hook][pos], f"L{layer}.{step}", step, section, hook, fwd(marker), layer,
                           description)

    stages = []
    resid = a[p + "hook_resid_pre"][pos]
    if pre:
        stages.append(norm("ln1", block.ln1, resid, p + "hook_ln1_out", "attention", "ln1"))
    qkv_lines = [source_line(Attention.project, "qkv")]
    if cfg.qk_norm:
        qkv_lines.append(source_line(Attention.project, "qk_norm"))
    stages.append(stage("qkv", "attention", "qkv", p + "attn.hook_q", a[p + "attn.hook_q"][pos],
                        "qkv_norm" if cfg.qk_norm else "qkv", qkv_lines,
                        k=a[p + "attn.hook_k"][pos], v=a[p + "attn.hook_v"][pos]))
    if cfg.position == "rope":
        stages.append(stage("rope", "attention", "rope", p + "attn.hook_rot_q", a[p + "attn.hook_rot_q"][pos], "rope",
                            [source_line(Attention.forward, "rope"),
                             source_line(apply_rope, "rotate")],
                            q=a[p + "attn.hook_q"][pos], k=a[p + "attn.hook_k"][pos],
                            rot_k=a[p + "attn.hook_rot_k"][pos]))
    stages.append(stage("scores", "attention", "scores", p + "attn.hook_scores",
                        a[p + "attn.hook_scores"][:, pos, keys], "scores",
                        [source_line(Attention._explicit, "scores"),
                         source_line(Attention._explicit, "mask")]))
    stages.append(stage("pattern", "attention", "pattern", p + "attn.hook_pattern",
                        a[p + "attn.hook_pattern"][:, pos, keys], "pattern",
                        [source_line(Attention._explicit, "pattern")]))
    stages.append(stage("z", "attention", "heads", p + "attn.hook_z", a[p + "attn.hook_z"][pos], "z",
                        [source_line(Attention._explicit, "pattern")],
                        code_line(Attention.forward, "F.scaled_dot_product_attention("),
                        v=a[p + "attn.hook_v"][keys], pattern=a[p + "attn.hook_pattern"][:, pos, keys]))
    stages.append(stage("result", "attention", "result", p + "attn.hook_result", a[p + "attn.hook_result"][pos],
                        "result", [source_line(Attention._per_head, "per_head"),
                                   source_line(Attention.forward, "proj")],
                        total=a[p + "hook_attn_out"][pos]))
    if pre:
        stages.append(stage("resid_mid", "attention", "residual", p + "hook_resid_mid", a[p + "hook_resid_mid"][pos],
                            "resid_attn", fwd("resid_mid"), before=resid, added=a[p + "hook_attn_out"][pos]))
        mid = a[p + "hook_resid_mid"][pos]
        stages.append(norm("ln2", block.ln2, mid, p + "hook_ln2_out", "ffn", "ln2"))
    else:  # post-norm: the sum itself is normed, and that is the stream
        stages.append(norm("resid_mid_norm", block.ln1, resid + a[p + "hook_attn_out"][pos], p + "hook_resid_mid",
                           "attention", "resid_mid_norm", "resid_attn_post"))
        mid = a[p + "hook_resid_mid"][pos]
    f = FeedForward.forward
    stages.append(stage("ffn_pre", "ffn", "vector", p + "ffn.hook_pre", a[p + "ffn.hook_pre"][pos], "ffn_pre",
                        [source_line(f, "ffn_pre")]))
    stages.append(stage("ffn_act", "ffn", "activation", p + "ffn.hook_act", a[p + "ffn.hook_act"][pos],
                        f"ffn_act_{cfg.ffn}", [source_line(f, "ffn_act")], input=a[p + "ffn.hook_pre"][pos]))
    if cfg.ffn == "swiglu":
        stages.append(stage("ffn_gate", "ffn", "vector", p + "ffn.hook_gate", a[p + "ffn.hook_gate"][pos],
                            "ffn_gate", [source_line(f, "ffn_gate")]))
        stages.append(stage("ffn_hidden", "ffn", "product", p + "ffn.hook_hidden", a[p + "ffn.hook_hidden"][pos],
                            "ffn_hidden", [source_line(f, "ffn_hidden")],
                            act=a[p + "ffn.hook_act"][pos], gate=a[p + "ffn.hook_gate"][pos]))
    stages.append(stage("ffn_out", "ffn", "vector", p + "hook_ffn_out", a[p + "hook_ffn_out"][pos], "ffn_out",
                        [source_line(f, "ffn_out")]))
    if pre:
        stages.append(stage("resid_post", "ffn", "residual", p + "hook_resid_post", a[p + "hook_resid_post"][pos],
                            "resid_ffn", fwd("resid_post"), before=mid, added=a[p + "hook_ffn_out"][pos]))
    else:
        stages.append(norm("resid_post_norm", block.ln2, mid + a[p + "hook_ffn_out"][pos], p + "hook_resid_post",
                           "ffn", "resid_post_norm", "resid_ffn_post"))
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
    fwd = GPT.forward
    encode = type(tokenizer).encode if tokenizer is not None else None
    token_source = [source_line(encode, "token")] if encode is not None and encode is not Tokenizer.encode else []
    stages = [
        Stage("token", "token", "input", "token", ids[pos], "token", token_source),
        Stage("embed", "embed", "input", "vector", a["hook_embed"][pos], "embed", [source_line(fwd, "embed")],
              hook="hook_embed"),
    ]
    if cfg.position == "learned":
        stages.append(Stage("pos_embed", "pos_embed", "input", "residual", a["blocks.0.hook_resid_pre"][pos],
                            "pos_embed", [source_line(fwd, "pos_embed")], hook="hook_pos_embed",
                            parts={"before": a["hook_embed"][pos], "added": a["hook_pos_embed"][pos]}))
    for layer in range(cfg.n_layer):
        stages += _block_stages(model, cap, layer, pos)
    if cfg.norm_placement == "pre":
        final = a[f"blocks.{cfg.n_layer - 1}.hook_resid_post"][pos]
        stages.append(_norm_stage(model.ln_f, final, a["hook_ln_f_out"][pos], "ln_f", "ln_f", "output",
                                  "hook_ln_f_out", [source_line(fwd, "ln_f")],
                                  description="final_norm" if isinstance(model.ln_f, RMSNorm) else "layernorm"))
    logits = cap.logits[pos]
    probs = sampling_distribution(logits, temperature, top_k)
    stages += [
        Stage("logits", "logits", "output", "logits", logits, "logits", [source_line(fwd, "logits")]),
        Stage("probs", "probs", "output", "probs", probs, "probs",  # computed as generation computes it
              [code_line(sampling_distribution, "scaled = logits / temperature"),
               code_line(sampling_distribution, "scaled.masked_fill("),
               code_line(sampling_distribution, "scaled.softmax(-1)")]),
        Stage("next", "next", "output", "next", probs.argmax(), "next",
              [source_line(sample_next, "temperature"), source_line(sample_next, "sample"),
               source_line(sample_next, "argmax")],  # how generation picks it
              parts={"probs": probs}),
    ]
    return Trace(ids, pos, stages, logits, probs)


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


# --- logit lens ---------------------------------------------------------------------------------------------------

@dataclass
class LogitLens:
    rows: list[str]  # "embedding", "attention 0", "block 0", "attention 1", …
    probs: torch.Tensor  # (rows, T, V)
    ids: torch.Tensor  # (T,)

    def readable_from(self, position: int, token: int) -> int | None:
        """The first row from which `token` is the lens's top guess at position in every later row, or None.

        That is where the answer becomes readable through the final norm and the head, which is not the same as
        where it was computed: a component can write it in a direction the readout only picks up later."""
        top = self.probs[:, position].argmax(-1) == token
        if not top[-1]:
            return None
        wrong = (~top).nonzero()
        return 0 if len(wrong) == 0 else int(wrong[-1]) + 1

    def true_next(self) -> torch.Tensor:
        """(rows, T-1): probability each row gives to the token that really comes next."""
        nxt = self.ids[1:]
        return self.probs[:, :-1].gather(-1, nxt.expand(len(self.rows), -1)[..., None])[..., 0]

    def top(self, k: int = 1) -> torch.return_types.topk:
        return self.probs.topk(k, dim=-1)


def residual_rows(model: GPT) -> list[tuple[str, str]]:
    """(label, hook name) of the residual stream after the embedding and after each block."""
    return [("embedding", "blocks.0.hook_resid_pre")] + [
        (f"block {i}", f"blocks.{i}.hook_resid_post") for i in range(model.cfg.n_layer)]


def lens_rows(model: GPT) -> list[tuple[str, str]]:
    """(label, hook name) of the residual stream after the embedding, then after each attention sublayer and each
    block in turn."""
    rows = [("embedding", "blocks.0.hook_resid_pre")]
    for i in range(model.cfg.n_layer):
        rows += [(f"attention {i}", f"blocks.{i}.hook_resid_mid"), (f"block {i}", f"blocks.{i}.hook_resid_post")]
    return rows


@torch.no_grad()
def logit_lens(model: GPT, cap: Capture) -> LogitLens:
    """Each residual row through the final norm and the head: what the model would predict if it stopped there.

    The last row is the model's real output.
    """
    rows = lens_rows(model)
    stream = torch.stack([cap[hook] for _, hook in rows])  # (rows, T, d_model)
    probs = model.head(model.ln_f(stream.to(device_of(model)))).softmax(-1).cpu()
    return LogitLens([label for label, _ in rows], probs, cap.ids)


# --- direct logit attribution ---------------------------------------------------------------------------------------

def head_label(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def ffn_label(layer: int) -> str:
    return f"L{layer} FFN"


def runner_up(logits: torch.Tensor, target: int) -> int:
    """The most likely token other than target under logits (V,): the default foil."""
    return int(logits.masked_fill(torch.arange(len(logits)) == target, float("-inf")).argmax())


@dataclass
class Attribution:
    parts: pd.DataFrame  # component, kind ("embedding", "head", "FFN", "norm"), layer, head, logit
    logit: float  # the model's own logit(target) − logit(foil) at position (logit(target) without a foil)
    target: int
    foil: int | None
    position: int
    scale: float  # the final norm's 1/rms (or 1/std), frozen

    @property
    def total(self) -> float:
        return float(self.parts["logit"].sum())


@dataclass(frozen=True)
class Readout:
    """The final norm and head at one position, linearised: a component's vector c adds direction · c to the
    measured logit difference (its direct effect). A LayerNorm's mean removal and shift add `offset` on top."""
    direction: torch.Tensor  # (d_model,) float64: scale · γ ⊙ (W_U[target] − W_U[foil])
    scale: float
    offset: float


@torch.no_grad()
def readout(model: GPT, cap: Capture, position: int, target: int, foil: int | None = None) -> Readout:
    """The frozen readout of logit(target) − logit(foil) at position (of logit(target) when foil is None).

    The final norm's scale is frozen at its value for this position (as is standard), which makes the readout
    linear in the residual stream, so it splits over the stream's summands.
    """
    cfg = model.cfg
    if cfg.norm_placement != "pre":
        raise InputError("interp.attribution_post_norm", "direct logit attribution needs a pre-norm model: in a "
                         "post-norm model every block renormalises the stream, so it is not a sum of the components' "
                         "outputs")
    if not 0 <= position < len(cap.ids):
        raise InputError("interp.position", "position must be between 0 and {last}, got {position}",
                         last=len(cap.ids) - 1, position=position)
    final = cap[f"blocks.{cfg.n_layer - 1}.hook_resid_post"][position].double()
    norm, unembed = model.ln_f, model.head.weight.double().cpu()
    unembed_row = unembed[target] - (0 if foil is None else unembed[foil])
    gained = norm.weight.double().cpu() * unembed_row
    if isinstance(norm, RMSNorm):
        scale, offset = torch.rsqrt(final.square().mean() + norm.eps), 0.0
    else:  # the mean LayerNorm subtracts, and its shift β
        scale = torch.rsqrt(final.var(unbiased=False) + norm.eps)
        offset = float(-scale * final.mean() * gained.sum() + norm.bias.double().cpu() @ unembed_row)
    return Readout(scale * gained, float(scale), offset)


def residual_summands(model: GPT, cap: Capture, position: int) -> list[tuple[str, str, int | None, int | None,
                                                                            torch.Tensor]]:
    """(name, kind, layer, head, vector) of everything added into the residual stream at position; in a pre-norm
    model they sum to the final residual."""
    rows = [("embedding", "embedding", None, None, cap["hook_embed"][position])]
    if model.cfg.position == "learned":
        rows.append(("positions", "embedding", None, None, cap["hook_pos_embed"][position]))
    for layer in range(model.cfg.n_layer):
        result = cap[f"blocks.{layer}.attn.hook_result"][position]
        rows += [(head_label(layer, h), "head", layer, h, result[h]) for h in range(model.cfg.n_head)]
        rows.append((ffn_label(layer), "FFN", layer, None, cap[f"blocks.{layer}.hook_ffn_out"][position]))
    return rows


@torch.no_grad()
def logit_attribution(model: GPT, cap: Capture, position: int, target: int, foil: int | None = None) -> Attribution:
    """How much each component's direct write into the residual stream adds to logit(target) − logit(foil).

    Direct means straight into the final norm and head at this position: what a head does through later layers
    (moving information that a later head reads, say) is not counted here; ablation measures that total effect.
    A difference against a foil cancels what every logit shares (the stream's size, a bias towards common tokens),
    so what is left is what tells the two tokens apart. Together the rows add up to the model's own difference.
    """
    frozen = readout(model, cap, position, target, foil)
    frame = pd.DataFrame([{"component": name, "kind": kind, "layer": layer, "head": head,
                           "logit": float(vec.double() @ frozen.direction)}
                          for name, kind, layer, head, vec in residual_summands(model, cap, position)])
    if not isinstance(model.ln_f, RMSNorm):
        frame.loc[len(frame)] = {"component": "final norm", "kind": "norm", "layer": None, "head": None,
                                 "logit": frozen.offset}
    measured = cap.logits[position, target] - (0 if foil is None else cap.logits[position, foil])
    return Attribution(frame, float(measured), int(target), foil, position, frozen.scale)


# --- ablation -----------------------------------------------------------------------------------------------------

ABLATIONS = ("zero", "mean")
_COMPONENT = re.compile(r"^L(\d+)(?:H(\d+)| FFN)$")


def components(model: GPT) -> list[str]:
    """Every head and FFN by name: L0H0 … L0H3, L0 FFN, L1H0, …"""
    names = []
    for layer in range(model.cfg.n_layer):
        names += [head_label(layer, h) for h in range(model.cfg.n_head)] + [ffn_label(layer)]
    return names


def parse_component(model: GPT, name: str) -> tuple[int, int | None]:
    """(layer, head) of "L1H2", (layer, None) of "L1 FFN"."""
    match = _COMPONENT.match(name.strip())
    if not match:
        raise InputError("interp.bad_component", "{name!r} names no head or FFN (write L1H2 or L1 FFN)", name=name)
    layer, head = int(match[1]), None if match[2] is None else int(match[2])
    if layer >= model.cfg.n_layer or (head is not None and head >= model.cfg.n_head):
        raise InputError("interp.no_component", "{name} does not exist: the model has {n_layer} layers of {n_head} "
                         "heads", name=name, n_layer=model.cfg.n_layer, n_head=model.cfg.n_head)
    return layer, head


# A fixed text for mean ablation, in the style of the training stories and unlike any one text a page traces: a
# component's mean here is what it writes on an ordinary position, known before the traced text is read.
REFERENCE_TEXT = (
    "Once upon a time, there was a little boy named Tom. He liked to run in the big green park with his dog, Max. "
    "One day, Tom saw a bird in a tree. The bird was sad because it could not fly. Tom said, \"Do not worry, I "
    "will help you!\" He took the bird home and gave it some water. Mom smiled and said, \"You are a kind boy.\" "
    "The next morning, the bird was happy and strong. It flew up high and sang a pretty song. Tom and Max waved "
    "goodbye. They went back to the park and played until the sun went down. Sara had a small red hat. She wore "
    "it every day, even when it rained. Her friend Ben asked, \"Why do you love that hat so much?\" Sara laughed "
    "and said, \"Because my grandma made it for me.\" Ben thought it was the best reason of all.")


@torch.no_grad()
def reference_means(model: GPT, tokenizer: Tokenizer, text: str = REFERENCE_TEXT) -> dict[str, torch.Tensor]:
    """Each head's mean z (H, d_head) and each FFN's mean output (d_model,) over every position of text, read in
    windows of the model's context; characters the model does not know are left out."""
    known = "".join(ch for ch in text if not tokenizer.unknown(ch))
    ids = as_ids(tokenizer.encode(known))
    names = [f"blocks.{layer}.{hook}" for layer in range(model.cfg.n_layer) for hook in ("attn.hook_z", "hook_ffn_out")]
    sums, count = {}, 0
    for window in ids.split(model.cfg.context):
        with MODEL_LOCK:
            _, acts = model.run_with_cache(window[None].to(device_of(model)), names)
        for name in names:
            sums[name] = sums.get(name, 0) + acts[name][0].double().sum(0).cpu()
        count += len(window)
    return {name: (total / count).float() for name, total in sums.items()}


def ablation_edits(model: GPT, cap: Capture, batches: list[list[str]], mode: str,
                   means: dict[str, torch.Tensor] | None = None) -> dict:
    """Hook edits that switch off the components of batches[b] in batch row b: to zero, or to `means` (from
    reference_means), the same vector at every position.

    The mean comes from a reference text, never from the traced text itself: a mean over the text would carry its
    later characters into every earlier position, which a causal model never sees. Heads are switched off at
    hook_z, before W_O: with no bias in W_O, a zero there leaves the head's output exactly zero. FFNs are switched
    off at their output.
    """
    if mode not in ABLATIONS:
        raise InputError("interp.ablation_mode", "ablation must be one of {modes}, got {mode!r}",
                         modes=", ".join(ABLATIONS), mode=mode)
    if mode == "mean" and means is None:
        raise ValueError("mean ablation needs the reference means (interp.reference_means)")
    L, H, B = model.cfg.n_layer, model.cfg.n_head, len(batches)
    heads = torch.zeros(L, B, H, dtype=torch.bool)
    ffns = torch.zeros(L, B, dtype=torch.bool)
    for b, names in enumerate(batches):
        for name in names:
            layer, head = parse_component(model, name)
            if head is None:
                ffns[layer, b] = True
            else:
                heads[layer, b, head] = True
    edits = {}
    for layer in range(L):
        z_name, ffn_name = f"blocks.{layer}.attn.hook_z", f"blocks.{layer}.hook_ffn_out"
        if heads[layer].any():
            fill = means[z_name] if mode == "mean" else torch.zeros_like(cap[z_name][0])  # (H, d_head)
            mask = heads[layer][:, None, :, None]  # (B, 1, H, 1)
            edits[z_name] = lambda z, mask=mask, fill=fill: torch.where(mask, fill, z)
        if ffns[layer].any():
            fill = means[ffn_name] if mode == "mean" else torch.zeros_like(cap[ffn_name][0])  # (d_model,)
            mask = ffns[layer][:, None, None]
            edits[ffn_name] = lambda out, mask=mask, fill=fill: torch.where(mask, fill, out)
    return edits


def ablated_logits(model: GPT, cap: Capture, batches: list[list[str]], mode: str = "zero",
                   means: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """(len(batches), T, V): the text's logits with each row's set of components switched off."""
    edits = ablation_edits(model, cap, batches, mode, means)
    return run_hooked(model, cap.ids.expand(len(batches), -1), edits)


def text_losses(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(..., T-1) cross-entropy of each next token; logits (..., T, V), ids (T,)."""
    targets = ids[1:].expand(*logits.shape[:-2], -1)
    return F.cross_entropy(logits[..., :-1, :].flatten(0, -2).float(), targets.flatten(),
                           reduction="none").view(targets.shape)


@dataclass
class Ablation:
    switched_off: list[str]
    mode: str
    logits: torch.Tensor  # (T, V) with the components off
    clean_logits: torch.Tensor  # (T, V)
    ids: torch.Tensor

    @property
    def losses(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token losses (T-1,) before and after."""
        return text_losses(self.clean_logits, self.ids), text_losses(self.logits, self.ids)

    @property
    def loss(self) -> tuple[float, float]:
        before, after = self.losses
        return float(before.mean()), float(after.mean())


def ablate(model: GPT, cap: Capture, switched_off: Iterable[str], mode: str = "zero",
           means: dict[str, torch.Tensor] | None = None) -> Ablation:
    """The text's logits with the named heads and FFNs switched off (mean ablation needs reference_means)."""
    switched_off = list(switched_off)
    if len(cap.ids) < 2:
        raise InputError("interp.too_short", "the text needs at least two tokens: a loss needs a next token to predict")
    logits = ablated_logits(model, cap, [switched_off], mode, means)[0] if switched_off else cap.logits
    return Ablation(switched_off, mode, logits, cap.logits, cap.ids)


def ablation_sweep(model: GPT, cap: Capture, mode: str = "zero", names: list[str] | None = None,
                   batch: int = 16, progress: Progress | None = None,
                   means: dict[str, torch.Tensor] | None = None) -> pd.DataFrame:
    """Switch each component off on its own (default: every head); rank them by the loss it costs the text.

    Rows run in batches of `batch` copies of the text, each copy with its own component off.
    """
    if len(cap.ids) < 2:
        raise InputError("interp.too_short", "the text needs at least two tokens: a loss needs a next token to predict")
    names = [head_label(layer, h) for layer in range(model.cfg.n_layer)
             for h in range(model.cfg.n_head)] if names is None else names
    clean = float(text_losses(cap.logits, cap.ids).mean())
    losses = []
    for start in range(0, len(names), batch):
        chunk = names[start:start + batch]
        logits = ablated_logits(model, cap, [[n] for n in chunk], mode, means)
        losses += text_losses(logits, cap.ids).mean(-1).tolist()
        if progress:
            progress(start + len(chunk), len(names))
    frame = pd.DataFrame({"component": names, "loss": losses})
    frame["loss increase"] = frame["loss"] - clean
    return frame.sort_values("loss increase", ascending=False, kind="stable").reset_index(drop=True)


# --- activation patching ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Patch:
    """Copy hook `hook` from the clean run into the corrupted one: at one head (for per-head hook points) or all,
    at one position or all."""
    hook: str
    head: int | None = None
    position: int | None = None


@dataclass(frozen=True)
class PatchingPair:
    """Two prompts of the same length that differ in a detail, and the next token each should lead to."""
    id: str  # stable: a page looks up the pair's title and explanation by it
    clean: str
    corrupted: str
    clean_answer: str  # the token the clean prompt should continue with
    corrupted_answer: str


# Each pair differs only early on and ends on the same text, so whatever tells the answers apart has to be carried
# forward from the difference to the last position: patching shows which heads and positions carry it.
PATCHING_PAIRS = [
    # a password of random characters can only be continued by copying it from its first mention
    PatchingPair("password",
                 'Pemi had a secret hideout, and its password was "Gr4Tk7!" Pemi smiled and said, "Gr4',
                 'Pemi had a secret hideout, and its password was "Gr4Bk7!" Pemi smiled and said, "Gr4',
                 "T", "B"),
    # names are invented per story: only the first mention says how one goes on
    PatchingPair("name",
                 "Once upon a time, there was a girl named Tavina. She had a red ball. One day, Tav",
                 "Once upon a time, there was a girl named Tavora. She had a red ball. One day, Tav",
                 "i", "o"),
    # the same story with one letter of the first mention changed: after "Tavi" the copy needs a key that says
    # "my previous character was i", so what breaks is where the induction head looks, not what it copies
    PatchingPair("key",
                 "Once upon a time, there was a girl named Tavina. She had a red ball. One day, Tavi",
                 "Once upon a time, there was a girl named Tavuna. She had a red ball. One day, Tavi",
                 "n", " "),
]


def logit_difference(logits: torch.Tensor, good: int, bad: int, position: int = -1) -> torch.Tensor:
    """logit(good) − logit(bad) at position, for logits (..., T, V)."""
    row = logits[..., position, :]
    return row[..., good] - row[..., bad]


# hook points laid out (B, T, H, …) and (B, T, …): the ones a patch may cut by head and by position
PER_HEAD = ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k", "hook_z", "hook_result")
PER_POSITION = PER_HEAD + ("hook_embed", "hook_pos_embed", "hook_ln_f_out", "hook_resid_pre", "hook_resid_mid",
                           "hook_resid_post", "hook_ln1_out", "hook_ln2_out", "hook_attn_out", "hook_ffn_out",
                           "hook_pre", "hook_act", "hook_gate", "hook_hidden")


def _patch_edits(model: GPT, clean: Capture, rows: list[list[Patch]]) -> dict:
    """Hook edits that copy, in batch row b, each patch of rows[b] from the clean capture."""
    per_hook: dict[str, list[tuple[int, Patch]]] = {}
    for b, patches in enumerate(rows):
        for patch in patches:
            if patch.hook not in clean.acts:
                raise KeyError(f"no hook point named {patch.hook}")
            if (patch.head is not None or patch.position is not None) and not patch.hook.endswith(PER_POSITION):
                raise ValueError(f"{patch.hook} is not laid out (batch, position, …): patch it whole")
            if patch.head is not None and not patch.hook.endswith(PER_HEAD):
                raise ValueError(f"{patch.hook} has no head dimension")
            per_hook.setdefault(patch.hook, []).append((b, patch))

    def edit(name):
        source = clean[name]

        def apply(act):
            act = act.clone()
            for b, patch in per_hook[name]:
                where = (b, slice(None) if patch.position is None else patch.position)
                if patch.head is not None:
                    where += (patch.head,)
                act[where] = source[where[1:]]
            return act
        return apply
    return {name: edit(name) for name in per_hook}


def patched_logits(model: GPT, clean: Capture, corrupted_ids, rows: list[list[Patch]]) -> torch.Tensor:
    """(len(rows), T, V): the corrupted prompt's logits with each row's patches copied in from the clean run."""
    corrupted_ids = as_ids(corrupted_ids)
    if corrupted_ids.shape != clean.ids.shape:
        raise InputError("interp.lengths_differ", "the clean and corrupted prompts must have the same length in "
                         "tokens: {clean} and {corrupted}", clean=len(clean.ids), corrupted=len(corrupted_ids))
    return run_hooked(model, corrupted_ids.expand(len(rows), -1), _patch_edits(model, clean, rows))


@dataclass
class PatchingSetup:
    """A clean and a corrupted prompt, both captured, and the logit difference that tells them apart."""
    clean: Capture
    corrupted: Capture
    good: int  # the clean answer's id
    bad: int  # the corrupted answer's id

    @property
    def clean_difference(self) -> float:
        return float(logit_difference(self.clean.logits, self.good, self.bad))

    @property
    def corrupted_difference(self) -> float:
        return float(logit_difference(self.corrupted.logits, self.good, self.bad))

    def restored(self, logits: torch.Tensor) -> torch.Tensor:
        """Share of the logit difference a patched run restores: 0 = as corrupted, 1 = as clean."""
        corrupted = self.corrupted_difference
        return (logit_difference(logits, self.good, self.bad) - corrupted) / (self.clean_difference - corrupted)


def _single_token(tokenizer: Tokenizer, answer: str) -> int | None:
    """answer's id when it is exactly one token the model knows, else None."""
    encoded = tokenizer.encode(answer)
    return encoded[0] if len(encoded) == 1 and not tokenizer.unknown(answer) else None


def patching_setup(model: GPT, tokenizer: Tokenizer, clean: str, corrupted: str, clean_answer: str,
                   corrupted_answer: str) -> PatchingSetup:
    """Encode and check a patching pair, and run both prompts once."""
    if unknown := tokenizer.unknown(clean):
        raise InputError("interp.clean_unknown", "the clean prompt has characters the model does not know: {chars}",
                         chars="".join(sorted(unknown)))
    if unknown := tokenizer.unknown(corrupted):
        raise InputError("interp.corrupted_unknown", "the corrupted prompt has characters the model does not know: "
                         "{chars}", chars="".join(sorted(unknown)))
    clean_ids, corrupted_ids = as_ids(tokenizer.encode(clean)), as_ids(tokenizer.encode(corrupted))
    if len(clean_ids) != len(corrupted_ids):
        raise InputError("interp.lengths_differ", "the clean and corrupted prompts must have the same length in "
                         "tokens: {clean} and {corrupted}", clean=len(clean_ids), corrupted=len(corrupted_ids))
    if (good := _single_token(tokenizer, clean_answer)) is None:
        raise InputError("interp.clean_answer", "the clean answer must be exactly one token the model knows, got "
                         "{answer!r}", answer=clean_answer)
    if (bad := _single_token(tokenizer, corrupted_answer)) is None:
        raise InputError("interp.corrupted_answer", "the corrupted answer must be exactly one token the model knows, "
                         "got {answer!r}", answer=corrupted_answer)
    if good == bad:
        raise InputError("interp.same_answers", "the two answers must differ: the measure is logit(clean answer) "
                         "− logit(corrupted answer)")
    setup = PatchingSetup(capture(model, clean_ids), capture(model, corrupted_ids), good, bad)
    if abs(setup.clean_difference - setup.corrupted_difference) < 1e-3:
        raise InputError("interp.nothing_to_restore", "the model gives both prompts the same logit difference, so "
                         "there is nothing to restore: change the prompts or the answers")
    return setup


def _sweep(model: GPT, setup: PatchingSetup, rows: list[list[Patch]], batch: int,
           progress: Progress | None) -> torch.Tensor:
    shares = []
    for start in range(0, len(rows), batch):
        logits = patched_logits(model, setup.clean, setup.corrupted.ids, rows[start:start + batch])
        shares.append(setup.restored(logits))
        if progress:
            progress(min(start + batch, len(rows)), len(rows))
    return torch.cat(shares)


def patch_heads(model: GPT, setup: PatchingSetup, batch: int = 16, progress: Progress | None = None) -> torch.Tensor:
    """(L, H): share restored by copying one head's output (its z, at every position) from clean to corrupted."""
    L, H = model.cfg.n_layer, model.cfg.n_head
    rows = [[Patch(f"blocks.{layer}.attn.hook_z", head)] for layer in range(L) for head in range(H)]
    return _sweep(model, setup, rows, batch, progress).view(L, H)


def patch_residual(model: GPT, setup: PatchingSetup, batch: int = 32, progress: Progress | None = None) -> torch.Tensor:
    """(L + 1, T): share restored by copying the residual stream at one position, after the embedding (row 0) or
    after block i (row i + 1)."""
    T = len(setup.clean.ids)
    hooks = [hook for _, hook in residual_rows(model)]
    rows = [[Patch(hook, position=p)] for hook in hooks for p in range(T)]
    return _sweep(model, setup, rows, batch, progress).view(len(hooks), T)


def patch_heads_by_position(model: GPT, setup: PatchingSetup, batch: int = 64,
                            progress: Progress | None = None) -> torch.Tensor:
    """(L · H, T): share restored by copying one head's output at one position."""
    L, H, T = model.cfg.n_layer, model.cfg.n_head, len(setup.clean.ids)
    rows = [[Patch(f"blocks.{layer}.attn.hook_z", head, p)] for layer in range(L) for head in range(H)
            for p in range(T)]
    return _sweep(model, setup, rows, batch, progress).view(L * H, T)
