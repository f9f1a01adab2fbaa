"""The Train page's live panel after a run's last step: it says the run is scoring the whole validation split
(its process reports nothing between its last step and its final_eval event), not "running, ETA 0 s"."""
import threading
from pathlib import Path

import pytest
from run_helpers import wait_until
from streamlit.testing.v1 import AppTest

from explorer.ui import job_registry
from gptcore import train as train_module

PAGE = str(Path(__file__).resolve().parent.parent / "app_pages" / "training.py")
TINY = dict(tr_builtin_chars=20_000, tr_m_d_model=16, tr_m_n_layer=1, tr_m_n_head=2, tr_m_d_ff=48, tr_m_context=16,
            tr_t_steps=5, tr_t_batch_size=4, tr_t_eval_every=5, tr_t_sample_every=0, tr_t_checkpoint_every=0,
            tr_t_threads=1)


@pytest.fixture(autouse=True)
def root(training_root):
    return training_root


@pytest.fixture
def held_final_eval(monkeypatch):
    """The whole-split evaluation at a run's end waits until the test sets the event it yields."""
    go_on, evaluate = threading.Event(), train_module.evaluate

    def held(*args, **kwargs):
        go_on.wait(60)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(train_module, "evaluate", held)
    yield go_on
    go_on.set()


def page(lang: str | None = None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    for key, value in {**TINY, **({"lang": lang} if lang else {})}.items():
        at.query_params[key] = value
    return at.run()


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


@pytest.mark.parametrize("lang, heading, eta, said", [
    ("en", "#### ending · evaluating…", "ETA", "All 5 steps are done: now the loss over the whole validation split"),
    ("zh", "#### ending · 评估中…", "预计剩余", "全部 5 步已经训练完：正在计算整个验证集上的损失")])
def test_after_the_last_step_the_run_reads_evaluating_not_eta_zero(held_final_eval, lang, heading, eta, said):
    at = page(lang)
    at.text_input(key="tr_name").set_value("ending").run()
    at.button(key="tr_start").click().run()
    job = job_registry().get("ending")
    wait_until(lambda: job.snapshot().data.get("step") == 5)  # its last step done, its final evaluation held
    at.run()
    assert heading in [m.value for m in at.markdown]
    assert metric(at, eta) == heading.split(" · ")[1]
    assert any(i.value.startswith(said) for i in at.info)
    if lang == "en":  # the sidebar's line, on every page, says it too
        app = AppTest.from_file(str(Path(PAGE).parent.parent / "app.py"), default_timeout=60).run()
        assert [c.value for c in app.sidebar.caption if "train **ending**" in c.value][0].endswith(
            " · step 5 of 5 · evaluating…")
    held_final_eval.set()
    job.join(60)
    at.run()
    assert heading not in [m.value for m in at.markdown]
    assert metric(at, eta) == "–" and not any(i.value.startswith(said) for i in at.info)
