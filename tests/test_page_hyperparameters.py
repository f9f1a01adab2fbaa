"""Page 'Hyperparameters': consensus table, published configs, the cost calculator, stability patches, quiz."""
import pandas as pd
import torch
from page_helpers import app_page, chart, figure, frame, metrics, open_page, panel, panel_text
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest


def test_published_configs_and_their_ratios():
    at = app_page("hyperparameters")
    published = frame(at, "d_model / n_layer").set_index("model")
    assert published.loc["GPT-3 175B", ["d_model", "n_layer", "n_head", "d_head", "d_model / n_layer"]].tolist() == [
        12288, 96, 96, 128, 128]
    assert published.loc["LLaMA-2-7B", ["d_model", "n_layer", "n_head", "d_ff", "d_model / n_layer"]].tolist() == [
        4096, 32, 32, 11008, 128]
    assert round(published.loc["LLaMA-2-7B", "d_ff / d_model"], 2) == 2.69
    assert published.columns[:2].tolist() == ["parameters", "d_ff / d_model"]  # beside the pinned model name
    text = " ".join(m.value for m in at.markdown)
    assert "**2.69**" in text and "11,008" in text and "**128**" in text
    consensus = at.table[0].value
    assert len(consensus) == 5 and "= d_model, with d_head mostly 64 or 128" in consensus["usual choice"].tolist()


def test_calculator_presets_and_costs():
    at = open_page("hyperparameters")
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
    at = open_page("hyperparameters")
    before = chart(at, "hp-drift-fig")
    table = frame(at, "max prob").set_index("patch")
    at.select_slider(key="hp-drift").set_value(64.0).run()
    after = frame(at, "max prob").set_index("patch")
    assert chart(at, "hp-drift-fig") != before
    assert after.loc["no patch", "max prob"] > table.loc["no patch", "max prob"]
    assert abs(after.loc["QK-norm", "max prob"] - table.loc["QK-norm", "max prob"]) < 1e-4


def test_quiz_multi_select():
    at = open_page("hyperparameters")
    at.checkbox(key="hp-4096-opt0").check()
    at.checkbox(key="hp-4096-opt1").check()
    at.button(key="hp-4096-check").click().run()
    assert at.success and at.success[0].value.startswith("Right.")
    at.checkbox(key="hp-4096-opt1").uncheck()
    at.checkbox(key="hp-4096-opt2").check()
    at.button(key="hp-4096-check").click().run()
    assert not at.success and any(e.value.startswith("Not quite.") for e in at.error)


def displayed(at: AppTest, label: str) -> pd.DataFrame:
    """The strings shown by the first styled dataframe with `label` among its columns (its display values)."""
    proto = next(d.proto for d in at.dataframe if label in d.value.columns)
    return convert_arrow_bytes_to_pandas_df(proto.arrow_data.styler.display_values)


def test_a_huge_config_renders_the_whole_page_in_readable_numbers():
    at = open_page("hyperparameters")
    for name, value in (("d_model", 10_000_000), ("n_head", 1), ("n_layer", 10_000_000)):
        at.number_input(key=f"hp-{name}").set_value(value).run()
    assert not at.exception  # the counts pass 2⁶³; they used to break the chart
    assert metrics(at)["parameters"] == "4.00e+21"
    assert metrics(at)["fp32 AdamW training memory"] == "6.41e+22 bytes"
    assert max(chart(at, "hp-costs")[-1]["y"]) > 2.0 ** 63
    memory = displayed(at, "bytes / param")
    assert memory.loc[0, "training total"] == "6.405e+13" and memory.map(len).max().max() <= 12
    assert frame(at, "max prob") is not None and at.checkbox(key="hp-4096-opt0")  # the sections after it


def test_memory_table_is_narrow():
    at = app_page("hyperparameters")
    memory = frame(at, "training total")
    # the key numbers beside the pinned precision, the parts after them
    assert memory.columns.tolist() == ["precision", "bytes / param", "training total", "weights", "gradients",
                                       "AdamW m + v", "master weights"]
    assert displayed(at, "bytes / param").loc[0, "training total"] == "107.815"


