"""Two-thread training step, alone and with one busy-loop process competing, under each OpenMP wait policy.

    python -m bench.thread_policy [--rounds 8]

libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when torch loads it, so every policy runs in a
fresh child process. A spinning worker that shares its core with the hog burns the time slices the
working thread needs, which is how a step collapses from ~0.5 s to several seconds.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # not from .common, which loads torch before child() may set policy

POLICIES = {
    "PASSIVE (gptcore sets it)": {"OMP_WAIT_POLICY": "PASSIVE"},
    "spin 10k, then sleep": {"GOMP_SPINCOUNT": "10000"},
    "libgomp default (spin 300k)": {},
    "ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"},
}


def child(policy: dict, rounds: int) -> None:
    """Runs in a fresh process where torch has not loaded yet (the bench package's gptcore import set PASSIVE)."""
    os.environ.pop("OMP_WAIT_POLICY", None)
    os.environ.update(policy)
    import torch

    from gptcore.recipes import RECIPES

    from .step import time_under_hog

    recipe = RECIPES["tutorial"]
    quiet, busy = time_under_hog(recipe.model, recipe.train, rounds, shards=1)  # one OpenMP team of 2
    print(json.dumps({"threads": torch.get_num_threads(), "quiet": quiet, "busy": busy}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.thread_policy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child), args.rounds)
        return 0
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'policy':<30} {'alone':>10} {'with hog':>10} {'slowdown':>9}")
    for name, policy in POLICIES.items():
        command = [sys.executable, "-m", "bench.thread_policy", "--rounds", str(args.rounds), "--child",
                   json.dumps(policy)]
        out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name:<30} {r['quiet'] * 1e3:7.0f} ms {r['busy'] * 1e3:7.0f} ms {r['busy'] / r['quiet']:8.2f}x",
              flush=True)
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
