"""Does a model copy from its context? Loss and attention on a random sequence shown more than once.

Random characters cannot be predicted from anything a model memorised, so the first copy of such a sequence
costs a lot. From the second copy on, a model that has learned in-context copying finds the earlier occurrence
of the current character, reads the character that followed it, and predicts that: the loss drops. The heads
that do the reading ("induction heads") attend from each position of a later copy to the position right after
its match in the copy before.

Pure torch, so `python -m gptcore copying` stays light to import.
"""
from __future__ import annotations

import random
import re
import string
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch
import torch.nn.functional as F

from .corpus import SEPARATOR, generate_stories, widespread
from .errors import InputError
from .model import GPT
from .tokenizer import Tokenizer

DEFAULT_SEQUENCES = 16


def repeated_ids(vocab_size: int, length: int, repeats: int, n_sequences: int, seed: int,
                 token_ids: list[int] | None = None) -> torch.Tensor:
    """(n_sequences, length * repeats) ids: each row is `length` uniform random tokens, `repeats` times; drawn from
    token_ids when given (a real model's ordinary tokens, not its special ones), else from the whole vocabulary.

    Drawn from a private generator, so it never disturbs anyone's global random state.
    """
    generator = torch.Generator().manual_seed(seed)
    if token_ids is None:
        once = torch.randint(vocab_size, (n_sequences, length), generator=generator)
    else:
        once = torch.tensor(token_ids)[torch.randint(len(token_ids), (n_sequences, length), generator=generator)]
    return once.repeat(1, repeats)


def copy_losses(logits: torch.Tensor, ids: torch.Tensor, length: int) -> torch.Tensor:
    """(..., repeats) mean cross-entropy (nats) of each copy's characters given everything before them.

    logits (..., T, V), ids (..., T) with T = length * repeats. A copy's first character is left out: nothing
    announces where a copy starts, so it is as unpredictable in every copy; from its second character on, an
    earlier copy says what comes next.
    """
    T = ids.shape[-1]
    losses = F.cross_entropy(logits[..., :-1, :].flatten(0, -2).float(), ids[..., 1:].flatten(),
                             reduction="none").view(ids[..., 1:].shape)  # losses[..., t]: predicting t + 1
    targets = torch.arange(1, T)
    return torch.stack([losses[..., (targets > start) & (targets < start + length)].mean(-1)
                        for start in range(0, T, length)], -1)


def induction_scores(patterns: torch.Tensor, length: int) -> torch.Tensor:
    """(..., L, H) mean attention from each position of a later copy to the position after its earlier match.

    patterns (..., L, H, T, T) are attention weights [query, key]. Query i >= length holds the character last
    seen at i - length, so the key that says what comes next is i - length + 1.
    """
    T = patterns.shape[-1]
    queries = torch.arange(length, T)
    return patterns[..., queries, queries - length + 1].mean(-1)


def previous_token_scores(patterns: torch.Tensor) -> torch.Tensor:
    """(..., L, H) mean attention from each position to the one just before it (position 0 has none)."""
    queries = torch.arange(1, patterns.shape[-1])
    return patterns[..., queries, queries - 1].mean(-1)


def first_token_scores(patterns: torch.Tensor) -> torch.Tensor:
    """(..., L, H) mean attention from each position to position 0 (position 0 itself left out)."""
    return patterns[..., 1:, 0].mean(-1)


@dataclass
class CopyingReport:
    length: int
    repeats: int
    n_sequences: int
    seed: int
    copy_losses: list[float]  # mean loss of each copy, first copy first
    induction: torch.Tensor  # (L, H), averaged over the sequences
    previous_token: torch.Tensor  # (L, H)
    first_token: torch.Tensor  # (L, H)

    @property
    def ratio(self) -> float:
        """Second-copy loss over first-copy loss: 1 means no copying, near 0 means perfect copying."""
        return self.copy_losses[1] / self.copy_losses[0]

    def top_heads(self, scores: torch.Tensor, k: int) -> list[tuple[str, float]]:
        """The k highest-scoring heads as ("L{layer}H{head}", score), best first."""
        n_head = scores.shape[-1]
        best = scores.flatten().topk(min(k, scores.numel()))
        return [(f"L{i // n_head}H{i % n_head}", v) for i, v in zip(best.indices.tolist(), best.values.tolist())]


