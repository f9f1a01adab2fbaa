"""Page 'Residual stream & norms': the live pre/post-norm race as a job, and RMSNorm against LayerNorm."""
import pytest
from page_helpers import chart, frame, metrics, run_page
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
        "pre-norm, no warmup", "pre-norm, with warmup", "post-norm, no warmup", "post-norm, with warmup"}
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
            assert lines[f"{placement}-norm, no warmup"] == pytest.approx(lines[f"{placement}-norm, with warmup"])
        assert lines["pre-norm, no warmup"] != pytest.approx(lines["post-norm, no warmup"])


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
