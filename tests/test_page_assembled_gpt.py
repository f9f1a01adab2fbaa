"""Page 'The assembled GPT': parameter breakdown, forward shapes, view vs reshape (its quiz: test_concept_quizzes)."""
import math
import re

import pytest
from page_helpers import app_page, chart, figure, frame, metrics, panel, panel_text, run_page
from streamlit.testing.v1 import AppTest

from gptcore.config import GPTConfig
from gptcore.model import GPT


def diagram_text(at: AppTest) -> str:
    return " ".join(a["text"] for a in figure(at, "gpt-diagram")["layout"]["annotations"])


def test_tutorial_parameter_count():
    at = app_page("assembled_gpt")
    assert metrics(at) == {"parameters (formula)": "810,624", "GPT(cfg).num_params()": "810,624",
                           "one block": "197,888"}
    parts = frame(at, "counted in GPT").set_index("part")
    assert parts["parameters"].to_dict() == {
        "token embedding": 9472, "attention: qkv + proj": 65536, "FFN (SwiGLU)": 132096, "two RMSNorms": 256,
        "one block": 197888, "all 4 blocks": 791552, "final RMSNorm": 128, "output head": 9472, "total": 810624}
    assert (parts["parameters"] == parts["counted in GPT"]).all()
    assert any("**810,624**" in m.value for m in at.markdown)
    assert "block × 4 (pre-norm)" in diagram_text(at)


def test_other_configs_recount_against_the_real_model():
    at = run_page("assembled_gpt.py")
    before = chart(at, "gpt-shares")
    at.slider(key="gpt-layers").set_value(6).run()
    at.selectbox(key="gpt-norm").set_value("layer").run()
    at.selectbox(key="gpt-position").set_value("learned").run()
    assert not at.exception
    expected = GPT(GPTConfig(n_layer=6, norm="layer", position="learned")).num_params()
    assert metrics(at)["GPT(cfg).num_params()"] == metrics(at)["parameters (formula)"] == f"{expected:,}"
    assert chart(at, "gpt-shares") != before
    assert "block × 6 (pre-norm)" in diagram_text(at) and "positions<br>128 × 128" in diagram_text(at)
    at.number_input(key="gpt-heads").set_value(3).run()
    assert not at.exception
    assert any("must be divisible by n_head" in e.value for e in at.error)


def test_shapes_come_from_a_forward_pass():
    at = run_page("assembled_gpt.py")
    shapes = frame(at, "output shape").set_index("module")["output shape"]
    assert shapes["blocks.0.attn.qkv"] == "(2, 16, 384)"
    assert shapes["blocks.0.attn.hook_pattern"] == "(2, 4, 16, 16)"
    assert shapes["head"] == "(2, 16, 74)"
    at.number_input(key="gpt-T").set_value(32).run()
    assert frame(at, "output shape").set_index("module")["output shape"]["head"] == "(2, 32, 74)"
    at.number_input(key="gpt-T").set_value(500).run()
    assert any("between 1 and the context (128)" in e.value for e in at.error)


def test_view_error_is_torchs_own():
    at = run_page("assembled_gpt.py")
    assert any("view size is not compatible with input tensor's size and stride" in c.value for c in at.code)
    before = chart(at, "gpt-vr-wrong")
    at.slider(key="gpt-vr-heads").set_value(6).run()
    assert chart(at, "gpt-vr-wrong") != before


def test_d_ff_field_shows_the_width_in_use_and_follows_the_ffn():
    at = run_page("assembled_gpt.py")
    assert at.toggle(key="gpt-auto-ff").label == "d_ff = 8/3·d (×8)" and at.number_input(key="gpt-ff").value == 344
    at.selectbox(key="gpt-ffn").set_value("relu").run()
    assert at.toggle(key="gpt-auto-ff").label == "d_ff = 4·d"  # a classic MLP is 4·d wide
    assert at.number_input(key="gpt-ff").value == 512
    at.toggle(key="gpt-auto-ff").set_value(False).run()
    at.number_input(key="gpt-ff").set_value(1).run()
    assert frame(at, "counted in GPT").set_index("part").loc["FFN (ReLU)", "formula"] == "2 · 128 · 1"
    at.toggle(key="gpt-auto-ff").set_value(True).run()
    assert not at.exception
    field = at.number_input(key="gpt-ff")
    assert field.value == 512 and field.disabled
    assert frame(at, "counted in GPT").set_index("part").loc["FFN (ReLU)", "formula"] == "2 · 128 · 512"
    assert "128→512→128" in diagram_text(at)


