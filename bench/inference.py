"""What the app asks of a trained model besides training: the inspector's forward, generation, evaluation.

    python -m bench.inference              the tutorial-sized model, random weights (~1 min)

The weights are random: the cost does not depend on what they learned. The two val estimates are also given
in training steps, timed in the same run, since that is what they cost a run that makes them.
"""
from __future__ import annotations

import argparse
import sys

import torch

from gptcore.config import GPTConfig
from gptcore.device import DEVICES, describe, resolve, synchronize
from gptcore.generate import stream
from gptcore.step import estimate_loss, evaluate
from gptcore.train import build_model

from .common import add_model_arguments, interleave, load_summary, median, thread_summary, time_calls
from .step import gptcore_step_fn, random_batches, tutorial_sized


def time_inference(cfg: GPTConfig, gen_chars: int, val_chars: int, repeats: int,
                   batch_size: int = 32, device: torch.device = torch.device("cpu")) -> dict[str, float]:
    """Inspector forward at a full context, generation with/without the KV cache, and the two val estimates."""
    model, gen = build_model(cfg, seed=0)
    model.to(device).eval()
    window = torch.randint(cfg.vocab_size, (1, cfg.context), generator=gen).to(device)
    prompt = window[:, :1]
    val_ids = torch.randint(cfg.vocab_size, (val_chars,), generator=gen)

    def generate(use_cache):
        return lambda: list(stream(model, prompt, gen_chars, generator=torch.Generator(device).manual_seed(0),
                                         use_cache=use_cache))

    def patterns(name):  # what the Inspect page reads: every attention pattern
        return name.endswith("hook_pattern")

    def synced(fn):  # a GPU queues work: wait for it, so the clock measures it
        return lambda: (fn(), synchronize(device))
    return {
        "inspector": time_calls(synced(lambda: model.run_with_cache(window, names_filter=patterns)), repeats),
        "forward": time_calls(synced(lambda: model(window)), repeats),
        "generate_cached": time_calls(generate(True), max(1, repeats // 4)),
        "generate_uncached": time_calls(generate(False), max(1, repeats // 4)),
        "estimate_loss": time_calls(lambda: estimate_loss(model, val_ids, batch_size, 10, gen), max(1, repeats // 4)),
        "evaluate": time_calls(lambda: evaluate(model, val_ids), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.inference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--gen-chars", type=int, default=400, help="characters per generation run")
    parser.add_argument("--val-chars", type=int, default=100_000, help="size of the val split to evaluate")
    parser.add_argument("--repeats", type=int, default=20, help="repeats of each timing")
    parser.add_argument("--device", default="cpu", choices=DEVICES,
                        help="where the model runs (the training step it is compared with stays on the CPU)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg, tc = tutorial_sized(args)
    print(f"{thread_summary()}\n{load_summary()}")
    device = resolve(args.device)
    t = time_inference(cfg, args.gen_chars, args.val_chars, args.repeats, tc.batch_size, device)
    model, gen = build_model(cfg, seed=0)
    train_step = gptcore_step_fn(model, tc, random_batches(cfg, tc.batch_size, gen, 4))
    step = median(interleave({"step": train_step}, max(3, args.repeats // 4))["step"])
    print(f"\nInference (model.eval(), random weights) on {describe(device)}, batch {tc.batch_size} x context "
          f"{cfg.context}:")
    print(f"  inspector run_with_cache, full context {cfg.context}: {t['inspector'] * 1e3:.1f} ms "
          f"(plain forward {t['forward'] * 1e3:.1f} ms)")
    for key, label in (("generate_cached", "with KV cache"), ("generate_uncached", "without cache")):
        print(f"  generation {label:<14}: {args.gen_chars / t[key]:7.0f} chars/s ({args.gen_chars} chars)")
    print(f"  val estimate, 10 batches of {tc.batch_size}: {t['estimate_loss'] * 1e3:.0f} ms "
          f"(= {t['estimate_loss'] / step:.1f} training steps of {step * 1e3:.0f} ms)")
    print(f"  evaluate over {args.val_chars:,} val chars: {t['evaluate']:.2f} s "
          f"(= {t['evaluate'] / step:.1f} training steps)")
    print(f"\n{load_summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
