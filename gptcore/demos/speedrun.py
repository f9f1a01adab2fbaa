"""The speedrun ladder on a page: the shipped measurements as tables, and one rung rerun live against the rung it
builds on.

The shipped curves (gptcore/ladder_curves.json, with the settings each rung was measured with) come from
`python -m bench.ladder --ship` on tinystories-1M.txt, which the app does not carry; the live rerun trains a shorter
version of both recipes on the built-in stories, one after the other, with every core.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from ..config import GPTConfig, TrainConfig, settings
from ..errors import UserError
from ..events import EvalEvent, StepEvent, TrainingEvent
from ..ladder import LADDER, LADDER_CURVES, RUNGS, Curve, Rung, predecessor
from ..texts import builtin_corpus
from ..train import Trainer
from .races import RaceProgress


class LadderDataError(UserError, ValueError):
    """The shipped ladder measurements are missing, unreadable or measured on other settings."""


@dataclass(frozen=True)
class LadderRuns:
    cpu: str
    cores: int
    command: str
    target: float
    curves: dict[str, Curve]


def rung_settings(rung: Rung) -> dict:
    """A rung's model and training settings, as the measurements record them."""
    return {"model": asdict(rung.model), "train": asdict(rung.train)}


def measured_with(recorded, rung: Rung) -> bool:
    """Whether recorded settings build the rung's model and run today: a setting added since they were written
    counts at its default, which builds what was measured."""
    try:
        return GPTConfig.from_dict(recorded["model"]) == rung.model and \
            TrainConfig(**recorded["train"]) == rung.train
    except (TypeError, KeyError, ValueError):
        return False


