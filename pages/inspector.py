"""Inspect: attention patterns, predictions, head roles and how they formed, for any saved checkpoint.

Speed: the forward pass, the copying test and the scores over training are cached per checkpoint and text, and
each interactive part is an st.fragment, so a click reruns only its own part and recomputes nothing.
"""
import os
from pathlib import Path

import streamlit as st

from explorer import inspector_figures as figs
from explorer.i18n import choice, help_text, label, say, t
from explorer.ui import ACTIVE_CHECKPOINT, default_checkpoint, show_source
from gptcore import checkpoint as ckpt
from gptcore import inspector as ins
from gptcore.config import TrainConfig, settings
from gptcore.data import unknown_warning
from gptcore.device import choices_here, describe, resolve
from gptcore.errors import UserError
from gptcore.model import GPT
from gptcore.runs import corpus_of

LOSS_CAP = 4.0  # nats; about ln(vocab): a character this surprising is drawn fully red
SCORE_SOURCES = ("repeated", "text")  # random characters shown twice (the copying test), or the text above
KEEP = "session"  # persist_state of every setting: kept while its tab is closed and across pages
# Every format_func below is a table of names made during the run (not a function calling t() whenever it is
# asked), so an option's name is in this tab's language whoever reads it.


# --- cached work: a click on this page only redraws ------------------------------------------------------------------

@st.cache_resource(max_entries=16, show_spinner=False)
def load_cached(path: bytes, mtime: float, where: str):
    """(model on the device `where`, tokenizer, step); mtime in the key reloads a file that was overwritten by a
    new run. The path as bytes: a name that is not UTF-8 could not be hashed as text."""
    model, tokenizer, step = ckpt.load_weights(Path(os.fsdecode(path)))
    return model.to(where), tokenizer, step


@st.cache_resource(max_entries=32, show_spinner=False)
def inspected(path: bytes, mtime: float, where: str, text: str) -> ins.Inspection:
    """The forward pass over a text (logits and every attention pattern), once per checkpoint and text."""
    model, tokenizer, _ = load_cached(path, mtime, where)
    return ins.inspect_text(model, tokenizer, text)


@st.cache_resource(max_entries=16, show_spinner=False)
def copying_scores(path: bytes, mtime: float, where: str):
    """The head scores and losses on random characters shown twice (`python -m gptcore copying`)."""
    return ins.repeated_sequence_scores(load_cached(path, mtime, where)[0])


@st.cache_resource(max_entries=8, show_spinner=False)
def training_scores(snapshots: tuple[tuple[int, bytes, float], ...], where: str, text: str | None):
    """Head scores of every snapshot, on the text or (None) on the copying test, in long form."""
    models = [(step, load_cached(path, mtime, where)[0]) for step, path, mtime in snapshots]
    tokenizer = load_cached(*snapshots[-1][1:], where)[1]
    return ins.scores_over_training(models, tokenizer, text)


def weights_key(path: Path) -> tuple[bytes, float, str]:
    return os.fsencode(path), path.stat().st_mtime, str(inspect_device)


def plot(fig, key: str, filename: str, **select) -> None:
    """A Plotly chart whose modebar saves a PNG, plus a button for a self-contained HTML copy."""
    st.plotly_chart(fig, key=key, config={"toImageButtonOptions": {"filename": filename, "scale": 2}}, **select)
    st.download_button(t("inspector.download_html"), lambda: fig.to_html(include_plotlyjs=True), f"{filename}.html",
                       "text/html", key=f"{key}-html", on_click="ignore", icon=":material/download:")


def clicked(chart_key: str):
    """The first point selected (clicked) on a chart, or None."""
    state = st.session_state.get(chart_key)
    points = state.selection.points if state is not None else []
    return points[0] if points else None


# --- checkpoint and text ---------------------------------------------------------------------------------------------

st.title(t("inspector.title"))
st.markdown(t("inspector.intro"))

folders = ckpt.list_checkpoints()
if not folders:
    st.info(t("inspector.no_checkpoint"))
    st.stop()
names = [ckpt.shown_name(p) for p in folders]  # (a name that is not UTF-8 shown escaped)


def remember_checkpoint() -> None:
    st.session_state[ACTIVE_CHECKPOINT] = st.session_state["inspect-checkpoint"]


name = st.selectbox(t("inspector.checkpoint"), names, index=names.index(default_checkpoint(names)),
                    key="inspect-checkpoint", on_change=remember_checkpoint, help=t("inspector.checkpoint_help"))
