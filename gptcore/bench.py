"""Benchmarks: `python -m gptcore bench` (speed) and `python -m gptcore bench time-to-loss`.

The machine may be shared, so absolute timings drift from minute to minute. Every comparison is
therefore made inside one process, with the candidates interleaved call by call on the same inputs,
and reported as a ratio of medians; the matmul peak is measured in the same rounds.
"""
from __future__ import annotations

import csv
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import GPTConfig
from .data import get_batch
from .model import GPT
from .optim import make_optimizer, set_lr
from .train import (INIT_LOCK, ShardedGrads, TrainConfig, Trainer, build_model, estimate_loss, evaluate, lr_at,
                    single_core_pool, use_threads)

ROOT = Path(__file__).resolve().parent.parent
TINYSTORIES = ROOT.parent / "shared" / "data" / "tinystories-1M.txt"
ARTIFACTS = ROOT / "artifacts"


# --- The tutorial's model as its listing runs it: the baseline every speed-up is measured against ---------------
# RoPE tables and the causal mask are rebuilt on every forward, softmax attention is written out, and the
# optimizer is a plain AdamW. Module names and shapes equal gptcore.GPT's, so one state_dict fits both.

class TutorialRMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        inv_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * inv_rms * self.weight


def tutorial_rope(x, theta: float = 10000.0):
    """Rotate the channel pairs of x (B, H, T, d_head), building the angle table from scratch each call."""
    T, d_head = x.shape[-2], x.shape[-1]
    speeds = theta ** (-torch.arange(0, d_head, 2) / d_head)
    angles = torch.arange(T)[:, None] * speeds[None, :]
    cos, sin = angles.cos(), angles.sin()
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)


class TutorialAttention(nn.Module):
    def __init__(self, d: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        heads = [t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in self.qkv(x).split(C, -1)]
        q, k, v = tutorial_rope(heads[0]), tutorial_rope(heads[1]), heads[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))


