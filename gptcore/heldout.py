"""A stretch of text a checkpoint was not trained on, to measure it beyond a learner's short sentence: the start of
its validation split (the last 10% of its corpus, gptcore.data.split_ids) when its meta.json says how to build the
corpus again (the built-in stories, or a file on the server), else built-in stories of a seed no run of the app
trains on (an imported model, an uploaded corpus, TinyStories' download: nothing is fetched for this).
"""
from __future__ import annotations

from dataclasses import dataclass

from .corpus import generate_stories
from .data import CorpusError
from .sources import CorpusSource

SPLIT_START = 0.95  # inside the last 10% of the corpus whatever the tokenizer's characters per token
STORIES_SEED = 7  # the built-in stories' seed when the run's own text cannot be had (the app's runs use 0)


@dataclass(frozen=True)
class HeldOut:
    text: str
    source: str  # "split": the run's validation split; "stories": built-in stories


def held_out_text(meta: dict, chars: int) -> HeldOut:
    """About `chars` characters the checkpoint did not train on, starting at a line's start where one is near."""
    source = CorpusSource.from_dict(meta.get("corpus_source"))
    if source is not None and source.kind in ("builtin", "file"):
        try:
            text = source.load(confine=True).text
        except CorpusError:  # (a file since moved or changed: the stories below instead)
            text = ""
        start = int(SPLIT_START * len(text))
        line = text.find("\n", start, start + chars // 2)
        piece = text[start if line < 0 else line + 1:][:chars]
        if len(piece) >= chars // 2:
            return HeldOut(piece, "split")
    return HeldOut(generate_stories(chars, STORIES_SEED), "stories")
