"""Renaming a run on the Train page says the name it will be saved under, as starting a new run does."""
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.ui import job_registry
from gptcore import checkpoint as ckpt
from gptcore import folders
from gptcore.config import GPTConfig
from gptcore.model import GPT
from gptcore.tokenizer import CharTokenizer

PAGE = str(Path(__file__).resolve().parent.parent / "app_pages" / "training.py")


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A private checkpoints folder holding one finished run, "old"."""
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    job_registry.clear()
    model = GPT(GPTConfig(vocab_size=8, d_model=16, n_layer=1, n_head=2, d_ff=48, context=16))
    ckpt.save_checkpoint(tmp_path / "old", model, CharTokenizer.from_text("abcdefgh"),
                         {"step": 3, "status": "finished", "train_config": {"steps": 3}, "history": {}})
    yield tmp_path
    job_registry.clear()


@pytest.mark.parametrize("typed, saved_as", [("../../../x2", "x2"), (".hidden", "hidden"), ("my run", "my-run")])
def test_a_rename_says_the_name_it_is_saved_as_before_it_is_done(root, typed, saved_as):
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert at.selectbox(key="tr_manage").value == "old"
    assert not [c for c in at.caption if c.value.startswith("Saved as")]
    at.text_input(key="tr_new_name_old").set_value(typed).run()
    said = f"Saved as **{saved_as}** (letters, digits, '.', '_' and '-' only)."
    assert said in [c.value for c in at.caption]
    at.button(key="tr_rename").click().run()
    assert not at.error and (root / saved_as).is_dir() and not (root / "old").exists()
    assert at.selectbox(key="tr_manage").value == saved_as
