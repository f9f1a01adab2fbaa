"""Streamlit helpers shared by the pages: source expanders, quizzes, the sidebar, failures."""
from __future__ import annotations

import importlib
import inspect
import logging
import re
import sys
import threading
import unicodedata

import streamlit as st

from gptcore.tokenizer import END_OF_TEXT

from .i18n import language_switch, say, t

log = logging.getLogger(__name__)


def show_source(*objects, label: str | None = None) -> None:
    """Show the real source of functions/classes (via inspect), so it can never drift from what runs."""
    with st.expander(label or t("ui.source")):
        for obj in objects:
            st.caption(f"`{obj.__module__}.{obj.__qualname__}`")
            st.code(inspect.getsource(obj), language="python")


def quiz(key: str, question: str, options: list[str], correct: set[int], explanation: str) -> bool | None:
    """A check-your-understanding question; several correct options make it multiple choice.

    Returns True/False once answered, None before. A checked answer keeps its verdict through the page's other
    reruns (a demo's progress, another widget) until the answer is changed.
    """
    multi = len(correct) > 1
    checked_key = f"{key}-checked"
    with st.container(border=True):
        st.markdown(t("ui.quiz.heading", question=question))
        if multi:
            st.caption(t("ui.quiz.select_all"))
            chosen = {i for i, text in enumerate(options) if st.checkbox(text, key=f"{key}-opt{i}")}
        else:
            # the option's index is the value, so an answer survives a language switch
            pick = st.radio(t("ui.quiz.answer"), range(len(options)), format_func=options.__getitem__, index=None,
                            key=f"{key}-radio", label_visibility="collapsed")
            chosen = set() if pick is None else {pick}
        if st.button(t("ui.quiz.check"), key=f"{key}-check"):
            if not chosen:
                st.warning(t("ui.quiz.pick_first"))
                return None
            st.session_state[checked_key] = chosen
        if st.session_state.get(checked_key) != chosen:
            return None
        right = chosen == correct
        (st.success if right else st.error)(t("ui.quiz.right" if right else "ui.quiz.wrong", explanation=explanation))
        return right


# One stylesheet for every page, so that a narrow screen (a 1024-pixel projector) reflows a page instead of squeezing
# it. Streamlit's rows of columns wrap a column that cannot get its minimum width onto the next line; Streamlit gives
# them none, so a number input lost its ± (hidden below 7.5rem), a select box its value and a label its words:
# - a column holding a widget or a number is at least 8rem wide (or as wide as its row, where that is less), one
#   holding a table 20rem and one holding a chart 22rem: a table or a chart beside something else moves under it,
#   where it keeps room for its columns or its title;
# - a label, a button, a number or a link wraps between words instead of being cut short with an ellipsis or broken
#   inside a word; a row of toggle buttons (segmented control) or of chosen options (multiselect) wraps instead of
#   hiding its ends.
LAYOUT_STYLE = """<style>
[data-testid=stColumn]:has(input, button, [data-testid=stMetric]) {min-width: min(100%, 8rem);}
[data-testid=stColumn]:has([data-testid=stDataFrame]) {min-width: min(100%, 20rem);}
[data-testid=stColumn]:has([data-testid=stPlotlyChart]) {min-width: min(100%, 22rem);}
[data-testid=stMain] :is(.stMarkdownEllipsis, [data-testid=stPageLink-NavLink] span),
[data-testid=stMain] :is(.stMarkdownEllipsis, [data-testid=stPageLink-NavLink] span) p
  {white-space: normal; overflow: visible; text-overflow: clip;}
[data-testid=stMain] :is([data-testid=stWidgetLabel], [data-testid=stMetricLabel], .stMarkdownEllipsis) p
  {overflow-wrap: normal; word-break: normal;}
[data-testid=stMain] :is([data-testid=stButtonGroup] > div, [data-testid=stMultiSelectTagsContainer])
  {flex-wrap: wrap; overflow: visible;}
</style>"""


def _row_of(key: str) -> str:
    """CSS selector of the columns of the row in the container `key` (Streamlit wraps the row in a layout div)."""
    return f":is(.st-key-{key}, .st-key-{key} > *) > [data-testid=stHorizontalBlock] > [data-testid=stColumn]"


def wrapping_columns(spec, min_width: float, key: str, **options):
    """st.columns whose columns are never narrower than `min_width` rem: where the page is too narrow for all of
    them side by side, the last ones move to the next line (sections stack) instead of squeezing their widgets."""
    box = st.container(key=key)
    box.html(f"<style>{_row_of(key)} {{min-width: min(100%, {min_width}rem);}}</style>")
    return box.columns(spec, **options)


