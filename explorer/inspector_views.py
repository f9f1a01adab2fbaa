"""The Inspect page's tabs: attention, predictions, the head finder (the head atlas), two models side by side and
how the heads formed over training.

Each tab takes an `Inspected` (the checkpoint, the text's forward pass, the head the page enlarges first) rather
than reading the page's globals. The forward pass, the copying test and the scores over training are cached per
checkpoint version, device and text, and each interactive part is an st.fragment, so a click reruns only its own
part and recomputes nothing. A model that reads tokens (a BPE, a real model's tokenizer) is worded in tokens
(figs.worded), and one of many heads (SmolLM2: 30 layers × 9 heads) shows one layer's grid at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import streamlit as st

from gptcore import atlas
from gptcore import inspector as ins
from gptcore.errors import UserError
from gptcore.folders import list_checkpoints, shown_name
from gptcore.model import GPT

from . import inspector_figures as figs
from . import inspector_link as link
from . import inspector_notes as notes
from . import notebook
from .checkpoints import UNREADABLE, Opened, WeightsKey, is_imported, load, load_cached, reason, weights_key
from .i18n import catalog, language, say, t
from .ui import shared_chart, show_chart, show_source, story_break_note, with_story_breaks, wrapping_columns

LOSS_CAP = 4.0  # nats; about ln(vocab): a character this surprising is drawn fully red
SCORE_SOURCES = ("repeated", "text")  # random characters shown twice (the copying test), or the text above
KEEP = "session"  # persist_state of every setting: kept while its tab is closed and across pages
GRID_HEADS = 32  # a model of more heads shows the attention grid one layer at a time (SmolLM2 has 270)
BAR_LIMIT = 100  # most bars in the next-token chart: a real vocabulary has tens of thousands
COMPARE_BARS = 8
CSV_ROWS = 1_000_000  # the attention tensor is offered as CSV up to this many rows, as NPY always
ATLAS_TICKS = 40  # the head the atlas opens is drawn token by token up to this many tokens, else in a fixed height
# Every format_func below is a table of names made during the run (not a function calling t() whenever it is
# asked), so an option's name is in this tab's language whoever reads it.


# --- cached work: a click only redraws ------------------------------------------------------------------------------

def many_heads(cfg) -> bool:
    return cfg.n_layer * cfg.n_head > GRID_HEADS


def inspected(key: WeightsKey, text: str) -> ins.Inspection:
    """The forward pass over a text (every attention pattern, the final hidden state, the losses), once per
    checkpoint and text. A model of many heads keeps fewer texts: each holds up to 32 MB of patterns."""
    return (_inspected_large if many_heads(load_cached(*key)[0].cfg) else _inspected)(key, text)


@st.cache_resource(max_entries=32, show_spinner=False)
def _inspected(key: WeightsKey, text: str) -> ins.Inspection:
    model, tokenizer, _ = load_cached(*key)
    return ins.inspect_text(model, tokenizer, text)


@st.cache_resource(max_entries=6, show_spinner=False)
def _inspected_large(key: WeightsKey, text: str) -> ins.Inspection:
    model, tokenizer, _ = load_cached(*key)
    return ins.inspect_text(model, tokenizer, text)


@st.cache_resource(max_entries=32, show_spinner=False)
def text_scores(key: WeightsKey, text: str):
    """The head finder's scores of every head on a text."""
    run = inspected(key, text)
    return ins.head_scores(run.patterns, run.ids)


@st.cache_resource(max_entries=32, show_spinner=False)
def copy_misses(key: WeightsKey, text: str) -> list[int]:
    """The positions after which the model misses a token its text said before (the surprise strip's note)."""
    return ins.copy_misses(inspected(key, text))


@st.cache_resource(max_entries=16, show_spinner=False)
def copying_scores(key: WeightsKey):
    """The head scores and losses on random tokens shown twice (`python -m gptcore copying`; for a large model
    fewer, shorter sequences: gptcore.atlas.repeated_shape)."""
    return ins.repeated_sequence_scores(load_cached(*key)[0])


@st.cache_resource(max_entries=4, show_spinner=False)
def repeated_patterns(key: WeightsKey, length: int):
    """(ids, every head's patterns) of the first random sequence copying_scores scored: the atlas opens its heads."""
    model = load_cached(*key)[0]
    ids = ins.repeated_sequence_ids(model.cfg.vocab_size, length)
    return ids, ins.patterns_from_ids(model, ids.to(next(model.parameters()).device))[1].cpu()


