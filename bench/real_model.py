"""SmolLM2-135M in the lab, on this machine's CPU: importing it, opening it, its forward pass against
transformers' LlamaForCausalLM on the same weights, and what Inspect and Trace compute for one text.

    python -m bench.real_model [--rounds N] [--tokens T]

Needs the SmolLM2 file in the cache (`python -m gptcore fetch smollm2`) and, for the side-by-side forward pass,
transformers (requirements-dev.txt). Every time is the median of interleaved rounds in this one process.
Inspect's figures, against the plain forward pass of the same tokens in the same rounds:
  - a new text: the forward pass with every head's pattern kept (inspector.inspect_text), then the figures the
    Attention tab draws (the chosen layer's grid, the enlarged head, the token row), serialised as Streamlit does;
  - a head or layer change: the figures only (the page caches the forward pass per checkpoint and text);
  - the head atlas: every head scored on random tokens shown twice (atlas.repeated_token_scores) and drawn.
Targets (issue 38): import ≤ 30 s, open ≤ 3 s, forward of 128 tokens no slower than transformers', Inspect's new
text ≤ 1.5 s and a head or layer change ≤ 0.5 s, the head atlas ≤ 3 s, Trace's logit lens and attribution ≤ 1.5 s,
one head's ablation ≤ 0.6 s, the sweep over every head ≤ 15 s, resident memory with the model open ≤ 1.5 GB.
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

from explorer import inspector_figures as figs
from gptcore import atlas
from gptcore import checkpoint as ckpt
from gptcore import inspector as ins
from gptcore.hub import cached_smollm2, import_model

from .common import cpu_name, interleave, load_summary, median, thread_summary

TEXT = ("Once upon a time, a little dog named Max lived by the sea. Every morning Max ran along the beach and "
        "barked at the waves. ")
INSPECT_TEXTS = {"the default text (18 tokens)": ins.DEFAULT_TEXT,
                 "a story said twice (~60 tokens)": "Once upon a time, a little dog named Max lived by the sea and "
                                                    "barked at the waves. " * 2,
                 "the most Inspect reads (128 tokens)": "The quick brown fox jumps over the lazy dog. " * 20}


def seconds(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def resident_gb() -> float:
    """This process's peak resident memory so far, in GB (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def forward_against_transformers(model, gguf: Path, ids: torch.Tensor, rounds: int) -> None:
    try:
        from transformers import AutoModelForCausalLM
    except ImportError:
        print("  (transformers is not installed: pip install -r requirements-dev.txt for the side-by-side forward)")
        return
    took, hf = seconds(lambda: AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                                    dtype=torch.float32).eval())
    print(f"  transformers loads the same GGUF file in {took:.1f} s")
    with torch.inference_mode():
        diff = (model(ids)[0] - hf(ids).logits).abs().max().item()
        times = interleave({"gptcore": lambda r: model(ids), "transformers": lambda r: hf(ids)}, rounds)
    ours, theirs = median(times["gptcore"]), median(times["transformers"])
    print(f"  forward of {ids.shape[1]} tokens: gptcore {ours * 1e3:.0f} ms, transformers LlamaForCausalLM "
          f"{theirs * 1e3:.0f} ms ({theirs / ours:.2f}× ours); largest logit difference {diff:.1e}")


def attention_figures(run: ins.Inspection, layer: int, head: int) -> list[str]:
    """What Inspect's Attention tab sends after a change of head or layer, as JSON."""
    labels = ins.token_labels(run.pieces)
    return [figs.head_heatmap(run.patterns[layer, head], labels, "head", len(labels) // 2).to_json(),
            figs.attention_grid(run.patterns[layer:layer + 1], first_layer=layer).to_json(),
            ins.token_boxes_html(labels)]


def inspect_text_timings(model, tokenizer, text: str, rounds: int) -> tuple[float, float, float]:
    """Median seconds of (the plain forward of the text's tokens, Inspect's new text, a head or layer change)."""
    ids = torch.tensor(tokenizer.encode(text)[:ins.inspect_limit(model.cfg)])
    run = ins.inspect_text(model, tokenizer, text)
    L, H = model.cfg.n_layer, model.cfg.n_head

    def new_text(r: int) -> list[str]:
        return attention_figures(ins.inspect_text(model, tokenizer, text), L // 2, 0)

    with torch.inference_mode():
        times = interleave({"plain forward": lambda r: model(ids[None]), "new text": new_text,
                            "head change": lambda r: attention_figures(run, r % L, r % H)}, rounds)
    return tuple(median(times[k]) for k in ("plain forward", "new text", "head change"))


def inspect_timings(model, tokenizer, rounds: int) -> None:
    """Inspect on each of INSPECT_TEXTS (a new text, a head change), then the head atlas."""
    for name, text in INSPECT_TEXTS.items():
        plain, new, change = inspect_text_timings(model, tokenizer, text, rounds)
        print(f"  Inspect, {name}: new text {new:.2f} s ({new / plain:.2f}× the plain forward's {plain:.2f} s), "
              f"head or layer change {change:.3f} s")
    cfg = model.cfg
    times = interleave({"atlas": lambda r: figs.head_atlas(ins.repeated_sequence_scores(model)[0], cfg.n_layer,
                                                           cfg.n_head, (0, 0), ins.CLEAR_SCORE).to_json()},
                       max(2, rounds // 2), warmup=1)
    length, sequences = atlas.repeated_shape(cfg)
    print(f"  Inspect's head atlas ({sequences} sequences of {length} random tokens shown twice): "
          f"{median(times['atlas']):.2f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args(argv)
    gguf = cached_smollm2()
    if gguf is None:
        print("skipping real_model: SmolLM2 is not in the cache (python -m gptcore fetch smollm2)")
        return 0
    print(f"{cpu_name()}; {thread_summary()}\n{load_summary()}")
    with tempfile.TemporaryDirectory() as tmp:
        took, folder = seconds(lambda: import_model("smollm2", Path(tmp) / "smollm2"))
        print(f"  import from the cached GGUF file: {took:.1f} s")
        took, loaded = seconds(lambda: ckpt.load_checkpoint(folder))
        print(f"  open the converted checkpoint: {took:.2f} s ({loaded.model.num_params():,} parameters)")
    model, tokenizer = loaded.model, loaded.tokenizer
    ids = torch.tensor([tokenizer.encode(TEXT * 8)[:args.tokens]])
    forward_against_transformers(model, gguf, ids, args.rounds)
    inspect_timings(model, tokenizer, args.rounds)
    print(f"  peak resident memory of this process: {resident_gb():.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
