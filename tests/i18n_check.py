"""What a page shows a reader, gathered from an AppTest run, and the runs of English words left in it.

`rendered_texts` collects the text a person reads: headings, markdown, captions, alerts, widget labels, help,
options, button labels, metrics, tab and expander labels, table column headers, and each Plotly figure's title,
axis titles, legend entries and hover templates. Code blocks (`st.code`: sources, printed tutorial output,
model samples) are left out, and so are widget values (a prompt the user may edit).

`english_runs` finds four or more English words in a row once code spans, math and identifiers are removed.
"""
from __future__ import annotations

import json
import re

from streamlit.testing.v1 import AppTest

# Four or more words of Latin letters separated only by spaces or light punctuation.
WORD = r"[A-Za-z][A-Za-z'’\-]*"
RUN = re.compile(rf"{WORD}(?:[ ,;:/&]+{WORD}){{3,}}")

# Reviewed: names and quotations that stay English in a Chinese text.
ALLOWED = [
    "Attention Is All You Need",          # paper titles, cited as they are
    "GLU Variants Improve Transformer",
    "Root Mean Square Layer Normalization",
    "On Layer Normalization in the Transformer Architecture",
    "Rotary Position Embedding",          # RoPE's name, given once beside 旋转位置编码
    "dog bites man",                      # the classic example sentence pair
    "man bites dog",
    "the divine benevolence",             # Shazeer's own words, quoted
    "we offer no explanation",
    "Language / 语言",
]


def _strip(text: str) -> str:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)       # fenced code
    text = re.sub(r"`[^`]*`", " ", text)                     # inline code
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)  # math
    text = re.sub(r":material/[a-z_]+:", " ", text)          # icons
    text = re.sub(r"https?://\S+", " ", text)                 # links
    text = re.sub(r"<[^>]+>", " ", text)                      # html tags
    text = re.sub(r"\S*[_0-9=()\[\]{}·×√]\S*", " | ", text)   # identifiers, numbers, formulas break a run
    for allowed in ALLOWED:
        text = text.replace(allowed, " | ")
    return text


def english_runs(text: str) -> list[str]:
    return RUN.findall(_strip(text))


def _figure_texts(spec: dict) -> list[str]:
    layout, out = spec.get("layout", {}), []

    def title(obj):
        t = obj.get("title") if isinstance(obj, dict) else None
        return t.get("text", "") if isinstance(t, dict) else (t or "")

    out.append(title(layout))
    for key, value in layout.items():
        if re.match(r"[xy]axis\d*$|coloraxis\d*$", key) and isinstance(value, dict):
            out.append(title(value))
            out.extend(str(v) for v in value.get("ticktext", []) or [] if isinstance(v, str))
    for annotation in layout.get("annotations", []) or []:
        out.append(str(annotation.get("text", "")))
    for trace in spec.get("data", []):
        if trace.get("showlegend", True) is not False and trace.get("name"):
            out.append(str(trace["name"]))
        out.append(str(trace.get("hovertemplate", "")))
        if isinstance(trace.get("colorbar"), dict):
            out.append(title(trace["colorbar"]))
    return out


def rendered_texts(at: AppTest) -> list[str]:
    """Everything a person reads on the page just run (see the module docstring)."""
    texts: list[str] = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "latex", "error", "warning", "info",
                 "success", "exception"):
        texts.extend(str(getattr(e, "value", "")) for e in at.get(kind))
    for e in at.get("metric"):
        texts.append(e.label)
    for kind in ("button", "checkbox", "toggle", "radio", "selectbox", "multiselect", "select_slider", "slider",
                 "number_input", "text_input", "text_area", "color_picker", "date_input", "time_input",
                 "download_button", "segmented_control", "pills", "file_uploader", "chat_input"):
        for e in at.get(kind):
            texts.append(str(getattr(e, "label", "") or ""))
            texts.append(str(getattr(e, "help", "") or ""))
            texts.extend(str(o) for o in getattr(e, "options", []) or [])
            texts.append(str(getattr(e, "placeholder", "") or ""))
    for kind in ("expander", "tab", "status"):
        texts.extend(str(getattr(e, "label", "")) for e in at.get(kind))
    for e in at.get("dataframe"):
        frame = e.value
        texts.extend(str(c) for c in frame.columns)
        if frame.index.name:
            texts.append(str(frame.index.name))
    for e in at.get("plotly_chart"):
        texts.extend(_figure_texts(json.loads(e.proto.spec)))
    return [t for t in texts if t]


def english_left(at: AppTest) -> list[str]:
    return [run for text in rendered_texts(at) for run in english_runs(text)]
