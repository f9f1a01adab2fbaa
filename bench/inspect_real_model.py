"""What the Inspect page computes for SmolLM2-135M on this machine's CPU, against the plain forward pass of the
same tokens measured in the same rounds.

    python -m bench.inspect_real_model [--checkpoint DIR] [--rounds N]

Without --checkpoint it imports the cached SmolLM2 into a temporary folder (`python -m gptcore fetch smollm2`
first). Each figure is the median of interleaved rounds:
  - a new text: the forward pass with every head's pattern kept (inspector.inspect_text), then the figures the
    Attention tab draws (the chosen layer's grid, the enlarged head, the token row), serialised as Streamlit does;
  - a head or layer change: the figures only (the page caches the forward pass per checkpoint and text);
  - the head atlas: every head scored on random tokens shown twice (atlas.repeated_token_scores) and drawn.
Targets (issue 38): a new text ≤ 1.5 s, a head or layer change ≤ 0.5 s, the atlas ≤ 3 s.
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path

import torch

from explorer import inspector_figures as figs
from gptcore import atlas
from gptcore import checkpoint as ckpt
from gptcore import inspector as ins
from gptcore.hub import cached_smollm2, import_model

from .common import cpu_name, interleave, load_summary, median, thread_summary

TEXTS = {"the default text (18 tokens)": ins.DEFAULT_TEXT,
         "a story said twice (~60 tokens)": "Once upon a time, a little dog named Max lived by the sea and barked at "
                                            "the waves. " * 2,
         "the most Inspect reads (128 tokens)": "The quick brown fox jumps over the lazy dog. " * 20}


def page_figures(run: ins.Inspection, layer: int, head: int) -> list[str]:
    """What the Attention tab sends after a change of head or layer, as JSON."""
    labels = ins.token_labels(run.pieces)
    return [figs.head_heatmap(run.patterns[layer, head], labels, "head", len(labels) // 2).to_json(),
            figs.attention_grid(run.patterns[layer:layer + 1], first_layer=layer).to_json(),
            ins.token_boxes_html(labels)]


def time_text(model, tokenizer, text: str, rounds: int) -> tuple[float, float, float]:
    """Median seconds of (the plain forward of the text's tokens, a new text, a head or layer change)."""
    ids = torch.tensor(tokenizer.encode(text)[:ins.inspect_limit(model.cfg)])
    run = ins.inspect_text(model, tokenizer, text)
    L, H = model.cfg.n_layer, model.cfg.n_head
    with torch.inference_mode():
        times = interleave({"plain forward": lambda r: model(ids[None]),
                            "new text": lambda r: page_figures(ins.inspect_text(model, tokenizer, text), L // 2, 0),
                            "head change": lambda r: page_figures(run, r % L, r % H)}, rounds)
    return tuple(median(times[k]) for k in ("plain forward", "new text", "head change"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, help="a converted SmolLM2 folder (default: import the cached file)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if args.checkpoint is None and cached_smollm2() is None:
        print("skipping inspect_real_model: SmolLM2 is not in the cache (python -m gptcore fetch smollm2)")
        return 0
    print(f"{cpu_name()}; {thread_summary()}\n{load_summary()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.checkpoint or import_model("smollm2", Path(tmp) / "smollm2")
        model, tokenizer, _ = ckpt.load_weights(Path(folder) / "model.safetensors")
    for name, text in TEXTS.items():
        plain, new, change = time_text(model, tokenizer, text, args.rounds)
        print(f"  {name}: new text {new:.2f} s ({new / plain:.2f}× the plain forward's {plain:.2f} s), "
              f"head or layer change {change:.3f} s")
    times = interleave({"atlas": lambda r: figs.head_atlas(ins.repeated_sequence_scores(model)[0], model.cfg.n_layer,
                                                           model.cfg.n_head, (0, 0), ins.CLEAR_SCORE).to_json()},
                       max(2, args.rounds // 2), warmup=1)
    length, sequences = atlas.repeated_shape(model.cfg)
    print(f"  head atlas ({sequences} sequences of {length} random tokens shown twice): {median(times['atlas']):.2f} s")
    print(f"  peak resident memory of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