@st.cache_resource(max_entries=8, show_spinner=False)
def training_scores(snapshots: tuple[tuple[int, WeightsKey], ...], text: str | None):
    """Head scores of every snapshot, on the text or (None) on the copying test, in long form."""
    models = [(step, load_cached(*key)[0]) for step, key in snapshots]
    return ins.scores_over_training(models, load_cached(*snapshots[-1][1])[1], text)


@st.cache_resource(max_entries=32, show_spinner=False)
def grid_figure(key: WeightsKey, text: str, lang: str):
    """The overview of every head, built once per checkpoint, text and language for every session: the same text
    opened by a whole class is one figure, and the largest of the page."""
    return shared_chart(figs.attention_grid(inspected(key, text).patterns))


@st.cache_resource(max_entries=32, show_spinner=False)
def layer_grid_figure(key: WeightsKey, text: str, lang: str, layer: int):
    """One layer's heads, for a model of too many heads to draw at once."""
    patterns = inspected(key, text).patterns[layer:layer + 1]
    return shared_chart(figs.attention_grid(patterns, first_layer=layer,
                                            title=t("inspector.attention.layer_grid_title", layer=layer)))


@st.cache_resource(max_entries=16, show_spinner=False)
def training_figure(snapshots: tuple[tuple[int, WeightsKey], ...], text: str | None, lang: str):
    """Every head's scores at each snapshot (on the text, or None: on the copying test), drawn once."""
    return shared_chart(figs.scores_over_training_figure(training_scores(snapshots, text)))


@st.cache_resource(max_entries=32, show_spinner=False)
def step_grid_figure(key: WeightsKey, text: str, lang: str, selected: tuple[int, int], step: int):
    """A snapshot's overview of every head, the selected one marked, drawn once."""
    return shared_chart(figs.attention_grid(inspected(key, text).patterns, selected,
                                            t("inspector.training.grid_title", step=step)))


def template(key: str):
    """t(key, …) for numbers, its entry looked up once: a tip on every character formats it hundreds of times."""
    return catalog(language())[key].format


@dataclass(frozen=True)
class Inspected:
    """What every tab reads: the checkpoint, the text's forward pass and the head that copies best."""
    opened: Opened
    text: str  # as typed
    run: ins.Inspection
    copying_head: tuple[int, int, float] | None  # (layer, head, induction score) on the copying test

    @property
    def cfg(self):
        return self.opened.model.cfg

    @property
    def tokens(self) -> bool:
        return self.opened.tokens

    def say(self, key: str, **values) -> str:
        """t(key), worded in tokens for a model that reads tokens."""
        return figs.worded(key, self.tokens, **values)

    @cached_property
    def labels(self) -> list[str]:  # one per position: a character, or a BPE token (position_label reads it T times)
        return ins.token_labels(self.run.pieces)

    @property
    def heads(self) -> list[str]:
        return ins.head_names(self.cfg.n_layer, self.cfg.n_head)

    @property
    def query_key(self) -> str:
        """The position both tabs look at: the Attention tab's query is the position the Predictions tab predicts
        after. Per text length, so a kept position always lies inside the text."""
        return f"inspect-query-{len(self.run.ids)}"

    def position_label(self, i: int) -> str:
        return f"{i} '{self.labels[i]}'"

    @cached_property
    def start_position(self) -> int:
        """Where the position starts: where the text is said again (copying shows there), else its last token."""
        again = ins.repeat_position(self.run.pieces)
        return len(self.run.ids) - 1 if again is None else again

    @property
    def first_head(self) -> tuple[int, int]:
        """The head enlarged first: the one that copies best on random tokens shown twice, else L0H0."""
        return self.copying_head[:2] if self.copying_head else (0, 0)

    def explain_miss(self, position: int) -> None:
        """Why the model misses the token after `position` that its text said before, as the head that copies
        best sees it; nothing when it does not miss."""
        head = self.copying_head[:2] if self.copying_head else None
        if note := notes.copy_miss(self.run, self.opened.tokenizer, position, head):
            st.info(note, icon=":material/help:")

    def keep_link(self) -> None:
        """The view into the page's address (after every run that can change it: the page's, each fragment's)."""
        state = st.session_state
        link.keep(self.opened.name, self.text, state[self.query_key], self.start_position,
                  (state["inspect-layer"], state["inspect-head"]), self.first_head)