def test_total_row_names_what_it_adds():
    at = run_page("assembled_gpt.py")
    total = frame(at, "counted in GPT").set_index("part").loc["total", "formula"]
    assert total == "token embedding + all 4 blocks + final RMSNorm + output head"
    at.selectbox(key="gpt-placement").set_value("post").run()
    at.selectbox(key="gpt-position").set_value("learned").run()
    parts = frame(at, "counted in GPT").set_index("part")
    assert parts.loc["total", "formula"] == "token embedding + position embedding + all 4 blocks + output head"
    assert not any(p.startswith("final") for p in parts.index)


def test_the_training_log_is_read_with_ln_v_of_the_tutorial_and_of_the_measured_corpus():
    at = app_page("assembled_gpt")
    text = " ".join(m.value for m in at.markdown)
    assert "ln 74 = 4.30" in text and "4.495 rather than 4.30" in text and "after one AdamW step" in text
    measured = next(c.value for c in at.code if c.value.startswith("vocab ") and "step  500" not in c.value)
    vocab = int(re.search(r"vocab (\d+), params ([\d,]+)", measured).group(1))
    params = int(re.search(r"params ([\d,]+)", measured).group(1).replace(",", ""))
    assert params == GPT(GPTConfig(vocab_size=vocab)).num_params()
    assert f"ln {vocab} = **{math.log(vocab):.2f}**" in text
    log = frame(at, "ln V").iloc[0]
    train, val = (float(v) for v in re.search(r"train ([\d.]+)  val ([\d.]+)", measured).groups())
    assert log["ln V"] == pytest.approx(math.log(vocab))
    assert train == pytest.approx(log["train loss, step 0"], abs=5e-4) and val == pytest.approx(
        log["val, step 0 (after one update)"], abs=5e-4)
    assert log["ln V"] < train and abs(train - log["ln V + σ²/2"]) < 0.15  # untrained: about ln V + σ²/2
    assert val < log["val before the update"] - 0.5  # the one update before the step-0 evaluation


def test_the_tutorials_count_in_the_text_is_the_tables():
    at = app_page("assembled_gpt")
    text = next(m.value for m in at.markdown if "**810,624**" in m.value)
    parts = frame(at, "counted in GPT").set_index("part")["counted in GPT"]
    for part in ("token embedding", "attention: qkv + proj", "FFN (SwiGLU)", "one block", "total"):
        assert f"{parts[part]:,}" in text


def test_in_chinese_the_parts_and_the_diagram_are_translated():
    at = app_page("assembled_gpt", "zh")
    parts = frame(at, "在 GPT 上实际计数").set_index("部分")
    assert parts.loc["总计", "公式"] == "词元嵌入 + 全部 4 个块 + 最终 RMSNorm + 输出头"
    assert parts.loc["总计", "参数量"] == 810624 and parts.loc["一个块", "公式"] == "以上三项之和"
    assert "块 × 4（前置归一化）" in diagram_text(at) and "注意力<br>4 个头 × 32<br>因果，RoPE" in diagram_text(at)
    assert "ln 74 = 4.30" in " ".join(m.value for m in at.markdown)


def test_the_real_model_panel_gives_the_embeddings_share_of_smollm2_and_of_ours():
    box = panel(app_page("assembled_gpt"), "gpt-real")
    text = panel_text(box)
    assert "49,152 × 576 = **28,311,552** weights, **21.0%** of its **134,515,008**" in text
    assert "would hold 162,826,560 weights, 34.8% of them" in text  # with a head of its own
    assert "74 × 128 = 9,472 weights in its embedding and as many again in its own head: 18,944, 2.3% of its 810,624" \
        in text
    shares = box.table[0].value
    assert shares.loc["SmolLM2-135M", ["embedding", "tied", "parameters"]].tolist() == [28_311_552, True, 134_515_008]
    assert not shares.loc["this app's GPT", "tied"]
    zh = panel_text(panel(app_page("assembled_gpt", "zh"), "gpt-real"))
    assert "**28,311,552** 个权重，占它 **134,515,008** 个参数的 **21.0%**" in zh


def test_the_real_model_panel_compares_the_configuration_picked():
    at = run_page("assembled_gpt.py")
    at.number_input(key="gpt-vocab").set_value(1000).run()
    n = GPT(GPTConfig(vocab_size=1000)).num_params()
    assert f"1,000 × 128 = 128,000 weights in its embedding and as many again in its own head: 256,000, " \
           f"{256_000 / n:.1%} of its {n:,}" in panel_text(panel(at, "gpt-real"))