folder = folders[names.index(name)]
# the device the models run on here: a choice where this machine has an accelerator, the CPU otherwise
device_setting = settings(TrainConfig)["device"]
if len(choices_here()) > 2:
    st.selectbox(label(device_setting), choices_here(), key="inspect-device", persist_state=KEEP,
                 format_func={v: choice(device_setting, v) for v in choices_here()}.__getitem__,
                 help=help_text(device_setting))
inspect_device = resolve(st.session_state.get("inspect-device", "cpu"))
st.caption(t("device.inspects_on", device=describe(inspect_device)))
weights = folder / "model.safetensors"
try:
    key = weights_key(weights)
    model, tokenizer, step = load_cached(*key)
except (ckpt.CheckpointError, OSError) as e:
    st.error(t("inspector.cannot_load", name=name, error=say(e) if isinstance(e, UserError) else str(e)))
    st.stop()
cfg = model.cfg
meta = ckpt.read_meta(folder)
facts = [t("inspector.facts.step", step=step), t("inspector.facts.params", n=model.num_params()),
         t("inspector.facts.shape", layers=cfg.n_layer, heads=cfg.n_head),
         f"d_model {cfg.d_model}", t("inspector.facts.context", context=cfg.context), say(tokenizer.describe())]
if isinstance(meta.get("final_val_loss"), (int, float)):
    facts.insert(1, t("inspector.facts.val_loss", loss=meta["final_val_loss"]))
corpus = corpus_of(meta)  # (in this tab's language where the run recorded it as a message)
st.caption(" · ".join(facts) + ("  \n" + t("inspector.facts.corpus", corpus=say(corpus)) if corpus else ""))

text = st.text_area(t("inspector.text"), ins.DEFAULT_TEXT, height=100, key="inspect-text", persist_state=KEEP,
                    help=t("inspector.text_help"))
try:
    run = inspected(*key, text)
except UserError as e:
    st.error(t("inspector.nothing", reason=say(e)))
    st.stop()
if warning := unknown_warning(run.unknown):
    st.warning(say(warning))
if run.truncated:
    st.warning(t("inspector.truncated", context=cfg.context, left_out=run.truncated))

labels = ins.token_labels(run.pieces)  # one per position: a character, or a BPE token
T = len(run.ids)
heads = ins.head_names(cfg.n_layer, cfg.n_head)
# Where a name comes back is where copying shows: both position pickers start there.
name_again = ins.repeat_position(run.pieces)
start_position = T - 1 if name_again is None else name_again
QUERY, POSITION = f"inspect-query-{T}", f"inspect-position-{T}"
for state_key in (QUERY, POSITION):
    if not 0 <= st.session_state.get(state_key, -1) < T:
        st.session_state[state_key] = start_position

# The head enlarged first is the one that copies best on random characters shown twice, if one does.
copying_head = ins.strongest_head(copying_scores(*key)[0], "induction")
if not (0 <= st.session_state.get("inspect-layer", -1) < cfg.n_layer
        and 0 <= st.session_state.get("inspect-head", -1) < cfg.n_head):  # (first visit, or a smaller model)
    st.session_state["inspect-layer"], st.session_state["inspect-head"] = copying_head[:2] if copying_head else (0, 0)
if st.session_state.get("inspect-topk", 0) > cfg.vocab_size:  # a slider refuses a kept value above its new max
    del st.session_state["inspect-topk"]
if st.session_state.get("inspect-score-source") not in SCORE_SOURCES:
    st.session_state["inspect-score-source"] = SCORE_SOURCES[0]


def position_label(i: int) -> str:
    return f"{i} '{labels[i]}'"


# The tabs are lazy: only the open one runs, which keeps a click on this page quick.
TABS = ("attention", "predictions", "finder", "training")
attention_tab, predictions_tab, finder_tab, training_tab = st.tabs(
    [t(f"inspector.tabs.{tab}") for tab in TABS], key="inspect-tab", on_change="rerun")


# --- attention -------------------------------------------------------------------------------------------------------

def pick_query() -> None:
    """on_select of the enlarged head: the clicked query character (its customdata is the position) becomes the
    query."""
    if (point := clicked("inspect-head-figure")) and "customdata" in point:
        data = point["customdata"]
        st.session_state[QUERY] = int(data[0] if isinstance(data, list) else data)