def token_row(run: ins.Inspection) -> None:
    """Where the tokenizer cut the text: one box per token, its position and id in the tooltip."""
    st.caption(t("inspector.tokens.cut", n=len(run.ids), chars=len(run.text)))
    tip, ids = template("inspector.tokens.box_tip"), run.ids.tolist()
    st.html(ins.token_boxes_html(ins.token_labels(run.pieces), lambda i: tip(position=i, id=ids[i])))


def plot(fig, key: str, filename: str, **select) -> None:
    """A Plotly chart whose modebar saves a PNG, plus a button for a self-contained HTML copy."""
    show_chart(fig, key=key, config={"toImageButtonOptions": {"filename": filename, "scale": 2}}, **select)
    st.download_button(t("inspector.download_html"), lambda: fig.to_html(include_plotlyjs=True), f"{filename}.html",
                       "text/html", key=f"{key}-html", on_click="ignore", icon=":material/download:")


def clicked(chart_key: str):
    """The first point selected (clicked) on a chart, or None."""
    state = st.session_state.get(chart_key)
    points = state.selection.points if state is not None else []
    return points[0] if points else None


# --- the tabs --------------------------------------------------------------------------------------------------------

@st.fragment
def tabs(view: Inspected) -> None:
    """The tabs, lazy (only the open one runs) and a fragment of their own: a tab switch reruns this part alone,
    never the picker, the text's forward pass or the token row above it."""
    open_tab = st.session_state[link.VIEW.opened_tab] = link.open_tab()
    st.session_state["inspect-tab"] = link.tab_label(open_tab)  # (after a language switch: its new name)
    show = {"attention": attention_tab, "predictions": predictions_tab, "finder": finder_tab,
            "compare": compare_tab, "training": training_tab}
    containers = st.tabs([link.tab_label(tab) for tab in link.TABS], key="inspect-tab", on_change="rerun")
    for tab, container in zip(link.TABS, containers):
        if container.open:
            with container:
                show[tab](view)
    view.keep_link()


# --- attention -------------------------------------------------------------------------------------------------------

def attention_tab(view: Inspected) -> None:
    run, name = view.run, view.opened.name
    st.markdown(t("inspector.attention.intro"))
    if many_heads(view.cfg):
        st.caption(t("inspector.attention.many_heads", heads=view.cfg.n_layer * view.cfg.n_head))
    else:
        plot(grid_figure(view.opened.key, view.text, language()), "inspect-grid", f"attention-grid-{name}")
        st.caption(t("inspector.attention.grid_caption"))
    attention_view(view)
    show_source(ins.patterns_from_ids, GPT.run_with_cache)

    st.subheader(t("inspector.export.heading"))
    st.caption(t("inspector.export.shape", shape=str(tuple(run.patterns.shape))))
    csv_col, npy_col = st.columns(2)
    if run.patterns.numel() > CSV_ROWS:  # (SmolLM2 at 128 tokens: 4.4 million rows, hundreds of MB of text)
        csv_col.caption(t("inspector.export.csv_too_big", rows=run.patterns.numel()))
    else:
        csv_col.download_button(t("inspector.export.csv"), lambda: ins.patterns_csv(run.patterns, run.pieces),
                                f"attention-{name}.csv", "text/csv", key="inspect-csv", on_click="ignore",
                                icon=":material/download:")
    npy_col.download_button(t("inspector.export.npy"), lambda: ins.patterns_npy(run.patterns),
                            f"attention-{name}.npy", "application/octet-stream", key="inspect-npy",
                            on_click="ignore", icon=":material/download:")


