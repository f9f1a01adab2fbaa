"""Running the model through its hook points: one pass observing every one of them (a Capture), one pass with some
of them replaced (run_hooked), and many partial passes in one batch (run_batched), each entering the blocks where
its change starts and reusing a Capture for everything before, which is what makes sweeps of hundreds of ablated or
patched runs affordable on a real model.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..config import GPTConfig
from ..errors import InputError
from ..generate import LayerCache
from ..inspector import MODEL_LOCK
from ..model import GPT

Progress = Callable[[int, int], None]  # (done, total)
Edit = Callable[[torch.Tensor], torch.Tensor]  # an activation in, the activation to use instead out
UNBATCHED = {"hook_pos_embed"}  # the same position rows go into every sequence: (T, d_model), no batch dimension
LOGITS_BYTES = 64 << 20  # logits computed at once when a readout covers many rows (49k-token vocabularies)
POSITIONS_AT_ONCE = 4096  # positions (runs × tokens) a wave of runs computes at once: large products, bounded memory


@dataclass
class Capture:
    """One forward pass over one sequence with every hook point's activation (batch dimension dropped)."""
    ids: torch.Tensor  # (T,)
    logits: torch.Tensor  # (T, V)
    acts: dict[str, torch.Tensor]

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.acts[name]

    @property
    def nbytes(self) -> int:
        return self.logits.nbytes + sum(a.nbytes for a in self.acts.values())


def as_ids(ids) -> torch.Tensor:
    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    if ids.numel() == 0:
        raise InputError("interp.no_tokens", "the text has no token the model knows")
    return ids


def check_length(model: GPT, ids: torch.Tensor) -> None:
    if len(ids) > model.cfg.context:
        raise InputError("interp.too_long", "the text is {n} tokens long; the model's context is {context}",
                         n=len(ids), context=model.cfg.context)


def capture_bytes(cfg: GPTConfig, T: int) -> int:
    """The size of a Capture of T tokens (float32): every hook point that fires, and the logits."""
    H, D = cfg.n_head, cfg.d_head
    per_head = (6 if cfg.position == "rope" else 4) * D + cfg.d_model  # q k v (rot_q rot_k) z, result after W_O
    attention = H * per_head + 2 * H * T  # … and this query's scores and weights over every key
    ffn = (4 if cfg.ffn == "swiglu" else 3) * cfg.d_ff  # pre, act, (pre_linear,) post
    block = 7 * cfg.d_model + attention + ffn  # resid pre/mid/post, both norms' outputs, attn_out, ffn_out
    outside = (3 if cfg.position == "learned" else 2) * cfg.d_model + cfg.vocab_size  # embed, (pos,) ln_f, logits
    return 4 * T * (cfg.n_layer * block + outside)


def traceable_tokens(cfg: GPTConfig, budget: int) -> int:
    """The most tokens (at most the context) whose Capture fits in `budget` bytes, and at least one."""
    low, high = 1, cfg.context
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if capture_bytes(cfg, middle) <= budget else (low, middle - 1)
    return low


@torch.no_grad()
def capture(model: GPT, ids) -> Capture:
    """Forward pass over ids (T,) observing every hook point, on the model's device; what it keeps is on the CPU."""
    ids = as_ids(ids)
    check_length(model, ids)
    with MODEL_LOCK:  # hooks live on the (possibly shared) model object: one hooked pass at a time
        logits, acts = model.run_with_cache(ids[None].to(device_of(model)))
    return Capture(ids, logits[0].cpu(), {name: (a if name in UNBATCHED else a[0]).cpu() for name, a in acts.items()})


def device_of(model: GPT) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def run_hooked(model: GPT, ids: torch.Tensor, edits: dict[str, Edit]) -> torch.Tensor:
    """Logits (B, T, V) of ids (B, T) with each named hook point's activation replaced by edits[name](activation).

    The edits see CPU tensors, like the Capture they copy from, whatever device the model runs on.
    """
    def edit(activation, hook):
        return edits[hook.name](activation.cpu()).to(activation.device)

    with MODEL_LOCK:
        logits, _ = model.run_with_hooks(ids.to(device_of(model)), fwd_hooks=[(name, edit) for name in edits])
    return logits.cpu()


# --- partial passes, many in one batch ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One row of a batched partial pass. It enters block `layer` with the base stream there, or with `stream`
    (T', d_model) when given, and each of its `edits` replaces its own activation (T', …) at that hook point."""
    layer: int
    edits: dict[str, Edit] = field(default_factory=dict)
    stream: torch.Tensor | None = None


def stream_at(cap: Capture, layer: int, n_layer: int) -> torch.Tensor:
    """(T, d_model): the residual stream entering block `layer` in cap's pass (after the last block for n_layer)."""
    return cap[f"blocks.{layer}.hook_resid_pre"] if layer < n_layer else cap[f"blocks.{n_layer - 1}.hook_resid_post"]


def _prefix_cache(model: GPT, prefix: Capture, layer: int, start: int, rows: int) -> LayerCache:
    """The keys (after RoPE) and values of prefix's first `start` positions in block `layer`, for `rows` rows."""
    attn = f"blocks.{layer}.attn."
    keys = prefix[attn + ("hook_rot_k" if model.cfg.position == "rope" else "hook_k")][:start]  # (start, H, d_head)
    cache = LayerCache()
    cache.extend(*(t.transpose(0, 1)[None].expand(rows, -1, -1, -1).to(device_of(model))
                   for t in (keys, prefix[attn + "hook_v"][:start])))
    return cache


