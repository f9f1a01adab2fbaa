"""Running pages under Streamlit AppTest and reading their output: plotly figures by chart key, dataframes by column,
metrics by label."""
import base64
import functools
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

PAGES = Path(__file__).resolve().parent.parent / "app_pages"


def run_page(name: str) -> AppTest:
    """Run app_pages/<name> once and check that it rendered without an exception."""
    at = AppTest.from_file(str(PAGES / name), default_timeout=60).run()
    assert not at.exception, at.exception
    return at


def open_page(stem: str, lang: str = "en") -> AppTest:
    """app_pages/<stem>.py opened through app.py, a fresh run of its own: for a page that links to other pages, which
    only the navigation knows, and whose widgets the test changes."""
    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=120)
    at.query_params["lang"] = lang
    at.run()
    if stem != "home":
        at.switch_page(f"app_pages/{stem}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@functools.cache
def app_page(stem: str, lang: str = "en") -> AppTest:
    """app_pages/<stem>.py opened through app.py (so with the navigation and the sidebar) in `lang`, rendered once for
    the whole test session: every test that only reads a page's first render shares it. Never set a widget or
    rerun it; a test that does takes its own run_page() or open_page()."""
    return open_page(stem, lang)


def decode(value):
    """Plotly ships numpy arrays as base64 {'bdata', 'dtype', 'shape'}: turn them back into nested lists."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        return array.reshape([int(n) for n in str(value.get("shape", len(array))).split(",")]).tolist()
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def figure(at: AppTest, key: str) -> dict:
    """The whole plotly figure (data and layout) rendered with this key."""
    spec = next(c.proto.spec for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}"))
    return decode(json.loads(spec))


def chart(at: AppTest, key: str) -> list[dict]:
    """The traces of the plotly chart rendered with this key."""
    return figure(at, key)["data"]


def frame(at: AppTest, label: str):
    """The first dataframe with `label` among its columns or its index."""
    return next(d.value for d in at.dataframe if label in d.value.columns or label in d.value.index)


def metrics(at: AppTest) -> dict[str, str]:
    """Every st.metric on the page: {label: value}."""
    return {m.label: m.value for m in at.metric}


def answer(at: AppTest, quiz_key: str, starts_with: str) -> None:
    """Pick the quiz option that starts with this text (the radio's values are option indices)."""
    radio = at.radio(key=f"{quiz_key}-radio")
    radio.set_value(next(i for i, o in enumerate(radio.options) if o.startswith(starts_with)))


def panel(at: AppTest, key: str):
    """The bordered container made with st.container(border=True, key=key): its own markdown, dataframes, captions."""
    def blocks(node):
        for child in getattr(node, "children", {}).values():
            yield child
            yield from blocks(child)

    return next(b for b in blocks(at.main) if getattr(b, "proto", None) is not None
                and getattr(b.proto, "id", "").endswith(f"-{key}") and b.proto.flex_container.border)


def panel_text(box) -> str:
    """A panel's markdown as one line, so a sentence reads the same wherever the catalog broke its lines."""
    return " ".join(" ".join(m.value for m in box.markdown).split())


def notes(at) -> list[str]:
    """The page's info boxes: where Inspect and Trace explain a result."""
    return [box.value for box in at.info]


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)
