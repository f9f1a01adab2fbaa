"""What a figure shows, as the lines a learner would write in a notebook to get it from the same checkpoint.

The code is gptcore with hooks named and called as in TransformerLens, filled in with what the page has on screen
(the checkpoint's folder, the text, the layer and the head). It runs as it stands from the folder the app was
started in; tests/test_notebook.py executes it and compares the result with the figure.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from gptcore.chat import bos_prefix, prompt_ids
from gptcore.tokenizer import Tokenizer

from .i18n import t


def folder_literal(folder: Path) -> str:
    """The checkpoint's folder as a string literal: relative to the current folder when inside it, else absolute."""
    folder = Path(folder).resolve()
    here = Path.cwd().resolve()
    return repr((folder.relative_to(here) if folder.is_relative_to(here) else folder).as_posix())


def ids_line(tokenizer: Tokenizer, text: str, limit: int) -> str:
    """ids = … as the page makes them: the beginning-of-sequence token first where the model was trained with one,
    and no more than the `limit` tokens the page reads."""
    bos = bos_prefix(tokenizer)
    bos = "[ckpt.tokenizer.bos_id] + " if bos and tokenizer.encode(text)[:1] != bos else ""
    cut = f"[:, :{limit}]" if len(prompt_ids(tokenizer, text)) > limit else ""
    return f"ids = torch.tensor([{bos}ckpt.tokenizer.encode(text)]){cut}"


def attention_code(folder: Path, tokenizer: Tokenizer, text: str, limit: int, layer: int, head: int) -> str:
    """The lines that give the enlarged head's pattern: (queries, keys), the figure's rows and columns."""
    return "\n".join([
        "import torch",
        "from gptcore.checkpoint import load_checkpoint",
        "",
        f"ckpt = load_checkpoint({folder_literal(folder)})",
        f"text = {text!r}",
        ids_line(tokenizer, text, limit),
        "logits, cache = ckpt.model.run_with_cache(ids)",
        f'cache["blocks.{layer}.attn.hook_pattern"][0, {head}]  # (queries, keys)',
    ])


def show(code: str) -> None:
    """The code in a closed expander, under the figure it reproduces."""
    with st.expander(t("notebook.label"), icon=":material/terminal:"):
        st.caption(t("notebook.caption"))
        st.code(code, language="python", wrap_lines=True)
