"""Page 'Residual stream & norms': the live pre/post-norm race as a job, and RMSNorm against LayerNorm."""
import threading

import pytest
from page_helpers import PAGES, app_page, chart, frame, metrics, panel, panel_text, run_page
from streamlit.testing.v1 import AppTest

from explorer.ui import job_registry

KIND = "norm race"


def tiny(at: AppTest) -> AppTest:
    at.slider(key="norm-layers").set_value(2)
    at.selectbox(key="norm-width").set_value(16)
    at.slider(key="norm-steps").set_value(10)
    return at


def test_rmsnorm_against_layernorm():
    at = run_page("residual_norm.py")
    assert frame(at, "parameters").set_index("norm")["parameters"].to_dict() == {"RMSNorm": 128, "LayerNorm": 256}
    assert set(frame(at, "µs per call")["norm"]) == {"RMSNorm", "LayerNorm"}
    summary = frame(at, "RMS").set_index("vector")
    assert abs(summary.loc["LayerNorm(x)", "mean"]) < 1e-6 and summary.loc["RMSNorm(x)", "mean"] > 0.3
    before = chart(at, "norm-vec")
    at.slider(key="norm-vec-shift").set_value(-2.0).run()
    assert chart(at, "norm-vec") != before
    assert frame(at, "RMS").set_index("vector").loc["RMSNorm(x)", "mean"] < -0.3


def test_train_button_runs_the_race_and_the_page_draws_it():
    at = tiny(run_page("residual_norm.py"))
    at.button(key="norm-start").click().run()
    assert not at.exception and not at.error
    job = job_registry().latest(KIND)
    job.join(120)
    assert job.snapshot().status == "finished", job.snapshot().message
    at.run()
    assert not at.exception
    assert metrics(at)["Steps"] == "44 / 44"  # 4 variants × steps 0..10
    assert {t["name"] for t in chart(at, "norm-loss") if t.get("showlegend") is not False} == {
        "pre-norm", "pre-norm + warmup", "post-norm", "post-norm + warmup"}  # (short: a multiselect chip clips)
    grads = chart(at, "norm-grads")
    resid = chart(at, "norm-resid")
    assert len(grads) == len(resid) == 4
    assert resid[0]["x"] == [0, 1, 2] and grads[0]["x"] == [1, 2]  # embedding + 2 blocks; 2 blocks
    at.radio(key="norm-when").set_value("first").run()
    assert chart(at, "norm-resid") != resid


def test_step_zero_view_shows_the_initialisation_where_warmup_makes_no_difference():
    at = tiny(run_page("residual_norm.py"))
    at.button(key="norm-start").click().run()
    job = job_registry().latest(KIND)
    job.join(120)
    assert job.snapshot().status == "finished", job.snapshot().message
    at.run()
    note = "each with/without-warmup pair of lines coincides"
    assert not any(note in c.value for c in at.caption)
    at.radio(key="norm-when").set_value("first").run()
    assert any(note in c.value for c in at.caption)
    for key in ("norm-resid", "norm-grads"):
        lines = {t["name"]: t["y"] for t in chart(at, key)}
        for placement in ("pre", "post"):  # the same weights and batch before the first update
            assert lines[f"{placement}-norm"] == pytest.approx(lines[f"{placement}-norm + warmup"])
        assert lines["pre-norm"] != pytest.approx(lines["post-norm"])


def test_stop_button_stops_the_race():
    at = run_page("residual_norm.py")
    at.slider(key="norm-steps").set_value(400)
    at.button(key="norm-start").click().run()
    job = job_registry().latest(KIND)
    assert job.snapshot().active
    at.button(key="norm-stop").click().run()
    job.join(60)
    assert job.snapshot().status == "stopped"
    assert job.snapshot().data["steps_done"] < job.snapshot().data["steps_total"]


def test_a_stopped_race_has_no_eta_and_says_stopped():
    at = run_page("residual_norm.py")
    at.slider(key="norm-steps").set_value(400)
    at.button(key="norm-start").click().run()
    job = job_registry().latest(KIND)
    job.stop()
    job.join(60)
    at.run()
    assert metrics(at)["ETA"] == "—" and metrics(at)["Status"] == "stopped"


def test_a_new_race_keeps_the_last_result_on_screen_until_it_has_a_step():
    at = tiny(run_page("residual_norm.py"))
    at.button(key="norm-start").click().run()
    finished = job_registry().latest(KIND)
    finished.join(120)
    at.run()
    drawn = chart(at, "norm-loss")
    release = threading.Event()
    waiting = job_registry().start("norm race waiting", KIND, lambda job: release.wait(60) and None)
    try:
        at.run()
        assert any("Showing the previous race" in c.value for c in at.caption)
        assert chart(at, "norm-loss") == drawn
        assert metrics(at)["Steps"] == "0 / 0"  # the numbers above the chart are the new race's
    finally:
        release.set()
        waiting.join(10)


def test_the_race_reads_in_chinese_from_the_same_job():
    at = tiny(run_page("residual_norm.py"))
    at.button(key="norm-start").click().run()
    job_registry().latest(KIND).join(120)
    zh = AppTest.from_file(str(PAGES / "residual_norm.py"), default_timeout=60)
    zh.query_params["lang"] = "zh"
    zh.run()
    assert not zh.exception
    assert metrics(zh)["状态"] == "已完成" and metrics(zh)["预计剩余"] == "完成"
    assert "**前置归一化，无预热**：已完成" in " ".join(c.value for c in zh.caption)
    assert {t["name"] for t in chart(zh, "norm-loss") if t.get("showlegend") is not False} == {
        "前置归一化，无预热", "前置归一化，有预热", "后置归一化，无预热", "后置归一化，有预热"}
    assert frame(zh, "变体")["变体"].tolist() == ["前置归一化，无预热", "前置归一化，有预热", "后置归一化，无预热",
                                                "后置归一化，有预热"]


def test_the_real_model_panel_counts_smollm2s_norms():
    box = panel(app_page("residual_norm"), "norm-real")
    text = panel_text(box)
    assert "ε = 1e-5" in text and "61 RMSNorms" in text and "**35,136** gains, 0.026%" in text
    assert "Qwen3-0.6B takes ε = 1e-6" in text
    norms = box.table[0].value
    assert norms.loc["SmolLM2-135M", ["norms", "gains"]].tolist() == [61, 35_136]
    assert norms.loc["this app's GPT", "norms"] == 9  # 2 × 4 blocks + the final norm
    zh = panel(app_page("residual_norm", "zh"), "norm-real")
    assert "共 61 个 RMSNorm" in panel_text(zh)
