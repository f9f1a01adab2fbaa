"""How components work together: direct against total effects, a head's output split by where it read from, and
patching one side (query, key or value) of one head.

A head can matter without writing anything useful into the readout itself: a previous-token head moves each
character's predecessor into its position, and a later head uses that in its keys to find where to copy from.
Direct logit attribution misses that (it reads only the direct path); ablation sees it (the total effect). The
difference, total − direct, is the indirect effect: what the component does through later layers.

Built on gptcore.interp's hook edits; the model is never special-cased. Pure torch and pandas.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import pandas as pd
import torch

from .errors import InputError
from .interp import (
    Capture,
    PatchingSetup,
    Progress,
    Run,
    ablation_runs,
    components,
    logit_difference,
    parse_component,
    read_logits,
    readout,
    residual_summands,
    run_batched,
    stream_at,
    suffix_sweep,
)
from .model import GPT

SIDES = ("q", "k", "v")  # the three inputs of a head, each a projection of the (normed) residual stream


# --- direct and total effects -------------------------------------------------------------------------------------

@torch.no_grad()
def effects(model: GPT, cap: Capture, position: int, target: int, foil: int, means: dict[str, torch.Tensor],
            batch: int | None = None, progress: Progress | None = None) -> pd.DataFrame:
    """Per head and FFN: its direct, indirect and total effect on logit(target) − logit(foil) at position.

    The total effect is what mean-ablating the component (to its mean over a reference text) costs the difference.
    The direct effect is the part of that change that reaches the readout straight from the component: its output
    minus the mean it is replaced by, through the frozen final norm and head. Indirect = total − direct: the effect
    through everything downstream (later heads' queries, keys and values, later FFNs, the final norm's scale).

    The ablated runs stop at `position` (a causal model's later positions cannot change it) and read only the two
    tokens' logits there.
    """
    frozen = readout(model, cap, position, target, foil)
    names = components(model)
    clean = float(logit_difference(cap.logits, target, foil, position))
    end = position + 1

    def read(final: torch.Tensor) -> torch.Tensor:
        logits = read_logits(model, final[:, -1], [target, foil])
        return logits[:, 0] - logits[:, 1]

    runs = ablation_runs(model, cap, [[n] for n in names], "mean", means)
    ablated = run_batched(model, lambda layer: stream_at(cap, layer, model.cfg.n_layer)[:end], runs, read, batch,
                          progress=progress)
    totals = (clean - ablated).tolist()
    written = {name: vec for name, _, _, _, vec in residual_summands(model, cap, position)}
    rows = []
    for name, total in zip(names, totals):
        layer, head = parse_component(model, name)
        change = written[name] - _mean_output(model, means, layer, head)
        direct = float(change.double() @ frozen.direction)
        rows.append({"component": name, "layer": layer, "head": head, "direct": direct, "indirect": total - direct,
                     "total": total})
    return pd.DataFrame(rows)


def _mean_output(model: GPT, means: dict[str, torch.Tensor], layer: int, head: int | None) -> torch.Tensor:
    """What a mean-ablated component writes into the stream: its mean z through its columns of W_O, or the FFN's
    mean output."""
    if head is None:
        return means[f"blocks.{layer}.hook_mlp_out"]
    return head_output_matrix(model, layer, head) @ means[f"blocks.{layer}.attn.hook_z"][head]


# --- a head's output by source position ---------------------------------------------------------------------------

def head_output_matrix(model: GPT, layer: int, head: int) -> torch.Tensor:
    """(d_model, d_head): head's own columns of W_O."""
    proj = model.blocks[layer].attn.proj.weight.detach().cpu()
    return proj.view(model.cfg.d_model, model.cfg.n_head, model.cfg.d_head)[:, head]


@torch.no_grad()
def head_by_source(model: GPT, cap: Capture, layer: int, head: int, position: int) -> torch.Tensor:
    """(position + 1, d_model): what head wrote at position, split by the earlier position it read it from.

    Row s is the head's attention weight on s times s's value through W_O: which character's information it moved
    into this position. The rows add up to the head's output there.
    """
    pattern = cap[f"blocks.{layer}.attn.hook_pattern"][head, position, :position + 1]  # (S,)
    values = cap[f"blocks.{layer}.attn.hook_v"][:position + 1, head]  # (S, d_head)
    return pattern[:, None] * (values @ head_output_matrix(model, layer, head).T)


def source_attribution(model: GPT, cap: Capture, layer: int, head: int, position: int, target: int,
                       foil: int) -> torch.Tensor:
    """(position + 1,): each source position's share of head's direct effect on logit(target) − logit(foil)."""
    frozen = readout(model, cap, position, target, foil)
    return (head_by_source(model, cap, layer, head, position).double() @ frozen.direction).float()


# --- patching one side of one head --------------------------------------------------------------------------------

@torch.no_grad()
def _side_inputs(model: GPT, layer: int, head: int, residual: torch.Tensor) -> dict[str, torch.Tensor]:
    """{side: (B, T, d_head)}: head's q, k and v (k and q before RoPE, after QK-norm) computed from residual
    (B, T, d_model) by the block's own projection."""
    block = model.blocks[layer]
    x = residual.to(next(model.parameters()).device)
    x = block.ln1(x) if model.cfg.norm_placement == "pre" else x
    qk, v = block.attn.project(x)
    return dict(zip(SIDES, torch.cat([qk, v], 2)[:, :, :, head].cpu().unbind(2)))


@dataclass(frozen=True)
class SidePatch:
    """Compute one side (q, k or v) of head (layer, head) from `residual` (T, d_model) instead of the block's real
    input."""
    layer: int
    head: int
    side: str
    residual: torch.Tensor = field(compare=False)


def side_edits(model: GPT, rows: list[list[SidePatch]]) -> dict:
    """Hook edits for a whole pass (run_hooked) that apply, in batch row b, each side patch of rows[b]. The heads'
    other sides, every other head and the residual stream itself are left as they are; RoPE still rotates a patched
    q or k."""
    picked: dict[str, list[tuple[int, int, torch.Tensor]]] = {}
    for b, patches in enumerate(rows):
        for patch in patches:
            picked.setdefault(_side_hook(patch), []).append((b, patch.head, _side_vector(model, patch)))
    return {name: lambda act, put=put: _put_heads(act, put) for name, put in picked.items()}


def _side_hook(patch: SidePatch) -> str:
    if patch.side not in SIDES:
        raise ValueError(f"a side is one of {SIDES}, not {patch.side!r}")
    return f"blocks.{patch.layer}.attn.hook_{patch.side}"


def _side_vector(model: GPT, patch: SidePatch) -> torch.Tensor:
    """(T, d_head): the patched side of the head, computed from the patch's residual stream."""
    return _side_inputs(model, patch.layer, patch.head, patch.residual[None])[patch.side][0]


def _put_side(act: torch.Tensor, head: int, vector: torch.Tensor) -> torch.Tensor:
    act = act.clone()
    act[:, head] = vector.to(act.device)
    return act


def _put_heads(act: torch.Tensor, put: list[tuple[int, int, torch.Tensor]]) -> torch.Tensor:
    act = act.clone()
    for b, head, vec in put:
        act[b, :, head] = vec
    return act


EMBEDDING = "embedding"  # a sender: the token (and learned position) rows themselves


def _sender_output(model: GPT, cap: Capture, sender: str) -> torch.Tensor:
    """(T, d_model): what sender (the embedding, a head or an FFN) adds into the residual stream in cap's run."""
    if sender == EMBEDDING:
        rows = cap["hook_embed"]
        return rows + cap["hook_pos_embed"] if model.cfg.position == "learned" else rows
    layer, head = parse_component(model, sender)
    if head is None:
        return cap[f"blocks.{layer}.hook_mlp_out"]
    return cap[f"blocks.{layer}.attn.hook_result"][:, head]


def sender_residual(model: GPT, setup: PatchingSetup, layer: int, sender: str | None) -> torch.Tensor:
    """(T, d_model): the corrupted run's input to block `layer`, with the sender's output swapped for its clean
    output (the sender must sit in an earlier layer), or the whole clean input when sender is None."""
    hook = f"blocks.{layer}.hook_resid_pre"
    if sender is None:
        return setup.clean[hook]
    if sender != EMBEDDING and (sender_layer := parse_component(model, sender)[0]) >= layer:
        raise InputError("interp.sender_after", "{sender} sits in layer {sender_layer}; a head in layer {layer} "
                         "can only read from earlier layers", sender=sender, sender_layer=sender_layer, layer=layer)
    return setup.corrupted[hook] + _sender_output(model, setup.clean, sender) - _sender_output(model, setup.corrupted,
                                                                                               sender)


def senders_before(model: GPT, layer: int) -> list[str]:
    """Everything that writes into the stream before block `layer`: the embedding, then each head and FFN."""
    return [EMBEDDING] + components(model)[:layer * (model.cfg.n_head + 1)]


def patch_sides(model: GPT, setup: PatchingSetup, receiver: str, senders: list[str | None]) -> pd.DataFrame:
    """Share of the clean answer restored when one side of the receiver head reads a cleaner residual stream.

    One row per sender (None: the receiver's whole clean input; EMBEDDING, a head or an FFN), one column per side:
    the corrupted run with only that side (query, key or value) of the receiver computed from the corrupted input
    plus the sender's clean output. A previous-token head feeding an induction head restores through the keys.
    """
    layer, head = parse_component(model, receiver)
    if head is None:
        raise InputError("interp.receiver_ffn", "{name} is an FFN: only a head has queries, keys and values",
                         name=receiver)
    start = setup.start  # the runs cover the positions from the first difference on (interp.suffix_sweep)
    runs = []
    for sender in senders:
        residual = sender_residual(model, setup, layer, sender)
        for side in SIDES:
            patch = SidePatch(layer, head, side, residual)
            runs.append(Run(layer, {_side_hook(patch): partial(_put_side, head=head,
                                                               vector=_side_vector(model, patch)[start:])}))
    shares = suffix_sweep(model, setup, runs).view(len(senders), len(SIDES))
    return pd.DataFrame(shares.numpy(), columns=list(SIDES), index=[s or "" for s in senders])
