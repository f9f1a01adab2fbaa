"""The linear layers' matrix products: torch's default fp32 kernel (MKL) against oneDNN, shape by shape.

    python -m bench.linear                 one core, batch 16 x context 128 (a shard's rows), 20 rounds (~1 min)
    python -m bench.linear --threads 0 --batch-size 32    every core, the whole batch of a training step

gptcore.linear.Linear sends x·Wᵀ and the input gradient g·W to oneDNN and leaves the weight gradient gᵀ·x to
torch.mm. This prints, for every linear layer of the tutorial's model, each product's median time under both
kernels (interleaved in the same rounds) and their ratio; then the sharded training step with and without
oneDNN, interleaved step by step, and the two runs' largest gradient difference.
"""
from __future__ import annotations

import argparse
import sys

import torch

from gptcore import linear
from gptcore.threads import ShardedGrads
from gptcore.train import build_model

from .common import add_model_arguments, interleave, load_summary, median, thread_summary
from .step import random_batches, tutorial_sized


def layer_shapes(cfg) -> list[tuple[str, int, int]]:
    """(name, d_in, d_out) of each distinct linear layer of one block, and the head."""
    ffn = [("w1, w3", cfg.d_model, cfg.d_ff), ("w2", cfg.d_ff, cfg.d_model)]
    return [("qkv", cfg.d_model, 3 * cfg.d_model), ("proj", cfg.d_model, cfg.d_model), *ffn,
            ("head", cfg.d_model, cfg.vocab_size)]


def product_candidates(rows: int, d_in: int, d_out: int) -> dict[str, callable]:
    x, w, g = torch.randn(rows, d_in), torch.randn(d_out, d_in), torch.randn(rows, d_out)
    return {"x·Wᵀ mkl": lambda _: x @ w.t(), "x·Wᵀ onednn": lambda _: linear.onednn_linear(x, w),
            "g·W mkl": lambda _: g @ w, "g·W onednn": lambda _: linear.onednn_linear(g, w.t()),
            "gᵀ·x mkl": lambda _: g.t() @ x, "gᵀ·x onednn": lambda _: linear.onednn_linear(g.t(), x.t())}


def step_candidates(cfg, tc) -> tuple[dict[str, callable], callable]:
    """The sharded step's forward and backward with and without oneDNN, and a check of their gradients."""
    model, gen = build_model(cfg, seed=0)
    batches = random_batches(cfg, tc.batch_size, gen, 4)
    grads = ShardedGrads(model, torch.get_num_threads())

    def step(onednn: bool):
        def run(i):
            before, linear.ONEDNN_LINEAR = linear.ONEDNN_LINEAR, onednn
            try:
                return grads(*batches[i % len(batches)])
            finally:
                linear.ONEDNN_LINEAR = before
        return run

    def largest_difference() -> float:
        step(False)(0)
        mkl = [p.grad.clone() for p in model.parameters()]
        step(True)(0)
        return max((p.grad - g).abs().max().item() for p, g in zip(model.parameters(), mkl))
    return {"step mkl": step(False), "step onednn": step(True)}, largest_difference


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.linear", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.set_defaults(threads=1, batch_size=16)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    if not linear.ONEDNN_AVAILABLE:
        print("oneDNN is not used on this machine (not an AMD x86 CPU, or a torch build without it): gptcore's "
              "linear layers use torch's default kernel")
        return 0
    torch.set_num_threads(args.threads or torch.get_num_threads())
    cfg, tc = tutorial_sized(args)
    rows = tc.batch_size * cfg.context
    print(f"{thread_summary()}\n{load_summary()}\n\nMedian ms per product, {rows:,} rows, {args.rounds} rounds:")
    for name, d_in, d_out in layer_shapes(cfg):
        times = {k: median(v) for k, v in interleave(product_candidates(rows, d_in, d_out), args.rounds).items()}
        cells = [f"{p} mkl {times[p + ' mkl'] * 1e3:6.3f}  onednn {times[p + ' onednn'] * 1e3:6.3f}  "
                 f"{times[p + ' mkl'] / times[p + ' onednn']:4.2f}x" for p in ("x·Wᵀ", "g·W", "gᵀ·x")]
        print(f"  {name:<7} {d_in:>3} -> {d_out:<3}  " + "  |  ".join(cells))
    candidates, largest_difference = step_candidates(cfg, tc)
    seconds = {k: median(v) for k, v in interleave(candidates, args.rounds).items()}
    mkl, onednn = seconds["step mkl"], seconds["step onednn"]
    print(f"\nForward and backward of batch {tc.batch_size} (one shard per thread): MKL {mkl * 1e3:.1f} ms, with "
          f"oneDNN {onednn * 1e3:.1f} ms: {mkl / onednn:.2f}x; "
          f"largest gradient difference {largest_difference():.1e}")
    print(f"\n{load_summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
