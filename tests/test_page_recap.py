"""Page 'Recap and what comes next': the three things, the road to GPT-2 counted, the pointers onward.

The page links to other pages, so it runs through app.py's navigation."""
from page_helpers import PAGES, frame
from streamlit.testing.v1 import AppTest


def run_page(name: str, lang: str = "en") -> AppTest:
    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    at.switch_page(f"pages/{name}").run()
    assert not at.exception, at.exception
    return at


def test_the_road_to_gpt2_is_counted_with_the_same_formulas():
    at = run_page("recap.py")
    scale = frame(at, "× this model").set_index("model")
    assert scale["parameters"].to_dict() == {"this app's GPT": 810_624, "GPT-2 small": 124_439_808,
                                             "GPT-2 XL": 1_557_611_200, "LLaMA-2-7B": 6_738_415_616}
    assert scale.loc["this app's GPT", "tokens"] == "characters" and scale.loc["GPT-2 small", "tokens"] == "BPE"
    assert scale.loc["GPT-2 small", "× this model"] == 124_439_808 / 810_624
    text = " ".join(m.value for m in at.markdown)
    for point in ("BPE", "Mixed precision", "Many GPUs", "Checkpoints", "810,624", "ln V"):
        assert point in text


def test_the_pointers_onward_are_all_there():
    at = run_page("recap.py")
    text = " ".join(m.value for m in at.markdown)
    for pointer in ("GQA and MLA", "Sliding-window attention", "Sparse attention", "Mixture of experts",
                    "FlashAttention"):
        assert f"**{pointer}" in text


def test_in_chinese():
    at = run_page("recap.py", "zh")
    scale = frame(at, "本模型的倍数").set_index("模型")
    assert scale.loc["本应用的 GPT", "词元类型"] == "字符" and scale.loc["GPT-2 XL", "参数量"] == 1_557_611_200
    assert [h.value for h in at.header] == ["三条要点", "从这个模型到 GPT-2", "现代模型还加了什么"]
