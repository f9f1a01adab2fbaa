"""Inspect: attention patterns, predictions, head roles and how they formed, for any saved checkpoint or imported
real model, and two models side by side.

The tabs live in explorer.inspector_views: cached per checkpoint and text, each interactive part a fragment.
"""
import streamlit as st

from explorer import inspector_figures as figs
from explorer import inspector_link as link
from explorer import inspector_views as views
from explorer.checkpoints import Opened, checkpoint_meta, open_checkpoint
from explorer.i18n import say, t
from gptcore import inspector as ins
from gptcore.data import unknown_warning
from gptcore.errors import UserError
from gptcore.runs import corpus_of


def show_facts(opened: Opened) -> None:
    """One line about the checkpoint: its step, size, shape and tokenizer, its loss and corpus where known."""
    model, cfg = opened.model, opened.model.cfg
    meta = checkpoint_meta(opened.folder)  # (read only: the dict is shared by every session)
    facts = [t("inspector.facts.step", step=opened.step), t("inspector.facts.params", n=model.num_params()),
             t("inspector.facts.shape", layers=cfg.n_layer, heads=cfg.n_head), f"d_model {cfg.d_model}",
             t("inspector.facts.context", context=cfg.context), say(opened.tokenizer.describe())]
    if isinstance(meta.get("final_val_loss"), (int, float)):
        facts.insert(1, t("inspector.facts.val_loss", loss=meta["final_val_loss"]))
    if opened.imported:  # (its step is the importer's 0, not training done here)
        facts[0] = t("inspector.facts.imported")
    corpus = corpus_of(meta)  # (in this tab's language where the run recorded it as a message)
    st.caption(" · ".join(facts) + ("  \n" + t("inspector.facts.corpus", corpus=say(corpus)) if corpus else ""))


def start_settings(view: views.Inspected) -> None:
    """Kept settings that no longer fit (a shorter text, a smaller model) start again where they make sense; then a
    link's position and head, where they fit."""
    cfg, state = view.cfg, st.session_state
    if not 0 <= state.get(view.query_key, -1) < len(view.run.ids):  # (both tabs share the position)
        state[view.query_key] = view.start_position
    # The head enlarged first, for each checkpoint opened, is the one that copies best on random tokens shown twice.
    if state.get("inspect-heads-of") != view.opened.name or not (
            0 <= state.get("inspect-layer", -1) < cfg.n_layer and 0 <= state.get("inspect-head", -1) < cfg.n_head):
        state["inspect-layer"], state["inspect-head"] = view.first_head
        state["inspect-heads-of"] = view.opened.name
    link.position_and_head(len(view.run.ids), cfg.n_layer, cfg.n_head, view.query_key)
    if state.get("inspect-topk", 0) > min(cfg.vocab_size, views.BAR_LIMIT):  # (a slider refuses a kept value
        # above its new max)
        del state["inspect-topk"]
    if state.get("inspect-score-source") not in views.SCORE_SOURCES:
        state["inspect-score-source"] = views.SCORE_SOURCES[0]


st.title(t("inspector.title"))
st.markdown(t("inspector.intro"))
link.follow()  # (a link opened: its checkpoint, text and tab, before the widgets that hold them)
opened = open_checkpoint("inspector", "inspect")
link.say_missing(opened)
show_facts(opened)

text = st.text_area(t("inspector.text"), ins.DEFAULT_TEXT, height=100, key="inspect-text", persist_state=views.KEEP,
                    help=t("inspector.text_help"))
if text == ins.DEFAULT_TEXT:
    st.caption(t("inspector.default_text"))
elif len(text) > link.LINK_CHARS:
    st.caption(t("inspector.link.text_cut", limit=link.LINK_CHARS))
try:
    run = views.inspected(opened.key, text)
except UserError as e:
    st.error(t("inspector.nothing", reason=say(e)))
    st.stop()
if warning := unknown_warning(run.unknown):
    st.warning(say(warning))
if run.truncated and run.limit < opened.model.cfg.context:
    st.warning(t("inspector.capped", heads=opened.model.cfg.n_layer * opened.model.cfg.n_head, limit=run.limit,
                 left_out=run.truncated))
elif run.truncated:
    st.warning(figs.worded("inspector.truncated", opened.tokens, context=opened.model.cfg.context,
                           left_out=run.truncated))
if opened.tokens:
    views.token_row(run)
# the head enlarged first is the best copier, found once per checkpoint
with st.spinner(figs.worded("inspector.scoring", opened.tokens)):
    copying = views.copying_scores(opened.key)[0]
view = views.Inspected(opened, text, run, ins.strongest_head(copying, "induction"))
start_settings(view)

views.tabs(view)  # lazy, and a fragment: a tab switch reruns only the tabs
