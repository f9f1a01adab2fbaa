"""The Inspect page on the shipped checkpoint: what it draws is exactly what gptcore computes."""
import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from explorer import inspector_figures as figs
from gptcore import checkpoint as ckpt
from gptcore import folders
from gptcore import inspector as ins
from gptcore.runs import SHIPPED as SHIPPED_NAME

SHIPPED = folders.CHECKPOINT_ROOT / SHIPPED_NAME
PAGE = Path(__file__).resolve().parent.parent / "app_pages" / "inspector.py"


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


def grid_patterns(spec: dict, n_layer: int, n_head: int, T: int) -> np.ndarray:
    """The (L, H, T, T) patterns of the grid: one heatmap, its panels separated by blank cells."""
    [heatmap] = spec["data"]
    image = array(heatmap["z"])
    panels = figs.grid_panels(image, n_layer, n_head, T)
    assert image.sum() == panels.sum()  # nothing but the panels: the gaps are blank
    return panels


def default_head(shipped) -> tuple[int, int]:
    """The head the page enlarges first: the best copier of the repeated-sequence test, if one is clear."""
    best = ins.strongest_head(ins.repeated_sequence_scores(shipped.model)[0], "induction", ins.CLEAR_SCORE)
    return best[:2] if best else (0, 0)


def test_default_view_draws_the_patterns_gptcore_computes(shipped, default_view):
    at = default_view
    assert at.selectbox(key="inspect-checkpoint").value == SHIPPED_NAME
    assert not at.warning and not at.error
    cfg = shipped.model.cfg
    direct = ins.attention_patterns(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT).numpy()

    T = len(ins.DEFAULT_TEXT)
    shown = grid_patterns(chart(at, "inspect-grid"), cfg.n_layer, cfg.n_head, T)
    assert shown.shape == (cfg.n_layer, cfg.n_head, T, T) and shown.dtype == np.uint8  # whole percent: small
    np.testing.assert_array_equal(shown, np.rint(direct * 100))
    assert np.all(np.triu(shown, k=1) == 0)  # no query sees a later character
    # the enlarged head at full precision: the copying head, in the second saying of the sentence
    layer, head = default_head(shipped)
    assert (at.segmented_control(key="inspect-layer").value, at.segmented_control(key="inspect-head").value) == \
        (layer, head)
    enlarged = array(chart(at, "inspect-head-figure")["data"][0]["z"])
    np.testing.assert_allclose(enlarged, direct[layer, head], atol=1e-6)
    np.testing.assert_allclose(enlarged.sum(-1), 1.0, atol=1e-5)  # every query's weights sum to 1
    again = ins.repeat_position(shipped.tokenizer.pieces(shipped.tokenizer.encode(ins.DEFAULT_TEXT)))
    assert ins.DEFAULT_TEXT[again] == " " and at.select_slider(key=f"inspect-query-{T}").value == again
    box = chart(at, "inspect-head-figure")["layout"]["shapes"][0]  # the query's row is boxed
    assert (box["y0"], box["y1"]) == (again - 0.5, again + 0.5)
    captions = " ".join(c.value for c in at.caption)
    if (layer, head) != (0, 0) or "Enlarged first" in captions:
        assert f"Enlarged first: L{layer}H{head}" in captions
    else:
        assert "No head of this checkpoint copies from its context yet" in captions


