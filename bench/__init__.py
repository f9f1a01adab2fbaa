"""Benchmarks of gptcore: each module measures one thing and runs on its own from the repository root.

    python -m bench.step               training step against the tutorial's literal code, and its ceilings
    python -m bench.rmsnorm            RMSNorm's backward written by hand against autograd, in the training step
    python -m bench.inference          inspector forward, generation with and without the KV cache, eval cost
    python -m bench.time_to_loss       wall time to the tutorial's final val loss, tutorial vs fast recipe
    python -m bench.muon               gptcore's Muon against torch.optim.Muon on the fast recipe
    python -m bench.thread_policy      a two-thread step under each OpenMP wait policy, with a CPU hog
    python -m bench.inspector          the Inspect page's work for one full context window
    python -m bench.corpus             the built-in story generator
    python -m bench.memmap             peak memory of training from a memory-mapped token file, against its size
    python -m bench.training_latency   click-to-update latency of the Train page during a run (Playwright)
    python -m bench.trace              the Trace page: a step click, the ablation sweep, head × position patching
    python -m bench.whole_process      the training step as a user times it: the tutorial's script vs our CLI
    python -m bench.browser_latency    click-to-figure and page-open times in Chromium, payload bytes per rerun
    python -m bench.corpus_memory      peak memory of reading and training on a large upload

`python -m bench NAME [flags]` runs one by name (step when none is given). See bench/README.md for the figures.
"""
import importlib
from pathlib import Path

import gptcore  # noqa: F401  (before any benchmark loads torch: it sets OMP_WAIT_POLICY)

HELPERS = {"common"}  # modules shared by the benchmarks, not benchmarks themselves
NAMES = tuple(sorted(p.stem.replace("_", "-") for p in Path(__file__).parent.glob("[a-z]*.py")
                     if p.stem not in HELPERS))


def main(argv: list[str]) -> int:
    """Run the benchmark argv[0] names (step when argv is empty or starts with a flag) on the rest of argv."""
    name, rest = (argv[0], argv[1:]) if argv and not argv[0].startswith("-") else ("step", argv)
    if name not in NAMES:
        print(f"unknown benchmark {name!r}: choose one of {', '.join(NAMES)}")
        return 2
    return importlib.import_module(f"bench.{name.replace('-', '_')}").main(rest) or 0
