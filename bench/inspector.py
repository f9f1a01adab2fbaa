"""How long the Inspect page takes for a full context window: forward pass with hooks, grid figure, JSON.

    python -m bench.inspector [checkpoint folder ...]

Without arguments it times the shipped checkpoint and the tutorial-sized model (810k parameters, random
weights: the cost does not depend on what the weights learned). Target: under 1 s per window.
"""
import statistics
import string
import sys
import time
from pathlib import Path

import torch

from explorer import inspector_figures as figs
from gptcore import checkpoint as ckpt
from gptcore import inspector as ins
from gptcore.config import GPTConfig
from gptcore.data import CharTokenizer
from gptcore.train import build_model

REPEATS = 7


def full_window_text(tokenizer: CharTokenizer, context: int) -> str:
    known = "".join(c for c in ins.DEFAULT_TEXT + " " if c in tokenizer.stoi) or tokenizer.chars[0]
    return (known * (context // len(known) + 1))[:context]


def tutorial_sized_tokenizer() -> CharTokenizer:
    """74 characters, the tutorial's vocabulary size, including every character of the default text."""
    chars = sorted(set(ins.DEFAULT_TEXT))
    chars += [c for c in string.printable if c not in chars][: GPTConfig().vocab_size - len(chars)]
    return CharTokenizer(chars)


def time_once(model, tokenizer, text) -> dict[str, float]:
    t0 = time.perf_counter()
    run = ins.inspect_text(model, tokenizer, text)
    t1 = time.perf_counter()
    fig = figs.attention_grid(run.patterns, (0, 0))
    t2 = time.perf_counter()
    fig.to_json()  # what st.plotly_chart serialises for the browser
    t3 = time.perf_counter()
    return {"forward": t1 - t0, "figure": t2 - t1, "json": t3 - t2, "total": t3 - t0}


def time_window(label: str, model, tokenizer) -> float:
    text = full_window_text(tokenizer, model.cfg.context)
    time_once(model, tokenizer, text)  # warm-up: first calls pay for lazy imports and allocations
    runs = [time_once(model, tokenizer, text) for _ in range(REPEATS)]
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    cfg = model.cfg
    print(f"{label}: {cfg.n_layer}x{cfg.n_head} heads, T={len(text)}, {model.num_params():,} params — median of "
          f"{REPEATS}: forward {median['forward'] * 1e3:.0f} ms + grid figure {median['figure'] * 1e3:.0f} ms "
          f"+ JSON {median['json'] * 1e3:.0f} ms = {median['total'] * 1e3:.0f} ms "
          f"({'OK' if median['total'] < 1 else 'OVER'} the 1 s target)")
    return median["total"]


def main(argv: list[str] | None = None) -> int:
    folders = sys.argv[1:] if argv is None else argv
    print(f"torch threads: {torch.get_num_threads()}")
    worst = 0.0
    for folder in folders or [str(ckpt.CHECKPOINT_ROOT / "shipped-tiny")]:
        loaded = ckpt.load_checkpoint(folder)
        worst = max(worst, time_window(Path(folder).name, loaded.model, loaded.tokenizer))
    if not folders:
        tokenizer = tutorial_sized_tokenizer()
        model, _ = build_model(GPTConfig(vocab_size=tokenizer.vocab_size), seed=0)
        worst = max(worst, time_window("tutorial-size model", model.eval(), tokenizer))
    return 0 if worst < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