def test_every_character_of_the_enlarged_head_is_on_a_tick_label(default_view):
    """#15: at full context every character is written across the top, upright, in a font that can be read: each
    word once, centred over its own columns (a column is narrower than a character), the colour bar under the plot
    so the columns have the whole width."""
    spec = chart(default_view, "inspect-head-figure")
    T = len(ins.DEFAULT_TEXT)
    labels = ins.token_labels(ins.DEFAULT_TEXT)
    keys = spec["layout"]["xaxis"]
    assert "␣".join(keys["ticktext"]) == "".join(labels).strip("␣")
    assert keys["tickfont"]["size"] >= 11 and keys["tickangle"] == 0
    first = len(ins.DEFAULT_TEXT.split(" ")[0])
    assert list(keys["tickvals"][:2]) == [(first - 1) / 2, first + 1 + (len(ins.DEFAULT_TEXT.split(" ")[1]) - 1) / 2]
    assert spec["data"][0]["colorbar"]["orientation"] == "h"
    queries = spec["data"][1]  # the query characters down the left: points, so a click on one picks it
    assert queries["type"] == "scatter" and list(queries["text"]) == labels and queries["textfont"]["size"] >= 10
    assert list(array(queries["customdata"])) == list(range(T))
    assert spec["layout"]["height"] >= 10 * T  # a row of at least 10 px for each character


def test_the_query_characters_are_legible_and_each_grid_title_sits_on_its_own_map(default_view):
    """#27: the query characters down the left in an upright font of at least 11 px on a cell as tall as the row;
    the 16-map grid's titles each just above their own map, with more room above a title than below it."""
    spec = chart(default_view, "inspect-head-figure")
    T = len(ins.DEFAULT_TEXT)
    queries = spec["data"][1]
    assert queries["textfont"]["size"] >= 11 and "textangle" not in queries
    row_px = (spec["layout"]["height"] - 70) / T
    assert queries["marker"]["size"] >= queries["textfont"]["size"] and row_px >= queries["textfont"]["size"] + 1

    grid = chart(default_view, "inspect-grid")
    row_gap = figs.grid_gaps(T)[1]
    maps_top = [row_gap + layer * (T + row_gap) for layer in range(4)]
    for note in grid["layout"]["annotations"]:
        assert note["yanchor"] == "bottom" and note["y"] + 0.5 in maps_top  # its lower edge on its map's top
    assert row_gap >= 0.2 * T  # a title is about a tenth of a map high: as much space again above it


def test_a_head_change_recomputes_nothing(shipped, monkeypatch):
    """The forward pass is cached per checkpoint and text: choosing heads, layers and queries only redraws."""
    import streamlit as st

    calls = []
    forward = ins.patterns_from_ids
    monkeypatch.setattr(ins, "patterns_from_ids", lambda *a, **k: calls.append(1) or forward(*a, **k))
    st.cache_resource.clear()
    at = run_page()
    assert len(calls) == 1
    cfg = shipped.model.cfg
    for layer, head in ((cfg.n_layer - 1, 0), (cfg.n_layer - 1, cfg.n_head - 1), (0, 1)):
        at.segmented_control(key="inspect-layer").set_value(layer)
        at.segmented_control(key="inspect-head").set_value(head).run()
        assert not at.exception
        title = chart(at, "inspect-head-figure")["layout"]["title"]["text"]
        assert title.startswith(f"L{layer}H{head}:")
    T = len(ins.DEFAULT_TEXT)
    at.select_slider(key=f"inspect-query-{T}").set_value(5).run()
    open_tab(at, "Predictions")
    at.slider(key="inspect-temperature").set_value(1.2).run()
    assert len(calls) == 1  # the one forward pass of the first run served every click


def test_only_the_open_tab_is_computed_and_sent(default_view):
    charts = {c.proto.id.rsplit("-", 1)[-1] for c in default_view.get("plotly_chart")}
    assert {"grid", "figure"} <= charts and not charts & {"predictions", "scores"}
    assert not [c for c in default_view.get("plotly_chart") if "training" in c.proto.id]


def score_table_matches(at: AppTest, expected) -> None:
    table = at.dataframe[0].value  # (the columns named as a reader reads them)
    for column, shown in (("previous_token", "previous token"), ("first_token", "first token"),
                          ("induction", "induction")):
        np.testing.assert_allclose(table[shown].to_numpy(), expected[column].round(3).to_numpy(), atol=1e-9)


