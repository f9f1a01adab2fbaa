"""The Trace page on the shipped checkpoint: every number it draws is the one gptcore.interp computes."""
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from i18n_check import english_left
from page_helpers import chart, figure, open_page
from streamlit.testing.v1 import AppTest

from gptcore import checkpoint as ckpt
from gptcore import circuits, folders, interp
from gptcore import inspector as ins
from gptcore.runs import SHIPPED

PAGE = Path(__file__).resolve().parent.parent / "app_pages" / "trace.py"
TABS = ("step", "lens", "attribution", "ablation", "patching")


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

    at.select_slider(key="trace-stage").set_value(tr.index("L1.z"))
    rerun(at)
    captions = " ".join(c.value for c in at.caption)
    assert "one fused call" in captions and tr["L1.z"].unobserved.where in captions
    assert tr["L1.z"].unobserved.text in [c.value for c in at.code]
    at.select_slider(key="trace-stage").set_value(index)
    rerun(at)

    at.button(key="trace-back").click()
    rerun(at)
    assert at.select_slider(key="trace-stage").value == index - 1


def test_every_stage_reads_in_chinese():
    """The stages a learner steps through in Chromium (test_browser_trace, in English), read here in Chinese."""
    at = open_page("trace", "zh")
    stages = at.select_slider(key="trace-stage").options
    for index in range(1, len(stages), 7):  # (every stage kind: embedding, attention, norms, FFN, the readout)
        at.select_slider(key="trace-stage").set_value(index)
        rerun(at)
        assert at.subheader[0].value.startswith(f"{index + 1}/{len(stages)} · ")
        assert english_left(at) == [], index


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
    assert heat["y"] == list(range(2 * model.cfg.n_layer + 1))  # after each attention sublayer and each block
    row = lens.readable_from(position, int(cap.ids[position + 1]))
    name = "embedding" if lens.rows[row] == "embedding" else f"after {lens.rows[row]}"
    char = shipped.tokenizer.display(int(cap.ids[position + 1]))
    readable = f"Only the output, the last row (**{name}**), ranks '{char}' first" if row == len(lens.rows) - 1 \
        else f"from the row **{name}** on the lens already ranks '{char}' first"
    assert any(readable in m.value for m in at.markdown)

    open_tab(at, 2)
    target = int(cap.ids[position + 1])
    assert at.selectbox(key=f"trace-target-{position}").value == target
    foil = interp.runner_up(cap.logits[position], target)
    assert at.selectbox(key=f"trace-foil-{position}-{target}").value == foil  # the runner-up by default
    attribution = interp.logit_attribution(model, cap, position, target, foil)
    bars = chart(at, "trace-attribution")[0]
    np.testing.assert_allclose(bars["y"], attribution.parts["logit"].to_numpy(), atol=1e-9)
    assert sum(bars["y"]) == pytest.approx(float(cap.logits[position, target] - cap.logits[position, foil]), abs=1e-4)
    means = interp.reference_means(model, shipped.tokenizer)
    effects = circuits.effects(model, cap, position, target, foil, means)
    direct, total = chart(at, "trace-effects")[:2]
    assert list(direct["x"]) == effects["component"].tolist()
    np.testing.assert_allclose(direct["y"], effects["direct"].to_numpy(), atol=1e-6)
    np.testing.assert_allclose(total["y"], effects["total"].to_numpy(), atol=1e-6)
    head = at.selectbox(key="trace-source-head").value
    assert head == effects[effects["head"].notna()].set_index("component")["total"].abs().idxmax()
    layer, index = interp.parse_component(model, head)
    shares = circuits.source_attribution(model, cap, layer, index, position, target, foil).numpy()
    source = chart(at, "trace-source")[0]
    np.testing.assert_allclose(source["y"], shares[source["x"]], atol=1e-6)
    at.selectbox(key=f"trace-foil-{position}-{target}").set_value(int(shipped.tokenizer.encode("z")[0]))
    rerun(at)
    assert sum(chart(at, "trace-attribution")[0]["y"]) == pytest.approx(
        float(cap.logits[position, target] - cap.logits[position, shipped.tokenizer.encode("z")[0]]), abs=1e-4)

    open_tab(at, 3)
    at.multiselect(key="trace-ablate").set_value(["L1H2", "L3 FFN"])
    rerun(at)
    before, after = interp.ablate(model, cap, ["L1H2", "L3 FFN"]).loss
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["loss of the text"] == f"{before:.3f}" and metrics["with them off"] == f"{after:.3f}"
    at.radio(key="trace-ablate-mode").set_value("mean")
    rerun(at)
    _, after = interp.ablate(model, cap, ["L1H2", "L3 FFN"], "mean", means).loss
    assert {m.label: m.value for m in at.metric}["with them off"] == f"{after:.3f}"
    at.radio(key="trace-ablate-mode").set_value("zero")
    rerun(at)
    at.button(key="trace-sweep").click()
    rerun(at)
    frame = interp.ablation_sweep(model, cap)
    sweep = chart(at, "trace-sweep-bars")[0]
    assert list(sweep["x"]) == frame["component"].tolist()
    np.testing.assert_allclose(sweep["y"], frame["loss increase"].to_numpy(), atol=1e-6)

    open_tab(at, 4)
    pair = interp.PATCHING_PAIRS[0]
    assert at.selectbox(key="trace-pair").value == "own"  # the learner's text (test_page_trace_notes), then a pair
    at.selectbox(key="trace-pair").set_value(pair.id)
    rerun(at)
    setup = interp.patching_setup(model, shipped.tokenizer, pair.clean, pair.corrupted, pair.clean_answer,
                                  pair.corrupted_answer)
    grid = np.array(chart(at, "trace-patch-heads")[0]["z"], dtype=float)
    np.testing.assert_allclose(grid, interp.patch_heads(model, setup).numpy(), atol=1e-5)
    at.button(key="trace-patch-residual-button").click()
    rerun(at)
    residual = np.array(chart(at, "trace-patch-residual-figure")[0]["z"], dtype=float)
    np.testing.assert_allclose(residual, interp.patch_residual(model, setup).numpy(), atol=1e-5)
    assert at.selectbox(key="trace-receiver").value == "L3H2"  # the password's copying head
    sides = np.array(chart(at, "trace-patch-sides")[0]["z"], dtype=float)
    senders = [None] + circuits.senders_before(model, 3)
    np.testing.assert_allclose(sides, circuits.patch_sides(model, setup, "L3H2", senders).to_numpy(), atol=1e-5)

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


