"""The notebook lines a page shows run as they stand and give the numbers its figure plotted."""
import os
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from page_helpers import chart, run_page

from explorer import notebook
from gptcore import checkpoint as ckpt
from gptcore import folders
from gptcore import inspector as ins
from gptcore.chat import prompt_ids
from gptcore.config import GPTConfig
from gptcore.model import GPT
from gptcore.runs import SHIPPED as SHIPPED_NAME
from gptcore.tokenizer import CharTokenizer

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = folders.CHECKPOINT_ROOT / SHIPPED_NAME


def run_notebook(code: str):
    """What a notebook cell of `code` shows: its last line's value, the lines before it run first."""
    *lines, last = code.splitlines()
    scope: dict = {}
    exec("\n".join(lines), scope)
    return eval(last, scope)


@pytest.fixture(autouse=True)
def in_the_repository(monkeypatch):
    monkeypatch.chdir(ROOT)  # where the app is started, so where the shown folder is relative to


def test_the_attention_lines_give_the_enlarged_heads_pattern():
    shipped = ckpt.load_checkpoint(SHIPPED)
    run = ins.inspect_text(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT)
    code = notebook.attention_code(SHIPPED, shipped.tokenizer, ins.DEFAULT_TEXT, run.limit, 2, 1)
    assert "load_checkpoint('checkpoints/starter')" in code
    assert 'cache["blocks.2.attn.hook_pattern"][0, 1]' in code
    np.testing.assert_allclose(run_notebook(code).numpy(), run.patterns[2, 1].numpy(), atol=1e-5)


def test_the_page_shows_the_lines_of_the_head_on_screen_and_they_give_its_figure():
    at = run_page("inspector.py")
    at.segmented_control(key="inspect-layer").set_value(3)
    at.segmented_control(key="inspect-head").set_value(2).run()
    assert not at.exception, at.exception
    [code] = [c.value for c in at.code if "load_checkpoint(" in c.value]
    assert 'cache["blocks.3.attn.hook_pattern"][0, 2]' in code and "checkpoints/starter" in code
    plotted = np.array(chart(at, "inspect-head-figure")[0]["z"])
    # (the notebook caches every hook point, so each head's output is summed on its own: float32 rounding)
    np.testing.assert_allclose(run_notebook(code).numpy(), plotted, atol=1e-5)
    assert "In a notebook" in [e.label for e in at.expander]


def test_a_text_longer_than_the_page_reads_is_cut_as_the_page_cuts_it(tmp_path):
    tokenizer = CharTokenizer.from_text("abcdefgh ")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, d_model=16, n_layer=2, n_head=2, d_ff=32, context=16))
    ckpt.save_checkpoint(tmp_path / "tiny", model, tokenizer, {"step": 0})
    text = "abc defgh, " * 3  # 33 characters, the comma unknown: 30 tokens for a context of 16
    run = ins.inspect_text(model, tokenizer, text)
    assert run.truncated == 14
    code = notebook.attention_code(tmp_path / "tiny", tokenizer, text, run.limit, 1, 0)
    assert "[:, :16]" in code and str(tmp_path) in code  # a folder outside the current one is named in full
    np.testing.assert_allclose(run_notebook(code).numpy(), run.patterns[1, 0].numpy(), atol=1e-5)


def test_a_model_that_starts_with_bos_gets_it_in_the_lines_too():
    tokenizer = CharTokenizer.from_text("abc")
    tokenizer.bos_id, tokenizer.add_bos = 2, True
    line = notebook.ids_line(tokenizer, "abcab", 4)
    ids = eval(line.removeprefix("ids = "), {"torch": torch, "text": "abcab",
                                                   "ckpt": types.SimpleNamespace(tokenizer=tokenizer)})
    assert ids.tolist() == [prompt_ids(tokenizer, "abcab")[:4]] == [[2, 0, 1, 2]]
    assert notebook.ids_line(tokenizer, "cab", 4) == "ids = torch.tensor([ckpt.tokenizer.encode(text)])"  # has it


def test_the_folder_is_named_relative_to_where_the_app_runs(tmp_path):
    assert notebook.folder_literal(SHIPPED) == repr("checkpoints/starter")
    os.chdir(tmp_path)
    assert notebook.folder_literal(tmp_path / "run") == repr("run")
