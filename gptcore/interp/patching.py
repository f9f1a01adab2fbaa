"""Activation patching: run a corrupted prompt again with activations copied in from a clean one, and measure how
much of the clean answer comes back.

`patched_logits` runs whole passes with any patches; the sweeps (`patch_heads`, `patch_residual`,
`patch_heads_by_position`) batch hundreds of patched runs, each starting at the layer of its patch and at the first
position where the prompts differ: before that position the two runs are the same text, so nothing there can differ.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from ..errors import InputError
from ..model import GPT
from ..tokenizer import Tokenizer
from .capture import (
    Capture,
    Progress,
    Run,
    as_ids,
    capture,
    read_logits,
    run_batched,
    run_hooked,
    stream_at,
)
from .lens import residual_rows


@dataclass(frozen=True)
class Patch:
    """Copy hook `hook` from the clean run into the corrupted one: at one head (for per-head hook points) or all,
    at one position or all."""
    hook: str
    head: int | None = None
    position: int | None = None


@dataclass(frozen=True)
class PatchingPair:
    """Two prompts of the same length that differ in a detail, and the next token each should lead to."""
    id: str  # stable: a page looks up the pair's title and explanation by it
    clean: str
    corrupted: str
    clean_answer: str  # the token the clean prompt should continue with
    corrupted_answer: str


# Each pair differs only early on and ends on the same text, so whatever tells the answers apart has to be carried
# forward from the difference to the last position: patching shows which heads and positions carry it.
PATCHING_PAIRS = [
    # a password of random characters can only be continued by copying it from its first mention
    PatchingPair("password",
                 'Pemi had a secret hideout, and its password was "Gr4Tk7!" Pemi smiled and said, "Gr4',
                 'Pemi had a secret hideout, and its password was "Gr4Bk7!" Pemi smiled and said, "Gr4',
                 "T", "B"),
    # names are invented per story: only the first mention says how one goes on
    PatchingPair("name",
                 "Once upon a time, there was a girl named Tavina. She had a red ball. One day, Tav",
                 "Once upon a time, there was a girl named Tavora. She had a red ball. One day, Tav",
                 "i", "o"),
    # the same story with one letter of the first mention changed: after "Tavi" the copy needs a key that says
    # "my previous character was i", so what breaks is where the induction head looks, not what it copies
    PatchingPair("key",
                 "Once upon a time, there was a girl named Tavina. She had a red ball. One day, Tavi",
                 "Once upon a time, there was a girl named Tavuna. She had a red ball. One day, Tavi",
                 "n", " "),
]

# For a model that reads words: the password still works (its characters become short tokens), the names do not (a
# made-up name is cut into pieces that give nothing single to copy), so two word-level pairs take their place.
WORD_PATCHING_PAIRS = [
    # indirect object: who receives the drink is whoever of the two names is not said again
    PatchingPair("ioi",
                 "When Mary and John went to the store, John gave a drink to",
                 "When Mary and John went to the store, Mary gave a drink to",
                 " Mary", " John"),
    # a pair of words said once, to be said again: only the first saying tells which second word follows
    PatchingPair("word",
                 'The secret word is "blue fox". Later I said the secret word again: "blue',
                 'The secret word is "blue cat". Later I said the secret word again: "blue',
                 " fox", " cat"),
    PATCHING_PAIRS[0],
]


def patching_pairs(tokenizer: Tokenizer) -> list[PatchingPair]:
    """The pairs that fit the tokenizer: character pairs for a character model, word pairs for any other."""
    return PATCHING_PAIRS if tokenizer.kind == "char" else WORD_PATCHING_PAIRS


def logit_difference(logits: torch.Tensor, good: int, bad: int, position: int = -1) -> torch.Tensor:
    """logit(good) − logit(bad) at position, for logits (..., T, V)."""
    row = logits[..., position, :]
    return row[..., good] - row[..., bad]


# hook points laid out (B, T, H, …) and (B, T, …): the ones a patch may cut by head and by position
PER_HEAD = ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k", "hook_z", "hook_result")
PER_POSITION = PER_HEAD + ("hook_embed", "hook_pos_embed", "hook_ln_f_out", "hook_resid_pre", "hook_resid_mid",
                           "hook_resid_post", "hook_ln1_out", "hook_ln2_out", "hook_attn_out", "hook_mlp_out",
                           "hook_pre", "hook_act", "hook_pre_linear", "hook_post")


def _patch_edits(model: GPT, clean: Capture, rows: list[list[Patch]]) -> dict:
    """Hook edits that copy, in batch row b, each patch of rows[b] from the clean capture."""
    per_hook: dict[str, list[tuple[int, Patch]]] = {}
    for b, patches in enumerate(rows):
        for patch in patches:
            if patch.hook not in clean.acts:
                raise KeyError(f"no hook point named {patch.hook}")
            if (patch.head is not None or patch.position is not None) and not patch.hook.endswith(PER_POSITION):
                raise ValueError(f"{patch.hook} is not laid out (batch, position, …): patch it whole")
            if patch.head is not None and not patch.hook.endswith(PER_HEAD):
                raise ValueError(f"{patch.hook} has no head dimension")
            per_hook.setdefault(patch.hook, []).append((b, patch))

    def edit(name):
        source = clean[name]

        def apply(act):
            act = act.clone()
            for b, patch in per_hook[name]:
                where = (b, slice(None) if patch.position is None else patch.position)
                if patch.head is not None:
                    where += (patch.head,)
                act[where] = source[where[1:]]
            return act
        return apply
    return {name: edit(name) for name in per_hook}


def patched_logits(model: GPT, clean: Capture, corrupted_ids, rows: list[list[Patch]]) -> torch.Tensor:
    """(len(rows), T, V): the corrupted prompt's logits with each row's patches copied in from the clean run."""
    corrupted_ids = as_ids(corrupted_ids)
    if corrupted_ids.shape != clean.ids.shape:
        raise InputError("interp.lengths_differ", "the clean and corrupted prompts must have the same length in "
                         "tokens: {clean} and {corrupted}", clean=len(clean.ids), corrupted=len(corrupted_ids))
    return run_hooked(model, corrupted_ids.expand(len(rows), -1), _patch_edits(model, clean, rows))


@dataclass
class PatchingSetup:
    """A clean and a corrupted prompt, both captured, and the logit difference that tells them apart."""
    clean: Capture
    corrupted: Capture
    good: int  # the clean answer's id
    bad: int  # the corrupted answer's id

    @property
    def clean_difference(self) -> float:
        return float(logit_difference(self.clean.logits, self.good, self.bad))

    @property
    def corrupted_difference(self) -> float:
        return float(logit_difference(self.corrupted.logits, self.good, self.bad))

    @property
    def start(self) -> int:
        """The first position where the prompts differ (the last one when they never do)."""
        differ = (self.clean.ids != self.corrupted.ids).nonzero()
        return int(differ[0]) if len(differ) else len(self.clean.ids) - 1

    def restored(self, logits: torch.Tensor) -> torch.Tensor:
        """Share of the logit difference a patched run restores: 0 = as corrupted, 1 = as clean."""
        return self.share(logit_difference(logits, self.good, self.bad))

    def share(self, difference: torch.Tensor) -> torch.Tensor:
        """The share of a logit difference between the corrupted (0) and the clean one (1)."""
        corrupted = self.corrupted_difference
        return (difference - corrupted) / (self.clean_difference - corrupted)


def _single_token(tokenizer: Tokenizer, answer: str) -> int | None:
    """answer's id when it is exactly one token the model knows, else None."""
    encoded = tokenizer.encode(answer)
    return encoded[0] if len(encoded) == 1 and not tokenizer.unknown(answer) else None


