"""Peak memory of bringing a large upload to training: decoding, the tokenizer, the ids, the trainer.

    python -m bench.corpus_memory              a 60 MB upload (the app's limit is 64 MB), all of it used
    python -m bench.corpus_memory --mb 8       a smaller one

The text is the built-in stories with one character in 200 drawn from 3,000 CJK characters and a few emoji, so
Python holds it at 4 bytes per character (what a Chinese or emoji-rich upload costs) and its vocabulary has
thousands of characters. It is written once to a temporary file; each stage runs in a fresh process that reads it
and reports: its peak resident memory (ru_maxrss) and how far that is above the process once it had read the bytes;
what it holds with everything made; and what it still holds after dropping all of it and calling
`explorer.jobs.release_memory`, as a finished job of the app does (VmRSS). `list encode` is the
one-Python-int-per-character encoding that the streamed `gptcore.data.encode_chars` replaces, for comparison.
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

STAGES = ("bytes only", "decode", "decode + tokenizer + streamed ids", "decode + tokenizer + list encode",
          "whole trainer (tiny model)")


def make_upload(mb: float) -> bytes:
    """About mb megabytes of UTF-8: stories, with one character in 200 a CJK character or an emoji."""
    from gptcore.corpus import generate_stories

    rng = random.Random(0)
    rare = [chr(0x4E00 + i) for i in range(3000)] + ["😀", "🚀", "🌟", "🐱"]
    stories = generate_stories(1_000_000, seed=0)
    target, parts, size = int(mb * 1e6), [], 0
    while size < target:
        chunk = "".join(rng.choice(rare) if rng.random() < 0.005 else c for c in stories[:200_000])
        data = chunk.encode("utf-8")
        parts.append(data)
        size += len(data)
        stories = stories[200_000:] + stories[:200_000]
    return b"".join(parts)[:target].decode("utf-8", "ignore").encode("utf-8")


def rss_now() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_stage(stage: str, upload: Path) -> dict:
    import torch

    from explorer.jobs import release_memory
    from gptcore.config import GPTConfig, TrainConfig
    from gptcore.data import encode_chars
    from gptcore.runs import new_run
    from gptcore.sources import CorpusSource
    from gptcore.tokenizer import CharTokenizer

    raw = upload.read_bytes()  # (the app holds the upload's bytes as Streamlit hands them over)
    gc.collect()
    start = rss_now()
    made = []
    if stage != "bytes only":
        corpus = CorpusSource("upload", name="big.txt").load(upload=raw)
        made.append(corpus)
        if stage == "decode + tokenizer + streamed ids":
            made.append(encode_chars(CharTokenizer.from_text(corpus.text), corpus.text))
        elif stage == "decode + tokenizer + list encode":
            tokenizer = CharTokenizer.from_text(corpus.text)
            made.append(torch.tensor(tokenizer.encode(corpus.text), dtype=torch.long))
        elif stage == "whole trainer (tiny model)":
            cfg = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=48, context=16)
            made.append(new_run(cfg, TrainConfig(steps=1, batch_size=4, threads=1), corpus, None, None))
    held = rss_now()
    made.clear()
    corpus = None  # noqa: F841  (drop the last reference before measuring what stays)
    release_memory()  # what a finished job of the app does
    return {"stage": stage, "start": start, "peak": peak(), "held": held, "after": rss_now()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.corpus_memory", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=60.0, help="size of the upload in MB (default 60)")
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)  # one stage, in its own process
    parser.add_argument("--upload", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stage:
        print(json.dumps(run_stage(args.stage, args.upload)))
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        upload = Path(folder) / "big.txt"
        raw = make_upload(args.mb)
        upload.write_bytes(raw)
        chars = len(raw.decode("utf-8"))
        del raw
        for stage in STAGES:
            out = subprocess.run([sys.executable, "-m", "bench.corpus_memory", "--upload", str(upload), "--stage",
                                  stage], capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"upload: {args.mb:g} MB, {chars:,} characters")
    print(f"{'stage':<36} {'peak RSS':>10} {'peak over start':>16} {'held':>10} {'after freeing':>14}")
    for r in rows:
        print(f"{r['stage']:<36} {r['peak'] / 1e6:>7,.0f} MB {(r['peak'] - r['start']) / 1e6:>13,.0f} MB "
              f"{r['held'] / 1e6:>7,.0f} MB {r['after'] / 1e6:>11,.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
