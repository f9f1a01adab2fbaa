"""The training step as a user measures it: the tutorial's script as one process against `python -m gptcore train`.

    python -m bench.whole_process                       5 rounds of N1 = 10 and N2 = 210 steps (~11 min)
    python -m bench.whole_process --rounds 3 --n2 110   a quicker, noisier look (~5 min)
    python -m bench.whole_process --diagnose            + the tutorial script under gptcore's OpenMP policy

Each candidate is a fresh Python process, started from a shell-like environment (no OMP_WAIT_POLICY unless a variant
sets one), on the same text file, batch 32 × context 128. A run of N steps is timed from spawn to exit; the per-step
time is (time of N2 steps − time of N1 steps) / (N2 − N1), so interpreter start-up, imports, reading the corpus, the
first evaluation, the final save and everything else done once cancels out. That start-up itself varies by about 3 s
between rounds, so N2 − N1 is 200: over only 100 steps those 3 s would move an estimate by 12–15%. Runs are
interleaved A B A B within a round (order rotating between rounds); each round gives one per-step estimate per
candidate, and the report is the median over rounds with the ratio of medians, then each round's own ratio (its runs
ran back to back, under about the same load) and their median.

The tutorial's script is written out to a temporary folder: the model classes are the literal code of
gptcore/reference.py (inspect.getsource), the loop is the tutorial's (seed 0, the first 1M characters, a 90/10
split, AdamW at 3e-3, 10 val batches every 500 steps). The corpus is ../shared/data/tinystories-1M.txt when it
is there, else the built-in stories written to a temporary file.
"""
from __future__ import annotations

import argparse
import inspect
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gptcore import reference

from .common import ROOT, TINYSTORIES, load_summary

TUTORIAL_LOOP = '''
import sys
import time

torch.manual_seed(0)
text = open(sys.argv[1], encoding="utf-8").read()[:1_000_000]
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text])
n = int(0.9 * len(data))
train, val = data[:n], data[n:]
ctx, bs = 128, 32


def batch(d):
    ix = torch.randint(len(d) - ctx - 1, (bs,))
    return torch.stack([d[i:i + ctx] for i in ix]), torch.stack([d[i + 1:i + ctx + 1] for i in ix])


model = TutorialGPT(len(chars))
print(f"vocab {len(chars)}, params {sum(p.numel() for p in model.parameters()):,}")
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
t = time.time()
for step in range(int(sys.argv[2]) + 1):
    x, y = batch(train)
    _, loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 500 == 0:
        with torch.no_grad():
            vl = sum(model(*batch(val))[1].item() for _ in range(10)) / 10
        print(f"step {step:4d}  train {loss.item():.3f}  val {vl:.3f}")
print(f"{time.time() - t:.1f}s")
'''


def tutorial_script() -> str:
    """The tutorial's gpt.py and training loop as one standalone file (imports torch only)."""
    parts = [reference.TutorialRMSNorm, reference.tutorial_rope, reference.TutorialAttention,
             reference.TutorialSwiGLU, reference.TutorialBlock, reference.TutorialGPT]
    header = "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
    return header + "\n\n".join(inspect.getsource(p) for p in parts) + "\n" + TUTORIAL_LOOP


def shell_environment(**extra: str) -> dict:
    """os.environ as a shell would pass it: without the OMP_WAIT_POLICY that importing gptcore set here."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def candidates(script: Path, corpus: Path, work: Path, diagnose: bool) -> dict[str, callable]:
    """name -> function(steps, run index) returning the argv and environment of one run."""
    def tutorial(env):
        return lambda steps, i: ([sys.executable, str(script), str(corpus), str(steps)], env)

    def gptcore_cli(env):
        return lambda steps, i: ([sys.executable, "-m", "gptcore", "train", "--data", str(corpus), "--out",
                                  str(work / f"run-{i}"), "--steps", str(steps), "--batch-size", "32",
                                  "--context", "128"], env)

    found = {"tutorial script": tutorial(shell_environment()), "gptcore train": gptcore_cli(shell_environment())}
    if diagnose:
        found["tutorial, OMP_WAIT_POLICY=PASSIVE"] = tutorial(shell_environment(OMP_WAIT_POLICY="PASSIVE"))
    return found


def time_process(argv: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed


def measure(runs: dict, n1: int, n2: int, rounds: int) -> dict[str, list[float]]:
    """Per-step seconds of each candidate, one estimate per round: (t(n2) - t(n1)) / (n2 - n1)."""
    names, estimates, counter = list(runs), {name: [] for name in runs}, 0
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        times = {}
        for steps in (n1, n2):
            for name in order:
                counter += 1
                times[name, steps] = time_process(*runs[name](steps, counter))
        for name in names:
            estimates[name].append((times[name, n2] - times[name, n1]) / (n2 - n1))
        print(f"  round {r + 1}: " + ", ".join(
            f"{name} {times[name, n1]:.1f} s / {times[name, n2]:.1f} s -> {estimates[name][-1] * 1e3:.0f} ms/step"
            for name in names) + f"  ({load_summary()})", flush=True)
    return estimates


def corpus_file(work: Path) -> Path:
    if TINYSTORIES.is_file():
        return TINYSTORIES
    from gptcore.corpus import generate_stories

    path = work / "builtin-stories.txt"
    path.write_text(generate_stories(1_000_000, seed=0), encoding="utf-8")
    print(f"{TINYSTORIES} is absent: using the built-in stories (1M characters) instead")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.whole_process", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n1", type=int, default=10, help="steps of the short run")
    parser.add_argument("--n2", type=int, default=210, help="steps of the long run")
    parser.add_argument("--diagnose", action="store_true",
                        help="also run the tutorial's script with OMP_WAIT_POLICY=PASSIVE (gptcore's policy, which "
                             "the in-process benchmark's baseline runs under)")
    args = parser.parse_args(argv)
    if not 0 <= args.n1 < args.n2:
        parser.error("need 0 <= n1 < n2")
    with tempfile.TemporaryDirectory(prefix="whole-process-") as tmp:
        work = Path(tmp)
        corpus = corpus_file(work)
        script = work / "tutorial_gpt.py"
        script.write_text(tutorial_script())
        runs = candidates(script, corpus, work, args.diagnose)
        print(f"{load_summary()}; {os.cpu_count()} cores; corpus {corpus.name}; batch 32 x 128; "
              f"{args.rounds} rounds of {args.n1} and {args.n2} steps, each run a fresh process")
        estimates = measure(runs, args.n1, args.n2, args.rounds)
    per_step = {name: statistics.median(xs) for name, xs in estimates.items()}
    base = per_step["tutorial script"]
    print("\nper-step time, median over rounds (start-up cancelled):")
    for name, s in per_step.items():
        print(f"  {name:<36} {s * 1e3:7.1f} ms/step  {base / s:5.2f}x the tutorial script  "
              f"(rounds: {', '.join(f'{x * 1e3:.0f}' for x in estimates[name])})")
    # each round ran every candidate back to back: its ratio compares runs under about the same load
    for name in list(per_step)[1:]:
        ratios = [b / x for b, x in zip(estimates["tutorial script"], estimates[name])]
        print(f"  {name}: the script's time / its time, round by round: {', '.join(f'{r:.2f}' for r in ratios)} "
              f"(median {statistics.median(ratios):.2f}x)")
    print(load_summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
