"""The closing page: how far the tutorial's model is from GPT-2 and LLaMA, counted with the same formulas."""
from __future__ import annotations

import pandas as pd

from ..config import GPTConfig
from ..errors import message
from .anatomy import ModelShape, total_parameters
from .frames import message_frame
from .hyperparams import OURS, PUBLISHED, model_name

GPT2 = dict(vocab_size=50257, context=1024, ffn="gelu", norm="layer", position="learned", bias=True, tied_head=True)
SHAPES = {
    "GPT-2 small": ModelShape(d_model=768, n_layer=12, n_head=12, d_ff=4 * 768, **GPT2),
    "GPT-2 XL": ModelShape(d_model=1600, n_layer=48, n_head=25, d_ff=4 * 1600, **GPT2),
    "LLaMA-2-7B": PUBLISHED["LLaMA-2-7B"],
}
TOKENS = {"GPT-2 small": "BPE", "GPT-2 XL": "BPE", "LLaMA-2-7B": "BPE (SentencePiece)"}


def scale_table(cfg: GPTConfig) -> pd.DataFrame:
    """This app's model next to GPT-2 small, GPT-2 XL and LLaMA-2-7B: shape and parameter count."""
    ours = ModelShape.from_config(cfg)
    base = total_parameters(ours)
    rows = []
    for name, s in {OURS: ours, **SHAPES}.items():
        n = total_parameters(s)
        tokens = TOKENS.get(name) or message("recap.characters", "characters")
        rows.append({"model": model_name(name), "tokens": tokens, "vocabulary": s.vocab_size,
                     "d_model": s.d_model, "n_layer": s.n_layer, "n_head": s.n_head, "context": s.context,
                     "parameters": n, "× this model": n / base})
    return message_frame(rows)
