"""Named training presets: a model config plus a TrainConfig."""
from __future__ import annotations

from dataclasses import dataclass

from .config import GPTConfig
from .train import TrainConfig


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    model: GPTConfig
    train: TrainConfig


RECIPES = {
    "tutorial": Recipe(
        "Tutorial recipe",
        "The tutorial's exact settings: 1,501 steps of batch 32 × context 128, AdamW at a constant 3e-3, "
        "PyTorch default init, seed 0.",
        GPTConfig(), TrainConfig()),
    "quick": Recipe(
        "Quick demo",
        "About a minute on two cores: the same model, 200 steps of batch 16. It learns spelling and spacing, "
        "not stories.",
        GPTConfig(), TrainConfig(steps=200, batch_size=16, eval_every=25, sample_every=50, sample_chars=150)),
}
