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
    "fast": Recipe(
        "Fast recipe",
        "The tutorial's model and data, reaching the tutorial recipe's final validation loss in about 60% of its "
        "training time (half that of the tutorial's own script) after reading 45% as many characters: batches "
        "of 8 (four times the updates per character), lr warmed up over 100 steps to 2e-3 and decayed along a "
        "cosine, gradients clipped at 1, weight decay 0.1 on matrices only, AdamW β₂ 0.99.",
        GPTConfig(), TrainConfig(steps=2700, batch_size=8, lr=2e-3, schedule="cosine", warmup=100, min_lr_ratio=0.05,
                                 grad_clip=1.0, decay_all=False, weight_decay=0.1, beta2=0.99, eval_every=500)),
}
