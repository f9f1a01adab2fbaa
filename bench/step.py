"""One training step: the tutorial's literal code against gptcore's, and how close each gets to the CPU's peak.

    python -m bench.step                   batch 32 x context 128 on every core, 20 interleaved rounds (~2 min)
    python -m bench.step --threads 1       the same on one core
    python -m bench.step --compile         adds a torch.compile'd step (slow: it compiles first)

Same weights and batches for every candidate; a 2048^3 fp32 matmul, timed in the same rounds, is the peak.
The step's linear-layer GEMMs and its attention are also timed alone, run as the step runs them: what the
step would cost if everything else took no time (its ceiling in fp32 here).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from gptcore.config import GPTConfig
from gptcore.data import get_batch
from gptcore.model import GPT
from gptcore.optim import make_optimizer, set_lr
from gptcore.recipes import RECIPES
from gptcore.reference import TutorialGPT, tutorial_step, tutorial_twin
from gptcore.step import lr_at, train_step
from gptcore.threads import ShardedGrads, single_core_pool
from gptcore.train import TrainConfig, build_model

from .common import add_model_arguments, interleave, load_summary, median, thread_summary


def flops_per_step(cfg: GPTConfig, batch_size: int) -> float:
    """Matmul FLOPs of one training step at full context.

    Linear layers cost 6 FLOPs per weight per token (2 forward, 4 backward); q·kᵀ and weights·v add
    12·n_layer·B·T²·d (the full T×T square, the usual convention). 22.9 GFLOP for the tutorial's step.
    """
    d, T = cfg.d_model, cfg.context
    ffn_matrices = 3 if cfg.ffn == "swiglu" else 2
    weights = cfg.n_layer * (4 * d * d + ffn_matrices * d * cfg.d_ff) + d * cfg.vocab_size
    return 6 * weights * batch_size * T + 12 * cfg.n_layer * batch_size * T * T * d


def matmul_probe(n: int = 2048) -> tuple[Callable[[int], object], float]:
    """One large fp32 matmul and its FLOPs: the practical peak of this CPU at the current thread count."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    return lambda _: a @ b, 2.0 * n ** 3


def linear_matmuls_probe(cfg: GPTConfig, batch_size: int) -> tuple[Callable[[int], object], float]:
    """Exactly the GEMMs of one training step's linear layers (forward x·Wᵀ, backward g·W and gᵀ·x) and their
    FLOPs: how fast these skinny shapes can go here, a ceiling for the whole step's share of the peak."""
    N, d, d_ff = batch_size * cfg.context, cfg.d_model, cfg.d_ff
    ffn = [(d, d_ff), (d, d_ff), (d_ff, d)] if cfg.ffn == "swiglu" else [(d, d_ff), (d_ff, d)]
    layer = [(torch.randn(N, i), torch.randn(o, i), torch.randn(N, o)) for i, o in [(d, 3 * d), (d, d)] + ffn]
    head = (torch.randn(N, d), torch.randn(cfg.vocab_size, d), torch.randn(N, cfg.vocab_size))
    operands = layer * cfg.n_layer + [head]

    def run(_):
        for x, w, g in operands:
            x @ w.t(), g @ w, g.t() @ x
    return run, sum(6.0 * N * w.shape[0] * w.shape[1] for _, w, _ in operands)


def attention_probe(cfg: GPTConfig, batch_size: int) -> tuple[Callable[[int], object], float]:
    """One step's causal attention alone (SDPA forward and backward in every layer) and its FLOPs as counted."""
    shape = (batch_size, cfg.n_head, cfg.context, cfg.d_head)
    q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape)

    def run(_):
        for _ in range(cfg.n_layer):
            torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), grad)
    return run, 12.0 * cfg.n_layer * batch_size * cfg.context ** 2 * cfg.d_model