def patching_setup(model: GPT, tokenizer: Tokenizer, clean: str, corrupted: str, clean_answer: str,
                   corrupted_answer: str, run: Callable[[torch.Tensor], Capture] | None = None) -> PatchingSetup:
    """Encode and check a patching pair, and run both prompts once (with `run`, a page's cached capture, if given)."""
    if unknown := tokenizer.unknown(clean):
        raise InputError("interp.clean_unknown", "the clean prompt has characters the model does not know: {chars}",
                         chars="".join(sorted(unknown)))
    if unknown := tokenizer.unknown(corrupted):
        raise InputError("interp.corrupted_unknown", "the corrupted prompt has characters the model does not know: "
                         "{chars}", chars="".join(sorted(unknown)))
    clean_ids, corrupted_ids = as_ids(tokenizer.encode(clean)), as_ids(tokenizer.encode(corrupted))
    if len(clean_ids) != len(corrupted_ids):
        raise InputError("interp.lengths_differ", "the clean and corrupted prompts must have the same length in "
                         "tokens: {clean} and {corrupted}", clean=len(clean_ids), corrupted=len(corrupted_ids))
    if (good := _single_token(tokenizer, clean_answer)) is None:
        raise InputError("interp.clean_answer", "the clean answer must be exactly one token the model knows, got "
                         "{answer!r}", answer=clean_answer)
    if (bad := _single_token(tokenizer, corrupted_answer)) is None:
        raise InputError("interp.corrupted_answer", "the corrupted answer must be exactly one token the model knows, "
                         "got {answer!r}", answer=corrupted_answer)
    if good == bad:
        raise InputError("interp.same_answers", "the two answers must differ: the measure is logit(clean answer) "
                         "− logit(corrupted answer)")
    run = run or partial(capture, model)
    setup = PatchingSetup(run(clean_ids), run(corrupted_ids), good, bad)
    if abs(setup.clean_difference - setup.corrupted_difference) < 1e-3:
        raise InputError("interp.nothing_to_restore", "the model gives both prompts the same logit difference, so "
                         "there is nothing to restore: change the prompts or the answers")
    return setup