def test_head_finder_scores_random_text_shown_twice_then_the_text(shipped):
    at = open_tab(run_page(), "Head finder")
    assert at.radio(key="inspect-score-source").value == "repeated"  # the copying test comes first
    expected, report = ins.repeated_sequence_scores(shipped.model)
    expected = expected.set_index("head")
    score_table_matches(at, expected)
    metrics = {m.label: m.value for m in at.metric}
    best = expected["induction"].idxmax()
    assert expected.loc[best, "induction"] >= 0.4  # the shipped model has an induction head ...
    assert metrics["Strongest induction head"] == f"{best} · {expected.loc[best, 'induction']:.2f}"
    assert metrics["loss on the second copy"] == f"{report.copy_losses[1]:.2f}"  # ... and copies with it
    assert report.copy_losses[1] <= 0.5 * report.copy_losses[0]  # 0.21 measured (checkpoints/README.md)

    at.radio(key="inspect-score-source").set_value("text").run()
    assert not at.exception
    run = ins.inspect_text(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT)
    expected = ins.head_scores(run.patterns, run.ids).set_index("head")
    score_table_matches(at, expected)
    metrics = {m.label: m.value for m in at.metric}
    best_previous = expected["previous_token"].idxmax()
    best_score = expected.loc[best_previous, "previous_token"]
    assert metrics["Strongest previous token head"] == f"{best_previous} · {best_score:.2f}"


def test_the_predictions_follow_the_query_chosen_on_the_attention_tab(shipped):
    """#25: the Attention tab's query is the position the Predictions tab predicts after, and back again."""
    at = run_page()
    T = len(shipped.tokenizer.encode(ins.DEFAULT_TEXT))
    at.select_slider(key=f"inspect-query-{T}").set_value(12).run()
    open_tab(at, "Predictions")
    assert at.select_slider(key=f"inspect-query-{T}").value == 12
    run = ins.inspect_text(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT)
    top = ins.top_predictions(run.logits, shipped.tokenizer, 12, 10, 0.8, None)
    assert list(chart(at, "inspect-predictions")["data"][0]["x"]) == top["label"].tolist()
    at.select_slider(key=f"inspect-query-{T}").set_value(30).run()
    open_tab(at, "Attention")
    assert at.select_slider(key=f"inspect-query-{T}").value == 30


def test_the_distribution_follows_the_sampling_controls(shipped):
    at = open_tab(run_page(), "Predictions")
    run = ins.inspect_text(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT)
    # the position picker starts where the hero's name comes back
    position = ins.repeat_position(run.pieces)
    assert at.select_slider(key=f"inspect-query-{len(run.ids)}").value == position

    def bars_match(temperature, top_k):
        top = ins.top_predictions(run.logits, shipped.tokenizer, position, 10, temperature, top_k)
        bars = chart(at, "inspect-predictions")["data"][0]
        assert list(bars["x"]) == top["label"].tolist()
        np.testing.assert_allclose(array(bars["y"]), top["probability"].to_numpy(), atol=1e-6)
        return array(bars["y"])

    bars_match(0.8, None)
    at.slider(key="inspect-temperature").set_value(1.5).run()
    flat = bars_match(1.5, None)
    at.number_input(key="inspect-gen-topk").set_value(3).run()
    cut = bars_match(1.5, 3)
    assert np.count_nonzero(cut) == 3 and cut[:3].sum() == pytest.approx(1.0, abs=1e-6)
    assert cut[0] > flat[0]  # the mass of the characters cut off goes to the three kept
    at.slider(key="inspect-temperature").set_value(0.0).run()
    assert bars_match(0.0, 3)[0] == 1.0  # temperature 0: always the most likely character


