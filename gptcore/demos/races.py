"""Training runs raced one after another inside one background job: what they report, and how.

A race's job (an explorer.jobs.Job) holds in job.data: 'runs' (each run's label → waiting, training, finished,
stopped or diverged), 'diverged' (label → the Message that says why), 'steps_done', 'steps_total', 'tokens_per_s'
and 'eta_s'. The demos append their own rows (losses, probes) beside them.
"""
from __future__ import annotations

import time

from ..failures import Diverged
from ..train import Trainer


class RaceProgress:
    """Counts the steps of every run of a race and keeps the job's progress, speed, ETA and run states current."""

    def __init__(self, job, labels: list[str], total_steps: int):
        self.job, self.total, self.done = job, total_steps, 0
        self.states, self.diverged = {label: "waiting" for label in labels}, {}
        self.started = time.perf_counter()
        job.update(data={"runs": dict(self.states), "steps_done": 0, "steps_total": total_steps,
                         "tokens_per_s": 0.0, "eta_s": None})

    def step_done(self, tokens_per_s: float) -> None:
        self.done += 1
        rate = self.done / (time.perf_counter() - self.started)
        self.job.update(progress=self.done / self.total, data={
            "steps_done": self.done, "tokens_per_s": tokens_per_s, "eta_s": (self.total - self.done) / rate})

    def run(self, label: str, trainer: Trainer, **run_options) -> None:
        """trainer.run(...) as this race's run `label`: its state kept, a divergence recorded, not raised."""
        self._set(label, "training")
        try:
            self._set(label, trainer.run(control=self.job.control, **run_options))
        except Diverged as e:
            self.diverged[label] = e.message
            self.job.update(data={"diverged": dict(self.diverged)})
            self.done += trainer.tc.steps - trainer.step  # its remaining steps will never run
            self._set(label, "diverged")

    def _set(self, label: str, state: str) -> None:
        self.states[label] = state
        self.job.update(data={"runs": dict(self.states)})

    @property
    def stopped(self) -> bool:
        return self.job.control.stop.is_set()

    def outcome(self) -> str:
        return "stopped" if self.stopped else "finished"

