"""Switching heads and FFNs off: to zero, or to their mean over a fixed reference text, one set at a time
(ablate) or each component on its own in a batched sweep that ranks them by the loss they cost the text."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial

import pandas as pd
import torch
import torch.nn.functional as F

from ..errors import InputError
from ..inspector import MODEL_LOCK
from ..model import GPT
from ..tokenizer import Tokenizer
from .capture import (
    Capture,
    Progress,
    Run,
    as_ids,
    device_of,
    head_label,
    parse_component,
    read_logits,
    rows_at_once,
    run_batched,
    stream_at,
)

ABLATIONS = ("zero", "mean")


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
    names = [f"blocks.{layer}.{hook}" for layer in range(model.cfg.n_layer) for hook in ("attn.hook_z", "hook_mlp_out")]
    sums, count = {}, 0
    for window in ids.split(model.cfg.context):
        with MODEL_LOCK:
            _, acts = model.run_with_cache(window[None].to(device_of(model)), names_filter=names)
        for name in names:
            sums[name] = sums.get(name, 0) + acts[name][0].double().sum(0).cpu()
        count += len(window)
    return {name: (total / count).float() for name, total in sums.items()}


def _check_mode(mode: str, means: dict[str, torch.Tensor] | None) -> None:
    if mode not in ABLATIONS:
        raise InputError("interp.ablation_mode", "ablation must be one of {modes}, got {mode!r}",
                         modes=", ".join(ABLATIONS), mode=mode)
    if mode == "mean" and means is None:
        raise ValueError("mean ablation needs the reference means (interp.reference_means)")


def _fill(cap: Capture, means: dict[str, torch.Tensor] | None, mode: str, hook: str) -> torch.Tensor:
    """What a switched-off component leaves at `hook`: zeros, or its reference mean (one vector per position)."""
    return means[hook] if mode == "mean" else torch.zeros_like(cap[hook][0])


def _replace_heads(z: torch.Tensor, heads: list[int], fill: torch.Tensor) -> torch.Tensor:
    """z (T, H, d_head) with the given heads' vectors replaced by their rows of fill (H, d_head)."""
    z = z.clone()
    z[:, heads] = fill[heads].to(z.device)
    return z


def _replace_all(out: torch.Tensor, fill: torch.Tensor) -> torch.Tensor:
    return fill.to(out.device).expand_as(out)


def ablation_runs(model: GPT, cap: Capture, batches: list[list[str]], mode: str,
                  means: dict[str, torch.Tensor] | None = None) -> list[Run]:
    """One Run per row of batches, with its components switched off: to zero, or to `means` (from reference_means),
    the same vector at every position. A run enters the blocks at the first of them: before, it is the captured
    pass.

    The mean comes from a reference text, never from the traced text itself: a mean over the text would carry its
    later characters into every earlier position, which a causal model never sees. Heads are switched off at
    hook_z, before W_O: with no bias in W_O, a zero there leaves the head's output exactly zero. FFNs are switched
    off at their output.
    """
    _check_mode(mode, means)
    runs = []
    for names in batches:
        heads: dict[int, list[int]] = {}
        ffns: set[int] = set()
        for layer, head in (parse_component(model, name) for name in names):
            if head is None:
                ffns.add(layer)
            else:
                heads.setdefault(layer, []).append(head)
        edits = {}
        for layer, chosen in heads.items():
            hook = f"blocks.{layer}.attn.hook_z"
            edits[hook] = partial(_replace_heads, heads=sorted(set(chosen)), fill=_fill(cap, means, mode, hook))
        for layer in ffns:
            hook = f"blocks.{layer}.hook_mlp_out"
            edits[hook] = partial(_replace_all, fill=_fill(cap, means, mode, hook))
        runs.append(Run(min([*heads, *ffns], default=model.cfg.n_layer), edits))
    return runs


def ablated_logits(model: GPT, cap: Capture, batches: list[list[str]], mode: str = "zero",
                   means: dict[str, torch.Tensor] | None = None, batch: int | None = None) -> torch.Tensor:
    """(len(batches), T, V): the text's logits with each row's set of components switched off."""
    runs = ablation_runs(model, cap, batches, mode, means)
    return run_batched(model, _captured(model, cap), runs, lambda final: read_logits(model, final), batch)


def _captured(model: GPT, cap: Capture, length: int | None = None):
    """The base stream of runs on cap's text (its first `length` positions)."""
    return lambda layer: stream_at(cap, layer, model.cfg.n_layer)[:length]


def ablation_edits(model: GPT, cap: Capture, batches: list[list[str]], mode: str,
                   means: dict[str, torch.Tensor] | None = None) -> dict:
    """Hook edits for a whole pass (run_hooked) that switch off the components of batches[b] in batch row b."""
    runs = ablation_runs(model, cap, batches, mode, means)

    def edit(name: str):
        def apply(act: torch.Tensor) -> torch.Tensor:
            act = act.clone()
            for row, run in enumerate(runs):
                if name in run.edits:
                    act[row] = run.edits[name](act[row])
            return act
        return apply
    return {name: edit(name) for name in sorted({name for run in runs for name in run.edits})}


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


def _check_length(cap: Capture) -> None:
    if len(cap.ids) < 2:
        raise InputError("interp.too_short", "the text needs at least two tokens: a loss needs a next token to predict")


def ablate(model: GPT, cap: Capture, switched_off: Iterable[str], mode: str = "zero",
           means: dict[str, torch.Tensor] | None = None) -> Ablation:
    """The text's logits with the named heads and FFNs switched off (mean ablation needs reference_means): one run,
    from the first of them on."""
    switched_off = list(switched_off)
    _check_length(cap)
    logits = ablated_logits(model, cap, [switched_off], mode, means)[0] if switched_off else cap.logits
    return Ablation(switched_off, mode, logits, cap.logits, cap.ids)


def _mean_losses(model: GPT, ids: torch.Tensor):
    """read for run_batched over every position but the last: each run's mean loss over the text, its logits
    computed a few sequences at a time. (The last position predicts nothing in the text, and no earlier position
    reads it, so the runs leave it out.)"""
    targets = ids[1:]

    def read(final: torch.Tensor) -> torch.Tensor:
        losses = []
        for chunk in final.split(rows_at_once(model, final.shape[1])):
            logits = read_logits(model, chunk)
            losses.append(F.cross_entropy(logits.flatten(0, 1).float(), targets.repeat(len(chunk)),
                                          reduction="none").view(len(chunk), -1).mean(-1))
        return torch.cat(losses)
    return read


def ablation_sweep(model: GPT, cap: Capture, mode: str = "zero", names: list[str] | None = None,
                   batch: int | None = None, progress: Progress | None = None,
                   means: dict[str, torch.Tensor] | None = None) -> pd.DataFrame:
    """Switch each component off on its own (default: every head); rank them by the loss it costs the text.

    Up to `batch` copies of the text run at once, each with its own component off, each entering the blocks at its
    component's layer (run_batched).
    """
    _check_length(cap)
    names = [head_label(layer, h) for layer in range(model.cfg.n_layer)
             for h in range(model.cfg.n_head)] if names is None else names
    clean = float(text_losses(cap.logits, cap.ids).mean())
    runs = ablation_runs(model, cap, [[name] for name in names], mode, means)
    losses = run_batched(model, _captured(model, cap, len(cap.ids) - 1), runs, _mean_losses(model, cap.ids), batch,
                         progress=progress)
    frame = pd.DataFrame({"component": names, "loss": losses.tolist()})
    frame["loss increase"] = frame["loss"] - clean
    return frame.sort_values("loss increase", ascending=False, kind="stable").reset_index(drop=True)
