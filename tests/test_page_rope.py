"""Page 'RoPE': the invariance table, score grids, the rotating pair, frequencies, the quiz."""
import pytest
from page_helpers import app_page, chart, frame, panel, panel_text, run_page


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


@pytest.mark.parametrize("lang, said", [("en", "sets the base to θ = **100,000**, 10 times the tutorial's 10,000"),
                                        ("zh", "把底数设为 θ = **100,000**，是教程 10,000 的 10 倍")])
def test_the_real_model_panel_gives_smollm2s_base_and_its_slowest_pair(lang, said):
    box = panel(app_page("rope", lang), "rope-real")
    text = panel_text(box)
    assert said in text
    if lang == "en":
        assert "its slowest pair turns once every **438,460** tokens, where at θ = 10,000 it would turn every " \
               "47,117: 9.3× slower" in text
        assert "12 of its 32 pairs never complete a turn (7 at θ = 10,000)" in text and "32-fold" in text
    else:
        assert "每 **438,460** 个词元才转一圈" in text and "32 个通道对中有 12 个一圈也转不满" in text
    reach = box.table[0].value  # θ, d_head, context, slowest wavelength, pairs slower than the context
    smol = reach.loc["SmolLM2-135M"].tolist()
    assert smol[:3] == [100_000, 64, 8192] and round(smol[3]) == 438_460 and smol[4] == 12
    assert reach.loc["Llama-3.2-1B"].iloc[3] > 32 * 2_000_000  # Llama 3's scaling: its slow pairs 32× slower