def test_head_choice_and_training_slider(shipped):
    at = run_page()
    cfg = shipped.model.cfg
    last = f"L{cfg.n_layer - 1}H{cfg.n_head - 1}"
    at.segmented_control(key="inspect-layer").set_value(cfg.n_layer - 1)
    at.segmented_control(key="inspect-head").set_value(cfg.n_head - 1).run()
    assert not at.exception
    direct = ins.attention_patterns(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT)[-1, -1].numpy()
    np.testing.assert_allclose(array(chart(at, "inspect-head-figure")["data"][0]["z"]), direct, atol=1e-5)
    open_tab(at, "Over training")
    titles = [a["text"] for a in chart(at, "inspect-training-grid")["layout"]["annotations"]]
    assert f"<b>▶ {last}</b>" in titles  # the head chosen in the closed Attention tab

    # over training: the slider steps through the snapshots, each drawn from its own weights
    steps = ins.training_steps(SHIPPED)
    assert len(steps) >= 3, "the shipped model must come with snapshots"
    slider = at.select_slider(key=f"inspect-step-{SHIPPED_NAME}")
    assert list(slider.options) == [str(s) for s, _ in steps]
    first_step, first_path = steps[0]
    slider.set_value(first_step).run()
    assert not at.exception
    model, tokenizer, _ = ckpt.load_weights(first_path)
    direct = ins.attention_patterns(model, tokenizer, ins.DEFAULT_TEXT).numpy()
    shown = grid_patterns(chart(at, "inspect-training-grid"), model.cfg.n_layer, model.cfg.n_head,
                          len(ins.DEFAULT_TEXT))
    np.testing.assert_array_equal(shown, np.rint(direct * 100))
    final = ins.attention_patterns(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT).numpy()
    assert not np.allclose(shown, final, atol=1e-3)  # the patterns really changed during training

    open_tab(at, "Attention")  # settings of a closed tab survive it being closed
    assert at.segmented_control(key="inspect-layer").value == cfg.n_layer - 1
    assert at.segmented_control(key="inspect-head").value == cfg.n_head - 1
    open_tab(at, "Over training")
    assert at.select_slider(key=f"inspect-step-{SHIPPED_NAME}").value == first_step


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
    shown = grid_patterns(chart(at, "inspect-grid"), cfg.n_layer, cfg.n_head, context)
    direct = ins.attention_patterns(shipped.model, shipped.tokenizer, text).numpy()
    assert shown.shape[-1] == context
    np.testing.assert_array_equal(shown, np.rint(direct * 100))

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
    prompt, chat, generated = at.session_state["inspect-generated"]
    assert prompt == ins.DEFAULT_TEXT and chat is False  # (a character model has no chat template)
    assert generated == ins.generate(shipped.model, shipped.tokenizer, ins.DEFAULT_TEXT, 60, 0.5, None, 7)


def test_settings_survive_an_empty_text_and_a_checkpoint_with_fewer_characters(tmp_path, monkeypatch):
    import shutil

    from gptcore.config import GPTConfig
    from gptcore.model import GPT
    from gptcore.tokenizer import CharTokenizer

    shutil.copytree(SHIPPED, tmp_path / SHIPPED_NAME)
    small = CharTokenizer.from_text("abcdefghij Lily.")
    ckpt.save_checkpoint(tmp_path / "small", GPT(GPTConfig(vocab_size=small.vocab_size, d_model=16, n_layer=1,
                                                           n_head=2, d_ff=32, context=32)), small, {"step": 0})
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    at = open_tab(run_page(), "Predictions")
    at.slider(key="inspect-topk").set_value(60).run()
    at.text_area(key="inspect-text").set_value("").run()
    assert [e.value for e in at.error] == ["Nothing to inspect: the text is empty."]
    at.text_area(key="inspect-text").set_value(ins.DEFAULT_TEXT).run()
    assert at.slider(key="inspect-topk").value == 60  # kept while the page stopped early, tab included
    at.selectbox(key="inspect-checkpoint").set_value("small").run()
    assert not at.exception, at.exception  # 60 is above the small vocabulary's slider maximum
    assert at.slider(key="inspect-topk").value == min(10, small.vocab_size)


