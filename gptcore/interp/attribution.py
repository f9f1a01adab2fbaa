"""Direct logit attribution: a logit difference at one position split into what the embedding, each head and each
FFN wrote straight into the residual stream, through the final norm (its scale frozen) and the head."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ..errors import InputError
from ..model import GPT, RMSNorm
from .capture import Capture, ffn_label, head_label


def unembedding(model: GPT) -> torch.Tensor:
    """(V, d_model): the head's weight, one row per token; with tied embeddings it is the embedding itself."""
    return model.emb.weight if model.cfg.tie_embeddings else model.head.weight


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
    norm, unembed = model.ln_f, unembedding(model)
    unembed_row = unembed[target].double().cpu() - (0 if foil is None else unembed[foil].double().cpu())
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
        rows.append((ffn_label(layer), "FFN", layer, None, cap[f"blocks.{layer}.hook_mlp_out"][position]))
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