def test_a_checkpoint_folder_whose_name_is_not_utf8_is_listed_and_traced(tmp_path, monkeypatch):
    """#27: a folder named with the byte 0xe9 (Latin-1 'é') must not take the page down for everyone."""
    import shutil

    for name in (SHIPPED, os.fsdecode(b"caf\xe9")):
        (tmp_path / name).mkdir()
        shutil.copy(folders.CHECKPOINT_ROOT / SHIPPED / "model.safetensors", tmp_path / name)
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    at = run_page()
    picker = at.selectbox(key="trace-checkpoint")
    assert sorted(picker.options) == ["caf\\xe9", SHIPPED]
    picker.set_value("caf\\xe9")
    rerun(at)
    assert not at.error and at.get("plotly_chart")


def tiny_checkpoint(root: Path, name: str, **changes) -> Path:
    """A random 2-layer model of one variant the Train page can make, saved as a checkpoint."""
    from gptcore.config import GPTConfig
    from gptcore.model import GPT
    from gptcore.tokenizer import CharTokenizer

    torch.manual_seed(0)
    pairs = "".join(pair.clean + pair.corrupted for pair in interp.PATCHING_PAIRS)  # the Patching tab's prompts
    tokenizer = CharTokenizer.from_text(ins.DEFAULT_TEXT + pairs + "Lily had a ball. Lucy")
    cfg = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=16, n_layer=2, n_head=2, d_ff=24, context=256, **changes)
    model = GPT(cfg)
    with torch.no_grad():  # weights far larger than at initialisation: every prompt gets its own logits
        for weight in model.parameters():
            weight.normal_(0, 0.5)
    ckpt.save_checkpoint(root / name, model, tokenizer, {"step": 0})
    return root / name