def sharded_probe(probe: Callable[[GPTConfig, int], tuple[Callable[[int], object], float]], cfg: GPTConfig,
                  batch_size: int, shards: int) -> tuple[Callable[[int], object], float]:
    """A probe run the way ShardedGrads runs a step: one part of the batch per single-core thread, in parallel."""
    sizes = [len(part) for part in torch.arange(batch_size).tensor_split(shards) if len(part)]
    if len(sizes) < 2:
        return probe(cfg, batch_size)
    parts = [probe(cfg, size) for size in sizes]
    pool = single_core_pool(len(parts), "probe-shard")

    def run_all(r):  # the pool's idle workers exit when run_all, and with it the pool, is collected
        return [f.result() for f in [pool.submit(run, r) for run, _ in parts]]
    return run_all, sum(f for _, f in parts)


def tutorial_step_fn(twin: TutorialGPT, batches) -> Callable[[int], float]:
    """The tutorial loop's step: forward, zero_grad, backward, plain AdamW at 3e-3."""
    opt = torch.optim.AdamW(twin.parameters(), lr=3e-3)
    return lambda i: tutorial_step(twin, opt, *batches[i % len(batches)]).item()


def gptcore_step_fn(model: GPT, tc: TrainConfig, batches, shards: int = 0,
                    optimizer: torch.optim.Optimizer | None = None) -> Callable[[int], float]:
    """gptcore's training step as Trainer runs it: scheduled lr, the batch split into one shard per thread
    (shards=1: one pass on all threads), tc's optimizer (or the one given), optional clipping."""
    opt = optimizer or make_optimizer(model, tc)
    grads = ShardedGrads(model, shards or torch.get_num_threads())

    def step(i):
        set_lr(opt, lr_at(i, tc))
        return train_step(model, opt, *batches[i % len(batches)], tc.grad_clip, grads).item()
    return step


def random_batches(cfg: GPTConfig, batch_size: int, gen: torch.Generator, n: int) -> list:
    """n batches of random token ids: a step's cost does not depend on what the text says."""
    data = torch.randint(cfg.vocab_size, (100_000,), generator=gen)
    return [get_batch(data, cfg.context, batch_size, gen) for _ in range(n)]


@dataclass
class StepReport:
    """Medians of one interleaved run: seconds per call of each candidate and of the matmul probe."""
    seconds: dict[str, float]
    flops: float  # per training step
    peak_flops: float  # per second, from the probe
    tokens: int  # per training step
    linear_flops: float  # per second, the step's linear-layer GEMMs alone
    parts: dict[str, float]  # seconds of the step's linear GEMMs and of its attention, each timed alone

    def line(self, name: str, baseline: str = "tutorial") -> str:
        s = self.seconds[name]
        gflops = self.flops / s / 1e9
        return (f"{name:<18} {s * 1e3:8.1f} ms/step  {self.tokens / s:8,.0f} tok/s  "
                f"{self.seconds[baseline] / s:5.2f}x  {gflops:5.1f} GFLOP/s  "
                f"{gflops * 1e9 / self.peak_flops:4.0%} of peak")


def time_training_steps(cfg: GPTConfig, tc: TrainConfig, rounds: int, compile_model: bool = False,
                        matmul_n: int = 2048) -> StepReport:
    """The tutorial's literal step against gptcore's, same weights and batches, interleaved with a matmul probe."""
    model, gen = build_model(cfg, seed=0)
    twin = tutorial_twin(model)
    batches = random_batches(cfg, tc.batch_size, gen, 8)
    candidates = {"tutorial": tutorial_step_fn(twin, batches), "gptcore": gptcore_step_fn(model, tc, batches)}
    if torch.get_num_threads() > 1:
        unsharded, _ = build_model(cfg, seed=0)
        candidates["gptcore, 1 shard"] = gptcore_step_fn(unsharded, tc, batches, shards=1)
    if compile_model:
        compiled, _ = build_model(cfg, seed=0)
        t0 = time.perf_counter()
        step = gptcore_step_fn(torch.compile(compiled), tc, batches, shards=1)  # compiling is not thread-safe
        step(0)
        print(f"torch.compile: first step (compiling) took {time.perf_counter() - t0:.1f} s")
        candidates["gptcore compiled"] = step
    candidates["matmul probe"], probe_flops = matmul_probe(matmul_n)
    shards = torch.get_num_threads()
    candidates["linear GEMMs"], linear_flops = sharded_probe(linear_matmuls_probe, cfg, tc.batch_size, shards)
    candidates["attention"], _ = sharded_probe(attention_probe, cfg, tc.batch_size, shards)
    times = {name: median(ts) for name, ts in interleave(candidates, rounds).items()}
    parts = {name: times.pop(name) for name in ("linear GEMMs", "attention")}
    peak = probe_flops / times.pop("matmul probe")
    return StepReport(times, flops_per_step(cfg, tc.batch_size), peak, tc.batch_size * cfg.context,
                      linear_flops / parts["linear GEMMs"], parts)