def test_reset_restores_the_selected_preset():
    at = open_page("hyperparameters")
    at.selectbox(key="hp-preset").set_value("GPT-3 175B").run()
    gpt3 = metrics(at)["parameters"]
    at.number_input(key="hp-d_model").set_value(1536).run()
    at.selectbox(key="hp-ffn").set_value("swiglu").run()
    assert metrics(at)["parameters"] != gpt3
    at.button(key="hp-reset").click().run()
    assert at.number_input(key="hp-d_model").value == 12288 and at.selectbox(key="hp-ffn").value == "gelu"
    assert metrics(at)["parameters"] == gpt3 == "174.60 B"


def test_z_loss_is_shown_on_the_shipped_models_output_logits():
    from explorer.shipped import shipped_checkpoint
    from gptcore.demos import hyperparams as hp

    at = open_page("hyperparameters")
    shipped = shipped_checkpoint()
    text = at.text_input(key="hp-z-text").value
    ids = torch.tensor(shipped.tokenizer.encode(text[:-1]))[None]
    with torch.no_grad():
        logits = shipped.model(ids)[0][0, -1]  # the output layer: one logit per character of the vocabulary
    assert logits.shape == (shipped.tokenizer.vocab_size,)
    log_z = torch.logsumexp(logits, -1).item()
    assert metrics(at)["log Z"] == f"{log_z:.2f}"
    assert metrics(at)["z-loss"] == f"{hp.Z_LOSS_WEIGHT * log_z ** 2:.2e}"
    title = figure(at, "hp-z-fig")["layout"]["annotations"][0]["text"].replace("<br>", " ")  # the metric's number
    assert f"cross-entropy stays {metrics(at)['cross-entropy']})" in title
    text = " ".join(m.value for m in at.markdown)
    assert "holds only while **log Z > 0**" in text and "lowers every logit" in text
    at.slider(key="hp-z-shift").set_value(-20.0).run()  # log Z < 0 now: the z-loss raises every logit
    assert float(metrics(at)["log Z"]) < 0 and "raises every logit" in " ".join(m.value for m in at.markdown)


def test_the_attention_flops_say_they_assume_causal_attention():
    at = app_page("hyperparameters")
    text = next(m.value for m in at.markdown if "FLOPs per token" in m.value)
    assert "This count assumes causal attention" in text and "halved" in text


def test_in_chinese_the_tables_and_the_consensus_are_translated():
    at = app_page("hyperparameters", "zh")
    consensus = at.table[0].value
    assert consensus.index.tolist() == ["d_ff / d_model", "n_head × d_head", "d_model / n_layer", "词表",
                                        "dropout / 权重衰减"]
    assert frame(at, "d_model / n_layer").set_index("模型").loc["本应用的 GPT", "参数量"] == 810624
    assert frame(at, "精度")["精度"].tolist() == ["fp32", "bf16 混合精度", "纯 bf16"]
    assert frame(at, "补丁")["补丁"].tolist() == ["不打补丁", "QK-norm", "软截断 5"]
    assert "12,288" in " ".join(m.value for m in at.markdown)


def test_the_real_model_panel_puts_ours_smollm2_and_three_published_models_side_by_side():
    box = panel(app_page("hyperparameters"), "hp-real")
    table = box.table[0].value
    assert table.columns.tolist() == ["this app's GPT", "SmolLM2-135M", "Qwen3-0.6B", "Llama-3.2-1B", "TinyLlama-1.1B"]
    assert table.index.tolist() == ["layers", "d_model", "heads", "key/value heads", "d_head", "d_ff", "d_ff / d_model",
                                    "vocabulary", "context", "θ", "tied", "parameters", "embedding share"]
    assert table["SmolLM2-135M"].tolist() == ["30", "576", "9", "3", "64", "1536", "2.667", "49,152", "8,192",
                                              "100,000", "✓", "134,515,008", "21.0%"]
    assert table.loc["parameters"].tolist() == ["810,624", "134,515,008", "596,049,920", "1,235,814,400",
                                                "1,100,048,384"]
    assert table.loc["d_head", "Qwen3-0.6B"] == "128" and table.loc["tied", "TinyLlama-1.1B"] == "—"
    text = panel_text(box)
    assert "(SmolLM2-135M: 134,515,008)" in text and "at most 2,048 tokens" in text and "3 of the 4 tie" in text
    zh = panel(app_page("hyperparameters", "zh"), "hp-real").table[0].value
    assert zh.columns[0] == "本应用的 GPT" and zh.loc["参数量", "SmolLM2-135M"] == "134,515,008"