def test_attribution_on_a_post_norm_model_says_why_it_cannot_be_split(tmp_path, monkeypatch):
    tiny_checkpoint(tmp_path, SHIPPED, norm_placement="post")
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    at = open_tab(run_page(), TABS.index("attribution"))
    assert not at.error and [i.value for i in at.info] == [
        "direct logit attribution needs a pre-norm model: in a post-norm model every block renormalises the stream, "
        "so it is not a sum of the components' outputs"]


VARIANTS = {"learned positions": {"position": "learned"}, "no positions": {"position": "none"},
            "grouped keys and values, tied embeddings": {"n_kv_head": 1, "tie_embeddings": True},
            "LayerNorm": {"norm": "layer"}, "post-norm": {"norm_placement": "post"}, "ReLU": {"ffn": "relu"},
            "GELU": {"ffn": "gelu"}, "QK-norm and ReLU²": {"qk_norm": True, "ffn": "relu2"}}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_stage_and_tab_works_for_every_model_the_train_page_can_make(variant, tmp_path, monkeypatch):
    """#25: every stage drawn and every tab's numbers computed, for each model variant, then the page itself."""
    from explorer import trace_figures as figs

    folder = tiny_checkpoint(tmp_path, SHIPPED, **VARIANTS[variant])
    model, tokenizer, _ = ckpt.load_weights(folder / "model.safetensors")
    ids = torch.tensor(tokenizer.encode(ins.DEFAULT_TEXT))
    cap = interp.capture(model, ids)
    position = len(ids) - 2
    tr = interp.trace(model, ids, position, cap, tokenizer)
    labels = vocab = [tokenizer.display(i) for i in range(model.cfg.vocab_size)]
    for stage in tr.stages:
        figs.stage_view(stage, tr, [labels[i] for i in ids], vocab, tokenizer.pieces(ids.tolist()), model.cfg.ffn)
    assert interp.logit_lens(model, cap).probs.shape == (2 * model.cfg.n_layer + 1, len(ids), model.cfg.vocab_size)
    if model.cfg.norm_placement == "pre":
        attribution = interp.logit_attribution(model, cap, position, int(ids[position + 1]))
        assert attribution.total == pytest.approx(attribution.logit, abs=1e-4)
    assert interp.ablation_sweep(model, cap)["loss"].notna().all()
    means = interp.reference_means(model, tokenizer)
    assert interp.ablation_sweep(model, cap, "mean", means=means)["loss"].notna().all()
    if model.cfg.norm_placement == "pre":
        target = int(ids[position + 1])
        effects = circuits.effects(model, cap, position, target, interp.runner_up(cap.logits[position], target), means)
        assert effects[["direct", "total"]].notna().all().all()
    setup = interp.patching_setup(model, tokenizer, "Lily had a ball. Lily", "Lucy had a ball. Lily", " ", "y")
    for sweep in (interp.patch_heads, interp.patch_residual, interp.patch_heads_by_position):
        assert torch.isfinite(sweep(model, setup)).all()
    assert np.isfinite(circuits.patch_sides(model, setup, "L1H0", [None, "L0H1"]).to_numpy()).all()

    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    at = open_tab(run_page(), TABS.index("attribution"))  # the page on the stage and the tab that crashed
    assert [e.value for e in at.error] == []


def test_the_page_runs_on_the_device_chosen_for_it_and_says_when_that_device_is_gone(monkeypatch):
    from gptcore import device

    monkeypatch.setattr(device, "accelerators", lambda: ["mps"])  # a machine with a second device to offer
    at = AppTest.from_file(str(PAGE), default_timeout=120)
    at.session_state["trace-device"] = "cpu"
    rerun(at)
    picker = at.selectbox(key="trace-device")
    assert picker.value == "cpu" and picker.options == ["auto", "CPU", "Apple GPU (MPS)"]
    assert "Runs the models on CPU" in " ".join(c.value for c in at.caption) and at.get("plotly_chart")
    picker.set_value("mps")  # offered, but this machine has no Apple GPU after all
    rerun(at)
    assert [e.value for e in at.error] == [
        "--device mps was asked for, but no Apple GPU (MPS) is available here: use --device cpu or auto"]


