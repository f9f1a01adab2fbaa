"""The Trace page on the shipped checkpoint: every number it draws is the one gptcore.interp computes."""
import time
from pathlib import Path

import numpy as np
import pytest
from page_helpers import chart, figure
from streamlit.testing.v1 import AppTest

from gptcore import checkpoint as ckpt
from gptcore import folders, interp
from gptcore import inspector as ins
from gptcore.runs import SHIPPED

PAGE = Path(__file__).resolve().parent.parent / "pages" / "trace.py"


@pytest.fixture(scope="module")
def shipped():
    return ckpt.load_checkpoint(folders.CHECKPOINT_ROOT / SHIPPED)


@pytest.fixture(scope="module")
def cap(shipped):
    return interp.capture(shipped.model, shipped.tokenizer.encode(ins.DEFAULT_TEXT))


def run_page() -> AppTest:
    at = AppTest.from_file(str(PAGE), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def rerun(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_tab(at: AppTest, index: int) -> AppTest:
    at.session_state["trace-tab"] = at.tabs[index].label
    return rerun(at)


def test_stepping_through_draws_the_traced_values(shipped, cap):
    at = run_page()
    assert at.selectbox(key="trace-checkpoint").value == SHIPPED
    position = ins.repeat_position(shipped.tokenizer.pieces(cap.ids.tolist()))
    assert at.select_slider(key="trace-position").value == position  # where the hero's name comes back
    tr = interp.trace(shipped.model, cap.ids, position, cap, shipped.tokenizer)
    diagram = chart(at, "trace-diagram")
    assert len(diagram[1]["x"]) == len(tr.stages)
    assert at.select_slider(key="trace-stage").value == 0
    assert f"→ id <b>{int(cap.ids[position])}</b>" in at.get("html")[-1].proto.body

    at.button(key="trace-forward").click()
    rerun(at)
    assert at.select_slider(key="trace-stage").value == 1
    bars = chart(at, "trace-stage-figure")[0]
    np.testing.assert_allclose(bars["y"], tr["embed"].value.numpy(), atol=1e-6)

    index = tr.index("L1.pattern")
    at.select_slider(key="trace-stage").set_value(index)
    rerun(at)
    shown = np.array(chart(at, "trace-stage-figure")[0]["z"])
    weights = tr["L1.pattern"].value.numpy()
    np.testing.assert_allclose(shown, weights[:, -shown.shape[1]:], atol=1e-6)  # the keys nearest the query
    assert [m.value for m in at.subheader] == [
        f"{index + 1}/{len(tr.stages)} · attention · layer 1: softmax: attention weights"]
    sources = " ".join(c.value for c in at.caption)
    assert "gptcore/model.py:" in sources

    at.button(key="trace-back").click()
    rerun(at)
    assert at.select_slider(key="trace-stage").value == index - 1


def test_play_moves_one_stage_per_interval_and_the_position_follows_a_click(shipped, cap):
    at = run_page()
    at.button(key="trace-play").click()
    rerun(at)
    assert at.session_state["trace-playing"] and at.button(key="trace-play").label == "⏸ Pause"
    start = at.select_slider(key="trace-stage").value
    time.sleep(1.6)  # one interval: what the fragment's timer waits before it reruns
    rerun(at)
    assert at.select_slider(key="trace-stage").value == start + 1
    at.button(key="trace-play").click()
    rerun(at)
    assert not at.session_state["trace-playing"]

    at.select_slider(key="trace-position").set_value(5)
    rerun(at)
    tr = interp.trace(shipped.model, cap.ids, 5, cap, shipped.tokenizer)
    stage = tr.stages[at.select_slider(key="trace-stage").value]
    assert f"Shape ({'×'.join(map(str, stage.shape)) or '1'})" in " ".join(c.value for c in at.caption)
    strip = chart(at, "trace-strip")[0]
    assert strip["marker"]["line"]["width"][5] == 3  # the traced character is boxed


def test_lens_attribution_ablation_and_patching_tabs_show_gptcores_numbers(shipped, cap):
    model = shipped.model
    at = run_page()
    position = at.select_slider(key="trace-position").value

    open_tab(at, 1)
    lens = interp.logit_lens(model, cap)
    heat = figure(at, "trace-lens")["data"][0]
    columns = heat["x"]
    np.testing.assert_allclose(np.array(heat["z"], dtype=float), lens.true_next().numpy()[:, columns], atol=1e-6)
    assert position in columns

    open_tab(at, 2)
    target = int(cap.ids[position + 1])
    assert at.selectbox(key=f"trace-target-{position}").value == target
    attribution = interp.logit_attribution(model, cap, position, target)
    bars = chart(at, "trace-attribution")[0]
    np.testing.assert_allclose(bars["y"], attribution.parts["logit"].to_numpy(), atol=1e-9)
    assert sum(bars["y"]) == pytest.approx(float(cap.logits[position, target]), abs=1e-4)

    open_tab(at, 3)
    at.multiselect(key="trace-ablate").set_value(["L1H2", "L3 FFN"])
    rerun(at)
    before, after = interp.ablate(model, cap, ["L1H2", "L3 FFN"]).loss
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["loss of the text"] == f"{before:.3f}" and metrics["with them off"] == f"{after:.3f}"
    at.button(key="trace-sweep").click()
    rerun(at)
    frame = interp.ablation_sweep(model, cap)
    sweep = chart(at, "trace-sweep-bars")[0]
    assert list(sweep["x"]) == frame["component"].tolist()
    np.testing.assert_allclose(sweep["y"], frame["loss increase"].to_numpy(), atol=1e-6)

    open_tab(at, 4)
    pair = interp.PATCHING_PAIRS[0]
    assert at.selectbox(key="trace-pair").value == pair.id
    setup = interp.patching_setup(model, shipped.tokenizer, pair.clean, pair.corrupted, pair.clean_answer,
                                  pair.corrupted_answer)
    grid = np.array(chart(at, "trace-patch-heads")[0]["z"], dtype=float)
    np.testing.assert_allclose(grid, interp.patch_heads(model, setup).numpy(), atol=1e-5)
    at.button(key="trace-patch-residual-button").click()
    rerun(at)
    residual = np.array(chart(at, "trace-patch-residual-figure")[0]["z"], dtype=float)
    np.testing.assert_allclose(residual, interp.patch_residual(model, setup).numpy(), atol=1e-5)

    at.text_area(key="trace-corrupted-password").set_value(pair.corrupted + "!")
    rerun(at)
    assert [e.value for e in at.error] == [
        f"the clean and corrupted prompts must have the same length in tokens: {len(setup.clean.ids)} and "
        f"{len(setup.clean.ids) + 1}"]


def test_a_text_the_model_cannot_read_says_so():
    at = run_page()
    at.text_area(key="trace-text").set_value("€€€")
    rerun(at)
    assert [e.value for e in at.error] == ["Nothing to trace: the text has no character the model knows."]
    at.text_area(key="trace-text").set_value("Lily")
    rerun(at)
    assert at.select_slider(key="trace-position").value == 3  # no name comes back: the last character