def test_every_bar_is_named_and_every_head_has_its_own_look(shipped):
    """#15: at top-k = the whole vocabulary every bar keeps its character; over training, 16 heads, 16 looks."""
    at = open_tab(run_page(), "Predictions")
    V = shipped.model.cfg.vocab_size
    at.slider(key="inspect-topk").set_value(V).run()
    spec = chart(at, "inspect-predictions")
    bars = list(spec["data"][0]["x"])
    assert len(bars) == V and list(spec["layout"]["xaxis"]["tickvals"]) == bars
    assert list(spec["layout"]["xaxis"]["ticktext"]) == bars and spec["layout"]["xaxis"]["tickangle"] == 0

    open_tab(at, "Over training")
    traces = chart(at, "inspect-training-scores")["data"]
    cfg = shipped.model.cfg
    shown = [tr for tr in traces if tr.get("showlegend") is not False]
    assert sorted(tr["name"] for tr in shown) == sorted(ins.head_names(cfg.n_layer, cfg.n_head))
    looks = {(tr["line"]["color"], tr["line"]["dash"], tr["marker"]["symbol"]) for tr in shown}
    assert len(looks) == cfg.n_layer * cfg.n_head  # no two heads drawn alike
    assert len({tr["line"]["color"] for tr in shown}) == cfg.n_layer  # the colour says the layer
    layout = chart(at, "inspect-training-scores")["layout"]
    legend = layout["legend"]  # at the chart's foot, in a margin that holds the axes' titles above its rows too
    assert (legend["yref"], legend["y"], legend["yanchor"]) == ("container", 0, "bottom")
    assert layout["margin"]["b"] == 70 + 30 * (cfg.n_layer + 1)  # a row per layer, and its title


# ------------------------------------------------------------- real models: the picker, tokens, the atlas, two models

@pytest.fixture(scope="module")
def with_import(tmp_path_factory):
    """A checkpoints folder with the shipped model and a small imported one: a byte-level BPE, grouped-query
    attention, tied embeddings, marked `imported` as gptcore.hub marks a real model."""
    from gptcore.config import GPTConfig
    from gptcore.model import GPT
    from gptcore.tokenizer import BPETokenizer

    root = tmp_path_factory.mktemp("checkpoints")
    (root / SHIPPED_NAME).symlink_to(SHIPPED, target_is_directory=True)
    tokenizer = BPETokenizer.train([ins.DEFAULT_TEXT * 10 + " Lily met Tom.\nThe dog ran home." * 10], 300)
    cfg = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=32, n_layer=2, n_head=4, n_kv_head=2, d_ff=64,
                    context=64, tie_embeddings=True)
    import torch

    torch.manual_seed(0)
    ckpt.save_checkpoint(root / "tiny-import", GPT(cfg).eval(), tokenizer, {"step": 0, "imported": True})
    return root


def run_in(root: Path, monkeypatch, **state) -> AppTest:
    import streamlit as st

    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", root)
    st.cache_resource.clear()  # (the picker's meta.json reads are cached by folder)
    at = AppTest.from_file(str(PAGE), default_timeout=90)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_picker_marks_an_imported_model_and_offers_to_get_smollm2(with_import, monkeypatch):
    at = run_in(with_import, monkeypatch)
    picker = at.selectbox(key="inspect-checkpoint")
    assert picker.options == [SHIPPED_NAME, "tiny-import · imported"] and picker.value == SHIPPED_NAME
    assert at.button(key="inspect-get-smollm2").label == "Get SmolLM2-135M"
    assert at.button(key="inspect-import").disabled  # nothing typed yet
    assert not [c for c in at.caption if "The tokenizer cut" in c.value]  # a character model: no token row


