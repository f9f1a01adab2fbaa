"""gptcore's Muon (gptcore/optim.py) against torch.optim.Muon, training the fast recipe in one process.

    python -m bench.muon                                         the built-in corpus (1M characters)
    python -m bench.muon --data ../shared/data/tinystories-1M.txt
    python -m bench.muon --steps 200 --seed 1                    a shorter run of the same recipe, another seed

Same model, seed, batches, param groups and schedule; the runs take turns step by step. torch.optim.Muon
cannot orthogonalize q, k and v apart (it takes whole 2-D parameters), so qkv.weight goes through
Newton–Schulz as one 384 x 128 matrix there; "ours, joint qkv" is gptcore's Muon doing the same, which
separates that choice from the implementation. Also timed: optimizer.step() alone, interleaved on fixed
gradients.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

from gptcore.optim import adamw_groups, make_optimizer
from gptcore.recipes import RECIPES
from gptcore.texts import builtin_corpus
from gptcore.threads import ShardedGrads
from gptcore.train import TrainConfig, build_model

from .common import interleave, load_summary, median, thread_summary
from .step import random_batches
from .time_to_loss import Curve, time_to_loss, train_recipe


class MuonWithAdamW:
    """torch.optim.Muon on the blocks' matrices and fused AdamW on the rest, stepped as one optimizer."""

    def __init__(self, muon: torch.optim.Optimizer, adamw: torch.optim.Optimizer):
        self.parts = (adamw, muon)
        self.param_groups = adamw.param_groups + muon.param_groups  # the same dicts: set_lr reaches both
        # One state keyed by parameter, as checkpoint.py saves and restores it; each part touches only its own.
        self.state = muon.state = adamw.state = defaultdict(dict)

    def step(self) -> None:
        for part in self.parts:
            part.step()


def torch_muon(model, tc: TrainConfig) -> MuonWithAdamW:
    """make_optimizer's groups and settings, with torch.optim.Muon in place of gptcore's."""
    named = list(model.named_parameters())
    hidden = {n: p for n, p in named if n.startswith("blocks.") and p.dim() == 2}
    muon = torch.optim.Muon([{"params": list(hidden.values()), "lr_scale": tc.muon_lr / tc.lr}], lr=tc.muon_lr,
                            weight_decay=tc.weight_decay, momentum=0.95, nesterov=True, ns_steps=5,
                            adjust_lr_fn="original")
    adamw = torch.optim.AdamW(adamw_groups([(n, p) for n, p in named if n not in hidden], tc),
                              lr=tc.lr, betas=(0.9, tc.beta2), weight_decay=tc.weight_decay, fused=True)
    return MuonWithAdamW(muon, adamw)


def ours_joint_qkv(model, tc: TrainConfig) -> torch.optim.Optimizer:
    """gptcore's Muon with qkv.weight orthogonalized as one matrix, as torch.optim.Muon must."""
    opt = make_optimizer(model, tc)
    for group in opt.param_groups:
        group["pieces"] = 1
    return opt


CANDIDATES = {"ours": make_optimizer, "ours, joint qkv": ours_joint_qkv, "torch.optim.Muon": torch_muon}


def time_optimizer_steps(tc: TrainConfig, rounds: int) -> dict[str, float]:
    """Median seconds of optimizer.step() alone for each candidate, on its own copy of the model, same gradients."""
    cfg = RECIPES["fast"].model
    steps = {}
    for name, make in CANDIDATES.items():
        model, gen = build_model(cfg, seed=0)
        ShardedGrads(model, 1)(*random_batches(cfg, tc.batch_size, gen, 1)[0])  # .grad stays for every step
        steps[name] = make(model, tc).step
    return {name: median(ts) for name, ts in interleave({n: lambda _, s=s: s() for n, s in steps.items()},
                                                        rounds).items()}


def train_all(text: str, tc: TrainConfig, points: int) -> dict[str, Curve]:
    recipe = replace(RECIPES["fast"], train=tc)
    runs = {name: (partial(train_recipe, make_optimizer=make), recipe) for name, make in CANDIDATES.items()}

    def report(curve):
        print(f"  {curve.name:<17} step {curve.step[-1]:4d}  {curve.seconds[-1]:6.1f} s  val {curve.val[-1]:.4f}",
              flush=True)
    return time_to_loss(text, runs, points, report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.muon", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a UTF-8 text file (its first 1,000,000 characters); default: built-in")
    parser.add_argument("--steps", type=int, default=RECIPES["fast"].train.steps, help="the fast recipe's steps")
    parser.add_argument("--seed", type=int, default=0, help="the runs' seed (init and batches)")
    parser.add_argument("--points", type=int, default=4, help="whole-val-split evals per run (off the clock)")
    parser.add_argument("--rounds", type=int, default=50, help="interleaved rounds of optimizer.step() alone")
    args = parser.parse_args(argv)
    text = Path(args.data).read_text(encoding="utf-8")[:1_000_000] if args.data else builtin_corpus(1_000_000).text
    tc = replace(RECIPES["fast"].train, steps=args.steps, seed=args.seed)
    print(f"{thread_summary()}\n{load_summary()}")
    print(f"\noptimizer.step() alone, fast recipe's model, {args.rounds} interleaved rounds:")
    alone = time_optimizer_steps(tc, args.rounds)
    for name, s in alone.items():
        print(f"  {name:<17} {s * 1e3:6.2f} ms  ({s / alone['ours']:.2f}x ours)")
    print(f"\nThe fast recipe, {tc.steps} steps of batch {tc.batch_size}, on "
          f"{Path(args.data).name if args.data else 'the built-in corpus'}, one step of each run in turn:", flush=True)
    curves = train_all(text, tc, args.points)
    print("\n  run               ms/step (training, incl. its own val estimates)   final whole-val loss")
    ours = curves["ours"]
    for name, c in curves.items():
        per_step = c.seconds[-1] / c.step[-1]
        print(f"  {name:<17} {per_step * 1e3:6.1f} ({per_step / (ours.seconds[-1] / ours.step[-1]):.2f}x ours)"
              f"{'':<31}{c.val[-1]:.4f} ({c.val[-1] - ours.val[-1]:+.4f})")
    print(f"\n{load_summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
