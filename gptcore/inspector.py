"""The math behind the Inspect page: attention patterns, head scores, per-token losses, predictions.

Everything here is a pure function of a model, a tokenizer and a text (or of tensors), so the page only lays
out widgets and figures, and tests can check every number against a direct computation. A real model's
vocabulary is large (SmolLM2: 49,152 tokens), so an inspection keeps the final hidden state rather than every
position's logits, and computes a position's logits when a view asks for them.
"""
from __future__ import annotations

import html
import io
import re
import threading
from collections import Counter
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from . import atlas, copying
from . import checkpoint as ckpt
from .chat import chat_prompt, prompt_ids
from .config import GPTConfig
from .errors import InputError
from .generate import check_sampling, stream
from .model import GPT
from .tokenizer import Tokenizer, visible

# An ordinary sentence said twice, as a learner might type it: at its second saying, copying is what predicts
DEFAULT_TEXT = "My cat likes warm milk and soft socks. My cat likes warm milk and soft socks."
REPEAT_MIN = 8  # characters a span shares with an earlier one to count as said again

CLEAR_SCORE = 0.3  # a head score below this is not called a role: uniform attention over 100 keys gives 0.01
# Inspect keeps every head's (T, T) pattern of a text: for a model of many heads the text is cut so that they take
# at most this many bytes (SmolLM2's 270 heads: 128 tokens, 18 MB)
PATTERN_BYTES = 32 << 20

# Hooks live on the model object, and the app shares one loaded model between sessions: a forward pass of
# one session while another has its hooks registered would feed the wrong store. One pass at a time.
MODEL_LOCK = threading.Lock()


@dataclass
class Inspection:
    """One forward pass over a text, with everything the page shows about it."""
    text: str  # the characters actually fed to the model (known ones, cut to the context)
    ids: torch.Tensor  # (T,)
    final: torch.Tensor  # (T, d_model): the last norm's output, which the output head turns into logits
    unembed: torch.Tensor  # (V, d_model): the output head's weights (the model's own tensor, not a copy)
    losses: torch.Tensor  # (T,): each token's cross-entropy given the ones before it; NaN for the first
    patterns: torch.Tensor  # (L, H, T, T): patterns[l, h, query, key]
    unknown: Counter  # characters the tokenizer does not know, dropped from the input
    truncated: int  # known tokens beyond the context window (or inspect_limit), not analysed
    pieces: list[str]  # each position's token as text (a character, or a BPE token, ⟨e4 bd⟩ for partial bytes)
    limit: int  # the most tokens inspected: the context, or less for a model of many heads (inspect_limit)

    def logits_at(self, position: int) -> torch.Tensor:
        """(V,) the logits after `position`, as the model's output head computes them."""
        return F.linear(self.final[position], self.unembed)

    @property
    def logits(self) -> torch.Tensor:
        """(T, V) every position's logits: for a small vocabulary, or a test; a view asks logits_at."""
        return F.linear(self.final, self.unembed)


def inspect_limit(cfg: GPTConfig) -> int:
    """How many tokens Inspect reads: the context, or fewer when every head's patterns would pass PATTERN_BYTES."""
    fits = int((PATTERN_BYTES / (4 * cfg.n_layer * cfg.n_head)) ** 0.5)
    return min(cfg.context, fits if fits >= cfg.context else 1 << (fits.bit_length() - 1))


def prepare_ids(tokenizer: Tokenizer, text: str, context: int) -> tuple[list[int], Counter, int]:
    """Token ids of the first `context` known characters, the unknown characters, and how many were cut; after
    the beginning-of-sequence token where the model was trained with one first (Llama 2, TinyLlama)."""
    ids = prompt_ids(tokenizer, text) if text else []
    return ids[:context], tokenizer.unknown(text), max(0, len(ids) - context)