def grid(min_width: float, key: str):
    """A container whose elements flow in reading order into as many equal columns as fit, each at least
    `min_width` rem wide: six fields in a row on a wide screen, three in two rows on a projector. Put each field
    with what belongs to it (its error) in a container of its own."""
    box = st.container(key=key)
    box.html(f"<style>.st-key-{key} {{display: grid; grid-template-columns: repeat(auto-fill, minmax("
             f"min(100%, {min_width}rem), 1fr)); align-items: start;}}</style>")
    return box


def sidebar() -> None:
    registry = job_registry()
    st.html(LAYOUT_STYLE)

    def job_status():  # one line about the background job, refreshed while it runs
        job = registry.active() or registry.latest("train")
        if job is None:
            return
        from gptcore.describe import format_step  # (torch: there is a job, so it is loaded already)

        from .training import run_gone, shown_status

        if run_gone(s := job.snapshot()):  # (a run deleted since: nothing left to point to)
            return
        step, total = s.data.get("step"), s.data.get("total_steps")
        where = format_step(step, total) if step is not None and total is not None else f"{s.progress:.0%}"
        icon = {"running": "play_circle", "paused": "pause_circle", "stopping": "stop_circle",
                "finished": "check_circle", "stopped": "stop_circle", "failed": "error",
                "interrupted": "error"}.get(s.status, "circle")
        st.caption(t("sidebar.job", icon=icon, kind=t(f"ui.job_kind.{s.kind}"), name=s.name, where=say(where),
                     status=shown_status(s)))

    with st.sidebar:
        language_switch()
        st.caption(t("sidebar.tagline"))
        if names := checkpoint_names():
            st.caption(t("sidebar.active_checkpoint", name=default_checkpoint(names)))
        st.fragment(job_status, run_every=2 if registry.active() else None)()


TOOLBAR_BAND = 34  # px at a chart's top kept free: Plotly's toolbar appears there, at the right, under the pointer
TEXT_LINE = 24  # px taken by one line of a title or of a horizontal legend
CHART_CONFIG = {"displaylogo": False}


def show_chart(fig, key: str, where=None, config: dict | None = None, **options):
    """Draw a Plotly figure (in `where`, a column or container, else the page) with a toolbar that covers nothing.

    Every chart of the app goes through here, so no title or legend is ever drawn under the toolbar."""
    config = {**CHART_CONFIG, **(config or {})}
    if not getattr(fig, "_shared", False):
        toolbar = config.get("displayModeBar", True) and not config.get("staticPlot")
        if fit_title(fig) or toolbar:  # (a title broken into lines needs the room above a legend too)
            clear_toolbar_band(fig, TOOLBAR_BAND if toolbar else 0)
    return (where or st).plotly_chart(fig, key=key, config=config, **options)


def shared_chart(fig):
    """A figure made ready for show_chart once, to be cached and drawn by every session as it is: show_chart then
    reads it and never changes it, so sessions drawing it at once on their own threads see the same figure."""
    fit_title(fig)
    clear_toolbar_band(fig)
    fig._shared = True
    return fig


TITLE_ROOM = 520  # px: the width of a chart across the page on a 1024-pixel screen, less the title's padding


def text_width(text: str, size: float) -> float:
    """About how many pixels `text` takes at font size `size`: a Chinese character a square, a Latin one (in the
    app's font, space included) 0.4 of one."""
    return sum(size if unicodedata.east_asian_width(c) in "WF" else 0.4 * size for c in text)


# a word and the space after it; a Chinese character is a word of its own
WORDS = re.compile(r"[\u2e80-\u9fff\uff00-\uffef]|[^\s\u2e80-\u9fff\uff00-\uffef]+\s*|\s+")


def broken_lines(text: str, room: float, size: float) -> str:
    """`text` broken into lines of at most `room` pixels between words (between characters in Chinese); a text
    with markup other than line breaks is left as it is."""
    if re.search(r"<(?!br>)", text):
        return text
    lines = []
    for line in text.split("<br>"):
        lines.append("")
        for word in WORDS.findall(line):
            if lines[-1].strip() and text_width(lines[-1] + word.rstrip(), size) > room:
                lines[-1] = lines[-1].rstrip()
                lines.append("")
            lines[-1] += word
    return "<br>".join(line.rstrip() for line in lines)


def fit_title(fig) -> bool:
    """Break the title and the subplot titles too long for a chart across a projector's page into lines: Plotly
    cuts them at the chart's edge. A subplot title has its subplot's share of the width. Whether any was broken."""
    layout, before = fig.layout, fig.layout.title.text
    if layout.title.text:
        layout.title.text = broken_lines(layout.title.text, TITLE_ROOM, layout.title.font.size or 17)
    broken = layout.title.text != before
    domains = [axis.domain for axis in fig.select_xaxes() if axis.domain] if len(layout.annotations) else []
    for note in layout.annotations:
        if note.text and note.xref == "paper" and (note.y or 0) >= 1:  # a subplot title, over its subplot
            share = next((b - a for a, b in domains if a <= (note.x or 0) <= b), 1)
            text, note.text = note.text, broken_lines(note.text, share * TITLE_ROOM, note.font.size or 16)
            broken |= note.text != text
    return broken