def _hooked_blocks(model: GPT, wave: list[Run], start: int) -> list[str]:
    names = {name for run in wave for name in run.edits}
    if start:  # SDPA's is_causal lines its mask up top-left when the queries are fewer than the keys; observing the
        # scores makes each block write its attention out, with the mask lined up at the last key as it must be
        names |= {f"blocks.{i}.attn.hook_attn_scores" for i in range(wave[0].layer, model.cfg.n_layer)}
    return sorted(names)


@torch.no_grad()
def _run_wave(model: GPT, base: Callable[[int], torch.Tensor], wave: list[Run], start: int,
              prefix: Capture | None, ran: Callable[[int], None]) -> torch.Tensor:
    """The final residual stream (len(wave), T', d_model) of runs sorted by the layer they enter; ran(rows) after
    each block, with the rows it ran."""
    device, n_layer = device_of(model), model.cfg.n_layer
    edits: dict[str, list[tuple[int, Edit]]] = {}  # hook name -> (row in the batch, edit)
    x: torch.Tensor | None = None

    def enter(runs: list[Run]) -> None:
        nonlocal x
        first = 0 if x is None else len(x)
        for row, run in enumerate(runs, first):
            for name, edit in run.edits.items():
                edits.setdefault(name, []).append((row, edit))
        new = torch.stack([base(run.layer) if run.stream is None else run.stream for run in runs]).to(device)
        x = new if x is None else torch.cat([x, new])

    def apply_edits(activation: torch.Tensor, hook) -> torch.Tensor | None:
        if hook.name not in edits:
            return None
        activation = activation.clone()
        for row, edit in edits[hook.name]:
            activation[row] = edit(activation[row])
        return activation

    T = (wave[0].stream if wave[0].stream is not None else base(wave[0].layer)).shape[0]
    rope = model._rope(start, T)
    with MODEL_LOCK, model.hooks([(_hooked_blocks(model, wave, start), apply_edits)]):
        for layer in range(wave[0].layer, n_layer):
            if entering := [run for run in wave if run.layer == layer]:
                enter(entering)
            cache = _prefix_cache(model, prefix, layer, start, len(x)) if start else None
            x = model.blocks[layer](x, rope, cache)
            ran(len(x))
    if entering := [run for run in wave if run.layer == n_layer]:  # patched after the last block: nothing to run
        enter(entering)
    return x


def run_batched(model: GPT, base: Callable[[int], torch.Tensor], runs: list[Run],
                read: Callable[[torch.Tensor], torch.Tensor], batch: int | None = None, start: int = 0,
                prefix: Capture | None = None, progress: Progress | None = None) -> torch.Tensor:
    """read(final residual stream) of every run, in the runs' order: (len(runs), …).

    Each run enters the blocks at its own layer, where the stream is base(layer) (T', d_model) unless it brings its
    own, and the blocks before that are never run again: their output is the same for every run. The runs go in
    waves of up to `batch` (by default as many as make POSITIONS_AT_ONCE positions), sorted by layer; within a wave
    the batch grows as the later runs join at their layer.
    progress(done, len(runs)) follows the work: the blocks each run goes through, and its readout.

    With start > 0 the runs cover the positions start … start + T' − 1 only: every run must agree with `prefix` (a
    Capture) on the earlier positions, whose keys and values each block then reads from it. A patching sweep on two
    prompts that differ from position `start` on loses nothing by it, since a causal model's earlier positions never
    see the difference.
    """
    order = sorted(range(len(runs)), key=lambda i: runs[i].layer)
    first_run = runs[order[0]]
    T = len(base(first_run.layer) if first_run.stream is None else first_run.stream)
    batch = batch or max(1, POSITIONS_AT_ONCE // T)
    work = sum(model.cfg.n_layer - run.layer + 1 for run in runs)  # a block per row, and the readout
    done = 0

    def ran(rows: int) -> None:
        nonlocal done
        done += rows
        if progress:
            progress(len(runs) * done // work, len(runs))

    results: list[torch.Tensor | None] = [None] * len(runs)
    for first in range(0, len(order), batch):
        wave = order[first:first + batch]
        read_out = read(_run_wave(model, base, [runs[i] for i in wave], start, prefix, ran))
        for i, value in zip(wave, read_out):
            results[i] = value
        ran(len(wave))
    return torch.stack(results)


@torch.no_grad()
def read_logits(model: GPT, final: torch.Tensor, tokens: list[int] | None = None) -> torch.Tensor:
    """Logits (…, V) of a final residual stream (…, d_model) through the final norm and the head, or only the
    logits of `tokens` (…, len(tokens)): two rows of a 49k-token head cost next to nothing, all of them a lot."""
    normed = model.ln_f(final.to(device_of(model)))
    if tokens is None:
        return model.head(normed).cpu()
    return F.linear(normed, model.head.weight[tokens]).cpu()


def rows_at_once(model: GPT, T: int) -> int:
    """How many sequences of T positions a readout of the whole vocabulary takes at once."""
    return max(1, LOGITS_BYTES // (4 * T * model.cfg.vocab_size))


# --- the components, by name ---------------------------------------------------------------------------------------

_COMPONENT = re.compile(r"^L(\d+)(?:H(\d+)| FFN)$")


def head_label(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def ffn_label(layer: int) -> str:
    return f"L{layer} FFN"


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
