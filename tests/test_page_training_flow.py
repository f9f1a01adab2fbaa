"""The Train page's flow: a started run's live panel is brought into view, and the runs table's corpus column is
wide enough to read."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.ui import job_registry

PAGE = str(Path(__file__).resolve().parent.parent / "app_pages" / "training.py")
TINY = dict(tr_m_d_model=16, tr_m_n_layer=1, tr_m_n_head=2, tr_m_d_ff=48, tr_m_context=16, tr_t_steps=5,
            tr_t_batch_size=4, tr_t_eval_every=5, tr_t_threads=1)


@pytest.fixture(autouse=True)
def root(training_root):
    return training_root


def scripts(at: AppTest) -> list[str]:
    """The page's scripts but the one that keeps this browser's learner cookie (explorer.classroom)."""
    return [e.proto.body for e in at.get("html")
            if "<script>" in e.proto.body and "document.cookie" not in e.proto.body]


def test_start_brings_the_live_panel_into_view_once_and_the_corpus_column_is_wide():
    at = AppTest.from_file(PAGE, default_timeout=60)
    for key, value in {"tr_builtin_chars": 20_000, **TINY}.items():  # (the form's numbers are bound to the URL)
        at.query_params[key] = value
    at.run()
    assert at.number_input(key="tr_m_d_model").value == 16 and not scripts(at)
    at.text_input(key="tr_name").set_value("shown").run()
    at.button(key="tr_start").click().run()
    [script] = scripts(at)
    assert 'document.querySelector(".st-key-tr_live")' in script and "scrollIntoView" in script
    job_registry().get("shown").join(60)
    at.run()
    assert not scripts(at)  # only right after Start: a later rerun leaves the reader where they are
    table = next(d for d in at.dataframe if "corpus" in d.value.columns)
    columns = json.loads(table.proto.columns)
    assert columns["corpus"]["width"] == "large"  # and the losses headed short beside it, their full names as help
    assert [columns[c].get("label") for c in ("best val (estimate)", "final val (whole split)")] == \
        ["best val", "final val"]
    assert list(table.proto.column_order)[-1] == "corpus"
