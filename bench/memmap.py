"""Training from a memory-mapped token file keeps memory flat, however large the file: peak RSS against file size.

    python -m bench.memmap                       prepared corpora of 5M and 60M tokens (~2 min on 2 cores)
    python -m bench.memmap --millions 5 60 250   add a 250M-token one (500 MB of uint16 ids)

For each size, a text file of that many characters is written to a temporary folder (tinystories-1M.txt repeated
when it is there, the built-in stories otherwise), `gptcore prepare`d into a character token file, and the
tutorial's model trains --steps steps from it, in fresh processes, so each peak resident set size (ru_maxrss) is
that step's own. Training from the file should cost the same memory at every size; the in-memory path would hold
8 bytes per token of int64 ids (plus the text) and grow with it.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import ROOT, TINYSTORIES, load_summary

MB = 1e6


def peak_rss() -> int:
    """Bytes this process has held in RAM at most (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_text(path: Path, chars: int) -> None:
    """chars characters of stories, written a block at a time (never held whole)."""
    from gptcore.corpus import generate_stories

    block = TINYSTORIES.read_text(encoding="utf-8") if TINYSTORIES.is_file() else generate_stories(1_000_000, 0)
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, chars, len(block)):
            f.write(block[:min(len(block), chars - start)])


def child_prepare(source: str, out: str) -> dict:
    from gptcore.prepare import prepare

    began = time.perf_counter()
    header = prepare(source, out)
    return {"tokens": header["tokens"], "seconds": time.perf_counter() - began, "peak_rss": peak_rss()}


def child_train(folder: str, steps: int, device: str) -> dict:
    from gptcore.config import GPTConfig, TrainConfig
    from gptcore.prepare import open_prepared
    from gptcore.train import Trainer

    prepared = open_prepared(folder)
    after_open = peak_rss()
    tc = TrainConfig(steps=steps - 1, eval_every=10**6, eval_batches=2, final_eval=False, device=device)
    trainer = Trainer.fresh(GPTConfig(), tc, prepared)
    began = time.perf_counter()
    trainer.run()
    return {"seconds": time.perf_counter() - began, "after_open": after_open, "peak_rss": peak_rss(),
            "loss": trainer.history["train_loss"][-1]}


def in_child(*args: str) -> dict:
    """Run this module's child mode in a fresh interpreter; its JSON answer."""
    done = subprocess.run([sys.executable, "-m", "bench.memmap", "--child", *args], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memmap", description=__doc__.split("\n\n")[0])
    parser.add_argument("--millions", type=float, nargs="+", default=[5, 60], help="corpus sizes, millions of tokens")
    parser.add_argument("--steps", type=int, default=30, help="training steps from each file")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda", "mps"))
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        answer = child_prepare(*rest) if kind == "prepare" else child_train(rest[0], int(rest[1]), rest[2])
        print(json.dumps(answer))
        return 0
    print(load_summary())
    print(f"{'tokens':>12} {'tokens.bin':>11} {'prepare: s':>11} {'peak RSS':>9} │ {'train: s':>9} "
          f"{'RSS open':>9} {'peak RSS':>9} {'last loss':>9}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="gptcore-memmap-") as tmp:
        for millions in args.millions:
            text, folder = Path(tmp) / f"{millions:g}M.txt", Path(tmp) / f"{millions:g}M"
            write_text(text, int(millions * 1e6))
            prepared = in_child("prepare", str(text), str(folder))
            text.unlink()  # only the token file is needed from here on
            size = (folder / "tokens.bin").stat().st_size
            trained = in_child("train", str(folder), str(args.steps), args.device)
            rows.append((prepared["tokens"], size, trained["peak_rss"]))
            print(f"{prepared['tokens']:>12,} {size / MB:>8,.0f} MB {prepared['seconds']:>11.1f} "
                  f"{prepared['peak_rss'] / MB:>6,.0f} MB │ {trained['seconds']:>9.1f} "
                  f"{trained['after_open'] / MB:>6,.0f} MB {trained['peak_rss'] / MB:>6,.0f} MB "
                  f"{trained['loss']:>9.3f}", flush=True)
    (_, small_size, small_rss), (big_tokens, big_size, big_rss) = rows[0], rows[-1]
    print(f"\nfile {big_size / small_size:.0f}× larger, training peak RSS {(big_rss - small_rss) / MB:+,.0f} MB "
          f"({big_rss / small_rss:.2f}×); ids held in memory instead would take {8 * big_tokens / MB:,.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