def clear_toolbar_band(fig, band: int = TOOLBAR_BAND) -> None:
    """Stack a top legend, subplot titles and the title just above the plot area, and make the top margin hold
    them plus the toolbar's band. (Plotly centres a title in the top margin, where the toolbar appears.)"""
    layout = fig.layout
    stacked = 0  # px from the plot area's top up to the band
    if layout.legend.orientation == "h" and (layout.legend.y or 0) >= 1:
        layout.legend.update(y=1, yanchor="bottom")
        stacked += TEXT_LINE
    if titles := [note for note in layout.annotations if note.yref == "paper" and (note.y or 0) >= 1]:  # subplot titles
        stacked = max(stacked, TEXT_LINE * max((note.text or "").count("<br>") + 1 for note in titles))
    if layout.title.text:  # (Plotly puts a title's first line at its anchor, and the lines after it below)
        lines = layout.title.text.count("<br>") + 1
        layout.title.update(y=1, yref="paper", yanchor="bottom", pad_b=stacked + 6 + TEXT_LINE * (lines - 1))
        stacked += TEXT_LINE * lines + 6
    layout.margin.t = max(layout.margin.t or 0, band + stacked)


STORY_BREAK = re.compile(rf"\n?{re.escape(END_OF_TEXT)}\n?")  # the marker with the newlines around it
# What a character model writes of the marker when it writes only part of it: cut off where a sample ends ("<|endo"),
# or misspelt before the model has learnt it ("<|ejyj", "<hame"). A "<" is one when "|" follows it, when it opens a
# line (in the corpus only the marker does) or when it ends the text.
PARTIAL_MARKER = re.compile(r"<\|[A-Za-z]{0,12}\|?>?|(?:^|(?<=\n))<[A-Za-z]{0,12}\|?>?|<$")


def with_story_breaks(text: str) -> str:
    """Text from a model or a corpus as a reader expects it: the marker between two stories becomes a divider line,
    and a piece of it written alone is set between ⟦ ⟧. Show `story_break_note()` once near it."""
    text = STORY_BREAK.sub(f"\n{t('ui.story_break')}\n", text)
    return PARTIAL_MARKER.sub(lambda piece: f"⟦{piece.group()}⟧", text)


def story_break_note() -> None:
    st.caption(t("ui.story_break_note", marker=END_OF_TEXT))


_TORCH_LOADER = threading.Lock()  # held for good by the one thread that loads torch


def load_torch_in_background() -> None:
    """The start page and the sidebar need no torch: load it (a second or two) while the reader reads the first
    page, not when they first click. A page that imports torch meanwhile waits for this import to finish."""
    if "torch" not in sys.modules and _TORCH_LOADER.acquire(blocking=False):
        threading.Thread(target=importlib.import_module, args=("torch",), name="load-torch", daemon=True).start()


ACTIVE_CHECKPOINT = "active_checkpoint"  # plain session-state key (widget state is dropped on page switches)


def checkpoint_names() -> list[str]:
    from gptcore.folders import list_checkpoints, shown_name

    return [shown_name(p) for p in list_checkpoints()]  # (a name that is not UTF-8 shown escaped)


def default_checkpoint(names: list[str]) -> str:
    """The session's active checkpoint if it still exists, else the shipped model, else the first."""
    from gptcore.folders import SHIPPED

    for candidate in (st.session_state.get(ACTIVE_CHECKPOINT), SHIPPED):
        if candidate in names:
            return candidate
    return names[0]


def job_progress(job, snap, text: str, stop_key: str) -> None:
    """Progress bar and Stop button while a job runs; its error message once it has failed."""
    if snap.active:
        st.progress(snap.progress, text=text)
        if st.button(t("ui.stop"), key=stop_key):
            job.stop()
    elif snap.status == "failed":
        show_failure(snap)


def show_failure(snap) -> None:
    """A failed job's message; when a bug (not the user) ended it, its traceback folded beneath."""
    st.error(say(snap.message))
    if snap.traceback:
        with st.expander(t("ui.bug_details")):
            st.code(snap.traceback, language=None)


@st.cache_resource(show_spinner=False)
def _job_registry():
    from .jobs import JobRegistry

    return JobRegistry()


def job_registry():
    """The one JobRegistry of this server process, shared by every tab and page. A server setting it cannot use
    (GPTCORE_TRAINING_SLOTS that is no number) is said on the page, which stops there."""
    from gptcore.errors import UserError

    try:
        return _job_registry()
    except UserError as e:
        st.error(say(e))
        st.stop()


job_registry.clear = _job_registry.clear  # (a new registry: the tests start each from a clean server)