def test_a_token_model_is_shown_in_tokens(with_import, monkeypatch):
    at = run_in(with_import, monkeypatch, **{"inspect-checkpoint": "tiny-import"})
    loaded = ckpt.load_checkpoint(with_import / "tiny-import")
    ids = loaded.tokenizer.encode(ins.DEFAULT_TEXT)
    assert f"The tokenizer cut these {len(ins.DEFAULT_TEXT)} characters into {len(ids)} tokens" in \
        " ".join(c.value for c in at.caption)
    row = next(h.proto.body for h in at.get("html") if "#fbe9d7" in h.proto.body)
    assert row.count("<span") == len(ids) and ">␣cat</span>" in row
    assert "imported model" in at.caption[1].value  # the facts: an import has no training step to report
    assert list(chart(at, "inspect-head-figure")["layout"]["xaxis"]["ticktext"]) == loaded.tokenizer.labels(ids)
    open_tab(at, "Predictions")
    assert [s.value for s in at.subheader][0] == "Next-token distribution"
    assert chart(at, "inspect-predictions")["layout"]["xaxis"]["title"]["text"] == "next token"
    assert at.slider(key="inspect-gen-tokens").label == "Tokens"


def test_the_atlas_draws_every_heads_scores_and_opens_the_chosen_head(shipped, monkeypatch):
    at = open_tab(run_page(), "Head finder")
    scores = ins.repeated_sequence_scores(shipped.model)[0]
    cfg = shipped.model.cfg
    spec = chart(at, "inspect-atlas")
    for i, column in enumerate(figs.ATLAS_SCORES):  # a map and the points a click picks, per score
        grid, points = spec["data"][2 * i], spec["data"][2 * i + 1]
        np.testing.assert_allclose(array(grid["z"]), scores[column].to_numpy().reshape(cfg.n_layer, cfg.n_head))
        np.testing.assert_allclose(array(points["customdata"])[:, 2], scores[column].to_numpy())
        assert array(points["customdata"])[:, :2].tolist() == [[n, h] for n in range(cfg.n_layer)
                                                               for h in range(cfg.n_head)]
    best = ins.strongest_head(scores, "induction")
    found = scores[scores["induction"] >= ins.CLEAR_SCORE]
    sentence = next(m.value for m in at.markdown if m.value.startswith("**Threshold 0.3**"))
    assert f"{len(found)} of the {cfg.n_layer * cfg.n_head} heads reach an induction score of 0.3" in sentence
    assert f"The strongest is **L{best[0]}H{best[1]}** ({best[2]:.2f})" in sentence
    # the head opened is the page's chosen one (the best copier to start with), drawn on the first random sequence
    layer, head = best[:2]
    assert [s["x0"] for s in spec["layout"]["shapes"]] == [head - 0.5] * 3
    assert any(m.value.startswith(f"**Opened: L{layer}H{head}**") for m in at.markdown)
    report = ins.repeated_sequence_scores(shipped.model)[1]
    ids = ins.repeated_sequence_ids(cfg.vocab_size, report.length)
    patterns = ins.patterns_from_ids(shipped.model, ids)[1]
    np.testing.assert_allclose(array(chart(at, "inspect-atlas-head")["data"][0]["z"]), patterns[layer, head],
                               atol=1e-6)


