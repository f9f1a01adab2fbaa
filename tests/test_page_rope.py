"""Page 'RoPE': the invariance table, score grids, the rotating pair, frequencies, the quiz."""
import pytest
from page_helpers import app_page, chart, frame, run_page


@pytest.fixture
def at():
    return run_page("rope.py")  # run_page checks that the page rendered without an exception


def test_page_reproduces_the_tutorials_scores():
    at = app_page("rope")
    lines = at.code[0].value.splitlines()
    assert lines[:3] == ["m=   3 n=   1 m-n=2  q.k=-10.1427", "m=  10 n=   8 m-n=2  q.k=-10.1427",
                         "m=1002 n=1000 m-n=2  q.k=-10.1427"]
    table = frame(at, "RoPE q·k")
    assert [f"{v:.4f}" for v in table["RoPE q·k"]] == ["-10.1427"] * 4  # the user's default pair is 2 apart too
    assert table["absolute q·k"].round(2).nunique() == 4


def test_own_pair_with_another_offset_gets_another_score(at):
    at.number_input(key="rope-n").set_value(490).run()
    row = frame(at, "RoPE q·k").iloc[3]
    assert row["m − n"] == 10 and f"{row['RoPE q·k']:.4f}" != "-10.1427"


def test_theta_changes_the_scores_but_not_the_invariance(at):
    before = chart(at, "rope-grid-RoPE")[0]["z"]
    at.select_slider(key="rope-theta").set_value(500).run()
    after = chart(at, "rope-grid-RoPE")[0]["z"]
    assert after != before
    scores = frame(at, "RoPE q·k")["RoPE q·k"].round(2)  # float32 angles at position 1000: ~1e-3 noise
    assert scores.nunique() == 1 and f"{scores[0]:.4f}" != "-10.1427"
    spreads = {m.label: float(m.value) for m in at.metric}
    assert spreads["Spread along a diagonal, RoPE"] < 1e-3 < 10 < spreads["Spread along a diagonal, absolute positions"]
    assert chart(at, "rope-freqs")[0]["y"][-1] == pytest.approx(500 ** (-62 / 64), rel=1e-4)


def test_pair_slider_changes_the_rotation(at):
    fast = chart(at, "rope-pair-plot")
    at.slider(key="rope-pair").set_value(20).run()
    slow = chart(at, "rope-pair-plot")
    assert slow[1]["x"] != fast[1]["x"]
    assert frame(at, "angle (rad)")["angle (rad)"].iloc[-1] < 1  # 12 tokens turn pair 20 less than a radian


@pytest.mark.parametrize("ticked, right", [({0, 1}, True), ({0}, False), ({0, 1, 3}, False), ({2, 3}, False)])
def test_quiz_accepts_exactly_the_two_true_statements(at, ticked, right):
    for i in ticked:
        at.checkbox(key=f"rope-opt{i}").check().run()
    at.button(key="rope-check").click().run()
    if right:
        assert at.success and at.success[0].value.startswith("Right.") and not at.error
    else:
        assert at.error and at.error[0].value.startswith("Not quite.") and not at.success