@st.fragment
def attention_view() -> None:
    """The enlarged head and one query's weights: a head, layer or query change reruns only this."""
    left, right = st.columns([1, 1])
    layer = left.segmented_control(t("inspector.attention.layer"), range(cfg.n_layer), key="inspect-layer",
                                   required=True, persist_state=KEEP,
                                   format_func=[t("inspector.attention.layer_option", n=n)
                                                for n in range(cfg.n_layer)].__getitem__)
    head = right.segmented_control(t("inspector.attention.head"), range(cfg.n_head), key="inspect-head",
                                   required=True, persist_state=KEEP,
                                   format_func=[t("inspector.attention.head_option", n=n)
                                                for n in range(cfg.n_head)].__getitem__)
    chosen = heads[layer * cfg.n_head + head]
    if copying_head and (layer, head) == copying_head[:2]:
        st.caption(t("inspector.attention.copying_head", head=chosen, score=copying_head[2]))
    elif copying_head is None:
        st.caption(t("inspector.attention.no_copying_head", clear=ins.CLEAR_SCORE))
    query = st.session_state[QUERY]
    plot(figs.head_heatmap(run.patterns[layer, head], labels, t("inspector.attention.head_title", head=chosen), query),
         "inspect-head-figure", f"attention-{chosen}-{name}", on_select=pick_query, selection_mode="points")

    st.subheader(t("inspector.attention.one_position"))
    query = st.select_slider(t("inspector.attention.query"), range(T), format_func=position_label, key=QUERY,
                             persist_state=KEEP, help=t("inspector.attention.query_help"))
    weights = run.patterns[:, :, query, : query + 1]
    rows = [(h, weights[layer, i]) for i, h in enumerate(heads[layer * cfg.n_head:(layer + 1) * cfg.n_head])]
    rows += [(t("inspector.attention.layer_mean", layer=layer), weights[layer].mean(0)),
             (t("inspector.attention.all_mean"), weights.mean((0, 1)))]
    st.caption(t("inspector.attention.shading", query=position_label(query)))
    for row_name, row in rows:
        shade = (row / row.max()).tolist()

        def tip(i, row=row):
            return t("inspector.attention.weight_tip", position=i, weight=float(row[i]))

        left, right = st.columns([1, 9])
        left.markdown(f"**{row_name}**" if row_name == chosen else row_name)
        right.html(ins.highlight_html(run.pieces[: query + 1], shade, "31, 119, 180", tip, mark=query))


if attention_tab.open:  # lazy: only the open tab computes and ships its figures
    with attention_tab:
        st.markdown(t("inspector.attention.intro"))
        plot(figs.attention_grid(run.patterns), "inspect-grid", f"attention-grid-{name}")
        st.caption(t("inspector.attention.grid_caption"))
        attention_view()
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


# --- predictions -----------------------------------------------------------------------------------------------------

@st.fragment
def predictions_view() -> None:
    """The next-character distribution under the sampling controls, and generation with the same controls."""
    st.subheader(t("inspector.predictions.heading"))
    position = st.select_slider(t("inspector.predictions.position"), range(T), format_func=position_label,
                                key=POSITION, persist_state=KEEP)
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
         f"predictions-{name}")
    st.caption(t("inspector.predictions.follows", temperature=temperature, top_k=top_k or "—"))
    if position + 1 < T:
        actual = int(run.ids[position + 1])
        probs = ins.next_char_probs(run.logits, position, temperature, top_k or None)
        rank = int((probs > probs[actual]).sum()) + 1
        st.caption(t("inspector.predictions.actual", char=labels[position + 1], p=float(probs[actual]), rank=rank,
                     vocab=cfg.vocab_size))

    st.subheader(t("inspector.generate.heading"))
    st.caption(t("inspector.same_sampling", temperature=temperature, top_k=top_k or "—"))
    c1, c2 = st.columns(2)
    seed = c1.number_input(t("inspector.generate.seed"), 0, 2**31 - 1, 0, key="inspect-seed", persist_state=KEEP)
    n_chars = c2.slider(t("inspector.generate.chars"), 20, 500, 200, 10, key="inspect-gen-chars", persist_state=KEEP)
    if st.button(t("inspector.generate.button"), key="inspect-generate", type="primary"):
        st.session_state["inspect-generated"] = (text, ins.generate(
            model, tokenizer, text, n_chars, temperature, top_k or None, seed))
    generated = st.session_state.get("inspect-generated")
    if generated and generated[0] == text:
        prompt = tokenizer.decode(tokenizer.encode(text))
        st.html(ins.highlight_html(prompt + generated[1], [0.0] * len(prompt) + [0.3] * len(generated[1]),
                                   "44, 160, 44"))
        st.caption(t("inspector.generate.caption", context=cfg.context))


if predictions_tab.open:  # lazy: only the open tab computes and ships its figures
    with predictions_tab:
        predictions_view()
        st.subheader(t("inspector.surprise.heading"))
        losses = ins.char_losses(run.logits, run.ids)
        st.caption(t("inspector.surprise.caption", cap=LOSS_CAP, mean=float(losses[1:].mean())))
        st.html(ins.highlight_html(run.pieces, (losses / LOSS_CAP).tolist(), "230, 60, 50",
                                   lambda i: t("inspector.surprise.tip", position=i, loss=float(losses[i]))))
        with st.expander(t("inspector.surprise.chart")):
            plot(figs.loss_bars(losses, labels), "inspect-losses", f"losses-{name}")


