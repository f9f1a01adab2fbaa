"""Page 'Recap and what comes next': the three things, the road to GPT-2 counted, the pointers onward.

The page links to other pages, so it runs through app.py's navigation (the session's shared render)."""
from page_helpers import app_page, frame


def test_the_road_to_gpt2_is_counted_with_the_same_formulas():
    at = app_page("recap")
    scale = frame(at, "× this model").set_index("model")
    assert scale["parameters"].to_dict() == {"this app's GPT": 810_624, "GPT-2 small": 124_439_808,
                                             "GPT-2 XL": 1_557_611_200, "LLaMA-2-7B": 6_738_415_616}
    assert scale.loc["this app's GPT", "tokens"] == "characters" and scale.loc["GPT-2 small", "tokens"] == "BPE"
    assert scale.loc["GPT-2 small", "× this model"] == 124_439_808 / 810_624
    assert scale.columns[:2].tolist() == ["parameters", "× this model"]  # beside the pinned name: the text's count
    text = " ".join(m.value for m in at.markdown)
    for point in ("BPE", "Mixed precision", "Many GPUs", "Checkpoints", "810,624", "ln V"):
        assert point in text


def test_the_pointers_onward_are_all_there():
    text = " ".join(m.value for m in app_page("recap").markdown)
    for pointer in ("GQA and MLA", "Sliding-window attention", "Sparse attention", "Mixture of experts",
                    "FlashAttention"):
        assert f"**{pointer}" in text


def test_in_chinese():
    at = app_page("recap", "zh")
    scale = frame(at, "本模型的倍数").set_index("模型")
    assert scale.loc["本应用的 GPT", "词元类型"] == "字符" and scale.loc["GPT-2 XL", "参数量"] == 1_557_611_200
    assert [h.value for h in at.header] == ["三条要点", "从这个模型到 GPT-2", "现代模型还加了什么"]
