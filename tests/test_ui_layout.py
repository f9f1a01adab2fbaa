"""Chart titles on a projector: a title too long for a chart across a 1024-pixel page is broken between words
(between characters in Chinese) before Plotly would cut it at the chart's edge, and the margin above the plot makes
room for its lines beside a legend. (The page-wide layout itself: tests/test_browser_layout.py.)"""
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.ui import TEXT_LINE, TITLE_ROOM, broken_lines, clear_toolbar_band, fit_title, text_width

LENS = "Logit lens: each layer's top guess, coloured by the probability of the true next character"


def test_a_long_title_breaks_between_words_into_lines_that_fit():
    lines = broken_lines(LENS, TITLE_ROOM, 17).split("<br>")
    assert lines == ["Logit lens: each layer's top guess, coloured by the probability of the true",
                     "next character"]
    assert all(text_width(line, 17) <= TITLE_ROOM for line in lines) and " ".join(lines) == LENS
    assert broken_lines("short", TITLE_ROOM, 17) == "short"


def test_a_chinese_title_breaks_between_characters_and_markup_is_left_alone():
    title = "每词元训练 FLOPs 随上下文长度的变化"
    lines = broken_lines(title, 150, 17).split("<br>")
    assert lines == ["每词元训练 FLOPs 随", "上下文长度的变化"]
    assert broken_lines("<b>" + LENS + "</b>", 100, 17) == "<b>" + LENS + "</b>"  # (a tag is never split)


def test_a_subplot_title_gets_its_subplots_share_and_the_margin_holds_its_lines():
    fig = make_subplots(rows=1, cols=3, subplot_titles=["z-loss", "a", "∂ z-loss / ∂zᵢ (sum +3.4e-03)"])
    assert fit_title(fig)
    assert [note.text for note in fig.layout.annotations] == ["z-loss", "a", "∂ z-loss / ∂zᵢ (sum<br>+3.4e-03)"]
    assert not fit_title(fig)  # (broken once: a second look changes nothing)
    clear_toolbar_band(fig, band=0)
    assert fig.layout.margin.t == 2 * TEXT_LINE


def test_a_broken_title_rises_above_a_top_legend():
    fig = go.Figure(layout=dict(title=LENS, legend=dict(orientation="h", y=1.02), margin=dict(t=60)))
    assert fit_title(fig)
    clear_toolbar_band(fig, band=0)
    # the title's first line, where Plotly anchors it, one line above the second, which is above the legend
    assert fig.layout.legend.y == 1 and fig.layout.title.pad.b == TEXT_LINE + 6 + TEXT_LINE
    assert fig.layout.margin.t == TEXT_LINE + 2 * TEXT_LINE + 6
