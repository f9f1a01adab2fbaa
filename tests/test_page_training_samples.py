"""Samples as the Train page shows them: the story marker written whole is a divider line, and a piece of it written
alone (cut off where a sample ends, or misspelt by a model still learning it) is set apart, as the note under the
samples says, in both languages."""
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.i18n import catalog
from explorer.ui import job_registry, with_story_breaks
from gptcore.train import Trainer

PAGE = str(Path(__file__).resolve().parent.parent / "app_pages" / "training.py")
TINY = dict(tr_builtin_chars=20_000, tr_m_d_model=16, tr_m_n_layer=1, tr_m_n_head=2, tr_m_d_ff=48, tr_m_context=16,
            tr_t_steps=2, tr_t_batch_size=4, tr_t_eval_every=2, tr_t_sample_every=0, tr_t_checkpoint_every=0,
            tr_t_threads=1)


@pytest.mark.parametrize("written, shown", [
    # the samples of the walk-through (browser-walk.md, item 6), and their kin
    ("Lily smiled and went home.\n<|endo", "Lily smiled and went home.\n⟦<|endo⟧"),  # cut off at the sample's end
    ("\n<|ejyj Tom had a ball.", "\n⟦<|ejyj⟧ Tom had a ball."),  # misspelt, at the start
    ("\n<hame was Brisen. She", "\n⟦<hame⟧ was Brisen. She"),  # a "<" opening a line, its "|" missed
    ("The end.<|endoftext| Once", "The end.⟦<|endoftext|⟧ Once"),  # all but its last character
    ("It was fun <", "It was fun ⟦<⟧"),
    ("The end.\n<|endoftext|>\nOnce upon a time", "The end.\n— new story —\nOnce upon a time"),  # whole: a divider
    ("cat.<|endoftext|>Lily\n<|end", "cat.\n— new story —\nLily\n⟦<|end⟧"),
    ("Tom said 3 < 5 and x<y.", "Tom said 3 < 5 and x<y."),  # a "<" inside a line that is not the marker's
])
def test_whole_and_partial_story_markers(written, shown):
    assert with_story_breaks(written) == shown


@pytest.fixture
def root(training_root):
    return training_root


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_train_pages_samples_set_a_cut_off_marker_apart_and_say_so(root, monkeypatch, lang):
    monkeypatch.setattr(Trainer, "sample", lambda self, *args, **kwargs: "\n<|ejyj Lily ran.\n<|endo")
    at = AppTest.from_file(PAGE, default_timeout=60)
    for key, value in {**TINY, "lang": lang}.items():
        at.query_params[key] = value
    at.run()
    at.text_input(key="tr_name").set_value("marked").run()
    at.button(key="tr_start").click().run()
    job_registry().get("marked").join(60)
    at.run()
    samples = [c.value for c in at.code if c.key is None and "def " not in c.value]  # (not the page's source)
    assert samples == ["⟦<|ejyj⟧ Lily ran.\n⟦<|endo⟧"]  # the last step's sample (st.code drops its first newline)
    note = catalog(lang)["ui.story_break_note"].format(marker="<|endoftext|>")
    assert note in [c.value for c in at.caption] and "`⟦<|endo⟧`" in note