# --- a model shaped like SmolLM2, with the views of a model of many heads ----------------------------------------

def bpe_checkpoint(root: Path) -> Path:
    """A random 3-layer model with 4 query heads sharing 2 key/value heads, tied embeddings and a byte-level BPE
    trained on the page's texts, saved as the shipped checkpoint's stand-in."""
    from gptcore.config import GPTConfig
    from gptcore.model import GPT
    from gptcore.tokenizer import BPETokenizer

    texts = [ins.DEFAULT_TEXT] + [p.clean + p.corrupted for p in interp.WORD_PATCHING_PAIRS]
    tokenizer = BPETokenizer.train([text * 10 for text in texts], 330)
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=32, n_layer=3, n_head=4, n_kv_head=2, d_ff=48,
                    context=128, tie_embeddings=True)
    model = GPT(cfg)
    with torch.no_grad():
        for weight in model.parameters():
            weight.normal_(0, 0.5)
    ckpt.save_checkpoint(root / SHIPPED, model, tokenizer, {"step": 0})
    return root / SHIPPED


@pytest.fixture
def many_heads(tmp_path, monkeypatch):
    """The BPE model, with the page's limits lowered so that its 12 heads get the views of SmolLM2's 270: grids of
    every head, the lens's rows folded, and the sweeps that wait for a click."""
    from explorer import trace_figures as figs
    from explorer import trace_views as views

    folder = bpe_checkpoint(tmp_path)
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    monkeypatch.setattr(figs, "MANY", 4)
    monkeypatch.setattr(views, "QUICK_FLOPS", 0)
    monkeypatch.setattr(views, "DEEP", 1)
    return ckpt.load_weights(folder / "model.safetensors")[:2]


def test_a_bpe_model_with_grouped_heads_shows_its_tokens_and_its_key_value_groups(many_heads):
    model, tokenizer = many_heads
    at = run_page()
    ids = tokenizer.encode(ins.DEFAULT_TEXT)
    strip = chart(at, "trace-strip")[0]
    assert strip["type"] == "bar" and list(strip["text"]) == tokenizer.labels(ids)  # each token a bar: the cuts
    assert "␣cat" in strip["text"]
    position = at.select_slider(key="trace-position").value
    tr = interp.trace(model, torch.tensor(ids), position, interp.capture(model, ids), tokenizer)
    at.select_slider(key="trace-stage").set_value(tr.index("L1.qkv"))
    rerun(at)
    rows = chart(at, "trace-stage-figure")[0]["y"]
    assert list(rows) == ["q H0 · kv0", "q H1 · kv0", "q H2 · kv1", "q H3 · kv1", "k kv0 (H0–H1)", "k kv1 (H2–H3)",
                          "v kv0 (H0–H1)", "v kv1 (H2–H3)"]
    assert "k and v are computed once per key/value head (2×8)" in " ".join(c.value for c in at.caption)
    assert "4 query heads but only 2 key heads" in " ".join(m.value for m in at.markdown)


