"""Page 'FFN and SwiGLU': activation curves, the gate, the d_ff calculator, the quiz."""
from page_helpers import answer, app_page, chart, frame, metrics, run_page


def test_renders_with_the_tutorial_numbers():
    at = app_page("ffn_swiglu")
    examples = at.table[0].value
    assert examples["d_ff"].tolist() == [344, 11008]
    assert examples["d_model"].tolist() == [128, 4096]
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


def test_quiz_says_right_and_wrong():
    at = run_page("ffn_swiglu.py")
    answer(at, "ffn-dff", "8/3·d_model")
    at.button(key="ffn-dff-check").click().run()
    assert at.success and at.success[0].value.startswith("Right.")
    answer(at, "ffn-dff", "4·d_model")
    at.button(key="ffn-dff-check").click().run()
    assert not at.success and any(e.value.startswith("Not quite.") for e in at.error)


def test_in_chinese_the_tables_and_figures_are_translated_and_the_numbers_stay():
    at = app_page("ffn_swiglu", "zh")
    budget = frame(at, "FeedForward 实际计数")
    assert budget["前馈网络"].tolist() == ["ReLU/GELU MLP，d_ff = 4·d", "SwiGLU，d_ff = 8/3·d → 取 8 的倍数",
                                       "SwiGLU，d_ff = 4·d（不缩小）"]
    assert budget["公式"].tolist() == budget["FeedForward 实际计数"].tolist() == [131072, 132096, 196608]
    assert [t["x"] for t in chart(at, "ffn-budget-bars")] == [budget["前馈网络"].tolist()]
    assert metrics(at)["d_ff（取整后）"] == "344"
