"""Page 'Why divide by √d_k': the tutorial's variances and softmax values, the d slider, the gradient plot."""
import pytest
from page_helpers import app_page, chart, frame, run_page

TUTORIAL_PRINTOUT = """d= 16  var(q.k)=   15.8  var(q.k/sqrt(d))=0.99
d= 64  var(q.k)=   63.5  var(q.k/sqrt(d))=0.99
d=256  var(q.k)=  261.3  var(q.k/sqrt(d))=1.02
tensor([0.0900, 0.2447, 0.6652])
tensor([1.2664e-14, 1.1254e-07, 1.0000e+00])"""


@pytest.fixture
def at():
    return run_page("sqrt_d_scaling.py")  # run_page checks that the page rendered without an exception


def test_page_prints_the_tutorials_numbers():
    at = app_page("sqrt_d_scaling")
    assert at.code[0].value == TUTORIAL_PRINTOUT


def test_head_size_slider_changes_the_histogram_and_the_stats(at):
    before = chart(at, "scaling-hist")
    std_before = frame(at, "score std").set_index("scores").loc["q·k", "score std"]
    assert std_before == pytest.approx(8, rel=0.05)
    at.select_slider(key="scaling-d").set_value(256).run()
    after = chart(at, "scaling-hist")
    assert after[0]["x"] != before[0]["x"]
    stats = frame(at, "score std").set_index("scores")
    assert stats.loc["q·k", "score std"] == pytest.approx(16, rel=0.05)
    assert stats.loc["q·k/√d", "score std"] == pytest.approx(1, rel=0.05)
    assert after[1]["x"] != before[1]["x"]


def test_entropy_curve_and_table_agree_at_the_chosen_head_size(at):
    for d in (64, 1024):
        at.select_slider(key="scaling-d").set_value(d).run()
        table = frame(at, "mean entropy (nats)").set_index("scores")["mean entropy (nats)"]
        for trace in chart(at, "scaling-entropy"):
            assert trace["y"][trace["x"].index(d)] == pytest.approx(table[trace["name"]], rel=1e-9), (d, trace["name"])


def test_factor_slider_moves_the_jacobian_towards_zero(at):
    at.select_slider(key="scaling-factor").set_value(1).run()
    at_one = chart(at, "scaling-jacobian")[0]["z"]
    at.select_slider(key="scaling-factor").set_value(64).run()
    at_64 = chart(at, "scaling-jacobian")[0]["z"]
    assert max(abs(v) for row in at_one for v in row) > 0.2
    assert max(abs(v) for row in at_64 for v in row) < 1e-10