def test_two_models_side_by_side_on_one_text(with_import, monkeypatch, shipped):
    at = run_in(with_import, monkeypatch, **{"inspect-tab": "Side by side", "inspect-compare-with": "tiny-import"})
    imported = ckpt.load_checkpoint(with_import / "tiny-import")
    char = at.select_slider(key=f"inspect-compare-char-{len(ins.DEFAULT_TEXT)}").value
    assert char == ins.repeat_position(list(ins.DEFAULT_TEXT))  # in the second saying, where copying shows
    for side, loaded in (("a", shipped), ("b", imported)):
        run = ins.inspect_text(loaded.model, loaded.tokenizer, ins.DEFAULT_TEXT)
        position = int(np.searchsorted(np.cumsum([len(p) for p in run.pieces]), char, side="right"))
        assert len("".join(run.pieces[:position])) <= char < len("".join(run.pieces[:position + 1]))
        scores = ins.head_scores(run.patterns, run.ids)
        best = ins.strongest_head(scores, "induction")
        if best is None:  # (the random import copies nothing: its best head is shown, and said to be below 0.3)
            i = int(scores["induction"].fillna(-1).to_numpy().argmax())
            layer, head = divmod(i, loaded.model.cfg.n_head)
            assert any(f"the best, L{layer}H{head}, is shown" in m.value for m in at.markdown)
        else:
            layer, head = best[:2]
            assert any(f"**L{layer}H{head}** ({best[2]:.2f})" in m.value for m in at.markdown)
        np.testing.assert_allclose(array(chart(at, f"inspect-compare-{side}-head")["data"][0]["z"]),
                                   run.patterns[layer, head], atol=1e-6)
        top = ins.predictions(run.logits_at(position), loaded.tokenizer, 8)
        bars = chart(at, f"inspect-compare-{side}-predictions")["data"][0]
        assert list(bars["x"]) == top["label"].tolist()
        np.testing.assert_allclose(array(bars["y"]), top["probability"].to_numpy(), atol=1e-6)
    headings = [m.value for m in at.markdown if m.value.startswith("####")]
    assert headings == [f"#### {SHIPPED_NAME}", "#### tiny-import"]


def test_smollm2_is_fetched_in_the_background_with_its_progress_then_opened(with_import, monkeypatch, tmp_path):
    """The button starts the import as a job (gptcore.hub's own functions, replaced here by a stand-in that copies
    the small import): its stage, bytes and time left show while it runs; then the picker lists and opens it."""
    import shutil
    import threading

    from explorer import model_picker
    from explorer.ui import job_registry

    root = tmp_path / "checkpoints"
    shutil.copytree(with_import, root, symlinks=True)
    release, calls = threading.Event(), []

    def import_model(source, out, progress):
        calls.append((source, out))
        progress(40_000_000, 92_871_040, "download")
        release.wait(30)
        shutil.copytree(with_import / "tiny-import", out)

    monkeypatch.setattr(model_picker.hub, "import_model", import_model)
    at = run_in(root, monkeypatch)
    at.button(key="inspect-get-smollm2").click().run()
    assert not at.exception, at.exception
    assert calls == [("smollm2", root / "smollm2")]
    bar = at.get("progress")[0].proto
    assert bar.text.startswith("Step 1 of 6: downloading, 40.0 of 92.9 MB") and bar.value == 43
    assert at.button(key="inspect-get-smollm2").disabled  # one import at a time
    release.set()
    job_registry().latest(model_picker.JOB_KIND).join(30)
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="inspect-checkpoint").value == "smollm2"  # opened as soon as it is there
    assert "smollm2 · imported" in at.selectbox(key="inspect-checkpoint").options
    assert [s.value for s in at.success] == ["Imported as `smollm2`: it is now in the list of checkpoints."]
    assert not any(b.key == "inspect-get-smollm2" for b in at.button)  # SmolLM2 is here: no button for it


def test_an_import_that_fails_says_why(with_import, monkeypatch):
    from explorer import model_picker
    from explorer.ui import job_registry
    from gptcore.hub import ImportFailure

    def import_model(source, out, progress):
        raise ImportFailure("hub.no_source", "{source} is neither smollm2, a .gguf file, a Hugging Face model folder "
                            "nor a Hugging Face model name (organisation/model)", source=source)

    monkeypatch.setattr(model_picker.hub, "import_model", import_model)
    at = run_in(with_import, monkeypatch)
    at.text_input(key="inspect-import-source").set_value("nowhere").run()
    at.button(key="inspect-import").click().run()
    job_registry().latest(model_picker.JOB_KIND).join(30)
    at.run()
    assert [e.value for e in at.error] == ["nowhere is neither smollm2, a .gguf file, a Hugging Face model folder nor "
                                           "a Hugging Face model name (organisation/model)"]
    assert at.selectbox(key="inspect-checkpoint").value == SHIPPED_NAME
