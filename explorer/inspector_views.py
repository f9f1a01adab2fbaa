"""The Inspect page's tabs: attention, predictions, the head finder and how the heads formed over training.

Each tab takes an `Inspected` (the checkpoint, the text's forward pass, the head the page enlarges first) rather
than reading the page's globals. The forward pass, the copying test and the scores over training are cached per
checkpoint version, device and text, and each interactive part is an st.fragment, so a click reruns only its own
part and recomputes nothing.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import streamlit as st

from gptcore import checkpoint as ckpt
from gptcore import inspector as ins
from gptcore.model import GPT

from . import inspector_figures as figs
from .checkpoints import UNREADABLE, Opened, WeightsKey, load_cached, reason, weights_key
from .i18n import catalog, language, t
from .ui import shared_chart, show_chart, show_source, story_break_note, with_story_breaks

LOSS_CAP = 4.0  # nats; about ln(vocab): a character this surprising is drawn fully red
SCORE_SOURCES = ("repeated", "text")  # random characters shown twice (the copying test), or the text above
KEEP = "session"  # persist_state of every setting: kept while its tab is closed and across pages
# Every format_func below is a table of names made during the run (not a function calling t() whenever it is
# asked), so an option's name is in this tab's language whoever reads it.


# --- cached work: a click only redraws ------------------------------------------------------------------------------

@st.cache_resource(max_entries=32, show_spinner=False)
def inspected(key: WeightsKey, text: str) -> ins.Inspection:
    """The forward pass over a text (logits and every attention pattern), once per checkpoint and text."""
    model, tokenizer, _ = load_cached(*key)
    return ins.inspect_text(model, tokenizer, text)


@st.cache_resource(max_entries=16, show_spinner=False)
def copying_scores(key: WeightsKey):
    """The head scores and losses on random characters shown twice (`python -m gptcore copying`)."""
    return ins.repeated_sequence_scores(load_cached(*key)[0])


@st.cache_resource(max_entries=8, show_spinner=False)
def training_scores(snapshots: tuple[tuple[int, WeightsKey], ...], text: str | None):
    """Head scores of every snapshot, on the text or (None) on the copying test, in long form."""
    models = [(step, load_cached(*key)[0]) for step, key in snapshots]
    return ins.scores_over_training(models, load_cached(*snapshots[-1][1])[1], text)


def checkpoint_meta(folder: Path) -> dict:
    """meta.json's checked values (gptcore.checkpoint.read_meta), read once per version of the file."""
    try:
        version = (folder / "meta.json").stat().st_mtime_ns
    except FileNotFoundError:
        version = 0
    return _meta(os.fsencode(folder), version)


@st.cache_resource(max_entries=64, show_spinner=False)
def _meta(folder: bytes, version: int) -> dict:
    return ckpt.read_meta(Path(os.fsdecode(folder)))


@st.cache_resource(max_entries=32, show_spinner=False)
def grid_figure(key: WeightsKey, text: str, lang: str):
    """The overview of every head, built once per checkpoint, text and language for every session: the same text
    opened by a whole class is one figure, and the largest of the page."""
    return shared_chart(figs.attention_grid(inspected(key, text).patterns))


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


# --- attention -------------------------------------------------------------------------------------------------------

def attention_tab(view: Inspected) -> None:
    run, name = view.run, view.opened.name
    st.markdown(t("inspector.attention.intro"))
    plot(grid_figure(view.opened.key, view.text, language()), "inspect-grid", f"attention-grid-{name}")
    st.caption(t("inspector.attention.grid_caption"))
    attention_view(view)
    show_source(ins.patterns_from_ids, GPT.run_with_cache)

    st.subheader(t("inspector.export.heading"))
    st.caption(t("inspector.export.shape", shape=str(tuple(run.patterns.shape))))
    csv_col, npy_col = st.columns(2)
    csv_col.download_button(t("inspector.export.csv"), lambda: ins.patterns_csv(run.patterns, run.pieces),
                            f"attention-{name}.csv", "text/csv", key="inspect-csv", on_click="ignore",
                            icon=":material/download:")
    npy_col.download_button(t("inspector.export.npy"), lambda: ins.patterns_npy(run.patterns),
                            f"attention-{name}.npy", "application/octet-stream", key="inspect-npy",
                            on_click="ignore", icon=":material/download:")


