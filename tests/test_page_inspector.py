"""The Inspect page on the shipped checkpoint: what it draws is exactly what gptcore computes."""
import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from gptcore import checkpoint as ckpt
from gptcore import inspector as ins

SHIPPED = ckpt.CHECKPOINT_ROOT / "shipped-tiny"
PAGE = Path(__file__).resolve().parent.parent / "pages" / "inspector.py"


@pytest.fixture(scope="module")
def shipped():
    return ckpt.load_checkpoint(SHIPPED)


def run_page() -> AppTest:
    """A fresh session. Each costs seconds of AppTest set-up, so tests that only read share one."""
    at = AppTest.from_file(str(PAGE), default_timeout=90).run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def default_view():
    return run_page()


def open_tab(at: AppTest, label: str) -> AppTest:
    """Click a tab: the tabs are lazy, so only the open one runs."""
    at.session_state["inspect-tab"] = label
    at.run()
    assert not at.exception, at.exception
    return at


def chart(at: AppTest, key: str) -> dict:
    """The Plotly spec of the chart with this widget key, as sent to the browser."""
    matches = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    assert len(matches) == 1, f"no single chart with key {key}"
    return json.loads(matches[0].proto.spec)


def array(value) -> np.ndarray:
    """Decode a Plotly array: a plain list, or the typed {dtype, bdata, shape} form of plotly >= 6."""
    if not isinstance(value, dict):
        return np.asarray(value)
    flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    shape = value.get("shape")
    return flat.reshape([int(s) for s in str(shape).split(",")]) if shape else flat


def grid_patterns(spec: dict, n_layer: int, n_head: int) -> np.ndarray:
    traces = [array(t["z"]) for t in spec["data"]]
    assert len(traces) == n_layer * n_head
    return np.stack(traces).reshape(n_layer, n_head, *traces[0].shape)


def test_default_view_draws_the_patterns_gptcore_computes(shipped, default_view):
    at = default_view
    assert at.selectbox(key="inspect-checkpoint").value == "shipped-tiny"
    assert not at.warning and not at.error
    cfg = shipped.model.cfg
    direct = ins.attention_patterns(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT).numpy()

    shown = grid_patterns(chart(at, "inspect-grid"), cfg.n_layer, cfg.n_head)
    T = len(ins.DEFAULT_TEXT)
    assert shown.shape == (cfg.n_layer, cfg.n_head, T, T)
    np.testing.assert_allclose(shown, direct, rtol=0, atol=1e-6)
    np.testing.assert_allclose(shown.sum(-1), 1.0, atol=1e-5)  # every query's weights sum to 1
    assert np.all(np.triu(shown, k=1) == 0)  # no query sees a later character
    np.testing.assert_allclose(array(chart(at, "inspect-head-figure")["data"][0]["z"]), direct[0, 0], atol=1e-6)


def test_only_the_open_tab_is_computed_and_sent(default_view):
    charts = {c.proto.id.rsplit("-", 1)[-1] for c in default_view.get("plotly_chart")}
    assert {"grid", "figure"} <= charts and not charts & {"predictions", "scores"}
    assert not [c for c in default_view.get("plotly_chart") if "training" in c.proto.id]


def test_head_finder_and_predictions_match_gptcore(shipped):
    at = open_tab(run_page(), "Head finder")
    run = ins.inspect_text(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT)
    expected = ins.head_scores(run.patterns, run.ids).set_index("head")
    table = at.dataframe[0].value
    for column in ("previous_token", "first_token", "induction"):
        np.testing.assert_allclose(table[column].to_numpy(), expected[column].round(3).to_numpy(), atol=1e-9)
    metrics = {m.label: m.value for m in at.metric}
    best_previous = expected["previous_token"].idxmax()
    best_score = expected.loc[best_previous, "previous_token"]
    assert metrics["Strongest previous token head"] == f"{best_previous} · {best_score:.2f}"
    assert metrics["Strongest induction head"] == f"none · {expected['induction'].max():.2f}"  # no head reaches 0.3

    at = open_tab(at, "Predictions")

    # both position pickers start where the hero's name comes back
    position = ins.repeat_position(ins.DEFAULT_TEXT)
    assert at.select_slider(key=f"inspect-position-{len(run.ids)}").value == position
    top = ins.top_predictions(run.logits, shipped.tokenizer, position, 10)
    bars = chart(at, "inspect-predictions")["data"][0]
    assert list(bars["x"]) == top["label"].tolist()
    np.testing.assert_allclose(array(bars["y"]), top["probability"].to_numpy(), atol=1e-6)


