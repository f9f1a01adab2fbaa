"""The Trace page's explanations of the results a learner may doubt, each computed from the run on screen and said
only where it applies:
- why switching a head off can lower the loss (how many heads do it on this text, and what the ablation puts in
  the head's place);
- which way a total effect goes, in words ("switching it off makes 'd' more likely"), beside the baseline each
  number is measured against;
- a patched share above 100% (the patched run overshoots the clean one's difference);
- which input of the receiver head (query, key or value) a prompt pair's answer comes back through;
- the model's own probability of the next token (temperature 1, as Inspect reports it) beside a sampled one.
A token is quoted as its label: a space as ␣.
"""
from __future__ import annotations

import pandas as pd

from gptcore.circuits import SIDES

from .i18n import t

SHORT = 200  # predictions below which one text's loss is a small sample
OVERSHOOT = 1.005  # a share above this is said to overshoot (a share of 100.4% is 100% as the page rounds it)


def unit(tokens: bool) -> str:
    """'characters' or 'tokens', as the model reads its text."""
    return t("trace.notes.tokens" if tokens else "trace.notes.characters")


def lowering(frame: pd.DataFrame, mode: str, predicted: int, tokens: bool, held_out: bool) -> str | None:
    """Why heads switched off alone lower the loss, when any does (frame: ablation_sweep's, one row per head);
    predicted: the predictions the loss averages over."""
    lower = frame[frame["loss increase"] < 0]
    if lower.empty:
        return None
    most = lower.loc[lower["loss increase"].idxmin()]
    where = t("trace.notes.held_out" if held_out else "trace.notes.this_text")
    said = t("trace.notes.lowering", n=len(lower), total=len(frame), where=where, head=most["component"],
             increase=float(most["loss increase"]), predicted=predicted, unit=unit(tokens),
             why=t(f"trace.notes.lowering_{mode}", unit=unit(tokens)))
    if not held_out:
        said += " " + t("trace.notes.lowering_short" if predicted < SHORT else "trace.notes.lowering_compare")
    return said


def switched_off(drop: float, char: str, foil: str) -> str:
    """A total effect (how much the difference logit(char) − logit(foil) drops when the component is switched off)
    in words: which of the two it makes more likely, and by how much the difference moves."""
    key = "trace.notes.more_likely" if drop < 0 else "trace.notes.less_likely"
    return t(key, char=char, foil=foil, size=abs(drop))


def overshoot(name: str, share: float, clean: float, corrupted: float, good: str, bad: str) -> str | None:
    """Why a patched share is above 100%, when it is: the patched run's difference against the clean run's."""
    if not share > OVERSHOOT:
        return None
    patched = corrupted + share * (clean - corrupted)
    return t("trace.notes.overshoot", name=name, share=share, good=good, bad=bad, patched=patched, clean=clean)


def percent(share: float) -> float:
    """A share as the page rounds it (to a whole percent), so that a tiny negative one reads 0%, never -0%."""
    return round(share, 2) + 0.0  # (-0.0 + 0.0 is 0.0)


def path(head: str, whole: dict[str, float]) -> str:
    """Which of the receiver head's inputs the pair's answer comes back through: the side the whole clean input
    restores most through, beside the others (whole: side → share)."""
    best = max(SIDES, key=lambda side: whole[side])
    others = t("trace.notes.list_separator").join(
        t("trace.notes.side_share", side=t(f"trace.patching.sides.{side}"), share=percent(whole[side]))
        for side in SIDES if side != best)
    key = "trace.notes.path" if whole[best] >= 0.5 else "trace.notes.path_weak"
    return t(key, head=head, side=t(f"trace.patching.sides.{best}"), share=percent(whole[best]),
             others=others)


def probability(position: int, char: str, p: float, last: bool) -> str:
    """The model's own probability (temperature 1) of the text's next token, or of its top guess after the last."""
    return t("trace.notes.probability_last" if last else "trace.notes.probability", position=position, char=char,
             p=p)


def sampled(char: str, q: float, temperature: float, top_k: int | None) -> str:
    """The same token's chance under the page's sampling settings, said only when they differ from the model's own."""
    return t("trace.notes.sampled", char=char, q=q, temperature=temperature, top_k=top_k or "—")
