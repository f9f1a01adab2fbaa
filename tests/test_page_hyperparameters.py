"""Page 'Hyperparameters': consensus table, published configs, the cost calculator, stability patches, quiz."""
from page_helpers import chart, frame, metrics, run_page


def test_published_configs_and_their_ratios():
    at = run_page("hyperparameters.py")
    published = frame(at, "d_model / n_layer").set_index("model")
    assert published.loc["GPT-3 175B", ["d_model", "n_layer", "n_head", "d_head", "d_model / n_layer"]].tolist() == [
        12288, 96, 96, 128, 128]
    assert published.loc["LLaMA-2-7B", ["d_model", "n_layer", "n_head", "d_ff", "d_model / n_layer"]].tolist() == [
        4096, 32, 32, 11008, 128]
    assert round(published.loc["LLaMA-2-7B", "d_ff / d_model"], 2) == 2.69
    text = " ".join(m.value for m in at.markdown)
    assert "**2.69**" in text and "11008" in text and "**128**" in text
    consensus = at.table[0].value
    assert len(consensus) == 5 and "= d_model, with d_head mostly 64 or 128" in consensus["usual choice"].tolist()


def test_calculator_presets_and_costs():
    at = run_page("hyperparameters.py")
    assert metrics(at)["parameters"] == "6.74 B"  # LLaMA-2-7B by default
    assert frame(at, "usual?")["usual?"].all()
    before = chart(at, "hp-costs")
    at.selectbox(key="hp-preset").set_value("this app's GPT").run()
    assert metrics(at)["parameters"] == "810.62 k"
    assert metrics(at)["training FLOPs / token"] == "5.20 M"  # 6 · 801,152 + 6 · 4 · 128 · 128
    assert not frame(at, "usual?")["usual?"].all()
    assert chart(at, "hp-costs") != before
    at.number_input(key="hp-n_head").set_value(7).run()
    assert any("must be divisible by n_head" in e.value for e in at.error)


def test_drift_slider_moves_the_softmax():
    at = run_page("hyperparameters.py")
    before = chart(at, "hp-drift-fig")
    table = frame(at, "max prob").set_index("patch")
    at.select_slider(key="hp-drift").set_value(64.0).run()
    after = frame(at, "max prob").set_index("patch")
    assert chart(at, "hp-drift-fig") != before
    assert after.loc["no patch", "max prob"] > table.loc["no patch", "max prob"]
    assert abs(after.loc["QK-norm", "max prob"] - table.loc["QK-norm", "max prob"]) < 1e-4


def test_quiz_multi_select():
    at = run_page("hyperparameters.py")
    at.checkbox(key="hp-4096-opt0").check()
    at.checkbox(key="hp-4096-opt1").check()
    at.button(key="hp-4096-check").click().run()
    assert at.success and at.success[0].value.startswith("Right.")
    at.checkbox(key="hp-4096-opt1").uncheck()
    at.checkbox(key="hp-4096-opt2").check()
    at.button(key="hp-4096-check").click().run()
    assert not at.success and any(e.value.startswith("Not quite.") for e in at.error)
