"""The logit lens: the residual stream after the embedding, after each attention sublayer and after each block,
read through the final norm and the head as if the model stopped there.

On a small vocabulary the whole lens (rows × positions × vocabulary) is cheap. With 49k tokens one row at one
position costs a 576 × 49,152 product, so a page asks for what it shows: every row's full distribution at the traced
position (lens_column), and, for a window of positions, only the probability of the true next token and the top
guess of each cell (lens_grid), computed a few hundred cells at a time.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model import GPT
from .capture import Capture, Progress, device_of, rows_at_once


def readable_row(column: torch.Tensor, token: int) -> int | None:
    """The first row of column (rows, V) from which `token` is the top guess in every later row, or None.

    That is where the answer becomes readable through the final norm and the head, which is not the same as where it
    was computed: a component can write it in a direction the readout only picks up later."""
    top = column.argmax(-1) == token
    if not top[-1]:
        return None
    wrong = (~top).nonzero()
    return 0 if len(wrong) == 0 else int(wrong[-1]) + 1


@dataclass
class LogitLens:
    rows: list[str]  # "embedding", "attention 0", "block 0", "attention 1", …
    probs: torch.Tensor  # (rows, T, V)
    ids: torch.Tensor  # (T,)

    def readable_from(self, position: int, token: int) -> int | None:
        """The first row from which `token` is the lens's top guess at position in every later row, or None."""
        return readable_row(self.probs[:, position], token)

    def true_next(self) -> torch.Tensor:
        """(rows, T-1): probability each row gives to the token that really comes next."""
        nxt = self.ids[1:]
        return self.probs[:, :-1].gather(-1, nxt.expand(len(self.rows), -1)[..., None])[..., 0]

    def top(self, k: int = 1) -> torch.return_types.topk:
        return self.probs.topk(k, dim=-1)


@dataclass
class LensColumn:
    """Every row's distribution over the vocabulary at one position."""
    rows: list[str]
    position: int
    probs: torch.Tensor  # (rows, V)

    def readable_from(self, token: int) -> int | None:
        return readable_row(self.probs, token)


@dataclass
class LensGrid:
    """For each row and each of a few positions: the probability of the token that really comes next (NaN at the
    text's last position, which has none) and the top guess."""
    rows: list[str]
    positions: list[int]
    true_next: torch.Tensor  # (rows, len(positions))
    top: torch.Tensor  # (rows, len(positions)) token ids


def residual_rows(model: GPT) -> list[tuple[str, str]]:
    """(label, hook name) of the residual stream after the embedding and after each block."""
    return [("embedding", "blocks.0.hook_resid_pre")] + [
        (f"block {i}", f"blocks.{i}.hook_resid_post") for i in range(model.cfg.n_layer)]


def lens_rows(model: GPT, attention: bool = True) -> list[tuple[str, str]]:
    """(label, hook name) of the residual stream after the embedding, then after each attention sublayer (unless
    attention is False) and each block in turn."""
    rows = [("embedding", "blocks.0.hook_resid_pre")]
    for i in range(model.cfg.n_layer):
        rows += [(f"attention {i}", f"blocks.{i}.hook_resid_mid")] if attention else []
        rows.append((f"block {i}", f"blocks.{i}.hook_resid_post"))
    return rows


@torch.no_grad()
def _probs(model: GPT, stream: torch.Tensor) -> torch.Tensor:
    return model.head(model.ln_f(stream.to(device_of(model)))).softmax(-1).cpu()


@torch.no_grad()
def logit_lens(model: GPT, cap: Capture) -> LogitLens:
    """Each residual row through the final norm and the head, at every position: what the model would predict if it
    stopped there. The last row is the model's real output."""
    rows = lens_rows(model)
    stream = torch.stack([cap[hook] for _, hook in rows])  # (rows, T, d_model)
    return LogitLens([label for label, _ in rows], _probs(model, stream), cap.ids)


def lens_column(model: GPT, cap: Capture, position: int, attention: bool = True) -> LensColumn:
    """Every row's distribution at one position: one product with the head per row."""
    rows = lens_rows(model, attention)
    stream = torch.stack([cap[hook][position] for _, hook in rows])  # (rows, d_model)
    return LensColumn([label for label, _ in rows], position, _probs(model, stream))


def lens_grid(model: GPT, cap: Capture, positions: list[int], attention: bool = True,
              progress: Progress | None = None) -> LensGrid:
    """The probability of the true next token and the top guess of every row at each of `positions`, the cells
    going through the head a few hundred at a time, of which only those two numbers are kept."""
    rows = lens_rows(model, attention)
    stream = torch.stack([cap[hook][positions] for _, hook in rows]).flatten(0, 1)  # (rows · P, d_model)
    following = torch.tensor([int(cap.ids[p + 1]) if p + 1 < len(cap.ids) else 0 for p in positions])
    following = following.repeat(len(rows))
    chance, top = [], []
    for start in range(0, len(stream), step := rows_at_once(model, 1)):
        probs = _probs(model, stream[start:start + step])
        chance.append(probs.gather(-1, following[start:start + step, None])[:, 0])
        top.append(probs.argmax(-1))
        if progress:
            progress(min(start + step, len(stream)), len(stream))
    shape = (len(rows), len(positions))
    true_next = torch.cat(chance).view(shape)
    true_next[:, [i for i, p in enumerate(positions) if p + 1 >= len(cap.ids)]] = float("nan")
    return LensGrid([label for label, _ in rows], list(positions), true_next, torch.cat(top).view(shape))
