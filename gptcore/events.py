"""What a running Trainer reports, one small frozen value per kind of event.

A consumer (the app's job, the command line, a demo) dispatches on the type:

    match event:
        case StepEvent(step=step, loss=loss): ...
        case EvalEvent(): ...
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class StepEvent:
    """A step is done: its batch's loss, the recent speed and the time left at that speed."""
    step: int
    loss: float
    tokens_per_s: float
    eta_s: float
    elapsed_s: float  # wall time of the run, pauses excluded, earlier sessions of a resumed run included
    total_steps: int


@dataclass(frozen=True)
class EvalEvent:
    """The quick loss estimate every eval_every steps: the step's train loss and the validation estimate."""
    step: int
    train: float
    val: float


@dataclass(frozen=True)
class SampleEvent:
    step: int
    text: str


@dataclass(frozen=True)
class CheckpointEvent:
    step: int
    path: str


@dataclass(frozen=True)
class FinalEvalEvent:
    """The loss over the whole validation split, once the run ends."""
    step: int
    val: float


@dataclass(frozen=True)
class DivergingEvent:
    """The validation loss went far above a uniform guess's (diverging), or came back below it."""
    step: int
    loss: float
    vocab: int
    diverging: bool

    def record(self) -> dict:
        """The run's meta.json `diverging` record (gptcore.failures.diverging_message says it)."""
        return {"step": self.step, "loss": self.loss, "vocab": self.vocab}


@dataclass(frozen=True)
class DoneEvent:
    step: int
    status: str  # finished or stopped
    wall_time: float


TrainingEvent = StepEvent | EvalEvent | SampleEvent | CheckpointEvent | FinalEvalEvent | DivergingEvent | DoneEvent
OnEvent = Callable[[TrainingEvent], None]
