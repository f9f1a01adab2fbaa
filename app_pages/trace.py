"""Trace: one prediction followed through every stage of the forward pass, and four ways to ask what it used.

The tabs live in explorer.trace_views: cached per checkpoint and text, a fragment of their own, so a tab switch
reruns only them; the view is kept in the address (explorer.trace_link).
"""
import streamlit as st

from explorer import trace_figures as figs
from explorer import trace_link as link
from explorer import trace_views as views
from explorer.checkpoints import open_checkpoint
from explorer.i18n import say, t
from explorer.ui import show_chart
from gptcore import inspector as ins
from gptcore import interp
from gptcore.data import unknown_warning

st.title(t("trace.title"))
st.markdown(t("trace.intro"))
link.follow()  # (a link opened: its checkpoint, text and tab, before the widgets that hold them)
opened = open_checkpoint("trace", "trace")
link.say_missing(opened)
cfg, tokenizer = opened.model.cfg, opened.tokenizer

# --- the text and the position ------------------------------------------------------------------------------------

left, right = st.columns([5, 2])  # the text, and beside it its two settings one above the other
text = left.text_area(t("trace.text"), ins.DEFAULT_TEXT, height=100, key="trace-text", help=t("trace.text_help"))
temperature = right.slider(t("trace.temperature"), 0.0, 2.0, 1.0, 0.05, key="trace-temperature",
                           help=t("trace.temperature_help"))
if text == ins.DEFAULT_TEXT:
    left.caption(t("trace.default_text"))
elif len(text) > link.LINK_CHARS:
    left.caption(t("trace.link.text_cut", limit=link.LINK_CHARS))
top_k = right.number_input(t("trace.top_k"), 0, cfg.vocab_size, 0, key="trace-top-k", help=t("trace.top_k_help"))
# a trace keeps every activation of every position: on a real model that bounds the text well below its context
limit = min(cfg.context, interp.traceable_tokens(cfg, views.CAPTURE_BUDGET))
ids, unknown, truncated = ins.prepare_ids(tokenizer, text, limit)
if warning := unknown_warning(unknown):
    st.warning(say(warning))
if truncated and limit < cfg.context:
    st.warning(t("trace.truncated_memory", limit=limit, megabytes=views.CAPTURE_BUDGET >> 20, left_out=truncated))
elif truncated:
    st.warning(t("trace.truncated", context=cfg.context, left_out=truncated))
if not ids:
    st.error(t("trace.no_known"))
    st.stop()
ids = tuple(ids)
T = len(ids)
labels = [tokenizer.display(i) for i in ids]

again = ins.repeat_position(tokenizer.pieces(ids))  # where the text is said again, copying shows
start = T - 1 if again is None else again
link.position_stage_and_head(T, cfg.n_layer, cfg.n_head)
if not 0 <= st.session_state.get("trace-position", -1) < T:
    st.session_state["trace-position"] = start
st.caption(t("trace.pick_position"))
show_chart(figs.text_strip(labels, st.session_state["trace-position"]), key="trace-strip",
                on_select=lambda: views.pick_point("trace-strip", "trace-position"), selection_mode="points",
                config=views.NO_MODEBAR)
position = st.select_slider(t("trace.position"), range(T), key="trace-position",
                            format_func=lambda i: f"{i} '{labels[i]}'")
view = views.Traced(opened, ids, position, float(temperature), int(top_k) or None)
views.probability_caption(view)

views.tabs(view, text, start)  # lazy, and a fragment: a tab switch reruns only the tabs