def test_a_model_of_many_heads_gets_grids_of_every_head_and_sweeps_on_request(many_heads):
    model, tokenizer = many_heads
    ids = tokenizer.encode(ins.DEFAULT_TEXT)
    cap = interp.capture(model, ids)
    at = run_page()
    position = at.select_slider(key="trace-position").value

    open_tab(at, TABS.index("lens"))  # the rows after each block only, and the grid on request
    assert not at.toggle(key="trace-lens-attention").value
    column = interp.lens_column(model, cap, position, attention=False)
    shown = np.array(chart(at, "trace-lens-column")[0]["z"], dtype=float)
    np.testing.assert_allclose(shown, column.probs.topk(5).values.numpy(), atol=1e-6)
    assert not [c for c in at.get("plotly_chart") if c.proto.id.endswith("-trace-lens")]
    at.button(key="trace-lens-grid").click()
    rerun(at)
    heat = chart(at, "trace-lens")[0]
    grid = interp.lens_grid(model, cap, list(heat["x"]), attention=False)
    np.testing.assert_allclose(np.array(heat["z"], dtype=float), grid.true_next.numpy(), atol=1e-6)
    assert heat["y"] == list(range(model.cfg.n_layer + 1))

    open_tab(at, TABS.index("attribution"))
    target = int(cap.ids[position + 1])
    foil = interp.runner_up(cap.logits[position], target)
    parts = interp.logit_attribution(model, cap, position, target, foil).parts.set_index("component")
    grid = np.array(chart(at, "trace-attribution-grid")[0]["z"], dtype=float)  # layers × (heads, FFN)
    assert grid.shape == (3, 5) and grid[2, 1] == pytest.approx(parts.loc["L2H1", "logit"], abs=1e-6)
    assert grid[1, 4] == pytest.approx(parts.loc["L1 FFN", "logit"], abs=1e-6)
    assert len(chart(at, "trace-attribution")[0]["x"]) == 16  # (the embedding and 15 components: fewer than TOP)
    at.button(key="trace-effects-button").click()
    rerun(at)
    effects = circuits.effects(model, cap, position, target, foil, interp.reference_means(model, tokenizer))
    np.testing.assert_allclose(chart(at, "trace-effects")[1]["y"], effects["total"].to_numpy(), atol=1e-6)

    open_tab(at, TABS.index("ablation"))
    at.button(key="trace-sweep").click()
    rerun(at)
    frame = interp.ablation_sweep(model, cap).set_index("component")
    grid = np.array(chart(at, "trace-sweep-grid")[0]["z"], dtype=float)
    assert grid[0, 3] == pytest.approx(frame.loc["L0H3", "loss increase"], abs=1e-6)

    at.session_state["trace-pair"] = "ioi"
    open_tab(at, TABS.index("patching"))
    pair = next(p for p in interp.WORD_PATCHING_PAIRS if p.id == "ioi")
    setup = interp.patching_setup(model, tokenizer, pair.clean, pair.corrupted, pair.clean_answer,
                                  pair.corrupted_answer)
    heads = interp.patch_heads(model, setup).numpy()
    np.testing.assert_allclose(np.array(chart(at, "trace-patch-heads")[0]["z"], dtype=float), heads, atol=1e-5)
    best = sorted(np.argsort(-np.abs(heads).ravel(), kind="stable")[:4])  # the grid's best restorers, in order
    assert at.multiselect(key="trace-position-heads").value == [interp.head_label(*divmod(int(i), 4)) for i in best]
    at.button(key="trace-patch-head_position-button").click()
    rerun(at)
    picked = [divmod(int(i), 4) for i in best]
    np.testing.assert_allclose(np.array(chart(at, "trace-patch-head_position-figure")[0]["z"], dtype=float),
                               interp.patch_heads_by_position(model, setup, heads=picked).numpy(), atol=1e-5)


def test_a_text_longer_than_a_trace_can_keep_is_cut_with_a_sentence(many_heads, monkeypatch):
    from explorer import trace_views as views

    model, tokenizer = many_heads
    monkeypatch.setattr(views, "CAPTURE_BUDGET", interp.capture_bytes(model.cfg, 10))
    at = run_page()
    left_out = len(tokenizer.encode(ins.DEFAULT_TEXT)) - 10
    assert [w.value for w in at.warning] == [
        f"A trace keeps every activation of every position, and on this model 10 tokens take about "
        f"{views.CAPTURE_BUDGET >> 20} MB: the last {left_out} tokens are left out."]
    assert at.select_slider(key="trace-position").options == [f"{i} '{label}'" for i, label in
                                                               enumerate(tokenizer.labels(tokenizer.encode(
                                                                   ins.DEFAULT_TEXT)[:10]))]