def time_under_hog(cfg: GPTConfig, tc: TrainConfig, rounds: int, shards: int = 0) -> tuple[float, float]:
    """gptcore's median step time without and then with one busy-loop process competing for the CPU
    (shards as in gptcore_step_fn)."""
    model, gen = build_model(cfg, seed=0)
    step = gptcore_step_fn(model, tc, random_batches(cfg, tc.batch_size, gen, 4), shards)
    quiet = median(interleave({"gptcore": step}, rounds)["gptcore"])
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = median(interleave({"gptcore": step}, rounds)["gptcore"])
    finally:
        hog.kill()
        hog.wait()
    return quiet, busy


def tutorial_sized(args) -> tuple[GPTConfig, TrainConfig]:
    """The tutorial recipe's model and training settings at the flags' vocabulary, context and batch."""
    recipe = RECIPES["tutorial"]
    return (replace(recipe.model, vocab_size=args.vocab, context=args.context),
            replace(recipe.train, batch_size=args.batch_size))


def print_report(report: StepReport, matmul_size: int) -> None:
    for name in report.seconds:
        print("  " + report.line(name))
    print(f"  matmul probe ({matmul_size}^3 fp32): {report.peak_flops / 1e9:.1f} GFLOP/s, the peak above")
    print(f"  the step's linear-layer GEMMs alone: {report.linear_flops / 1e9:.1f} GFLOP/s "
          f"({report.linear_flops / report.peak_flops:.0%} of peak: the ceiling for these skinny shapes)")
    print("  where gptcore's step goes (each part timed alone, run as the step runs it): " +
          ", ".join(f"{name} {t * 1e3:.0f} ms" for name, t in report.parts.items()) +
          f", everything else {(report.seconds['gptcore'] - sum(report.parts.values())) * 1e3:.0f} ms")
    ceiling = report.flops / sum(report.parts.values()) / report.peak_flops
    print(f"  if everything else took no time, the step would reach {ceiling:.0%} of peak (its ceiling in fp32 here)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.step", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--rounds", type=int, default=20, help="interleaved timing rounds")
    parser.add_argument("--matmul-size", type=int, default=2048, help="n of the n×n×n peak probe")
    parser.add_argument("--compile", action="store_true", help="also time a torch.compile'd gptcore step")
    parser.add_argument("--no-hog", action="store_true", help="skip the run with a competing busy loop")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg, tc = tutorial_sized(args)
    print(f"{thread_summary()}\n{load_summary()}")
    print(f"\nTraining step, batch {tc.batch_size} x context {cfg.context}, vocab {cfg.vocab_size} "
          f"({flops_per_step(cfg, tc.batch_size) / 1e9:.1f} GFLOP/step), {args.rounds} interleaved rounds:")
    print_report(time_training_steps(cfg, tc, args.rounds, args.compile, args.matmul_size), args.matmul_size)
    if not args.no_hog:
        quiet, busy = time_under_hog(cfg, tc, max(3, args.rounds // 3))
        print(f"  gptcore with one busy-loop process competing: {busy * 1e3:.0f} ms/step "
              f"(alone just before: {quiet * 1e3:.0f} ms/step, x{busy / quiet:.2f})")
    print(f"\n{load_summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
