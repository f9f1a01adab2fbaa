"""Page 'Multi-head attention & order': parameter counts, head patterns, the permutation check."""
import numpy as np
import pytest
from page_helpers import app_page, chart, figure, frame, panel, panel_text, run_page
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

from explorer.shipped import shipped_checkpoint
from gptcore import inspector as ins


@pytest.fixture
def at():
    return run_page("multihead_order.py")  # run_page checks that the page rendered without an exception


def test_parameter_count_is_the_same_for_every_head_count():
    at = app_page("multihead_order")
    counts = frame(at, "n_head")
    assert counts["parameters"].tolist() == [65_536] * len(counts) and len(counts) >= 4


def test_parameter_counts_have_thousands_separators():
    at = app_page("multihead_order")
    proto = next(d.proto for d in at.dataframe if "n_head" in d.value.columns)
    shown = convert_arrow_bytes_to_pandas_df(proto.arrow_data.styler.display_values)
    assert set(shown["parameters"]) == set(shown["4·d_model²"]) == {"65,536"}


def test_tutorial_permutation_is_true_without_mask_and_false_with_mask_or_rope():
    at = app_page("multihead_order")
    assert at.text_input(key="mh-perm").value == "4, 2, 0, 1, 3"
    table = frame(at, "allclose").set_index("attention")["allclose"]
    assert table.tolist() == ["True", "False", "False", "False"]
    assert table.index[1] == "with the causal mask" and table.index[2] == "with RoPE"


def test_head_count_changes_the_patterns(at):
    assert len(chart(at, "mh-patterns")) == 2
    at.button_group(key="mh-heads").set_value(4).run()
    assert len(chart(at, "mh-patterns")) == 4
    at.button_group(key="mh-heads").set_value(1).run()
    patterns = chart(at, "mh-patterns")
    assert len(patterns) == 1 and patterns[0]["z"][0][1:] == [0.0] * 4  # causal: row 0 sees only itself


def test_a_new_permutation_changes_the_outputs_and_stays_equal_without_position_info(at):
    before = chart(at, "perm-outputs")
    at.text_input(key="mh-perm").set_value("1 0 2 3 4").run()
    after = chart(at, "perm-outputs")
    assert after[0]["z"] != before[0]["z"]
    assert frame(at, "allclose")["allclose"].tolist()[0] == "True"
    assert max(abs(v) for row in after[2]["z"] for v in row) < 1e-4  # the difference panel


def test_mask_variant_shows_a_nonzero_difference(at):
    at.radio(key="mh-variant").set_value("causal").run()
    difference = chart(at, "perm-outputs")[2]["z"]
    assert max(abs(v) for row in difference for v in row) > 1


BAD_PERMUTATIONS = [("4 2 0 1", "give 5 numbers"), ("4 2 0 1 9", "9 is out of range"),
                    ("a b c d e", "'a' is not a whole number"), ("", "enter an order")]


def test_bad_permutations_get_a_clear_message(at):
    problems = []
    for text, message in BAD_PERMUTATIONS:  # one after another in the same field, as a reader would type them
        at.text_input(key="mh-perm").set_value(text).run()
        errors = [e.value for e in at.error]
        if at.exception or not errors or message not in errors[0]:
            problems.append(f"{text!r}: errors {errors}, exception {[e.value for e in at.exception]}")
        if any("allclose" in d.value.columns for d in at.dataframe):
            problems.append(f"{text!r}: the allclose table is still shown")
    assert problems == [], "\n".join(problems)


def test_trained_heads_are_one_mosaic_heatmap_with_a_title_over_each_head():
    at = app_page("multihead_order")
    fig = figure(at, "mh-trained")
    (trace,) = fig["data"]  # one heatmap on one pair of axes, not a subplot per head
    text = at.text_input(key="mh-trained-text").value
    shipped = shipped_checkpoint()
    layer = at.segmented_control(key="mh-layer").value
    patterns = ins.inspect_text(shipped.model, shipped.tokenizer, text).patterns[layer].float().numpy()
    T, z = len(text), np.array(trace["z"], dtype=float)  # (the gaps arrive as None: NaN)
    gap = z.shape[1] - 2 * T
    assert z.shape == (2 * T + gap, 2 * T + gap) and gap >= 2
    for h in range(4):
        top, left = h // 2 * (T + gap), h % 2 * (T + gap)
        np.testing.assert_allclose(z[top:top + T, left:left + T], patterns[h], atol=1e-6)
    assert np.isnan(z[T:T + gap]).all() and np.isnan(z[:, T:T + gap]).all()
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert len(titles) == 4 and all(title.startswith(f"L{layer}H{h}") for h, title in enumerate(titles))
    x = trace["x"]
    assert len(set(x)) == len(x)  # every column its own category, so the hover names the key of its own head
    assert x[0].replace("\u200b", "") == x[T + gap].replace("\u200b", "") == f"0 '{ins.token_labels(text)[0]}'"
    keys = [k.removeprefix("<br>") for k in fig["layout"]["xaxis"]["ticktext"]]  # word by word: the text reads
    assert " ".join(keys[:len(keys) // 2]) == " ".join(keys[len(keys) // 2:]) == " ".join(text.split())
    scores = frame(at, "entropy")
    assert scores.columns[:2].tolist() == ["head", "role"]  # the role beside the pinned head name


def test_the_real_model_panel_shows_smollm2s_grouped_query_attention_and_what_it_saves():
    box = panel(app_page("multihead_order"), "mh-real")
    text = panel_text(box)
    assert "In a real model" in text and "**9** query heads but only **3** key/value heads" in text
    for number in ("2 × 3 × 64", "**11,520**", "would keep 34,560", "**3×**", "189 MB instead of 566 MB",
                   "221,184 weights per block instead of 663,552", "**13,271,040**", "9.9% of its 134,515,008",
                   "4 query heads and 4 key/value heads"):
        assert number in text
    kv = box.table[0].value
    assert kv.loc["SmolLM2-135M", ["query heads", "key/value heads", "KV cache / token", "without sharing",
                                   "smaller by"]].tolist() == [9, 3, 11_520, 34_560, 3]
    assert kv.loc["this app's GPT", "smaller by"] == 1 and kv.loc["TinyLlama-1.1B", "smaller by"] == 8
    assert any("SmolLM2-135M/blob/main/config.json" in c.value for c in box.caption)


def test_in_chinese_the_real_model_panel_keeps_its_numbers():
    box = panel(app_page("multihead_order", "zh"), "mh-real")
    text = panel_text(box)
    assert "真实模型中" in text and "**9** 个查询头，却只有 **3** 个键/值头" in text
    assert "**13,271,040**" in text and "189 MB 而不是 566 MB" in text
    assert box.table[0].value.loc["本应用的 GPT", "查询头"] == 4