# --- head finder -----------------------------------------------------------------------------------------------------

@st.fragment
def finder_view() -> None:
    st.radio(t("inspector.finder.source"), SCORE_SOURCES, horizontal=True, key="inspect-score-source",
             persist_state=KEEP, format_func={s: t(f"inspector.finder.sources.{s}") for s in SCORE_SOURCES}.__getitem__,
             help=t("inspector.finder.source_help"))
    if st.session_state["inspect-score-source"] == "text":
        scores = ins.head_scores(run.patterns, run.ids)
    else:
        scores, report = copying_scores(*key)
        st.caption(t("inspector.finder.repeated", n=report.n_sequences, length=report.length))
        st.code("".join(ins.repeated_sequence_example(tokenizer, report.length)), language=None, wrap_lines=True)
        first, second = st.columns(2)
        first.metric(t("inspector.finder.first_copy"), f"{report.copy_losses[0]:.2f}")
        second.metric(t("inspector.finder.second_copy"), f"{report.copy_losses[1]:.2f}",
                      f"{report.copy_losses[1] - report.copy_losses[0]:+.2f}", delta_color="inverse",
                      help=t("inspector.finder.ratio", ratio=report.ratio))
    best = st.columns(len(figs.SCORES))
    for col, column in zip(best, figs.SCORES):
        role = t("inspector.finder.strongest", role=figs.score_name(column))
        if scores[column].notna().any():
            top_row = scores.loc[scores[column].idxmax()]
            found = top_row[column] >= ins.CLEAR_SCORE
            shown = top_row["head"] if found else t("inspector.finder.none")
            col.metric(role, f"{shown} · {top_row[column]:.2f}",
                       help=None if found else t("inspector.finder.below", clear=ins.CLEAR_SCORE, head=top_row["head"]))
        else:
            col.metric(role, "—", help=t("inspector.finder.no_repeat"))
    plot(figs.score_heatmaps(scores, cfg.n_layer, cfg.n_head), "inspect-scores", f"head-scores-{name}")
    table = scores.drop(columns=["layer", "head_index"]).set_index("head").round(3)
    table = table.rename(columns=figs.score_name).rename_axis(t("inspector.finder.head_column"))
    st.dataframe(table, height=35 * (len(scores) + 1) + 3, key="inspect-score-table")


if finder_tab.open:  # lazy: only the open tab computes and ships its figures
    with finder_tab:
        st.markdown(t("inspector.finder.intro"))
        finder_view()
        show_source(ins.induction_targets, ins.head_scores, ins.repeated_sequence_scores)


# --- over training ---------------------------------------------------------------------------------------------------

@st.fragment
def training_view(snapshots: list[tuple[int, Path]]) -> None:
    steps = [s for s, _ in snapshots]
    chosen_step = st.select_slider(t("inspector.training.step"), steps, value=steps[-1], key=f"inspect-step-{name}",
                                   persist_state=KEEP)
    path = dict(snapshots)[chosen_step]
    snap_run = inspected(*weights_key(path), text)
    selected = (st.session_state["inspect-layer"], st.session_state["inspect-head"])
    plot(figs.attention_grid(snap_run.patterns, selected, t("inspector.training.grid_title", step=chosen_step)),
         "inspect-training-grid", f"attention-step-{chosen_step}-{name}")


if training_tab.open:  # lazy: only the open tab computes and ships its figures
    with training_tab:
        snapshots = []
        for snap_step, path in ins.training_steps(folder):
            try:
                load_cached(*weights_key(path))
                snapshots.append((snap_step, path))
            except (ckpt.CheckpointError, OSError) as e:
                st.warning(t("inspector.training.skipping", step=snap_step,
                             error=say(e) if isinstance(e, UserError) else str(e)))
        if len(snapshots) < 2:
            st.info(t("inspector.training.no_snapshots", name=name))
        else:
            st.caption(t("inspector.training.intro"))
            training_view(snapshots)
            source = st.session_state["inspect-score-source"]
            long = training_scores(tuple((s, *weights_key(p)[:2]) for s, p in snapshots), str(inspect_device),
                                   run.text if source == "text" else None)
            st.caption(t("inspector.training_scored_on", source=t(f"inspector.finder.sources.{source}")))
            plot(figs.scores_over_training_figure(long), "inspect-training-scores", f"scores-over-training-{name}")
