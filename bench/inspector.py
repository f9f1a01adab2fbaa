"""The Python side of the Inspect page at a full context window: the forward pass (once per text, cached by the
page), the grid of every head (drawn on a whole-page run), and what a click redraws: the enlarged head and the
next-character bars, each built and serialised to JSON as st.plotly_chart does, with its size in bytes.

    python -m bench.inspector [checkpoint folder ...]

Without arguments it times the shipped checkpoint and the tutorial-sized model (810k parameters, random
weights: the cost does not depend on what the weights learned). Target: under 1 s per window. The time from a
click to the browser's screen is bench/browser_latency.py's.
"""
import statistics
import string
import sys
import time
from pathlib import Path

import torch

from explorer import inspector_figures as figs
from gptcore import checkpoint as ckpt
from gptcore import folders
from gptcore import inspector as ins
from gptcore.config import GPTConfig
from gptcore.runs import SHIPPED
from gptcore.tokenizer import CharTokenizer
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


def time_once(model, tokenizer, text) -> tuple[dict[str, float], dict[str, int]]:
    """(seconds, JSON bytes) of each part of the page's work on one text."""
    times, sizes = {}, {}
    t0 = time.perf_counter()
    run = ins.inspect_text(model, tokenizer, text)
    times["forward"] = time.perf_counter() - t0
    labels = ins.token_labels(run.pieces)
    last = len(labels) - 1
    parts = {"grid": lambda: figs.attention_grid(run.patterns),
             "enlarged head": lambda: figs.head_heatmap(run.patterns[0, 0], labels, "L0H0", last),
             "bars": lambda: figs.prediction_bars(ins.top_predictions(run.logits, tokenizer, last, 10, 0.8, None),
                                                  "bars")}
    for name, build in parts.items():
        t0 = time.perf_counter()
        sizes[name] = len(build().to_json())  # what st.plotly_chart serialises for the browser
        times[name] = time.perf_counter() - t0
    return times, sizes


def time_window(label: str, model, tokenizer) -> float:
    text = full_window_text(tokenizer, model.cfg.context)
    time_once(model, tokenizer, text)  # warm-up: first calls pay for lazy imports and allocations
    runs = [time_once(model, tokenizer, text) for _ in range(REPEATS)]
    median = {k: statistics.median(r[0][k] for r in runs) for k in runs[0][0]}
    sizes = runs[0][1]
    cfg = model.cfg
    total = sum(median.values())
    print(f"{label}: {cfg.n_layer}x{cfg.n_head} heads, T={len(text)}, {model.num_params():,} params — median of "
          f"{REPEATS}: forward {median['forward'] * 1e3:.0f} ms; "
          + "; ".join(f"{name} {median[name] * 1e3:.0f} ms ({sizes[name] / 1e3:.0f} kB JSON)" for name in sizes)
          + f"; all {total * 1e3:.0f} ms ({'OK' if total < 1 else 'OVER'} the 1 s target)")
    return total


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    print(f"torch threads: {torch.get_num_threads()}")
    worst = 0.0
    for folder in paths or [str(folders.CHECKPOINT_ROOT / SHIPPED)]:
        loaded = ckpt.load_checkpoint(folder)
        worst = max(worst, time_window(Path(folder).name, loaded.model, loaded.tokenizer))
    if not paths:
        tokenizer = tutorial_sized_tokenizer()
        model, _ = build_model(GPTConfig(vocab_size=tokenizer.vocab_size), seed=0)
        worst = max(worst, time_window("tutorial-size model", model.eval(), tokenizer))
    return 0 if worst < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
