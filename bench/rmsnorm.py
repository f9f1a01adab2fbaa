"""RMSNorm's backward: a hand-written one against autograd through the same formula, in the training step.

    python -m bench.rmsnorm                 the tutorial's model, batch 32 x 128, every core, 30 interleaved rounds
    python -m bench.rmsnorm --rounds 60     more rounds on a busy machine

Two copies of the same model with the same batches run gptcore's training step (sharded as the Trainer runs it),
call by call in rotating order. They differ only in how every RMSNorm computes x · rsqrt(mean(x²) + eps) · γ: with
a hand-written backward that reuses the normed x, or through autograd, which saves and walks each op of the formula.
"""
from __future__ import annotations

import argparse
from dataclasses import replace

import torch

from gptcore.model import RMSNorm
from gptcore.recipes import RECIPES
from gptcore.train import build_model

from .common import cpu_name, interleave, load_summary, median, thread_summary
from .step import gptcore_step_fn, random_batches


class HandWrittenRMSNorm(torch.autograd.Function):
    """The norm with its backward written out: one pass over the saved normed x for each gradient."""

    @staticmethod
    def forward(ctx, x, weight, eps: float):
        inv_rms = torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)
        normed = x * inv_rms
        ctx.save_for_backward(normed, weight, inv_rms)
        return normed * weight

    @staticmethod
    def backward(ctx, grad):
        normed, weight, inv_rms = ctx.saved_tensors
        g = grad * weight
        # the direct path minus the part of g along x, which only changes the rms that is divided out
        grad_x = (g - normed * (g * normed).mean(-1, keepdim=True)) * inv_rms
        grad_weight = (grad * normed).reshape(-1, normed.shape[-1]).sum(0)
        return grad_x, grad_weight, None


def autograd_norm(norm: RMSNorm, x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + norm.eps) * norm.weight


def hand_written_norm(norm: RMSNorm, x: torch.Tensor) -> torch.Tensor:
    return HandWrittenRMSNorm.apply(x, norm.weight, norm.eps)


def with_norm(model: torch.nn.Module, forward) -> torch.nn.Module:
    """The model with every RMSNorm's forward replaced by forward(norm, x)."""
    for module in model.modules():
        if isinstance(module, RMSNorm):
            module.forward = lambda x, norm=module: forward(norm, x)
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)
    recipe = RECIPES["tutorial"]
    cfg, tc = replace(recipe.model, vocab_size=76), replace(recipe.train, batch_size=args.batch_size)
    print(f"{cpu_name()}; {thread_summary()}\n{load_summary()}")
    models = {name: with_norm(build_model(cfg, seed=0)[0], forward)
              for name, forward in (("hand-written", hand_written_norm), ("autograd", autograd_norm))}
    batches = random_batches(cfg, tc.batch_size, torch.Generator().manual_seed(0), 8)
    steps = {name: gptcore_step_fn(model, tc, batches) for name, model in models.items()}
    times = {name: median(ts) for name, ts in interleave(steps, args.rounds).items()}
    for name, seconds in times.items():
        print(f"  {name:<13} {seconds * 1e3:7.1f} ms/step")
    print(f"  autograd / hand-written: {times['autograd'] / times['hand-written']:.3f}x "
          f"(median of {args.rounds} interleaved rounds, batch {tc.batch_size} x {cfg.context})")
    print(load_summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
