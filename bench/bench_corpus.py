"""Benchmark the built-in story generator: python bench/bench_corpus.py [n_chars]"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from gptcore.corpus import BUILTIN_DEFAULT_CHARS, generate_stories  # noqa: E402


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else BUILTIN_DEFAULT_CHARS
    start = time.perf_counter()
    text = generate_stories(n, seed=0)
    secs = time.perf_counter() - start
    print(f"{len(text):,} chars in {secs:.3f} s = {len(text) / secs:,.0f} chars/s, "
          f"vocab {len(set(text))}")


if __name__ == "__main__":
    main()