def load_ladder(path: Path = LADDER_CURVES) -> LadderRuns:
    """The measured curves of every rung, as `python -m bench.ladder --ship` wrote them, checked against the
    ladder's settings today."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        curves = {key: Curve(key, [int(s) for s in c["step"]], [float(s) for s in c["seconds"]],
                             [float(v) for v in c["val"]]) for key, c in raw["curves"].items()}
        runs = LadderRuns(str(raw["cpu"]), int(raw["cores"]), str(raw["command"]), float(raw["target"]), curves)
        settings = raw["settings"]
        bad = [key for key, c in curves.items() if not (len(c.step) == len(c.seconds) == len(c.val) > 0)]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise LadderDataError("speedrun.no_data", "the ladder's measurements ({name}) cannot be read: {error}",
                              name=path.name, error=f"{type(e).__name__}: {e}") from None
    missing = [r.key for r in LADDER if r.key not in curves or r.key in bad]
    if missing:
        raise LadderDataError("speedrun.missing_rungs", "the ladder's measurements lack the rungs {keys}: rerun "
                              "`python -m bench.ladder --ship`", keys=", ".join(missing))
    changed = [r.key for r in LADDER if not measured_with(settings.get(r.key), r)]
    if changed:
        raise LadderDataError("speedrun.stale", "the ladder's measurements were made with other settings for the "
                              "rungs {keys}: rerun `python -m bench.ladder --ship`", keys=", ".join(changed))
    return runs


def characters_read(train: TrainConfig, model: GPTConfig, step: int) -> int:
    """Training characters read up to and including `step` (steps count from 0)."""
    return (step + 1) * train.batch_size * model.context


def ladder_table(runs: LadderRuns) -> pd.DataFrame:
    """One row per measured rung: what it builds on, whether it stayed, when it first reached the target (step,
    characters read, seconds, and seconds over the first rung's) and where it ended."""
    base = runs.curves[LADDER[0].key].first_at_or_below(runs.target)
    rows = []
    for rung in (r for r in LADDER if r.key in runs.curves):
        curve, before = runs.curves[rung.key], predecessor(rung.key)
        hit = curve.first_at_or_below(runs.target)
        rows.append({"rung": rung.key, "builds on": before.key if before else None, "adopted": rung.adopted,
                     "steps": rung.train.steps, "step to target": hit[0] if hit else None,
                     "characters to target": characters_read(rung.train, rung.model, hit[0]) if hit else None,
                     "seconds to target": hit[1] if hit else None,
                     "× tutorial": hit[1] / base[1] if hit and base else None,
                     "final val loss": curve.val[-1], "final seconds": curve.seconds[-1]})
    return pd.DataFrame(rows)


def curve_frame(runs: LadderRuns, keys: list[str]) -> pd.DataFrame:
    """Long form of the chosen rungs' curves: rung, step, seconds, characters read, val."""
    frames = []
    for key in keys:
        c, rung = runs.curves[key], RUNGS[key]
        frames.append(pd.DataFrame({"rung": key, "step": c.step, "seconds": c.seconds, "val": c.val,
                                    "characters": [characters_read(rung.train, rung.model, s) for s in c.step]}))
    return pd.concat(frames, ignore_index=True)


NO_EFFECT = "—"  # a setting the rest of its config leaves without effect (the final lr ratio of a constant schedule)


def in_effect(config, name: str) -> str:
    """A setting's value as the changes table shows it: NO_EFFECT where the config's other settings ignore it."""
    s = settings(type(config)).get(name)
    if s is not None and s.only_with is not None and getattr(config, s.only_with[0]) not in s.only_with[1]:
        return NO_EFFECT
    return str(getattr(config, name))


def changes(rung: Rung) -> pd.DataFrame:
    """The settings in which a rung differs from the rung it builds on, where it matters on either side: setting,
    before, after."""
    before = predecessor(rung.key)
    rows = []
    if before is not None:
        for config, base in ((rung.model, before.model), (rung.train, before.train)):
            shown = [(name, in_effect(base, name), in_effect(config, name))
                     for name, value in asdict(config).items() if value != getattr(base, name)]
            rows += [{"setting": name, "before": old, "after": new} for name, old, new in shown
                     if (old, new) != (NO_EFFECT, NO_EFFECT)]
    return pd.DataFrame(rows, columns=["setting", "before", "after"])


# --- a rung rerun live --------------------------------------------------------------------------------------

MIN_STEPS = 20  # the fewest steps a shortened run takes: fewer say nothing


@dataclass(frozen=True)
class RungRace:
    """A rung and the rung it builds on, both shortened by the same factor, on the built-in stories: `share` of
    their steps, or more where the shorter one would fall under MIN_STEPS."""
    rung: str
    share: float = 0.25
    corpus_chars: int = 400_000
    evals: int = 6
    seed: int = 0

    def runs(self) -> list[tuple[str, GPTConfig, TrainConfig]]:
        """(label, model, training) of the predecessor, then the rung."""
        before = predecessor(self.rung)
        if before is None:
            raise ValueError(f"rung {self.rung!r} builds on nothing: there is no race to run")
        pair = (before, RUNGS[self.rung])
        factor = max(self.share, MIN_STEPS / min(r.train.steps for r in pair))
        return [(r.key, r.model, self._shorten(r.train, factor)) for r in pair]

    def _shorten(self, tc: TrainConfig, factor: float) -> TrainConfig:
        steps = round(tc.steps * factor)
        return replace(tc, steps=steps, warmup=round(tc.warmup * factor), eval_every=max(1, steps // self.evals),
                       eval_batches=5, sample_every=0, sample_chars=1, final_eval=False, checkpoint_every=0,
                       snapshot_every=0, seed=self.seed, device="cpu", threads=0)


def run_rung_race(job, race: RungRace) -> str | None:
    """Train the predecessor, then the rung, reporting into job (an explorer.jobs.Job) through a RaceProgress
    (gptcore.demos.races: run states, steps, speed, ETA).

    job.data gets 'pair' (the two labels) at once, then rows as training goes: 'loss' (run, step, seconds, train
    loss) and 'val' (run, step, seconds, val estimate), seconds being the run's own training time.
    """
    runs = race.runs()
    job.update(data={"pair": [label for label, _, _ in runs]})
    corpus = builtin_corpus(race.corpus_chars, race.seed)
    progress = RaceProgress(job, [label for label, _, _ in runs], sum(tc.steps + 1 for _, _, tc in runs))
    for label, model_cfg, tc in runs:
        if progress.stopped:
            break
        trainer = Trainer.fresh(model_cfg, tc, corpus)
        seconds = [0.0]  # the run's training time at its last step

        def on_event(event: TrainingEvent, label=label, seconds=seconds):
            if isinstance(event, EvalEvent):
                job.append("val", (label, event.step, seconds[0], event.val))
            elif isinstance(event, StepEvent):
                seconds[0] = event.elapsed_s
                job.append("loss", (label, event.step, event.elapsed_s, event.loss))
                progress.step_done(event.tokens_per_s)

        progress.run(label, trainer, on_event=on_event)
    return progress.outcome()


def race_frames(data: dict, smooth: int = 10) -> dict[str, pd.DataFrame]:
    """The race's rows as DataFrames; 'loss' gains a trailing moving average per run."""
    loss = pd.DataFrame(data.get("loss", []), columns=["run", "step", "seconds", "loss"])
    loss["smoothed"] = loss.groupby("run", sort=False)["loss"].rolling(smooth, min_periods=1).mean().droplevel(0)
    return {"loss": loss, "val": pd.DataFrame(data.get("val", []), columns=["run", "step", "seconds", "val"])}