def layer_and_head(view: Inspected) -> tuple[int, int]:
    """The layer and head controls: a row of buttons each, or for a model of many layers (SmolLM2's 30, more than
    a row holds) a slider of layers above the heads' buttons."""
    cfg = view.cfg
    head_names = [t("inspector.attention.head_option", n=n) for n in range(cfg.n_head)]
    if cfg.n_layer > 8:
        layer = st.select_slider(t("inspector.attention.layer"), range(cfg.n_layer), key="inspect-layer",
                                 persist_state=KEEP)
        head = st.segmented_control(t("inspector.attention.head"), range(cfg.n_head), key="inspect-head",
                                    required=True, persist_state=KEEP, format_func=head_names.__getitem__)
        return layer, head
    left, right = wrapping_columns(2, 19, key="inspect-layer-head")  # (one above the other on a projector)
    layer_names = [t("inspector.attention.layer_option", n=n) for n in range(cfg.n_layer)]
    layer = left.segmented_control(t("inspector.attention.layer"), range(cfg.n_layer), key="inspect-layer",
                                   required=True, persist_state=KEEP, format_func=layer_names.__getitem__)
    head = right.segmented_control(t("inspector.attention.head"), range(cfg.n_head), key="inspect-head",
                                   required=True, persist_state=KEEP, format_func=head_names.__getitem__)
    return layer, head


@st.fragment
def attention_view(view: Inspected) -> None:
    """The enlarged head and one query's weights: a head, layer or query change reruns only this."""
    cfg, run, copying_head = view.cfg, view.run, view.copying_head
    layer, head = layer_and_head(view)
    if many_heads(cfg):
        plot(layer_grid_figure(view.opened.key, view.text, language(), layer), "inspect-layer-grid",
             f"attention-layer-{layer}-{view.opened.name}")
    heads = view.heads
    chosen = heads[layer * cfg.n_head + head]
    if copying_head and (layer, head) == copying_head[:2]:
        st.caption(view.say("inspector.attention.copying_head", head=chosen, score=copying_head[2]))
    elif copying_head is None:
        st.caption(view.say("inspector.attention.no_copying_head", clear=ins.CLEAR_SCORE))
    view.explain_miss(st.session_state[view.query_key])

    def pick_query() -> None:  # the clicked query character (its customdata is the position) becomes the query
        if (point := clicked("inspect-head-figure")) and "customdata" in point:
            data = point["customdata"]
            st.session_state[view.query_key] = int(data[0] if isinstance(data, list) else data)

    title = view.say("inspector.attention.head_title", head=chosen)
    plot(figs.head_heatmap(run.patterns[layer, head], view.labels, title, st.session_state[view.query_key]),
         "inspect-head-figure", f"attention-{chosen}-{view.opened.name}", on_select=pick_query,
         selection_mode="points")
    notebook.show(notebook.attention_code(view.opened.folder, view.opened.tokenizer, view.text, run.limit, layer, head))

    st.subheader(t("inspector.attention.one_position"))
    query = st.select_slider(t("inspector.attention.query"), range(len(run.ids)), format_func=view.position_label,
                             key=view.query_key, persist_state=KEEP, help=view.say("inspector.attention.query_help"))
    weights = run.patterns[:, :, query, : query + 1]
    rows = [(h, weights[layer, i]) for i, h in enumerate(heads[layer * cfg.n_head:(layer + 1) * cfg.n_head])]
    rows += [(t("inspector.attention.layer_mean", layer=layer), weights[layer].mean(0)),
             (t("inspector.attention.all_mean"), weights.mean((0, 1)))]
    st.caption(view.say("inspector.attention.shading", query=view.position_label(query)))
    weight_tip = template("inspector.attention.weight_tip")
    for row_name, row in rows:
        shade, values = (row / row.max()).tolist(), row.tolist()

        def tip(i, values=values):
            return weight_tip(position=i, weight=values[i])

        left, right = st.columns([2.3, 9], gap="small")  # (room for "all-head mean" on one line at 1024 px)
        left.markdown(f"**{row_name}**" if row_name == chosen else row_name)
        right.html(ins.highlight_html(run.pieces[: query + 1], shade, "31, 119, 180", tip, mark=query))
    view.keep_link()


# --- predictions -----------------------------------------------------------------------------------------------------

def predictions_tab(view: Inspected) -> None:
    run = view.run
    predictions_view(view)
    st.subheader(t("inspector.surprise.heading"))
    losses = run.losses
    st.caption(view.say("inspector.surprise.caption", cap=LOSS_CAP, mean=float(losses[1:].mean())))
    loss_tip, values = template("inspector.surprise.tip"), losses.tolist()
    st.html(ins.highlight_html(run.pieces, (losses / LOSS_CAP).tolist(), "230, 60, 50",
                               lambda i: loss_tip(position=i, loss=values[i])))
    if note := notes.surprise(run, view.opened.tokenizer, copy_misses(view.opened.key, view.text)):
        st.caption(note)
    chart = st.expander(view.say("inspector.surprise.chart"), key="inspect-loss-chart", on_change="rerun")
    if chart.open:  # (drawn only when opened: a hidden chart would still cost the browser its layout)
        with chart:
            plot(figs.loss_bars(losses, view.labels, view.tokens), "inspect-losses", f"losses-{view.opened.name}")