def suffix_sweep(model: GPT, setup: PatchingSetup, runs: list[Run], batch: int | None = None,
                 progress: Progress | None = None) -> torch.Tensor:
    """(len(runs),): the share of the difference each run restores. The runs are patched versions of the corrupted
    prompt from its first differing position on (setup.start): their streams and edits cover those positions only,
    and only the two answers' logits at the last position are read."""
    start, n_layer = setup.start, model.cfg.n_layer

    def read(final: torch.Tensor) -> torch.Tensor:
        logits = read_logits(model, final[:, -1], [setup.good, setup.bad])
        return logits[:, 0] - logits[:, 1]

    differences = run_batched(model, lambda layer: stream_at(setup.corrupted, layer, n_layer)[start:], runs, read,
                              batch, start, setup.corrupted, progress)
    return setup.share(differences)


def _put_head(z: torch.Tensor, head: int, clean: torch.Tensor, at: int | None = None) -> torch.Tensor:
    """z (T', H, d_head) with `head`'s vectors taken from clean (T', H, d_head): at every position, or at `at`."""
    z = z.clone()
    where = slice(None) if at is None else at
    z[where, head] = clean[where, head].to(z.device)
    return z


def _head_run(setup: PatchingSetup, layer: int, head: int, position: int | None = None) -> Run:
    """The corrupted run with one head's output (its z) copied from the clean run, at one position or all."""
    hook, start = f"blocks.{layer}.attn.hook_z", setup.start
    at = None if position is None else position - start
    return Run(layer, {hook: partial(_put_head, head=head, clean=setup.clean[hook][start:], at=at)})


def patch_heads(model: GPT, setup: PatchingSetup, batch: int | None = None,
                progress: Progress | None = None) -> torch.Tensor:
    """(L, H): share restored by copying one head's output (its z, at every position) from clean to corrupted."""
    L, H = model.cfg.n_layer, model.cfg.n_head
    runs = [_head_run(setup, layer, head) for layer in range(L) for head in range(H)]
    return suffix_sweep(model, setup, runs, batch, progress).view(L, H)


def _cells(shape: tuple[int, int], runs: dict[tuple[int, int], Run], model: GPT, setup: PatchingSetup,
           batch: int | None, progress: Progress | None) -> torch.Tensor:
    """A (rows, T) table of shares: the cells with a run get its share, the others (positions before the prompts
    differ, where clean and corrupted are the same) 0."""
    shares = torch.zeros(shape)
    if runs:
        shares[tuple(torch.tensor(list(runs)).T)] = suffix_sweep(model, setup, list(runs.values()), batch, progress)
    return shares


def patch_residual(model: GPT, setup: PatchingSetup, batch: int | None = None,
                   progress: Progress | None = None) -> torch.Tensor:
    """(L + 1, T): share restored by copying the residual stream at one position, after the embedding (row 0) or
    after block i (row i + 1)."""
    T, start, n_layer = len(setup.clean.ids), setup.start, model.cfg.n_layer
    rows = len(residual_rows(model))
    runs = {}
    for row in range(rows):  # row r is the stream entering block r (after the last block for r = n_layer)
        corrupted, clean = stream_at(setup.corrupted, row, n_layer), stream_at(setup.clean, row, n_layer)
        for p in range(start, T):
            stream = corrupted[start:].clone()
            stream[p - start] = clean[p]
            runs[row, p] = Run(row, stream=stream)
    return _cells((rows, T), runs, model, setup, batch, progress)


def patch_heads_by_position(model: GPT, setup: PatchingSetup, batch: int | None = None,
                            progress: Progress | None = None,
                            heads: list[tuple[int, int]] | None = None) -> torch.Tensor:
    """(len(heads), T): share restored by copying one head's output at one position; heads are (layer, head)
    pairs, every head of every layer by default."""
    heads = [(layer, head) for layer in range(model.cfg.n_layer) for head in range(model.cfg.n_head)] \
        if heads is None else heads
    T, start = len(setup.clean.ids), setup.start
    runs = {(row, p): _head_run(setup, layer, head, p) for row, (layer, head) in enumerate(heads)
            for p in range(start, T)}
    return _cells((len(heads), T), runs, model, setup, batch, progress)