def check_shape(length: int, repeats: int, n_sequences: int, context: int) -> None:
    if repeats < 2:
        raise InputError("copying.repeats", "repeats must be at least 2: copying needs a copy to copy from, got "
                         "{repeats}", repeats=repeats)
    if length < 2:
        raise InputError("copying.length", "length must be at least 2 (a copy's first character is never scored), "
                         "got {length}", length=length)
    if n_sequences < 1:
        raise InputError("copying.sequences", "the number of sequences must be at least 1, got {n}", n=n_sequences)
    if length * repeats > context:
        raise InputError("copying.too_long", "{repeats} copies of {length} characters need {need}; the model's "
                         "context is {context}", repeats=repeats, length=length, need=length * repeats,
                         context=context)


def logits_and_patterns(model: GPT, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits (B, T, V), every attention pattern (B, L, H, T, T) in float64), on the CPU, from an eval-mode pass."""
    was_training = model.training
    model.eval()
    try:
        logits, store = model.run_with_cache(ids.to(next(model.parameters()).device),
                                             names_filter=lambda name: name.endswith("hook_pattern"))
    finally:
        model.train(was_training)
    patterns = torch.stack([store[f"blocks.{i}.attn.hook_pattern"] for i in range(model.cfg.n_layer)], 1)
    return logits.cpu(), patterns.cpu().double()


MAX_DEFAULT_LENGTH = 128  # a real model's context of thousands would make every layer's T×T patterns gigabytes
PASS_BYTES = 256 * 2**20  # the logits and patterns one forward pass may hold; more sequences go in several passes


def default_length(context: int, repeats: int) -> int:
    """The longest copy that fits the context, at most MAX_DEFAULT_LENGTH tokens."""
    return min(context // max(repeats, 1), MAX_DEFAULT_LENGTH)  # (repeats below 2: refused by check_shape)


def rows_per_pass(cfg, tokens: int) -> int:
    """How many sequences of `tokens` one forward pass scores within PASS_BYTES (logits in float32, every layer's
    patterns in float32 and float64): all of a small model's at once."""
    row = tokens * cfg.vocab_size * 4 + cfg.n_layer * cfg.n_head * tokens * tokens * 12
    return max(1, PASS_BYTES // row)


@torch.no_grad()
def measure_copying(model: GPT, length: int | None = None, repeats: int = 2,
                    n_sequences: int = DEFAULT_SEQUENCES, seed: int = 0,
                    token_ids: list[int] | None = None) -> CopyingReport:
    """Losses per copy and head scores, averaged over n_sequences random sequences of the model's vocabulary (of
    token_ids when given).

    length defaults to the longest that fits, context // repeats, up to MAX_DEFAULT_LENGTH.
    """
    context = model.cfg.context
    length = default_length(context, repeats) if length is None else length
    check_shape(length, repeats, n_sequences, context)
    ids = repeated_ids(model.cfg.vocab_size, length, repeats, n_sequences, seed, token_ids)
    parts = []
    for rows in ids.split(rows_per_pass(model.cfg, ids.shape[1])):
        logits, patterns = logits_and_patterns(model, rows)
        parts.append((copy_losses(logits, rows, length), induction_scores(patterns, length),
                      previous_token_scores(patterns), first_token_scores(patterns)))
    losses, induction, previous, first = (torch.cat(scores).mean(0) for scores in zip(*parts))
    return CopyingReport(length, repeats, n_sequences, seed, losses.tolist(), induction, previous, first)


def format_report(report: CopyingReport, k: int = 4, unit: str = "character") -> str:
    """The report in words; unit is what one id stands for (the tokenizer's unit: character or token)."""
    short = {"character": "char"}.get(unit, unit)
    lines = [f"{report.n_sequences} random sequences of {report.length} {unit}s, each shown {report.repeats} "
             f"times (seed {report.seed})"]
    for i, loss in enumerate(report.copy_losses):
        lines.append(f"copy {i + 1} loss: {loss:.3f} nats/{short}")
    lines.append(f"second / first copy: {report.ratio:.3f}")
    lines.append(f"induction heads (attention from a later copy to the {unit} after its earlier match):")
    lines += [f"  {name}  {score:.3f}" for name, score in report.top_heads(report.induction, k)]
    lines.append(f"previous-token heads (attention to the {unit} just before):")
    lines += [f"  {name}  {score:.3f}" for name, score in report.top_heads(report.previous_token, k)]
    return "\n".join(lines)


# --- Copying what a learner types: four families of ordinary text -------------------------------------------------

FAMILIES = ("characters", "words", "sentence", "name")
FAMILY_EXAMPLES = 32
HELD_OUT_SEED = 9_001  # the built-in stories of this seed are no shipped run's training text
SENTENCES_FILE = Path(__file__).with_name("copying_sentences.txt")
COMMON_NAMES = ("Lily", "Tom", "Ben", "Mia", "Sam", "Lucy", "Max", "Anna", "Jack", "Emma", "Leo", "Rosa", "Finn",
                "Nora", "Omar", "Ruby", "Zoe", "Hugo", "Ivy", "Kai")
NAME_FRAMES = ("Once there was a {kind} named {name}. One morning {name} went out to play.",
               "{name} had a red kite. The wind took it away, and {name} ran after it.",
               "A little {kind} called {name} lived by the sea. Every day {name} looked at the waves.",
               "Mom said, \"Where is {name}?\" Dad smiled and said, \"{name} is in the garden.\"")


@dataclass(frozen=True)
class Repeat:
    """A text whose span text[first:first + length] is said again at text[second:second + length]."""

    text: str
    first: int
    second: int
    length: int

    def __post_init__(self):
        if self.text[self.first:self.first + self.length] != self.text[self.second:self.second + self.length]:
            raise ValueError(f"{self.text!r} does not say its span again at {self.second}")


def _twice(span: str, between: str = " ") -> Repeat:
    return Repeat(span + between + span, 0, len(span) + len(between), len(span))


def _story_words(stories: str, n: int = 400) -> list[str]:
    """The stories' n most widespread lower-case words: those in the most stories, so no story's invented name or
    magic word is among them."""
    spread = Counter(w for story in stories.split(SEPARATOR) for w in set(re.findall(r"\b[a-z]{2,}\b", story)))
    return widespread(spread, n)


@cache
def _sentences() -> list[str]:
    """Plain sentences of the kind a learner types, written for this measurement (none comes from a corpus)."""
    return SENTENCES_FILE.read_text(encoding="utf-8").splitlines()


@cache
def _held_out_words() -> list[str]:
    return _story_words(generate_stories(200_000, seed=HELD_OUT_SEED))


def family_examples(family: str, n: int = FAMILY_EXAMPLES, seed: int = 0, span: int = 50) -> list[Repeat]:
    """n examples of one family, each a span of about `span` characters (a name: the name) said twice.

    - characters: random letters and digits;
    - words: random sequences of the stories' common words;
    - sentence: a plain story sentence (SENTENCES_FILE, written for this test, in no corpus), repeated;
    - name: a name, invented or common, introduced and used again in an ordinary sentence.
    The common words are those of the built-in stories of HELD_OUT_SEED; each family draws from its own generator.
    """
    if n < 1:
        raise InputError("copying.examples", "the number of examples must be at least 1, got {n}", n=n)
    rng = random.Random(f"{family}-{seed}")
    if family == "characters":
        alphabet = string.ascii_letters + string.digits
        return [_twice("".join(rng.choice(alphabet) for _ in range(span))) for _ in range(n)]
    if family == "words":
        words, examples = _held_out_words(), []
        for _ in range(n):
            picked = []
            while len(" ".join(picked)) < span:
                picked.append(rng.choice(words))
            examples.append(_twice(" ".join(picked), ". "))
        return examples
    if family == "sentence":
        return [_twice(line) for line in rng.sample(_sentences(), n)] if n <= len(_sentences()) else \
            [_twice(rng.choice(_sentences())) for _ in range(n)]
    if family == "name":
        examples = []
        for i in range(n):
            name = rng.choice(COMMON_NAMES) if i % 2 else _invented_name(rng)
            text = rng.choice(NAME_FRAMES).format(name=name, kind=rng.choice(("girl", "boy", "cat", "dog")))
            first = text.index(name)
            examples.append(Repeat(text, first, text.index(name, first + len(name)), len(name)))
        return examples
    raise InputError("copying.family", "unknown family {family}: one of {families}", family=family,
                     families=", ".join(FAMILIES))


def _invented_name(rng: random.Random) -> str:
    """A made-up name from syllables and endings of its own, not the built-in stories' (corpus._invent_name), so
    the measurement's names are not the kind the stories taught."""
    onsets, vowels, ends = "b d f g k l m n p r s t v z br tr".split(), "a e i o u".split(), "a o in el ix ora".split()
    return "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(1, 2))).capitalize() + \
        rng.choice(ends)


@dataclass
class FamilyReport:
    family: str
    n_examples: int
    first_loss: float  # mean nats per character of the span's first saying (its first character left out)
    second_loss: float  # the same for the second saying
    induction: torch.Tensor  # (L, H) mean attention from the second saying to the character after its match

    @property
    def ratio(self) -> float:
        return self.second_loss / self.first_loss

    def best_head(self) -> tuple[str, float]:
        n_head = self.induction.shape[-1]
        score, i = self.induction.flatten().max(0)
        return f"L{int(i) // n_head}H{int(i) % n_head}", float(score)


def usable_examples(model: GPT, tokenizer: Tokenizer, examples: list[Repeat]) -> list[Repeat]:
    """The examples whose characters the model knows and whose text fits its context."""
    return [r for r in examples if not tokenizer.unknown(r.text) and len(r.text) <= model.cfg.context]


@torch.no_grad()
def measure_family(model: GPT, tokenizer: Tokenizer, family: str, n: int = FAMILY_EXAMPLES,
                   seed: int = 0) -> FamilyReport:
    """Second-saying against first-saying loss, and each head's induction score, over n examples of a family."""
    if tokenizer.kind != "char":
        raise InputError("copying.char_only", "the copying families are measured per character: this model's "
                         "tokenizer is {kind}", kind=tokenizer.kind)
    examples = usable_examples(model, tokenizer, family_examples(family, n, seed))
    if not examples:
        raise InputError("copying.no_examples", "no {family} example fits this model: its vocabulary or context "
                         "is too small", family=family)
    width = max(len(r.text) for r in examples)
    # padded on the right: a causal model's outputs at a position never see what comes after it
    ids = torch.zeros(len(examples), width, dtype=torch.long)
    for row, r in enumerate(examples):
        ids[row, :len(r.text)] = torch.tensor(tokenizer.encode(r.text))
    logits, patterns = logits_and_patterns(model, ids)
    losses = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten(),
                             reduction="none").view(len(examples), -1)  # losses[b, t]: predicting t + 1
    first, second, induction = [], [], []
    for row, r in enumerate(examples):
        first.append(losses[row, r.first:r.first + r.length - 1].mean())
        second.append(losses[row, r.second:r.second + r.length - 1].mean())
        queries = torch.arange(r.second, r.second + r.length - 1)
        induction.append(patterns[row][..., queries, queries - (r.second - r.first) + 1].mean(-1))
    return FamilyReport(family, len(examples), float(torch.stack(first).mean()), float(torch.stack(second).mean()),
                        torch.stack(induction).mean(0))


def measure_families(model: GPT, tokenizer: Tokenizer, n: int = FAMILY_EXAMPLES, seed: int = 0) -> list[FamilyReport]:
    """One report per family that has an example the model can read (a small context or vocabulary has none)."""
    return [measure_family(model, tokenizer, family, n, seed) for family in FAMILIES
            if usable_examples(model, tokenizer, family_examples(family, n, seed))]


def format_families(reports: list[FamilyReport]) -> str:
    if not reports:
        return "no family of text fits this model's vocabulary and context"
    lines = [f"{'family':<12}{'examples':>9}{'first':>8}{'second':>8}{'ratio':>7}  best induction head"]
    for r in reports:
        head, score = r.best_head()
        lines.append(f"{r.family:<12}{r.n_examples:>9}{r.first_loss:>8.3f}{r.second_loss:>8.3f}{r.ratio:>7.2f}  "
                     f"{head} {score:.2f}")
    return "\n".join(lines)