def test_head_choice_and_training_slider(shipped):
    at = run_page()
    cfg = shipped.model.cfg
    last = f"L{cfg.n_layer - 1}H{cfg.n_head - 1}"
    at.selectbox(key="inspect-head").set_value(last).run()
    assert not at.exception
    direct = ins.attention_patterns(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT)[-1, -1].numpy()
    np.testing.assert_allclose(array(chart(at, "inspect-head-figure")["data"][0]["z"]), direct, atol=1e-6)
    titles = [a["text"] for a in chart(at, "inspect-grid")["layout"]["annotations"]]
    assert f"<b>▶ {last}</b>" in titles
    open_tab(at, "Over training")
    titles = [a["text"] for a in chart(at, "inspect-training-grid")["layout"]["annotations"]]
    assert f"<b>▶ {last}</b>" in titles  # the head chosen in the closed Attention tab

    # over training: the slider steps through the snapshots, each drawn from its own weights
    steps = ins.training_steps(SHIPPED)
    assert len(steps) >= 3, "the shipped model must come with snapshots"
    slider = at.select_slider(key="inspect-step-shipped-tiny")
    assert list(slider.options) == [str(s) for s, _ in steps]
    first_step, first_path = steps[0]
    slider.set_value(first_step).run()
    assert not at.exception
    model, tokenizer, _ = ckpt.load_weights(first_path)
    direct = ins.attention_patterns(model, tokenizer, ins.DEFAULT_TEXT).numpy()
    shown = grid_patterns(chart(at, "inspect-training-grid"), model.cfg.n_layer, model.cfg.n_head)
    np.testing.assert_allclose(shown, direct, atol=1e-6)
    final = ins.attention_patterns(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT).numpy()
    assert not np.allclose(shown, final, atol=1e-3)  # the patterns really changed during training

    open_tab(at, "Attention")  # settings of a closed tab survive it being closed
    assert at.selectbox(key="inspect-head").value == last
    open_tab(at, "Over training")
    assert at.select_slider(key="inspect-step-shipped-tiny").value == first_step


def test_long_or_unreadable_text_gets_a_visible_message(shipped):
    at = run_page()
    context = shipped.model.cfg.context
    text = ins.DEFAULT_TEXT + " €€ " + ins.DEFAULT_TEXT
    at.text_area(key="inspect-text").set_value(text).run()
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "'€'×2" in warnings
    known = len(shipped.tokenizer.encode(text))
    assert f"only the first {context} are analysed, the last {known - context} are left out" in warnings
    cfg = shipped.model.cfg
    shown = grid_patterns(chart(at, "inspect-grid"), cfg.n_layer, cfg.n_head)
    direct = ins.attention_patterns(shipped.model, shipped.tokenizer, text).numpy()
    assert shown.shape[-1] == context
    np.testing.assert_allclose(shown, direct, atol=1e-6)

    at.text_area(key="inspect-text").set_value("€€€").run()
    assert not at.exception
    assert [e.value for e in at.error] == ["Nothing to inspect: the text has no character the model knows."]


def test_generate_streams_from_the_model_with_the_chosen_settings(shipped):
    at = open_tab(run_page(), "Predictions")
    at.slider(key="inspect-temperature").set_value(0.5)
    at.number_input(key="inspect-seed").set_value(7)
    at.slider(key="inspect-gen-chars").set_value(60)
    at.button(key="inspect-generate").click().run()
    assert not at.exception
    prompt, generated = at.session_state["inspect-generated"]
    assert prompt == ins.DEFAULT_TEXT
    assert generated == ins.generate(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT, 60, 0.5, None, 7)


def test_settings_survive_an_empty_text_and_a_checkpoint_with_fewer_characters(tmp_path, monkeypatch):
    import shutil

    from gptcore.config import GPTConfig
    from gptcore.data import CharTokenizer
    from gptcore.model import GPT

    shutil.copytree(SHIPPED, tmp_path / "shipped-tiny")
    small = CharTokenizer.from_text("abcdefghij Lily.")
    ckpt.save_checkpoint(tmp_path / "small", GPT(GPTConfig(vocab_size=small.vocab_size, d_model=16, n_layer=1,
                                                           n_head=2, d_ff=32, context=32)), small, {"step": 0})
    monkeypatch.setattr(ckpt, "CHECKPOINT_ROOT", tmp_path)
    at = open_tab(run_page(), "Predictions")
    at.slider(key="inspect-topk").set_value(60).run()
    at.text_area(key="inspect-text").set_value("").run()
    assert [e.value for e in at.error] == ["Nothing to inspect: the text is empty."]
    at.text_area(key="inspect-text").set_value(ins.DEFAULT_TEXT).run()
    assert at.slider(key="inspect-topk").value == 60  # kept while the page stopped early, tab included
    at.selectbox(key="inspect-checkpoint").set_value("small").run()
    assert not at.exception, at.exception  # 60 is above the small vocabulary's slider maximum
    assert at.slider(key="inspect-topk").value == min(10, small.vocab_size)
