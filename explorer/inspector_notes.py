"""The Inspect page's explanations of the results a learner may doubt, each computed from the run on screen and
said only where it applies:
- why the model misses a token its text said before, where copying should have found it (the strongest induction
  head's largest weights from that query, and the short stretch of text that came before with other continuations:
  gptcore.inspector.copy_miss);
- where in the text that happens (the surprise strip);
- what the first copy of random tokens costs at best (an even guess over the vocabulary), and why more;
- the head finder's threshold: how many heads reach it, or the best below it.
Each is worded in tokens for a model that reads tokens (figs.worded); a token is quoted as its label, a space as ␣.
"""
from __future__ import annotations

import math
import re

from gptcore import inspector as ins
from gptcore.tokenizer import Tokenizer

from . import inspector_figures as figs
from .i18n import t

LISTED = 8  # the most positions a sentence lists
MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")  # (a token such as '*' or '_' would turn into emphasis)


def span(tokenizer: Tokenizer, ids: list[int]) -> str:
    """Tokens as the page quotes them: their labels (whitespace visible), in quotes, safe inside Markdown."""
    return "'" + MARKDOWN.sub(r"\\\1", "".join(tokenizer.labels(ids))) + "'"


def quoted(tokenizer: Tokenizer, token: int) -> str:
    return span(tokenizer, [token])


def copy_miss(run: ins.Inspection, tokenizer: Tokenizer, position: int, head: tuple[int, int] | None) -> str | None:
    """Why the model's top guess after `position` is not the token an earlier saying of the text predicts, as the
    head (layer, head) looks at it (Markdown); None when the guess is right, or the next token is no repeat."""
    if head is None or (miss := ins.copy_miss(run, position, *head)) is None:
        return None
    tokens, ids = tokenizer.kind != "char", run.ids.tolist()

    def say(key: str, **values) -> str:
        return figs.worded(f"inspector.notes.{key}", tokens, **values)

    def ending_here(n: int) -> str:  # the last n tokens up to the query
        return span(tokenizer, ids[position - n + 1:position + 1])

    expected = quoted(tokenizer, miss.expected)
    lines = [say("miss", expected=expected, guess=quoted(tokenizer, miss.guess), p_guess=miss.p_guess,
                 p_expected=miss.p_expected)]
    if miss.prefix:
        listed = t("inspector.notes.separator").join(
            t("inspector.notes.continuation", token=quoted(tokenizer, token), positions=", ".join(map(str, found)))
            for token, found in miss.continuations.items())
        lines.append(say("ambiguous", n=miss.prefix, prefix=ending_here(miss.prefix), continuations=listed))
        lines.append(say("telling", n=miss.telling, prefix=ending_here(miss.telling), expected=expected)
                     if miss.telling else say("untold", expected=expected))
    else:
        lines.append(say("unambiguous", token=quoted(tokenizer, ids[position]), expected=expected))
    keys = t("inspector.notes.list_separator").join(
        t("inspector.notes.key", weight=weight, token=quoted(tokenizer, ids[key]), position=key)
        for key, weight in miss.keys)
    lines.append(say("keys", head=f"L{head[0]}H{head[1]}", position=position, keys=keys))
    verdict = "outweighed" if miss.weight_expected >= 0.5 else \
        "split" if miss.weight_others > miss.weight_expected else "elsewhere"
    lines.append(say(verdict, token=expected, expected=miss.weight_expected, others=miss.weight_others))
    return "\n".join(f"- {line}" if i else line for i, line in enumerate(lines))


def surprise(run: ins.Inspection, tokenizer: Tokenizer, misses: list[int]) -> str | None:
    """Where the model misses tokens its text said before (the positions before them: misses); None if nowhere."""
    if not misses:
        return None
    ids = run.ids.tolist()
    separator = t("inspector.notes.list_separator")
    listed = separator.join(t("inspector.notes.listed", token=quoted(tokenizer, ids[q + 1]), position=q + 1)
                            for q in misses[:LISTED]) + (separator + "…" if len(misses) > LISTED else "")
    return figs.worded("inspector.notes.surprise", tokenizer.kind != "char", n=len(misses), listed=listed,
                       positions=", ".join(map(str, misses[:LISTED])))


def first_copy(loss: float, vocab: int, tokens: bool) -> str:
    """What the first copy of random tokens costs against the best any model can do there: an even guess over the
    vocabulary, ln(vocab) nats."""
    uniform = math.log(vocab)
    key = "first_copy" if loss - uniform >= 0.005 else "first_copy_even"  # (below it only by the sample's chance)
    return figs.worded(f"inspector.notes.{key}", tokens, loss=loss, vocab=f"{vocab:,}", size=vocab,
                       uniform=uniform, excess=loss - uniform)


def threshold(scores, column: str, clear: float) -> tuple[str, str]:
    """The head finder's answer for one role in words: (the strongest head and its score, or that none reaches
    the threshold; how many heads reach it, or the best below it)."""
    best = scores.loc[scores[column].idxmax()]
    reaching = int((scores[column] >= clear).sum())
    if reaching:
        return f"{best['head']} · {best[column]:.2f}", t("inspector.notes.reach", n=reaching, total=len(scores),
                                                           clear=clear)
    return t("inspector.notes.none_reach", clear=clear), t("inspector.notes.best_below", clear=clear,
                                                            head=best["head"], score=best[column])