@st.fragment
def predictions_view(view: Inspected) -> None:
    """The next-token distribution under the sampling controls, and generation with the same controls."""
    cfg, run, labels, tokenizer = view.cfg, view.run, view.labels, view.opened.tokenizer
    T = len(run.ids)
    st.subheader(view.say("inspector.predictions.heading"))
    position = st.select_slider(t("inspector.predictions.position"), range(T), format_func=view.position_label,
                                key=view.query_key, persist_state=KEEP, help=t("inspector.predictions.position_help"))
    # the distribution generation draws from: the sampling controls act on it at once
    c1, c2, c3 = st.columns(3)
    temperature = c1.slider(t("inspector.temperature"), 0.0, 2.0, 0.8, 0.05, key="inspect-temperature",
                            persist_state=KEEP, help=view.say("inspector.temperature_help"))
    top_k = c2.number_input(t("inspector.top_k"), 0, cfg.vocab_size, 0, key="inspect-gen-topk",
                            persist_state=KEEP, help=view.say("inspector.top_k_help"))
    bars = min(cfg.vocab_size, BAR_LIMIT)
    # (a slider needs min < max: a one-character vocabulary has a single prediction to show)
    k = c3.slider(view.say("inspector.bars"), 1, bars, min(10, bars), key="inspect-topk", persist_state=KEEP,
                  help=view.say("inspector.bars_help", most=bars)) if bars > 1 else 1
    logits = run.logits_at(position)
    top = ins.predictions(logits, tokenizer, k, temperature, top_k or None)
    context_tail = "".join(labels[max(0, position - 40): position + 1])
    plot(figs.prediction_bars(top, t("inspector.predictions.title", tail=context_tail), view.tokens),
         "inspect-predictions", f"predictions-{view.opened.name}")
    st.caption(t("inspector.predictions.follows", temperature=temperature, top_k=top_k or "—"))
    if position + 1 < T:  # the model's own probability (as the loss and Trace count it), then the sampled one
        actual = int(run.ids[position + 1])
        model_probs = ins.sampling_distribution(logits)
        rank = int((model_probs > model_probs[actual]).sum()) + 1
        st.caption(view.say("inspector.predictions.actual", char=labels[position + 1], p=float(model_probs[actual]),
                            rank=rank, vocab=f"{cfg.vocab_size:,}"))
        if temperature != 1 or top_k:
            sampled = ins.sampling_distribution(logits, temperature, top_k or None)
            st.caption(t("inspector.predictions.actual_sampled", temperature=temperature, top_k=top_k or "—",
                         char=labels[position + 1], p=float(sampled[actual])))
        view.explain_miss(position)
    view.keep_link()
    generate_view(view, temperature, top_k or None)


def generate_view(view: Inspected, temperature: float, top_k: int | None) -> None:
    model, tokenizer, text = view.opened.model, view.opened.tokenizer, view.text
    st.subheader(t("inspector.generate.heading"))
    st.caption(t("inspector.same_sampling", temperature=temperature, top_k=top_k or "—"))
    chat = bool(getattr(tokenizer, "chat_template", None)) and st.toggle(
        t("inspector.generate.chat"), True, key="inspect-chat", persist_state=KEEP,
        help=t("inspector.generate.chat_help"))
    c1, c2 = st.columns(2)
    seed = c1.number_input(t("inspector.generate.seed"), 0, 2**31 - 1, 0, key="inspect-seed", persist_state=KEEP)
    if view.tokens:  # a real model writes a token in tens of milliseconds here: fewer by default
        n_new = c2.slider(t("inspector.tokens.generate.chars"), 10, 300, 60, 10, key="inspect-gen-tokens",
                          persist_state=KEEP)
    else:
        n_new = c2.slider(t("inspector.generate.chars"), 20, 500, 200, 10, key="inspect-gen-chars", persist_state=KEEP)
    if st.button(t("inspector.generate.button"), key="inspect-generate", type="primary"):
        try:
            st.session_state["inspect-generated"] = (text, chat, ins.generate(
                model, tokenizer, text, n_new, temperature, top_k, seed, chat))
        except UserError as e:
            st.error(say(e))
    generated = st.session_state.get("inspect-generated")
    if generated and generated[:2] == (text, chat):
        prompt = tokenizer.decode(ins.prepare_ids(tokenizer, ins.generation_prompt(tokenizer, text, chat),
                                                  view.cfg.context)[0])
        story = with_story_breaks(generated[2])
        st.html(ins.highlight_html(prompt + story, [0.0] * len(prompt) + [0.3] * len(story), "44, 160, 44"))
        st.caption(view.say("inspector.generate.caption", context=view.cfg.context))
        if chat:
            st.caption(t("inspector.generate.chat_caption"))
        story_break_note()