@st.fragment
def attention_view(view: Inspected) -> None:
    """The enlarged head and one query's weights: a head, layer or query change reruns only this."""
    cfg, run, copying_head = view.cfg, view.run, view.copying_head
    left, right = st.columns([1, 1])
    layer = left.segmented_control(t("inspector.attention.layer"), range(cfg.n_layer), key="inspect-layer",
                                   required=True, persist_state=KEEP,
                                   format_func=[t("inspector.attention.layer_option", n=n)
                                                for n in range(cfg.n_layer)].__getitem__)
    head = right.segmented_control(t("inspector.attention.head"), range(cfg.n_head), key="inspect-head",
                                   required=True, persist_state=KEEP,
                                   format_func=[t("inspector.attention.head_option", n=n)
                                                for n in range(cfg.n_head)].__getitem__)
    heads = view.heads
    chosen = heads[layer * cfg.n_head + head]
    if copying_head and (layer, head) == copying_head[:2]:
        st.caption(t("inspector.attention.copying_head", head=chosen, score=copying_head[2]))
    elif copying_head is None:
        st.caption(t("inspector.attention.no_copying_head", clear=ins.CLEAR_SCORE))

    def pick_query() -> None:  # the clicked query character (its customdata is the position) becomes the query
        if (point := clicked("inspect-head-figure")) and "customdata" in point:
            data = point["customdata"]
            st.session_state[view.query_key] = int(data[0] if isinstance(data, list) else data)

    title = t("inspector.attention.head_title", head=chosen)
    plot(figs.head_heatmap(run.patterns[layer, head], view.labels, title, st.session_state[view.query_key]),
         "inspect-head-figure", f"attention-{chosen}-{view.opened.name}", on_select=pick_query,
         selection_mode="points")

    st.subheader(t("inspector.attention.one_position"))
    query = st.select_slider(t("inspector.attention.query"), range(len(run.ids)), format_func=view.position_label,
                             key=view.query_key, persist_state=KEEP, help=t("inspector.attention.query_help"))
    weights = run.patterns[:, :, query, : query + 1]
    rows = [(h, weights[layer, i]) for i, h in enumerate(heads[layer * cfg.n_head:(layer + 1) * cfg.n_head])]
    rows += [(t("inspector.attention.layer_mean", layer=layer), weights[layer].mean(0)),
             (t("inspector.attention.all_mean"), weights.mean((0, 1)))]
    st.caption(t("inspector.attention.shading", query=view.position_label(query)))
    weight_tip = template("inspector.attention.weight_tip")
    for row_name, row in rows:
        shade, values = (row / row.max()).tolist(), row.tolist()

        def tip(i, values=values):
            return weight_tip(position=i, weight=values[i])

        left, right = st.columns([1, 9])
        left.markdown(f"**{row_name}**" if row_name == chosen else row_name)
        right.html(ins.highlight_html(run.pieces[: query + 1], shade, "31, 119, 180", tip, mark=query))


# --- predictions -----------------------------------------------------------------------------------------------------

def predictions_tab(view: Inspected) -> None:
    run = view.run
    predictions_view(view)
    st.subheader(t("inspector.surprise.heading"))
    losses = ins.char_losses(run.logits, run.ids)
    st.caption(t("inspector.surprise.caption", cap=LOSS_CAP, mean=float(losses[1:].mean())))
    loss_tip, values = template("inspector.surprise.tip"), losses.tolist()
    st.html(ins.highlight_html(run.pieces, (losses / LOSS_CAP).tolist(), "230, 60, 50",
                               lambda i: loss_tip(position=i, loss=values[i])))
    with st.expander(t("inspector.surprise.chart")):
        plot(figs.loss_bars(losses, view.labels), "inspect-losses", f"losses-{view.opened.name}")


@st.fragment
def predictions_view(view: Inspected) -> None:
    """The next-character distribution under the sampling controls, and generation with the same controls."""
    cfg, run, labels, tokenizer = view.cfg, view.run, view.labels, view.opened.tokenizer
    T = len(run.ids)
    st.subheader(t("inspector.predictions.heading"))
    position = st.select_slider(t("inspector.predictions.position"), range(T), format_func=view.position_label,
                                key=view.query_key, persist_state=KEEP, help=t("inspector.predictions.position_help"))
    # the distribution generation draws from: the sampling controls act on it at once
    c1, c2, c3 = st.columns(3)
    temperature = c1.slider(t("inspector.temperature"), 0.0, 2.0, 0.8, 0.05, key="inspect-temperature",
                            persist_state=KEEP, help=t("inspector.temperature_help"))
    top_k = c2.number_input(t("inspector.top_k"), 0, cfg.vocab_size, 0, key="inspect-gen-topk",
                            persist_state=KEEP, help=t("inspector.top_k_help"))
    # (a slider needs min < max: a one-character vocabulary has a single prediction to show)
    k = c3.slider(t("inspector.bars"), 1, cfg.vocab_size, min(10, cfg.vocab_size), key="inspect-topk",
                  persist_state=KEEP, help=t("inspector.bars_help")) if cfg.vocab_size > 1 else 1
    top = ins.top_predictions(run.logits, tokenizer, position, k, temperature, top_k or None)
    context_tail = "".join(labels[max(0, position - 40): position + 1])
    plot(figs.prediction_bars(top, t("inspector.predictions.title", tail=context_tail)), "inspect-predictions",
         f"predictions-{view.opened.name}")
    st.caption(t("inspector.predictions.follows", temperature=temperature, top_k=top_k or "—"))
    if position + 1 < T:
        actual = int(run.ids[position + 1])
        probs = ins.next_char_probs(run.logits, position, temperature, top_k or None)
        rank = int((probs > probs[actual]).sum()) + 1
        st.caption(t("inspector.predictions.actual", char=labels[position + 1], p=float(probs[actual]), rank=rank,
                     vocab=cfg.vocab_size))
    generate_view(view, temperature, top_k or None)


