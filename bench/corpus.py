"""The built-in story generator's speed.

    python -m bench.corpus [n_chars]       default: the size the app and `--data builtin` use
"""
import sys
import time

from gptcore.corpus import BUILTIN_DEFAULT_CHARS, generate_stories


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    n = int(argv[0]) if argv else BUILTIN_DEFAULT_CHARS
    start = time.perf_counter()
    text = generate_stories(n, seed=0)
    secs = time.perf_counter() - start
    print(f"{len(text):,} chars in {secs:.3f} s = {len(text) / secs:,.0f} chars/s, vocab {len(set(text))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