def patterns_from_ids(model: GPT, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logits (T, V), attention patterns (L, H, T, T), the last norm's output (T, d_model)) of one sequence,
    read at the hook points."""
    names = [f"blocks.{i}.attn.hook_pattern" for i in range(model.cfg.n_layer)] + ["hook_ln_f_out"]
    with MODEL_LOCK:
        logits, store = model.run_with_cache(ids[None], names_filter=names)
    patterns = torch.stack([store[f"blocks.{i}.attn.hook_pattern"][0] for i in range(model.cfg.n_layer)])
    return logits[0], patterns, store["hook_ln_f_out"][0]


def inspect_text(model: GPT, tokenizer: Tokenizer, text: str) -> Inspection:
    limit = inspect_limit(model.cfg)
    ids, unknown, truncated = prepare_ids(tokenizer, text, limit)
    if not text:
        raise InputError("inspector.empty", "the text is empty")
    if not ids:
        raise InputError("inspector.no_known", "the text has no character the model knows")
    ids = torch.tensor(ids, dtype=torch.long)
    device = next(model.parameters()).device
    logits, patterns, final = patterns_from_ids(model, ids.to(device))
    losses = char_losses(logits, ids.to(device)).cpu()
    del logits  # (T, V): 25 MB for 128 tokens of a 49k vocabulary; a view computes the row it shows
    return Inspection(tokenizer.decode(ids), ids, final.cpu(), model.head.weight.detach().cpu(), losses,
                      patterns.cpu(), unknown, truncated, tokenizer.pieces(ids), limit)


def attention_patterns(model: GPT, tokenizer: Tokenizer, text: str) -> torch.Tensor:
    """Attention weights (L, H, T, T) of every layer and head on text (cut to the context)."""
    return inspect_text(model, tokenizer, text).patterns


def token_labels(pieces) -> list[str]:
    """One readable label per token (the characters of a text, or an Inspection's pieces): spaces, newlines and
    tabs become visible symbols."""
    return [visible(piece) for piece in pieces]


def repeat_position(pieces) -> int | None:
    """Where copying shows (a text's characters, or an Inspection's pieces): the position of the token holding the
    first space of a span said again (its last REPEAT_MIN characters came earlier), whose next character begins a
    word only the earlier saying predicts; else where a capitalised word (a name, say) first comes back; else None."""
    text, starts = "".join(pieces), np.cumsum([0] + [len(p) for p in pieces])
    def token_at(char: int) -> int:
        return int(np.searchsorted(starts, char, side="right")) - 1

    for end in range(REPEAT_MIN, len(text)):
        if text[end - 1] == " " and text[end - REPEAT_MIN:end] in text[:end - 1]:
            return token_at(end - 1)
    seen = set()
    for match in re.finditer(r"\b[A-Z][a-z]+\b", text):
        if match.group() in seen:
            return token_at(match.start())
        seen.add(match.group())
    return None


def repeated_random_text(tokenizer: Tokenizer, length: int, seed: int = 0) -> str:
    """length random vocabulary characters, twice: in the second copy only an induction head can predict.

    Drawn from a private generator, so it never disturbs anyone's global random state.
    """
    generator = torch.Generator().manual_seed(seed)
    whole = [i for i in range(tokenizer.vocab_size) if tokenizer.is_whole(i)]  # (a BPE's partial bytes would not
    picks = torch.randint(len(whole), (length,), generator=generator)           # survive decoding as text)
    return tokenizer.decode([whole[i] for i in picks.tolist()]) * 2


def repeated_sequence_scores(model: GPT, n_sequences: int | None = None,
                             seed: int = 0) -> tuple[pd.DataFrame, copying.CopyingReport]:
    """Head scores on random sequences of the vocabulary shown twice (the `python -m gptcore copying` test; for a
    large model fewer and shorter ones, atlas.repeated_shape), laid out like head_scores, and the measurement
    itself (the loss of each copy).

    induction is the mean attention from each second-copy position to the position after its match in the first
    copy: in such a sequence only copying predicts the second half, so this is the cleanest test for induction heads.
    """
    with MODEL_LOCK:
        return atlas.repeated_token_scores(model, n_sequences=n_sequences, seed=seed)


def repeated_sequence_example(tokenizer: Tokenizer, length: int, seed: int = 0) -> list[str]:
    """The first sequence repeated_sequence_scores scores, as one label per token."""
    return tokenizer.labels(copying.repeated_ids(tokenizer.vocab_size, length, 2, 1, seed)[0].tolist())


def repeated_sequence_ids(vocab_size: int, length: int, seed: int = 0) -> torch.Tensor:
    """(2 · length,) the first sequence repeated_sequence_scores scores, whose patterns the atlas opens."""
    return copying.repeated_ids(vocab_size, length, 2, 1, seed)[0]


def head_names(n_layer: int, n_head: int) -> list[str]:
    return [f"L{layer}H{head}" for layer in range(n_layer) for head in range(n_head)]


def strongest_head(scores: pd.DataFrame, column: str,
                   at_least: float = CLEAR_SCORE) -> tuple[int, int, float] | None:
    """(layer, head, score) of the head scoring highest in `column` of a head_scores-like table, or None when
    no head reaches at_least (or the column has no score at all)."""
    if not scores[column].notna().any():
        return None
    best = scores.loc[scores[column].idxmax()]
    if best[column] < at_least:
        return None
    return int(best["layer"]), int(best["head_index"]), float(best[column])


def induction_targets(ids: torch.Tensor) -> torch.Tensor:
    """Bool (T, T): key j is the character right after an earlier occurrence of query i's character.

    That is ids[j-1] == ids[i] with j < i: the key an induction head reads to predict what came next last time.
    """
    ids = torch.as_tensor(ids)
    T = len(ids)
    same = ids[:, None] == ids[None, :]  # same[i, p]: position p holds query i's character
    targets = torch.zeros(T, T, dtype=torch.bool)
    targets[:, 1:] = same[:, :-1]  # key j = p + 1
    return targets & torch.ones(T, T, dtype=torch.bool).tril(-1)


def head_scores(patterns: torch.Tensor, ids) -> pd.DataFrame:
    """One row per head: mean attention to the previous token, to the first token, and to induction targets.

    previous_token and first_token average over queries 1..T-1 (query 0 can only see itself). induction
    averages, over the queries whose character occurred before, the total weight on the characters that
    followed those earlier occurrences; it is NaN when no character repeats.
    """
    L, H, T, _ = patterns.shape
    p = patterns.double()
    queries = torch.arange(1, T)
    previous = p[..., queries, queries - 1].mean(-1) if T > 1 else torch.full((L, H), float("nan"))
    first = p[..., 1:, 0].mean(-1) if T > 1 else torch.full((L, H), float("nan"))
    targets = induction_targets(ids)
    has_target = targets.any(-1)
    if has_target.any():
        induction = (p * targets).sum(-1)[..., has_target].mean(-1)
    else:
        induction = torch.full((L, H), float("nan"))
    return atlas.score_table(previous, first, induction)


@dataclass(frozen=True)
class CopyMiss:
    """Why the model's most likely next token, at a position its text said before, is not the token that came next
    then: where the copying head looks from there, and the short prefix that came before with other continuations.

    Positions are the text's; a continuation's position is the key an induction head reads to copy it."""
    position: int  # the query
    expected: int  # the token the text goes on with, which an earlier saying predicts
    guess: int  # the model's most likely next token
    p_expected: float  # the model's probabilities (temperature 1, no top-k) of each
    p_guess: float
    keys: list[tuple[int, float]]  # the head's largest weights from the query: (key position, weight), largest first
    weight_expected: float  # the head's weight on the keys that would copy `expected`
    weight_others: float  # on the keys after an earlier occurrence of the query's token that hold another token
    prefix: int  # tokens in the longest prefix ending at the query that came before with different continuations
    # (0: every earlier occurrence of the query's token went on alike)
    continuations: dict[int, list[int]]  # that prefix's: token → the positions where it followed the prefix
    telling: int  # tokens of the shortest prefix ending at the query whose earlier occurrences all go on with
    # `expected` (0 when none does)


def earlier_matches(ids: list[int], position: int):
    """For n = 1, 2, … while there are any: (n, the earlier positions where the n tokens ending at `position` end
    too)."""
    ends, n = [end for end in range(position) if ids[end] == ids[position]], 1
    while ends:
        yield n, ends
        ends = [end for end in ends if end - n >= 0 and ids[end - n] == ids[position - n]]
        n += 1


def continuations(ids: list[int], ends: list[int]) -> dict[int, list[int]]:
    """The tokens that follow the earlier occurrences ending at `ends`: token → the positions where it follows."""
    found = {}
    for end in ends:
        found.setdefault(ids[end + 1], []).append(end + 1)
    return found


def said_before(ids: list[int], pieces: list[str], position: int) -> bool:
    """Is the token after `position` the end of a passage said earlier: do its last REPEAT_MIN characters (two
    tokens at least) come before, whole? Then an earlier saying predicts it, and copying could."""
    end, n, chars = position + 1, 0, 0
    while end < len(ids) and end - n >= 0 and (n < 2 or chars < REPEAT_MIN):
        chars += len(pieces[end - n])
        n += 1
    if end >= len(ids) or n < 2 or chars < REPEAT_MIN:
        return False
    span = ids[end - n + 1:end + 1]
    return any(ids[start:start + n] == span for start in range(end - n + 1))


def copy_miss(run: Inspection, position: int, layer: int, head: int, n_keys: int = 4) -> CopyMiss | None:
    """Why the model misses a token its text said before, at `position`, as head (layer, head) sees it; None when
    the next token ends no passage said before (said_before), or the model's top guess is that token."""
    ids = run.ids.tolist()
    if not said_before(ids, run.pieces, position):
        return None
    probs = run.logits_at(position).float().softmax(-1)
    expected, guess = ids[position + 1], int(probs.argmax())
    if guess == expected:
        return None
    prefix, ambiguous, telling, after_token = 0, {}, 0, {}
    for n, ends in earlier_matches(ids, position):
        found = continuations(ids, ends)
        after_token = after_token or found  # (n = 1: the keys an induction head reads from this query)
        if len(found) > 1:
            prefix, ambiguous = n, found
        elif not telling and expected in found:
            telling = n
    weights = run.patterns[layer, head, position, :position + 1].double()
    top = torch.topk(weights, min(n_keys, position + 1))
    keys = [(int(i), float(w)) for w, i in zip(top.values, top.indices)]
    others = [key for token, found in after_token.items() if token != expected for key in found]
    return CopyMiss(position, expected, guess, float(probs[expected]), float(probs[guess]), keys,
                    float(weights[after_token[expected]].sum()), float(weights[others].sum()), prefix, ambiguous,
                    telling)


def copy_misses(run: Inspection) -> list[int]:
    """The positions whose next token an earlier saying predicts but the model does not rank first (the positions
    copy_miss explains)."""
    ids = run.ids.tolist()
    guesses = run.logits.argmax(-1).tolist()
    return [q for q in range(len(ids) - 1) if guesses[q] != ids[q + 1] and said_before(ids, run.pieces, q)]


def char_losses(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Cross-entropy (nats) of each character given the ones before it; NaN for the first, which has none."""
    losses = F.cross_entropy(logits[:-1].float(), ids[1:], reduction="none")
    return torch.cat([torch.tensor([float("nan")]), losses])


def sampling_distribution(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """The distribution GPT.stream samples from: softmax(logits / temperature) over the top k (all if 0 or None);
    temperature 0 (or one so small that logits / temperature overflows) puts everything on the most likely token."""
    check_sampling(temperature, top_k)
    logits = logits.float()
    scaled = logits / temperature if temperature else None
    if scaled is None or not torch.isfinite(scaled).all():
        return F.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(scaled, top_k).values[..., -1, None]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return scaled.softmax(-1)


def next_char_probs(logits: torch.Tensor, position: int, temperature: float = 1.0,
                    top_k: int | None = None) -> torch.Tensor:
    return sampling_distribution(logits[position], temperature, top_k)


def top_predictions(logits: torch.Tensor, tokenizer: Tokenizer, position: int, k: int = 10,
                    temperature: float = 1.0, top_k: int | None = None) -> pd.DataFrame:
    """The k most likely next tokens after `position` of logits (T, V), most likely first, with the probabilities
    generation draws from at this temperature and top-k."""
    return predictions(logits[position], tokenizer, k, temperature, top_k)


def predictions(logits: torch.Tensor, tokenizer: Tokenizer, k: int = 10, temperature: float = 1.0,
                top_k: int | None = None) -> pd.DataFrame:
    """The k most likely next tokens of one position's logits (V,): their text, label and probability."""
    probs = sampling_distribution(logits, temperature, top_k)
    top = torch.topk(probs, min(k, len(probs)))
    ids = top.indices.tolist()
    return pd.DataFrame({"char": tokenizer.pieces(ids), "label": tokenizer.labels(ids),
                         "probability": top.values.numpy()})


def generation_prompt(tokenizer: Tokenizer, prompt: str, chat: bool = False) -> str:
    """The text the model continues: the prompt, or (chat) the prompt as a user's message in the model's chat
    template, ending where the assistant's answer begins."""
    if not prompt:
        raise InputError("inspector.empty_prompt", "the prompt is empty: type at least one character to continue from")
    if not chat:
        return prompt
    bos, eos = (getattr(tokenizer, name, None) for name in ("bos_id", "eos_id"))
    return chat_prompt(getattr(tokenizer, "chat_template", None), prompt, "" if bos is None else tokenizer.piece(bos),
                       "" if eos is None else tokenizer.piece(eos))


def generate(model: GPT, tokenizer: Tokenizer, prompt: str, n_chars: int, temperature: float,
             top_k: int | None, seed: int, chat: bool = False) -> str:
    """Sample up to n_chars tokens continuing generation_prompt(prompt, chat) with model.stream, from a private
    generator seeded with seed; it stops early at the tokenizer's end-of-sequence token, which is left out."""
    ids = prepare_ids(tokenizer, generation_prompt(tokenizer, prompt, chat), model.cfg.context)[0]
    if not ids:
        raise InputError("inspector.prompt_no_known", "the prompt has no character the model knows")
    device = next(model.parameters()).device
    generator = torch.Generator(device).manual_seed(seed)
    eos = getattr(tokenizer, "eos_id", None)
    with MODEL_LOCK:
        new = list(takewhile(lambda token: token != eos, stream(
            model, torch.tensor([ids], device=device), n_chars, temperature=temperature, top_k=top_k,
            generator=generator)))
    return tokenizer.decode(new)


def highlight_html(text: str, weights, colour: str = "255, 75, 75", title=None, mark: int | None = None) -> str:
    """text as HTML spans shaded by weights (0..1); a newline shows as ⏎ (so its weight is visible), then breaks.

    title(i) gives an optional tooltip per character; the character at `mark` is boxed.
    """
    spans = []
    colour = colour.replace(" ", "")  # (compact markup: the page sends six such rows on every click)
    for i, (c, w) in enumerate(zip(text, weights)):
        w = float(np.clip(w, 0.0, 1.0)) if np.isfinite(w) else 0.0
        tip = f' title="{html.escape(title(i))}"' if title else ""
        box = ";outline:2px solid #222" if i == mark else ""
        shown = html.escape(c).replace("\n", "⏎\n")
        spans.append(f'<span style="background:rgba({colour},{w:.2f}){box}"{tip}>{shown}</span>')
    return ('<div style="font-family: monospace; white-space: pre-wrap; line-height: 1.9; font-size: 0.95rem">'
            + "".join(spans) + "</div>")


def token_boxes_html(labels: list[str], title=None) -> str:
    """Where the tokenizer cut a text: one box per token around its label (whitespace visible), neighbours in two
    alternating colours so that each cut shows; title(i) gives an optional tooltip per token."""
    boxes = []
    for i, label in enumerate(labels):
        tip = f' title="{html.escape(title(i))}"' if title else ""
        colour = ("#e3edfb", "#fbe9d7")[i % 2]
        boxes.append(f'<span style="background:{colour};border:1px solid #9aa7b8;border-radius:4px;padding:0 3px;'
                     f'margin:2px 1px;display:inline-block;white-space:pre"{tip}>{html.escape(label)}</span>')
    return '<div style="font-family: monospace; line-height: 1.9; font-size: 0.95rem">' + "".join(boxes) + "</div>"


def weights_step(path: Path) -> int:
    """The training step recorded in a weights file's header, without loading its tensors."""
    return ckpt.header_step(path, ckpt.weights_metadata(path))


def training_steps(directory: Path) -> list[tuple[int, Path]]:
    """(step, weights file) of every snapshot of a run, plus its final weights unless a snapshot has that step."""
    directory = Path(directory)
    steps = ckpt.list_snapshots(directory)
    final = directory / "model.safetensors"
    if final.is_file() and (final_step := weights_step(final)) not in {s for s, _ in steps}:
        steps = sorted(steps + [(final_step, final)])
    return steps


def scores_over_training(snapshots: list[tuple[int, GPT]], tokenizer: Tokenizer, text: str | None) -> pd.DataFrame:
    """head_scores of every snapshot on the same text (None: repeated_sequence_scores), in long form: step, head,
    score, value."""
    frames = []
    for step, model in snapshots:
        if text is None:
            frame = repeated_sequence_scores(model)[0]
        else:
            run = inspect_text(model, tokenizer, text)
            frame = head_scores(run.patterns, run.ids)
        frames.append(frame.assign(step=step))
    wide = pd.concat(frames, ignore_index=True)
    return wide.melt(id_vars=["step", "head", "layer", "head_index"], var_name="score", value_name="value")


def patterns_csv(patterns: torch.Tensor, text: str) -> str:
    """The attention tensor as a long CSV: one row per (layer, head, query, key)."""
    L, H, T, _ = patterns.shape
    layer, head, query, key = (g.ravel() for g in np.meshgrid(*map(np.arange, (L, H, T, T)), indexing="ij"))
    chars = np.array(list(text), dtype=object)
    frame = pd.DataFrame({"layer": layer, "head": head, "query": query, "key": key, "query_char": chars[query],
                          "key_char": chars[key], "weight": patterns.numpy().ravel()})
    return frame.to_csv(index=False, float_format="%.6g")


def patterns_npy(patterns: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, patterns.numpy().astype(np.float32))
    return buffer.getvalue()