def generate_view(view: Inspected, temperature: float, top_k: int | None) -> None:
    st.subheader(t("inspector.generate.heading"))
    st.caption(t("inspector.same_sampling", temperature=temperature, top_k=top_k or "—"))
    c1, c2 = st.columns(2)
    seed = c1.number_input(t("inspector.generate.seed"), 0, 2**31 - 1, 0, key="inspect-seed", persist_state=KEEP)
    n_chars = c2.slider(t("inspector.generate.chars"), 20, 500, 200, 10, key="inspect-gen-chars", persist_state=KEEP)
    model, tokenizer, text = view.opened.model, view.opened.tokenizer, view.text
    if st.button(t("inspector.generate.button"), key="inspect-generate", type="primary"):
        st.session_state["inspect-generated"] = (text, ins.generate(
            model, tokenizer, text, n_chars, temperature, top_k, seed))
    generated = st.session_state.get("inspect-generated")
    if generated and generated[0] == text:
        prompt, story = tokenizer.decode(tokenizer.encode(text)), with_story_breaks(generated[1])
        st.html(ins.highlight_html(prompt + story, [0.0] * len(prompt) + [0.3] * len(story), "44, 160, 44"))
        st.caption(t("inspector.generate.caption", context=view.cfg.context))
        story_break_note()


# --- head finder -----------------------------------------------------------------------------------------------------

def finder_tab(view: Inspected) -> None:
    st.markdown(t("inspector.finder.intro"))
    finder_view(view)
    show_source(ins.induction_targets, ins.head_scores, ins.repeated_sequence_scores)


@st.fragment
def finder_view(view: Inspected) -> None:
    st.radio(t("inspector.finder.source"), SCORE_SOURCES, horizontal=True, key="inspect-score-source",
             persist_state=KEEP, format_func={s: t(f"inspector.finder.sources.{s}") for s in SCORE_SOURCES}.__getitem__,
             help=t("inspector.finder.source_help"))
    if st.session_state["inspect-score-source"] == "text":
        scores = ins.head_scores(view.run.patterns, view.run.ids)
    else:
        scores, report = copying_scores(view.opened.key)
        st.caption(t("inspector.finder.repeated", n=report.n_sequences, length=report.length))
        st.code("".join(ins.repeated_sequence_example(view.opened.tokenizer, report.length)), language=None,
                wrap_lines=True)
        first, second = st.columns(2)
        first.metric(t("inspector.finder.first_copy"), f"{report.copy_losses[0]:.2f}")
        second.metric(t("inspector.finder.second_copy"), f"{report.copy_losses[1]:.2f}",
                      f"{report.copy_losses[1] - report.copy_losses[0]:+.2f}", delta_color="inverse",
                      help=t("inspector.finder.ratio", ratio=report.ratio))
    for col, column in zip(st.columns(len(figs.SCORES)), figs.SCORES):
        role = t("inspector.finder.strongest", role=figs.score_name(column))
        if scores[column].notna().any():
            top_row = scores.loc[scores[column].idxmax()]
            found = top_row[column] >= ins.CLEAR_SCORE
            shown = top_row["head"] if found else t("inspector.finder.none")
            col.metric(role, f"{shown} · {top_row[column]:.2f}",
                       help=None if found else t("inspector.finder.below", clear=ins.CLEAR_SCORE, head=top_row["head"]))
        else:
            col.metric(role, "—", help=t("inspector.finder.no_repeat"))
    plot(figs.score_heatmaps(scores, view.cfg.n_layer, view.cfg.n_head), "inspect-scores",
         f"head-scores-{view.opened.name}")
    table = scores.drop(columns=["layer", "head_index"]).set_index("head").round(3)
    table = table.rename(columns=figs.score_name).rename_axis(t("inspector.finder.head_column"))
    st.dataframe(table, height=35 * (len(scores) + 1) + 3, key="inspect-score-table")


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
    long = training_scores(tuple(snapshots), view.run.text if source == "text" else None)
    st.caption(t("inspector.training_scored_on", source=t(f"inspector.finder.sources.{source}")))
    plot(figs.scores_over_training_figure(long), "inspect-training-scores", f"scores-over-training-{name}")


@st.fragment
def training_view(view: Inspected, snapshots: list[tuple[int, WeightsKey]]) -> None:
    steps = [s for s, _ in snapshots]
    name = view.opened.name
    chosen_step = st.select_slider(t("inspector.training.step"), steps, value=steps[-1], key=f"inspect-step-{name}",
                                   persist_state=KEEP)
    snap_run = inspected(dict(snapshots)[chosen_step], view.text)
    selected = (st.session_state["inspect-layer"], st.session_state["inspect-head"])
    plot(figs.attention_grid(snap_run.patterns, selected, t("inspector.training.grid_title", step=chosen_step)),
         "inspect-training-grid", f"attention-step-{chosen_step}-{name}")
