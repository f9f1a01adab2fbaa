"""A concept page's controls in its URL (explorer.links.linked): a link opens the page at its values, a value the
widget would not accept is passed over, a change is written back, and a value at its default leaves the URL."""
import pytest
import streamlit as st
from page_helpers import PAGES, chart, figure, metrics
from streamlit.testing.v1 import AppTest

from explorer.links import Control


def opened(stem: str, **params) -> AppTest:
    """app_pages/<stem>.py opened through app.py from a link with these query parameters."""
    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=120)
    at.run()
    for name, value in params.items():
        at.query_params[name] = value
    at.switch_page(f"app_pages/{stem}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("widget, args, kwargs, url, value", [
    (st.slider, ("T", 2, 12, 4), {}, "8", 8),
    (st.slider, ("T", 2, 12, 4), {}, "13", None),  # outside the range
    (st.slider, ("T", 2, 12, 4), {}, "8.5", None),  # not a whole number
    (st.slider, ("steps", 10, 400, 200), {"step": 10}, "205", None),  # off the step
    (st.slider, ("shift", -3.0, 3.0, 1.0), {"step": 0.25}, "-2.75", -2.75),
    (st.slider, ("shift", -3.0, 3.0, 1.0), {"step": 0.25}, "nan", None),
    (st.number_input, ("seed", 0, 10_000, 0), {}, "-1", None),
    (st.select_slider, ("θ", [100, 10_000, 500_000]), {"value": 10_000, "format_func": "{:,}".format}, "500000",
     500_000),
    (st.select_slider, ("θ", [100, 10_000, 500_000]), {"value": 10_000, "format_func": "{:,}".format}, "500,000",
     None),  # the shown name is not the value
    (st.radio, ("mode", ["tied", "random"]), {}, "random", "random"),
    (st.radio, ("mode", ["tied", "random"]), {}, "绑定", None),
    (st.segmented_control, ("heads", [1, 2, 4]), {"default": 2}, "4", 4),
    (st.toggle, ("bias",), {}, "true", True),
    (st.toggle, ("bias",), {}, "yes", None),
    (st.text_input, ("text", "Lucy saw a cat."), {"max_chars": 5}, "Lucy!", "Lucy!"),
    (st.text_input, ("text", "Lucy saw a cat."), {"max_chars": 5}, "Lucy saw", None),
])
def test_a_url_value_is_taken_only_where_the_widget_accepts_it(widget, args, kwargs, url, value):
    assert Control.of(widget, args, {"key": "k", **kwargs}).parse([url]) == value


def test_a_multiselect_is_kept_as_one_parameter_a_choice():
    control = Control.of(st.multiselect, ("shown", ["ReLU", "GELU", "SiLU"]), {"default": ["ReLU", "GELU", "SiLU"]})
    assert control.texts(["GELU"]) == ["GELU"] and control.texts([]) == [""]
    assert control.texts(["ReLU", "GELU", "SiLU"]) is None  # the default: no parameter
    assert control.parse(["SiLU", "ReLU"]) == ["SiLU", "ReLU"] and control.parse([""]) == []
    assert control.parse(["SiLU", "Swish"]) is None and control.parse(["SiLU", "SiLU"]) is None


def test_a_rope_link_opens_its_theta_and_pair_in_chinese_and_passes_over_a_bad_offset():
    at = opened("rope", lang="zh", **{"rope-theta": "500000", "rope-pair": "3", "rope-m": "5000"})
    assert at.select_slider(key="rope-theta").value == 500_000 and at.slider(key="rope-pair").value == 3
    assert at.number_input(key="rope-m").value == 500  # 5000 is beyond the field's 4096: its default
    assert chart(at, "rope-freqs")[0]["y"][-1] == pytest.approx(500_000 ** (-62 / 64), rel=1e-4)
    assert figure(at, "rope-pair-plot")["layout"]["xaxis"]["title"]["text"].endswith("6")  # pair 3: channels 6, 7
    assert dict(at.query_params) == {"lang": "zh", "rope-theta": "500000", "rope-pair": "3"}
    at.slider(key="rope-pair").set_value(6).run()  # back to its default: the parameter goes
    at.select_slider(key="rope-theta").set_value(100).run()
    assert dict(at.query_params) == {"lang": "zh", "rope-theta": "100"}


def test_a_calculator_link_keeps_its_preset_and_only_the_fields_that_differ_from_it():
    at = opened("hyperparameters", **{"hp-preset": "GPT-3 175B", "hp-d_model": "1536", "hp-ffn": "moe"})
    assert at.selectbox(key="hp-preset").value == "GPT-3 175B" and at.number_input(key="hp-d_model").value == 1536
    assert at.number_input(key="hp-n_layer").value == 96 and at.selectbox(key="hp-ffn").value == "gelu"  # GPT-3's
    assert metrics(at)["parameters"] == "15.49 B"  # 96 GPT-3 blocks at width 1536
    assert {k: v for k, v in at.query_params.items() if k.startswith("hp-")} == {"hp-preset": "GPT-3 175B",
                                                                                 "hp-d_model": "1536"}
    at.button(key="hp-reset").click().run()  # GPT-3 as it is: only the preset stays in the URL
    assert {k for k in at.query_params if k.startswith("hp-")} == {"hp-preset"}