class TutorialSwiGLU(nn.Module):
    def __init__(self, d: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d, d_ff, bias=False)
        self.w3 = nn.Linear(d, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TutorialBlock(nn.Module):
    def __init__(self, d: int, n_head: int, d_ff: int):
        super().__init__()
        self.ln1, self.attn = TutorialRMSNorm(d), TutorialAttention(d, n_head)
        self.ln2, self.ffn = TutorialRMSNorm(d), TutorialSwiGLU(d, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class TutorialGPT(nn.Module):
    def __init__(self, vocab: int, d: int = 128, n_layer: int = 4, n_head: int = 4, d_ff: int = 344):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(TutorialBlock(d, n_head, d_ff) for _ in range(n_layer))
        self.ln_f = TutorialRMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets=None):
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


def tutorial_twin(model: GPT) -> TutorialGPT:
    """The tutorial's literal model carrying a copy of model's weights (RoPE, RMSNorm, SwiGLU configs only)."""
    cfg = model.cfg
    with INIT_LOCK, torch.random.fork_rng(devices=[]):  # its throwaway init must not shift a seeded build elsewhere
        twin = TutorialGPT(cfg.vocab_size, cfg.d_model, cfg.n_layer, cfg.n_head, cfg.d_ff)
    twin.load_state_dict(model.state_dict())
    twin.cfg = cfg  # what evaluate() reads for the context
    return twin


# --- Counting and timing ------------------------------------------------------------------------------------------

def flops_per_step(cfg: GPTConfig, batch_size: int) -> float:
    """Matmul FLOPs of one training step at full context.

    Linear layers cost 6 FLOPs per weight per token (2 forward, 4 backward); q·kᵀ and weights·v add
    12·n_layer·B·T²·d (the full T×T square, the usual convention). 22.9 GFLOP for the tutorial's step.
    """
    d, T = cfg.d_model, cfg.context
    ffn_matrices = 3 if cfg.ffn == "swiglu" else 2
    weights = cfg.n_layer * (4 * d * d + ffn_matrices * d * cfg.d_ff) + d * cfg.vocab_size
    return 6 * weights * batch_size * T + 12 * cfg.n_layer * batch_size * T * T * d


def interleave(candidates: dict[str, Callable[[int], object]], rounds: int, warmup: int = 2) -> dict[str, list[float]]:
    """Seconds per call of each candidate. Each round calls every candidate once (argument: the round), in an
    order that rotates from round to round, so a burst of load elsewhere hits all of them alike."""
    names = list(candidates)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(warmup + rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            candidates[name](r)
            if r >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def matmul_probe(n: int = 2048) -> tuple[Callable[[int], object], float]:
    """One large fp32 matmul and its FLOPs: the practical peak of this CPU at the current thread count."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    return (lambda _: a @ b), 2.0 * n ** 3


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

    def step(i):
        x, y = batches[i % len(batches)]
        _, loss = twin(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def gptcore_step_fn(model: GPT, tc: TrainConfig, batches, shards: int = 0) -> Callable[[int], float]:
    """gptcore's training step as Trainer runs it: scheduled lr, the batch split into one shard per thread
    (shards=1: one pass on all threads), fused AdamW, optional clipping."""
    opt = make_optimizer(model, tc)
    grads = ShardedGrads(model, shards or torch.get_num_threads())

    def step(i):
        set_lr(opt, lr_at(i, tc))
        loss = grads(*batches[i % len(batches)])
        if tc.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        opt.step()
        return loss.item()
    return step


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
    data = torch.randint(cfg.vocab_size, (100_000,), generator=gen)
    batches = [get_batch(data, cfg.context, tc.batch_size, gen) for _ in range(8)]
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
    probe, probe_flops = matmul_probe(matmul_n)
    candidates["matmul probe"] = probe
    shards = torch.get_num_threads()
    candidates["linear GEMMs"], linear_flops = sharded_probe(linear_matmuls_probe, cfg, tc.batch_size, shards)
    candidates["attention"], _ = sharded_probe(attention_probe, cfg, tc.batch_size, shards)
    times = {name: median(ts) for name, ts in interleave(candidates, rounds).items()}
    parts = {name: times.pop(name) for name in ("linear GEMMs", "attention")}
    return StepReport(times, flops_per_step(cfg, tc.batch_size), probe_flops / times.pop("matmul probe"),
                      tc.batch_size * cfg.context, linear_flops / parts["linear GEMMs"], parts)


def time_under_hog(cfg: GPTConfig, tc: TrainConfig, rounds: int, shards: int = 0) -> tuple[float, float]:
    """gptcore's median step time without and then with one busy-loop process competing for the CPU
    (shards as in gptcore_step_fn)."""
    model, gen = build_model(cfg, seed=0)
    data = torch.randint(cfg.vocab_size, (100_000,), generator=gen)
    batches = [get_batch(data, cfg.context, tc.batch_size, gen) for _ in range(4)]
    step = gptcore_step_fn(model, tc, batches, shards)
    quiet = median(interleave({"gptcore": step}, rounds)["gptcore"])
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = median(interleave({"gptcore": step}, rounds)["gptcore"])
    finally:
        hog.kill()
        hog.wait()
    return quiet, busy


def time_calls(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of fn() over repeats calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return median(times)


def time_inference(cfg: GPTConfig, gen_chars: int, val_chars: int, repeats: int,
                   batch_size: int = 32) -> dict[str, float]:
    """Inspector forward at a full context, generation with/without the KV cache, and the two val estimates."""
    model, gen = build_model(cfg, seed=0)
    model.eval()
    window = torch.randint(cfg.vocab_size, (1, cfg.context), generator=gen)
    prompt = window[:, :1]
    val_ids = torch.randint(cfg.vocab_size, (val_chars,), generator=gen)

    def generate(use_cache):
        return lambda: list(model.stream(prompt, gen_chars, generator=torch.Generator().manual_seed(0),
                                         use_cache=use_cache))
    return {
        "inspector": time_calls(lambda: model.run_with_cache(window), repeats),
        "forward": time_calls(lambda: model(window), repeats),
        "generate_cached": time_calls(generate(True), max(1, repeats // 4)),
        "generate_uncached": time_calls(generate(False), max(1, repeats // 4)),
        "estimate_loss": time_calls(lambda: estimate_loss(model, val_ids, batch_size, 10, gen), max(1, repeats // 4)),
        "evaluate": time_calls(lambda: evaluate(model, val_ids), 1),
    }


def thread_summary() -> str:
    in_new_thread = []
    worker = threading.Thread(target=lambda: in_new_thread.append(torch.get_num_threads()))
    worker.start()
    worker.join()
    return (f"threads: {torch.get_num_threads()} here, {in_new_thread[0]} in a new thread, {os.cpu_count()} cores; "
            f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}")


def load_summary() -> str:
    try:
        return "load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average: unavailable"


def run_speed(args) -> int:
    from .recipes import RECIPES

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = replace(RECIPES["tutorial"].model, vocab_size=args.vocab, context=args.context)
    tc = replace(RECIPES["tutorial"].train, batch_size=args.batch_size)
    print(f"{thread_summary()}\n{load_summary()}")
    print(f"\nTraining step, batch {tc.batch_size} x context {cfg.context}, vocab {cfg.vocab_size} "
          f"({flops_per_step(cfg, tc.batch_size) / 1e9:.1f} GFLOP/step), {args.rounds} interleaved rounds:")
    report = time_training_steps(cfg, tc, args.rounds, args.compile, args.matmul_size)
    for name in report.seconds:
        print("  " + report.line(name))
    print(f"  matmul probe ({args.matmul_size}^3 fp32): {report.peak_flops / 1e9:.1f} GFLOP/s = the peak above")
    print(f"  the step's linear-layer GEMMs alone: {report.linear_flops / 1e9:.1f} GFLOP/s "
          f"({report.linear_flops / report.peak_flops:.0%} of peak: the ceiling for these skinny shapes)")
    print("  where gptcore's step goes (each part timed alone, run as the step runs it): " +
          ", ".join(f"{name} {t * 1e3:.0f} ms" for name, t in report.parts.items()) +
          f", everything else {(report.seconds['gptcore'] - sum(report.parts.values())) * 1e3:.0f} ms")
    ceiling = report.flops / sum(report.parts.values()) / report.peak_flops
    print(f"  if everything else took no time, the step would reach {ceiling:.0%} of peak (its ceiling in fp32 here)")
    if not args.no_hog:
        quiet, busy = time_under_hog(cfg, tc, max(3, args.rounds // 3))
        print(f"  gptcore with one busy-loop process competing: {busy * 1e3:.0f} ms/step "
              f"(alone just before: {quiet * 1e3:.0f} ms/step, x{busy / quiet:.2f})")
    t = time_inference(cfg, args.gen_chars, args.val_chars, args.repeats, tc.batch_size)
    print("\nInference (model.eval(), random weights: the cost does not depend on what they learned):")
    print(f"  inspector run_with_cache, full context {cfg.context}: {t['inspector'] * 1e3:.1f} ms "
          f"(plain forward {t['forward'] * 1e3:.1f} ms)")
    for key, label in (("generate_cached", "with KV cache"), ("generate_uncached", "without cache")):
        print(f"  generation {label:<14}: {args.gen_chars / t[key]:7.0f} chars/s ({args.gen_chars} chars)")
    step = report.seconds["gptcore"]
    print(f"  val estimate, 10 batches of {tc.batch_size}: {t['estimate_loss'] * 1e3:.0f} ms "
          f"(= {t['estimate_loss'] / step:.1f} training steps)")
    print(f"  evaluate over {args.val_chars:,} val chars: {t['evaluate']:.2f} s "
          f"(= {t['evaluate'] / step:.1f} training steps)")
    print(f"\n{load_summary()}")
    return 0


# --- Time to loss -------------------------------------------------------------------------------------------------

class TakeTurns:
    """Lets threads run one at a time in rotation, so concurrent training runs see the same machine load."""

    def __init__(self, names: list[str]):
        self.order, self.turn = list(names), 0
        self.cond = threading.Condition()

    def wait(self, name: str) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.order[self.turn] == name)

    def pass_on(self, name: str) -> None:
        with self.cond:
            self.turn = (self.order.index(name) + 1) % len(self.order)
            self.cond.notify_all()

    def leave(self, name: str) -> None:
        with self.cond:
            i = self.order.index(name)
            self.order.remove(name)
            if self.order:
                self.turn = i % len(self.order)
            self.cond.notify_all()


@dataclass
class Curve:
    """Whole-val-split loss of one run at checkpoints, against its training wall time (checkpoint evals
    excluded; the run's own val estimates and samples included)."""
    name: str
    step: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    val: list[float] = field(default_factory=list)

    def first_at_or_below(self, target: float) -> tuple[int, float] | None:
        """(step, seconds) of the first checkpoint whose loss is at most target, or None."""
        return next(((s, t) for s, t, v in zip(self.step, self.seconds, self.val) if v <= target), None)


class TurnClock:
    """One run's side of the rotation: times its steps, evaluates at checkpoints off the clock, yields the CPU."""

    def __init__(self, curve: Curve, turns: TakeTurns, every: int, last_step: int, val_ids: torch.Tensor,
                 report: Callable[[Curve], None]):
        self.curve, self.turns, self.every, self.last_step = curve, turns, every, last_step
        self.val_ids, self.report = val_ids, report
        self.busy = self.resumed = 0.0

    def start(self) -> None:
        self.turns.wait(self.curve.name)
        self.resumed = time.perf_counter()

    def after_step(self, step: int, model: nn.Module) -> None:
        self.busy += time.perf_counter() - self.resumed
        if step % self.every == 0 or step == self.last_step:
            self.curve.step.append(step)
            self.curve.seconds.append(self.busy)
            self.curve.val.append(evaluate(model, self.val_ids))
            model.train()
            self.report(self.curve)
        self.turns.pass_on(self.curve.name)
        self.turns.wait(self.curve.name)
        self.resumed = time.perf_counter()

    def finish(self) -> None:
        self.turns.leave(self.curve.name)


def train_recipe(recipe, text: str, clock_for: Callable[[Trainer], TurnClock], threads: int) -> None:
    """A recipe through gptcore's Trainer, its final whole-split eval left to the checkpoints."""
    tc = replace(recipe.train, final_eval=False, threads=threads, checkpoint_every=0, snapshot_every=0)
    trainer = Trainer(recipe.model, tc, text, out_dir=None)
    clock = clock_for(trainer)
    clock.start()
    try:
        trainer.run(lambda kind, d: clock.after_step(d["step"], trainer.model) if kind == "step" else None)
    finally:
        clock.finish()


def train_tutorial_script(recipe, text: str, clock_for: Callable[[Trainer], TurnClock], threads: int) -> None:
    """The tutorial's own script: its literal model, plain AdamW at a constant lr, a val estimate every
    eval_every steps. Same seed, init, batches and random-call order as gptcore's Trainer."""
    tc = recipe.train
    trainer = Trainer(recipe.model, tc, text, out_dir=None)  # only for its tokenizer, split, seeded model
    model, gen, ctx = tutorial_twin(trainer.model), trainer.stream, recipe.model.context
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr)
    use_threads(threads)  # per thread in torch: set it here
    clock = clock_for(trainer)
    clock.start()
    try:
        for step in range(tc.steps + 1):
            _, loss = model(*get_batch(trainer.train_ids, ctx, tc.batch_size, gen))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % tc.eval_every == 0:
                with torch.no_grad():
                    sum(model(*get_batch(trainer.val_ids, ctx, tc.batch_size, gen))[1].item()
                        for _ in range(tc.eval_batches))
            clock.after_step(step, model)
    finally:
        clock.finish()


RUNNERS = {"script": train_tutorial_script, "trainer": train_recipe}


def time_to_loss(text: str, runs: dict[str, tuple[str, object]], points: int = 20,
                 report: Callable[[Curve], None] = lambda c: None, threads: int = 0) -> dict[str, Curve]:
    """Train every run, {name: (runner, recipe)}, one step at a time in rotation; a Curve per run."""
    turns, errors = TakeTurns(list(runs)), []
    curves = {name: Curve(name) for name in runs}
    workers = []
    for name, (runner, recipe) in runs.items():
        every = max(1, recipe.train.steps // points)

        def clock_for(trainer, name=name, every=every, last=recipe.train.steps):
            return TurnClock(curves[name], turns, every, last, trainer.val_ids, report)

        def work(runner=RUNNERS[runner], recipe=recipe, clock_for=clock_for):
            try:
                runner(recipe, text, clock_for, threads)
            except BaseException as e:  # re-raised in the caller's thread below
                errors.append(e)
        workers.append(threading.Thread(target=work, name=f"time-to-loss-{name}"))
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return curves


def write_curves(curves: dict[str, Curve], target: float, out_dir: Path) -> tuple[Path, Path]:
    """artifacts/time_to_loss.csv and an interactive Plotly figure next to it."""
    import plotly.graph_objects as go

    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out_dir / "time_to_loss.csv", out_dir / "time_to_loss.html"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["recipe", "step", "seconds", "val_loss"])
        for c in curves.values():
            writer.writerows([c.name, s, f"{t:.2f}", f"{v:.5f}"] for s, t, v in zip(c.step, c.seconds, c.val))
    fig = go.Figure()
    for c in curves.values():
        fig.add_scatter(x=c.seconds, y=c.val, mode="lines+markers", name=c.name,
                        customdata=c.step, hovertemplate="step %{customdata}<br>%{x:.0f} s<br>val %{y:.4f}")
    fig.add_hline(y=target, line_dash="dot", annotation_text=f"tutorial recipe's final val loss {target:.4f}")
    fig.update_layout(title="Validation loss (whole val split) against training wall time",
                      xaxis_title="training wall time (s), checkpoint evals excluded", yaxis_title="val loss",
                      yaxis_range=[min(min(c.val) for c in curves.values()) - 0.05, 2.0], template="plotly_white")
    fig.write_html(html_path, include_plotlyjs=True)
    return csv_path, html_path


def run_time_to_loss(args) -> int:
    from .recipes import RECIPES

    path = Path(args.data)
    if not path.is_file():
        print(f"skipping time-to-loss: {path} is absent (it is benchmark data, not part of the project)")
        return 0
    text = path.read_text(encoding="utf-8")[:1_000_000]
    runs = {"tutorial": ("script", RECIPES["tutorial"]), "fast": ("trainer", RECIPES["fast"])}
    if args.with_gptcore_tutorial:
        runs["tutorial-gptcore"] = ("trainer", RECIPES["tutorial"])
    print(f"{thread_summary()}\n{load_summary()}")
    print(f"Runs on {path.name}, one step each in rotation, whole-val-split loss at ~{args.points} checkpoints:\n"
          "  tutorial          the tutorial's script: its literal model and loop, tutorial recipe\n"
          "  fast              gptcore's Trainer, RECIPES['fast']" +
          ("\n  tutorial-gptcore  gptcore's Trainer, RECIPES['tutorial']" if args.with_gptcore_tutorial else ""),
          flush=True)

    def report(curve):
        print(f"  {curve.name:<16} step {curve.step[-1]:5d}  {curve.seconds[-1]:7.1f} s  val {curve.val[-1]:.4f}",
              flush=True)
    curves = time_to_loss(text, runs, args.points, report, args.threads)
    target = curves["tutorial"].val[-1]
    print(f"\nTarget: the tutorial recipe's final val loss, {target:.4f}")
    reached = {name: c.first_at_or_below(target) for name, c in curves.items()}
    for name, hit in reached.items():
        end = curves[name]
        print(f"  {name:<16} " + (f"reaches it at step {hit[0]:,} after {hit[1]:.0f} s" if hit else "never reaches it")
              + f"  (final val {end.val[-1]:.4f} at step {end.step[-1]:,}, {end.seconds[-1]:.0f} s)")
    for name in reached:
        if name != "tutorial" and reached[name] and reached["tutorial"]:
            print(f"  {name} / tutorial wall time: {reached[name][1] / reached['tutorial'][1]:.2f}")
    csv_path, html_path = write_curves(curves, target, Path(args.out))
    print(f"curves: {csv_path}, {html_path}\n{load_summary()}")
    return 0


# --- Command line -------------------------------------------------------------------------------------------------

def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="speed benchmarks, or time-to-loss of the tutorial vs the fast recipe",
                       description=__doc__)
    p.add_argument("what", nargs="?", choices=("speed", "time-to-loss"), default="speed")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = every core)")
    speed = p.add_argument_group("speed")
    speed.add_argument("--rounds", type=int, default=20, help="interleaved timing rounds")
    speed.add_argument("--batch-size", type=int, default=32)
    speed.add_argument("--context", type=int, default=128)
    speed.add_argument("--vocab", type=int, default=76, help="76 = tinystories-1M.txt's characters")
    speed.add_argument("--matmul-size", type=int, default=2048, help="n of the n×n×n peak probe")
    speed.add_argument("--gen-chars", type=int, default=400, help="characters per generation run")
    speed.add_argument("--val-chars", type=int, default=100_000, help="size of the val split to evaluate")
    speed.add_argument("--repeats", type=int, default=20, help="repeats of the inference timings")
    speed.add_argument("--compile", action="store_true", help="also time a torch.compile'd gptcore step")
    speed.add_argument("--no-hog", action="store_true", help="skip the run with a competing busy loop")
    ttl = p.add_argument_group("time-to-loss")
    ttl.add_argument("--data", default=str(TINYSTORIES))
    ttl.add_argument("--points", type=int, default=20, help="checkpoint evals per run")
    ttl.add_argument("--out", default=str(ARTIFACTS), help="folder for the CSV and HTML curves")
    ttl.add_argument("--with-gptcore-tutorial", action="store_true",
                     help="also train the tutorial recipe through gptcore (separates code from recipe gains)")


def run_bench(args) -> int:
    return run_time_to_loss(args) if args.what == "time-to-loss" else run_speed(args)