# --- head finder: the head atlas -------------------------------------------------------------------------------------

def finder_tab(view: Inspected) -> None:
    st.markdown(view.say("inspector.finder.intro"))
    finder_view(view)
    show_source(ins.induction_targets, ins.head_scores, atlas.repeated_token_scores)


def scored_sequence(view: Inspected, source: str):
    """(scores, the ids and labels of the sequence whose patterns the atlas opens, its patterns, the query to box)."""
    if source == "text":
        run = view.run
        return text_scores(view.opened.key, view.text), view.labels, run.patterns, \
            st.session_state.get(view.query_key)
    scores, report = copying_scores(view.opened.key)
    ids, patterns = repeated_patterns(view.opened.key, report.length)
    return scores, view.opened.tokenizer.labels(ids.tolist()), patterns, report.length + report.length // 2


def copying_summary(view: Inspected) -> None:
    """The repeated-token test: what it scored on, the first sequence, the loss of each copy."""
    report = copying_scores(view.opened.key)[1]
    st.caption(view.say("inspector.finder.repeated", n=report.n_sequences, length=report.length))
    example = ins.repeated_sequence_example(view.opened.tokenizer, report.length)
    if view.tokens:  # (random tokens run together would hide where each ends)
        st.html(ins.token_boxes_html(example))
    else:
        st.code("".join(example), language=None, wrap_lines=True)
    first, second = st.columns(2)
    first.metric(view.say("inspector.finder.first_copy"), f"{report.copy_losses[0]:.2f}")
    second.metric(t("inspector.finder.second_copy"), f"{report.copy_losses[1]:.2f}",
                  f"{report.copy_losses[1] - report.copy_losses[0]:+.2f}", delta_color="inverse",
                  help=t("inspector.finder.ratio", ratio=report.ratio))
    st.caption(notes.first_copy(report.copy_losses[0], view.cfg.vocab_size, view.tokens))


def strongest_metrics(view: Inspected, scores) -> None:
    for col, column in zip(st.columns(len(figs.SCORES)), figs.SCORES):
        role = t("inspector.finder.strongest", role=figs.score_name(column))
        if scores[column].notna().any():  # the strongest head, or none above the threshold and the best below it
            answer, how_many = notes.threshold(scores, column, ins.CLEAR_SCORE)
            col.metric(role, answer)
            col.caption(how_many)
        else:
            col.metric(role, "—", help=view.say("inspector.finder.no_repeat"))


def induction_sentence(scores) -> str:
    """The induction heads in words: the threshold, how many heads reach it, the best of them."""
    found = atlas.clear_heads(scores, "induction", ins.CLEAR_SCORE)
    if found.empty:
        return t("inspector.finder.atlas_none", clear=ins.CLEAR_SCORE)
    listed = ", ".join(f"{row.head} ({row.induction:.2f})" for row in found.head(6).itertuples())
    return t("inspector.finder.atlas_found", clear=ins.CLEAR_SCORE, n=len(found), total=len(scores), heads=listed,
             best=found.iloc[0]["head"], score=found.iloc[0]["induction"])


