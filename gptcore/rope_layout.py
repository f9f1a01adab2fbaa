"""RoPE's two layouts of a head's channels, and the re-ordering that turns one into the other.

Our model rotates adjacent channel pairs (x[2i], x[2i+1]), Meta's original layout and llama.cpp's for the llama
architecture. Hugging Face checkpoints (and llama.cpp's NEOX models, qwen2 and qwen3) rotate "half" pairs
(x[i], x[i + d_head/2]). Pair i turns at the same speed in both, and q·k is a sum over channels that does not see
their order, so re-ordering each head's rows of W_q and W_k (and their biases and QK-norm gains) converts a model
exactly. The importer calls to_adjacent_pairs, the export to_rotate_half; each undoes the other.

Both take rows of one or more heads of d_head channels (a weight, a bias, or one head's norm gains).
"""
from __future__ import annotations

import torch


def to_adjacent_pairs(w: torch.Tensor, d_head: int) -> torch.Tensor:
    """Rotate-half rows re-ordered for adjacent pairs: within each head, row 2j + h of the result is row
    h·d_head/2 + j of w (the two halves interleaved)."""
    return w.reshape(-1, 2, d_head // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def to_rotate_half(w: torch.Tensor, d_head: int) -> torch.Tensor:
    """Adjacent-pair rows re-ordered for rotate-half: within each head, rows 0, 2, 4, … first, then 1, 3, 5, …"""
    return w.reshape(-1, d_head // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)
