"""The speedrun ladder: from the tutorial's recipe to RECIPES["speedrun"], one change per rung.

Each rung is the rung before it with one change; a rung marked `adopted=False` was tried on top of the rung before
it and left out (the next rung builds on the last adopted one). `python -m bench.ladder` trains them all, one step
of each in turn, and measures each one's wall time to the first rung's final validation loss; the Faster training
page shows those curves and reruns a short version of any rung against the rung it builds on.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from .config import GPTConfig, TrainConfig
from .recipes import RECIPES


@dataclass(frozen=True)
class Rung:
    key: str
    model: GPTConfig
    train: TrainConfig
    adopted: bool = True


def _ladder() -> list[Rung]:
    tutorial, fast, speedrun = RECIPES["tutorial"], RECIPES["fast"], RECIPES["speedrun"]
    cosine = replace(tutorial.train, schedule="cosine", warmup=50, min_lr_ratio=0.05)
    qk = replace(fast.model, qk_norm=True)
    qk_train = replace(fast.train, lr=speedrun.train.lr, muon_lr=speedrun.train.muon_lr)  # twice the fast recipe's
    embed = replace(qk_train, embed_lr=speedrun.train.embed_lr)
    zero = replace(qk, zero_init=True)
    return [
        Rung("tutorial", tutorial.model, tutorial.train),
        Rung("cosine", tutorial.model, cosine),
        Rung("muon", fast.model, fast.train),  # RECIPES["fast"]
        Rung("higher_lr", fast.model, qk_train, adopted=False),
        Rung("qk_norm", qk, qk_train),
        Rung("embed_lr", qk, embed),
        Rung("zero_init", zero, embed),
        Rung("warmdown", zero, replace(embed, schedule="warmdown", warmdown=0.5, min_lr_ratio=0.0), adopted=False),
        Rung("relu2", replace(zero, ffn="relu2", d_ff=512), embed, adopted=False),
        Rung("batch8", zero, replace(embed, batch_size=8, steps=2 * embed.steps, warmup=2 * embed.warmup),
             adopted=False),
        Rung("shorter", speedrun.model, speedrun.train),  # RECIPES["speedrun"]
    ]


LADDER = _ladder()
LADDER_CURVES = Path(__file__).with_name("ladder_curves.json")  # written by `python -m bench.ladder --ship`
RUNGS = {rung.key: rung for rung in LADDER}


def predecessor(key: str) -> Rung | None:
    """The rung a rung builds on: the last adopted rung before it (None for the first)."""
    before = [r for r in LADDER[:list(RUNGS).index(key)] if r.adopted]
    return before[-1] if before else None


@dataclass
class Curve:
    """Whole-val-split loss of one run at checkpoints, against its training wall time (checkpoint evaluations
    excluded)."""
    name: str
    step: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    val: list[float] = field(default_factory=list)

    def first_at_or_below(self, target: float) -> tuple[int, float] | None:
        """(step, seconds) of the first checkpoint whose loss is at most target, or None."""
        return next(((s, t) for s, t, v in zip(self.step, self.seconds, self.val) if v <= target), None)