@st.fragment
def finder_view(view: Inspected) -> None:
    st.radio(t("inspector.finder.source"), SCORE_SOURCES, horizontal=True, key="inspect-score-source",
             persist_state=KEEP, format_func={s: view.say(f"inspector.finder.sources.{s}")
                                              for s in SCORE_SOURCES}.__getitem__,
             help=view.say("inspector.finder.source_help"))
    source = st.session_state["inspect-score-source"]
    if source == "repeated":
        copying_summary(view)
    scores, labels, patterns, query = scored_sequence(view, source)
    strongest_metrics(view, scores)
    st.markdown(induction_sentence(scores))

    def pick_head() -> None:  # a click on a cell of any map opens that head (its customdata: layer, head, score)
        if (point := clicked("inspect-atlas")) and "customdata" in point:
            layer, head = (int(v) for v in point["customdata"][:2])
            st.session_state["inspect-layer"], st.session_state["inspect-head"] = layer, head

    cfg = view.cfg
    selected = (st.session_state["inspect-layer"], st.session_state["inspect-head"])
    plot(figs.head_atlas(scores, cfg.n_layer, cfg.n_head, selected, ins.CLEAR_SCORE), "inspect-atlas",
         f"head-atlas-{view.opened.name}", on_select=pick_head, selection_mode="points")
    st.caption(t("inspector.finder.atlas_caption", clear=ins.CLEAR_SCORE))
    opened_head(view, scores, labels, patterns, query, selected)
    table = scores.drop(columns=["layer", "head_index"]).set_index("head").round(3)
    table = table.rename(columns=figs.score_name).rename_axis(t("inspector.finder.head_column"))
    with st.expander(t("inspector.finder.table"), expanded=not many_heads(cfg)):
        st.dataframe(table, height=min(35 * (len(scores) + 1) + 3, 600), key="inspect-score-table")
    view.keep_link()


def opened_head(view: Inspected, scores, labels, patterns, query, selected: tuple[int, int]) -> None:
    """The head picked on the atlas: its three scores and its attention map on the sequence it was scored on."""
    layer, head = selected
    row = scores.iloc[layer * view.cfg.n_head + head]
    name = row["head"]
    st.markdown(t("inspector.finder.opened", head=name, induction=row["induction"], previous=row["previous_token"],
                  first=row["first_token"]))
    T = patterns.shape[-1]
    query = query if query is not None and 0 <= query < T else None
    title = t("inspector.finder.opened_title", head=name)
    # a long sequence (random tokens) in a map of fixed height, its tokens in the hover; a short one token by token
    draw = figs.compact_map if T > ATLAS_TICKS else figs.head_heatmap
    plot(draw(patterns[layer, head], labels, title, query), "inspect-atlas-head",
         f"attention-{name}-{view.opened.name}")


# --- two models side by side -----------------------------------------------------------------------------------------

def token_at(pieces: list[str], char: int) -> int:
    """The position of the token that holds character `char` of the text its pieces spell."""
    return int(np.searchsorted(np.cumsum([len(p) for p in pieces]), char, side="right"))


def compare_tab(view: Inspected) -> None:
    st.markdown(t("inspector.compare.intro"))
    folders = list_checkpoints()
    names = [shown_name(p) for p in folders]
    others = [n for n in names if n != view.opened.name] or names
    if st.session_state.get("inspect-compare-with") not in names:
        real = [n for n in others if is_imported(folders[names.index(n)])]
        st.session_state["inspect-compare-with"] = (real or others)[0]
    marked = {n: t("models.imported_mark", name=n) if is_imported(f) else n for n, f in zip(names, folders)}
    other_name = st.selectbox(t("inspector.compare.with"), names, key="inspect-compare-with",
                              format_func=marked.__getitem__, persist_state=KEEP)
    try:
        key, _, tokenizer, _ = load(folders[names.index(other_name)] / "model.safetensors", view.opened.device)
        other_run = inspected(key, view.text)
    except UNREADABLE as e:
        st.error(t("inspector.cannot_load", name=other_name, error=reason(e)))
        return
    except UserError as e:
        st.error(t("inspector.nothing", reason=say(e)))
        return
    compare_view(view, (other_name, key, tokenizer, other_run))


@st.fragment
def compare_view(view: Inspected, other) -> None:
    """One text, two models: where both read it, a character; each model's strongest induction head on the text,
    its attention map, and its prediction after the token that holds the chosen character."""
    other_name, other_key, other_tokenizer, other_run = other
    text = view.run.text if len(view.run.text) <= len(other_run.text) else other_run.text  # (what both read)
    start = ins.repeat_position(list(text))
    shown = ins.token_labels(text)

    def before(i: int) -> str:  # the character and the few before it, whitespace visible
        return f"{i} '…{''.join(shown[max(0, i - 12):i + 1])}'"

    char = st.select_slider(t("inspector.compare.position"), range(len(text)), value=start or len(text) - 1,
                            key=f"inspect-compare-char-{len(text)}", format_func=before,
                            help=t("inspector.compare.position_help"))
    st.caption(t("inspector.compare.caption"))
    sides = ((view.opened.name, view.opened.key, view.opened.tokenizer, view.run),
             (other_name, other_key, other_tokenizer, other_run))
    for column, side in zip(st.columns(2), sides):
        with column:
            model_side(*side, view.text, char, "inspect-compare-" + ("a" if side is sides[0] else "b"))


