"""Page 'Residual stream & norms': the live pre/post-norm race as a job, and RMSNorm against LayerNorm."""
import base64
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from gptcore.ui import job_registry

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "residual_norm.py")
KIND = "norm race"


def run_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    return at


def decode(value):
    """Plotly ships numpy arrays as base64 {'bdata', 'dtype'}: turn them back into lists."""
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def chart_data(at: AppTest, key: str) -> list:
    chart = next(c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}"))
    return decode(json.loads(chart.proto.spec)["data"])


def frame(at: AppTest, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def tiny(at: AppTest) -> AppTest:
    at.slider(key="norm-layers").set_value(2)
    at.selectbox(key="norm-width").set_value(16)
    at.slider(key="norm-steps").set_value(10)
    return at


def test_rmsnorm_against_layernorm():
    at = run_page()
    assert frame(at, "parameters").set_index("norm")["parameters"].to_dict() == {"RMSNorm": 128, "LayerNorm": 256}
    assert set(frame(at, "µs per call")["norm"]) == {"RMSNorm", "LayerNorm"}
    summary = frame(at, "RMS").set_index("vector")
    assert abs(summary.loc["LayerNorm(x)", "mean"]) < 1e-6 and summary.loc["RMSNorm(x)", "mean"] > 0.3
    before = chart_data(at, "norm-vec")
    at.slider(key="norm-vec-shift").set_value(-2.0).run()
    assert chart_data(at, "norm-vec") != before
    assert frame(at, "RMS").set_index("vector").loc["RMSNorm(x)", "mean"] < -0.3


def test_train_button_runs_the_race_and_the_page_draws_it():
    at = tiny(run_page())
    at.button(key="norm-start").click().run()
    assert not at.exception and not at.error
    job = job_registry().latest(KIND)
    job.join(120)
    assert job.snapshot().status == "finished", job.snapshot().message
    at.run()
    assert not at.exception
    steps = next(m.value for m in at.metric if m.label == "Steps")
    assert steps == "44 / 44"  # 4 variants × steps 0..10
    assert {t["name"] for t in chart_data(at, "norm-loss") if t.get("showlegend") is not False} == {
        "pre-norm, no warmup", "pre-norm, with warmup", "post-norm, no warmup", "post-norm, with warmup"}
    grads = chart_data(at, "norm-grads")
    resid = chart_data(at, "norm-resid")
    assert len(grads) == len(resid) == 4
    assert resid[0]["x"] == [0, 1, 2] and grads[0]["x"] == [1, 2]  # embedding + 2 blocks; 2 blocks
    at.radio(key="norm-when").set_value("first").run()
    assert chart_data(at, "norm-resid") != resid


def test_stop_button_stops_the_race():
    at = run_page()
    at.slider(key="norm-steps").set_value(400)
    at.button(key="norm-start").click().run()
    job = job_registry().latest(KIND)
    assert job.snapshot().active
    at.button(key="norm-stop").click().run()
    job.join(60)
    assert job.snapshot().status == "stopped"
    assert job.snapshot().data["steps_done"] < job.snapshot().data["steps_total"]
