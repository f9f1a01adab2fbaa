"""Do a model's samples read like stories? The share of the words it writes that are real words of the corpus.

    python -m bench.sample_words CHECKPOINT [CHECKPOINT ...] [--chars 3000] [--temperature 0.8]

Each checkpoint writes `--chars` characters at the given temperature from each of a few story openings (the same
seeded generator for every checkpoint). A word is a run of letters and digits; it is real when it appears in at
least two different stories of the built-in corpus (1M characters, seed 0), so an invented name or a secret code,
said only inside its own story, does not count. The story break <|endoftext|> is not a word.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter

import torch

from gptcore import checkpoint as ckpt
from gptcore.corpus import BUILTIN_DEFAULT_CHARS, SEPARATOR, generate_stories
from gptcore.generate import stream

PROMPTS = ("Once upon a time", "One day, a little", "The dog", "Mom said, \"")
WORD = re.compile(r"[A-Za-z0-9]+")


def real_words(text: str) -> set[str]:
    spread = Counter(w for story in text.split(SEPARATOR) for w in set(WORD.findall(story.lower())))
    return {w for w, n in spread.items() if n >= 2}


def samples(path: str, chars: int, temperature: float, seed: int = 0) -> str:
    loaded = ckpt.load_checkpoint(path)
    model, tok = loaded.model.eval(), loaded.tokenizer
    out = []
    for i, prompt in enumerate(PROMPTS):
        ids = torch.tensor([tok.encode(prompt)])
        gen = torch.Generator().manual_seed(seed + i)
        new = list(stream(model, ids, chars // len(PROMPTS), temperature=temperature, generator=gen))
        out.append(tok.decode(new))
    return "\n".join(out).replace(SEPARATOR.strip(), " ")


def word_share(text: str, vocabulary: set[str]) -> tuple[float, int]:
    words = WORD.findall(text.lower())
    return sum(w in vocabulary for w in words) / max(len(words), 1), len(words)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--chars", type=int, default=3000)
    parser.add_argument("--temperature", type=float, default=0.8)
    args = parser.parse_args(argv)
    vocabulary = real_words(generate_stories(BUILTIN_DEFAULT_CHARS, seed=0))
    print(f"{len(vocabulary):,} real words; {args.chars:,} characters per checkpoint at temperature {args.temperature}")
    for path in args.checkpoints:
        share, n = word_share(samples(path, args.chars, args.temperature), vocabulary)
        print(f"{path}: {share:.1%} of {n:,} words are real words of the corpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
