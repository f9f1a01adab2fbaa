"""Named training presets: a model config plus a TrainConfig."""
from __future__ import annotations

from dataclasses import dataclass

from .config import GPTConfig, TrainConfig, swiglu_hidden


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    model: GPTConfig
    train: TrainConfig


# The optimizer and schedule the quick and fast presets share (bench/README.md, for how they were chosen).
MUON = dict(optimizer="muon", muon_lr=0.02, lr=4e-3, schedule="cosine", min_lr_ratio=0.05, grad_clip=1.0,
            decay_all=False, weight_decay=0.0, beta2=0.99)

RECIPES = {
    "tutorial": Recipe(
        "Tutorial recipe",
        "The tutorial's exact settings: steps 0–1,500 of batch 32 × context 128, AdamW at a constant 3e-3, "
        "PyTorch default init, seed 0.",
        GPTConfig(), TrainConfig()),
    "quick": Recipe(
        "Quick demo",
        "One to two minutes on two CPU cores (longer while they are busy): the same model, steps 0–200 of batch 16 "
        "with the fast recipe's optimizer (Muon, cosine schedule). It learns words, spacing and dialogue; for "
        "stories, train longer.",
        GPTConfig(), TrainConfig(steps=200, batch_size=16, warmup=20, eval_every=25, sample_every=50,
                                 sample_chars=150, **MUON)),
    "fast": Recipe(
        "Fast recipe",
        "The tutorial's model and data, reaching the tutorial recipe's final validation loss in under a third of "
        "the tutorial script's time, after reading 28% as many characters: Muon (orthogonalized momentum) for the "
        "blocks' weight matrices at lr 0.02, AdamW at 4e-3 for embeddings, head and norms, batches of 16, "
        "50 warmup steps and a cosine decay, gradients clipped at 1, no weight decay.",
        GPTConfig(), TrainConfig(steps=800, batch_size=16, warmup=50, eval_every=200, **MUON)),
    "speedrun": Recipe(
        "Speedrun recipe",
        "The fast recipe plus the rungs of the speedrun ladder that paid on this model (the Faster training page): "
        "QK-norm with twice the learning rates (Muon 0.04, AdamW 8e-3), the embedding at lr 0.1 and the blocks' "
        "output matrices starting at zero; the cosine schedule planned for 700 steps of batch 16.",
        GPTConfig(qk_norm=True, zero_init=True),
        TrainConfig(steps=700, batch_size=16, warmup=50, eval_every=200,
                    **{**MUON, "muon_lr": 0.04, "lr": 8e-3, "embed_lr": 0.1})),
    # GPT-2's recipe at small scale, for a GPU: BPE tokens, a wider and deeper model, longer context and batch.
    "bigger": Recipe(
        "Bigger (for a GPU)",
        "For a GPU and a large corpus (the full TinyStories, prepared with `python -m gptcore prepare`): a "
        "byte-level BPE of 4,096 tokens, d_model 384, 6 layers of 6 heads, context 256, 13.8M parameters, batches "
        "of 64 × 256 tokens, AdamW at 1e-3 with warmup and a cosine decay. On two CPU cores a step takes seconds; "
        "on the tutorial's 1M characters it soon overfits.",
        GPTConfig(d_model=384, n_layer=6, n_head=6, d_ff=swiglu_hidden(384), context=256),
        TrainConfig(steps=5000, batch_size=64, lr=1e-3, schedule="cosine", warmup=200, min_lr_ratio=0.1,
                    weight_decay=0.1, decay_all=False, beta2=0.99, grad_clip=1.0, eval_every=500, eval_batches=20,
                    sample_chars=400, tokenizer="bpe", bpe_vocab=4096)),
}
