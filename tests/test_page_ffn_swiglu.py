"""Page 'FFN and SwiGLU': activation curves, the gate, the d_ff calculator (its quiz: test_concept_quizzes)."""
from page_helpers import app_page, chart, frame, metrics, panel, panel_text, run_page


def test_renders_with_the_tutorial_numbers():
    at = app_page("ffn_swiglu")
    examples = at.table[0].value
    assert examples["d_ff"].tolist() == ["344", "11,008"]  # with thousands separators, as every table writes them
    assert examples["d_model"].tolist() == ["128", "4,096"]
    assert metrics(at)["d_ff (rounded up)"] == "344"
    budget = frame(at, "counted in FeedForward")
    assert budget["formula"].tolist() == budget["counted in FeedForward"].tolist() == [131072, 132096, 196608]
    assert any("matches the parameter count of a real gptcore FeedForward" in c.value for c in at.caption)


def test_calculator_reproduces_llama_and_redraws():
    at = run_page("ffn_swiglu.py")
    before = chart(at, "ffn-budget-bars")
    at.number_input(key="ffn-calc-d").set_value(4096).run()
    at.selectbox(key="ffn-calc-multiple").set_value(256).run()
    assert not at.exception
    assert metrics(at)["d_ff (rounded up)"] == "11,008"
    assert metrics(at)["8/3 · d_model"] == "10,922.67"
    budget = frame(at, "counted in FeedForward")
    assert budget.loc[1, "counted in FeedForward"] == 3 * 4096 * 11008
    assert chart(at, "ffn-budget-bars") != before


def test_gate_heatmap_follows_the_input():
    at = run_page("ffn_swiglu.py")
    before = chart(at, "ffn-gate")
    at.number_input(key="ffn-gate-seed").set_value(7).run()
    after = chart(at, "ffn-gate")
    assert len(after) == 3 and after != before
    curves = chart(at, "ffn-curves")
    at.multiselect(key="ffn-acts").set_value(["SiLU"]).run()
    assert [t["name"] for t in chart(at, "ffn-curves")] == ["SiLU"] != [t["name"] for t in curves]


def test_no_activation_picked_shows_a_message_instead_of_an_empty_chart():
    at = run_page("ffn_swiglu.py")
    assert not at.info
    at.multiselect(key="ffn-acts").set_value([]).run()
    assert not at.exception
    assert [i.value for i in at.info] == ["Pick at least one activation to plot."]
    assert not any(c.proto.id.endswith("-ffn-curves") for c in at.get("plotly_chart"))


def test_in_chinese_the_tables_and_figures_are_translated_and_the_numbers_stay():
    at = app_page("ffn_swiglu", "zh")
    budget = frame(at, "FeedForward 实际计数")
    assert budget["前馈网络"].tolist() == ["ReLU/GELU MLP，d_ff = 4·d", "SwiGLU，d_ff = 8/3·d → 取 8 的倍数",
                                       "SwiGLU，d_ff = 4·d（不缩小）"]
    assert budget["公式"].tolist() == budget["FeedForward 实际计数"].tolist() == [131072, 132096, 196608]
    assert [t["x"] for t in chart(at, "ffn-budget-bars")] == [budget["前馈网络"].tolist()]
    assert metrics(at)["d_ff（取整后）"] == "344"


def test_the_real_model_panel_checks_smollm2s_width_with_swiglu_hidden():
    box = panel(app_page("ffn_swiglu"), "ffn-real")
    text = panel_text(box)
    assert "*d_ff* = **1,536** = 8/3 · 576 exactly" in text and "`swiglu_hidden(576)` = 1,536" in text
    assert "3 · 576 · 1,536 = **2,654,208**" in text and "8 · 576² = 2,654,208" in text
    widths = box.table[0].value
    assert widths["d_ff"].tolist() == [344, 1536, 3072, 8192, 5632]
    assert widths.loc["SmolLM2-135M", "d_ff is"] == "exactly 8/3·d_model"
    assert widths.loc["TinyLlama-1.1B", "d_ff is"] == "8/3·d_model rounded up to a multiple of 256"
    zh = panel(app_page("ffn_swiglu", "zh"), "ffn-real")
    assert "d_ff = **1,536**，正好是 8/3 · 576" in panel_text(zh)
    assert zh.table[0].value.loc["Llama-3.2-1B", "d_ff 的取法"] == "不是 8/3，而是 4·d_model"