def model_side(name: str, key: WeightsKey, tokenizer, run: ins.Inspection, text: str, char: int, chart: str) -> None:
    """One model of the two: its strongest induction head on the text (as typed: run is its inspection), where that
    head looks from the token holding character `char`, and what the model expects after that token."""
    cfg = load_cached(*key)[0].cfg
    tokens = tokenizer.kind != "char"
    st.markdown(f"#### {name}")
    st.caption(figs.worded("inspector.compare.facts", tokens, n=len(run.ids), layers=cfg.n_layer, heads=cfg.n_head,
                           tokenizer=say(tokenizer.describe())))
    labels = ins.token_labels(run.pieces)
    position = token_at(run.pieces, char)
    scores = text_scores(key, text)
    best = ins.strongest_head(scores, "induction")
    if best is None:
        layer, head = divmod(int(scores["induction"].fillna(-1).to_numpy().argmax()), cfg.n_head)
        st.markdown(t("inspector.compare.no_head", clear=ins.CLEAR_SCORE, head=f"L{layer}H{head}"))
    else:
        layer, head, score = best
        st.markdown(t("inspector.compare.head", head=f"L{layer}H{head}", score=score))
    weights = run.patterns[layer, head, position, :position + 1]
    st.caption(figs.worded("inspector.compare.looks", tokens, head=f"L{layer}H{head}", token=labels[position]))
    st.html(ins.highlight_html(run.pieces[:position + 1], (weights / weights.max()).tolist(), "31, 119, 180",
                               mark=position))
    plot(figs.compact_map(run.patterns[layer, head], labels, f"L{layer}H{head}", position), f"{chart}-head",
         f"attention-L{layer}H{head}-{name}")
    top = ins.predictions(run.logits_at(position), tokenizer, COMPARE_BARS)
    title = t("inspector.compare.after", token=labels[position], position=position)
    plot(figs.prediction_bars(top, title, tokens, height=340), f"{chart}-predictions", f"predictions-{name}")
    if note := notes.copy_miss(run, tokenizer, position, (layer, head)):
        st.info(note, icon=":material/help:")


# --- over training ---------------------------------------------------------------------------------------------------

def readable_snapshots(opened: Opened) -> list[tuple[int, WeightsKey]]:
    """(step, cache key) of every snapshot that loads; a warning names each one that does not."""
    snapshots = []
    for step, path in ins.training_steps(opened.folder):
        try:
            key = weights_key(Path(path), opened.device)
            load_cached(*key)
            snapshots.append((step, key))
        except UNREADABLE as e:
            st.warning(t("inspector.training.skipping", step=step, error=reason(e)))
    return snapshots


def training_tab(view: Inspected) -> None:
    name = view.opened.name
    snapshots = readable_snapshots(view.opened)
    if len(snapshots) < 2:
        st.info(t("inspector.training.no_snapshots", name=name))
        return
    st.caption(t("inspector.training.intro"))
    training_view(view, snapshots)
    source = st.session_state["inspect-score-source"]
    st.caption(t("inspector.training_scored_on", source=t(f"inspector.finder.sources.{source}")))
    plot(training_figure(tuple(snapshots), view.run.text if source == "text" else None, language()),
         "inspect-training-scores", f"scores-over-training-{name}")


@st.fragment
def training_view(view: Inspected, snapshots: list[tuple[int, WeightsKey]]) -> None:
    steps = [s for s, _ in snapshots]
    name = view.opened.name
    chosen_step = st.select_slider(t("inspector.training.step"), steps, value=steps[-1], key=f"inspect-step-{name}",
                                   persist_state=KEEP)
    selected = (st.session_state["inspect-layer"], st.session_state["inspect-head"])
    plot(step_grid_figure(dict(snapshots)[chosen_step], view.text, language(), selected, chosen_step),
         "inspect-training-grid", f"attention-step-{chosen_step}-{name}")
