"""Inspect: attention patterns, predictions, head roles and how they formed, for any saved checkpoint."""
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

LOSS_CAP = 4.0  # nats; about ln(vocab): a character this surprising is drawn fully red
CLEAR_SCORE = 0.3  # a head finder score below this is not called a role: uniform attention over 100 keys gives 0.01
SCORE_SOURCES = ("repeated", "text")  # random characters shown twice (the copying test), or the text above
KEEP = "session"  # persist_state of every setting: kept while its tab is closed and across pages


@st.cache_resource(max_entries=16, show_spinner="Loading weights…")
def load_cached(path: bytes, mtime: float, where: str):
    """(model on the device `where`, tokenizer, step); mtime in the key reloads a file that was overwritten by a
    new run. The path as bytes: a name that is not UTF-8 could not be hashed as text."""
    model, tokenizer, step = ckpt.load_weights(Path(os.fsdecode(path)))
    return model.to(where), tokenizer, step


def load(path: Path):
    return load_cached(os.fsencode(path), path.stat().st_mtime, str(inspect_device))


def plot(fig, key: str, filename: str) -> None:
    """A Plotly chart whose modebar saves a PNG, plus a button for a self-contained HTML copy."""
    st.plotly_chart(fig, key=key, config={"toImageButtonOptions": {"filename": filename, "scale": 2}})
    st.download_button("Download as HTML", lambda: fig.to_html(include_plotlyjs=True), f"{filename}.html",
                       "text/html", key=f"{key}-html", on_click="ignore", icon=":material/download:")


st.title("Inspect a trained model")
st.markdown(
    "Feed a text to a trained checkpoint and look inside: where every head looks, what the model expects "
    "next, which heads carry a name forward, and how those patterns formed during training.")

folders = ckpt.list_checkpoints()
if not folders:
    st.info("There is no checkpoint in `checkpoints/` yet. Train one, for example "
            "`python -m gptcore train --data builtin --out checkpoints/mine --snapshot-every 250`.")
    st.stop()
names = [ckpt.shown_name(p) for p in folders]  # (a name that is not UTF-8 shown escaped)


def remember_checkpoint() -> None:
    st.session_state[ACTIVE_CHECKPOINT] = st.session_state["inspect-checkpoint"]


name = st.selectbox("Checkpoint", names, index=names.index(default_checkpoint(names)), key="inspect-checkpoint",
                    on_change=remember_checkpoint,
                    help="Every folder of checkpoints/ that holds a model.safetensors (the same as the sidebar's "
                         "active checkpoint).")
folder = folders[names.index(name)]
# the device the models run on here: a choice where this machine has an accelerator, the CPU otherwise
device_setting = settings(TrainConfig)["device"]
if len(choices_here()) > 2:
    st.selectbox(label(device_setting), choices_here(), key="inspect-device", persist_state=KEEP,
                 format_func=lambda v: choice(device_setting, v), help=help_text(device_setting))
inspect_device = resolve(st.session_state.get("inspect-device", "cpu"))
st.caption(t("device.inspects_on", device=describe(inspect_device)))
try:
    model, tokenizer, step = load(folder / "model.safetensors")
except (ckpt.CheckpointError, OSError) as e:
    st.error(f"Cannot load {name}: {e}")
    st.stop()
cfg = model.cfg
meta = ckpt.read_meta(folder)
facts = [f"step {step}", f"{model.num_params():,} parameters", f"{cfg.n_layer} layers × {cfg.n_head} heads",
         f"d_model {cfg.d_model}", f"context {cfg.context}", say(tokenizer.describe())]
if meta.get("final_val_loss") is not None:
    facts.insert(1, f"final val loss {meta['final_val_loss']:.3f}")
st.caption(" · ".join(facts) + (f"  \nTrained on {meta['corpus']}." if meta.get("corpus") else ""))

text = st.text_area("Text to inspect", ins.DEFAULT_TEXT, height=100, key="inspect-text", persist_state=KEEP,
                    help="The default story names its hero twice, so a head that copies the name can show itself.")
try:
    run = ins.inspect_text(model, tokenizer, text)
except UserError as e:
    st.error(f"Nothing to inspect: {e}.")
    st.stop()
if warning := unknown_warning(run.unknown):
    st.warning(warning)
if run.truncated:
    st.warning(f"The text is longer than the model's context of {cfg.context} characters: only the first "
               f"{cfg.context} are analysed, the last {run.truncated} are left out.")

labels = ins.token_labels(run.pieces)  # one per position: a character, or a BPE token
T = len(run.ids)
heads = ins.head_names(cfg.n_layer, cfg.n_head)
# Where a name comes back is where copying shows: start both position pickers there.
name_again = ins.repeat_position(run.pieces)
start_position = T - 1 if name_again is None else name_again


def position_label(i: int) -> str:
    return f"{i} '{labels[i]}'"


if st.session_state.get("inspect-topk", 0) > cfg.vocab_size:  # a slider refuses a kept value above its new max
    del st.session_state["inspect-topk"]
if st.session_state.get("inspect-head") not in heads:  # (first visit, or a checkpoint with fewer heads)
    st.session_state["inspect-head"] = heads[0]
chosen = st.session_state["inspect-head"]
layer, head = divmod(heads.index(chosen), cfg.n_head)
if st.session_state.get("inspect-score-source") not in SCORE_SOURCES:
    st.session_state["inspect-score-source"] = SCORE_SOURCES[0]
source = st.session_state["inspect-score-source"]


def scored_text() -> str | None:
    """What the head finder scores: the text above, or (None) random sequences shown twice."""
    return run.text if source == "text" else None


# The tabs are lazy: only the open one runs, which keeps a click on this page quick.
attention_tab, predictions_tab, finder_tab, training_tab = st.tabs(
    ["Attention", "Predictions", "Head finder", "Over training"], key="inspect-tab", on_change="rerun")

if attention_tab.open:  # lazy: only the open tab computes and ships its figures
    with attention_tab:
        st.markdown("Row *q* of a pattern is how query position *q* splits its attention over positions 0…*q*; "
                    "every row sums to 1 and the causal mask keeps everything right of the diagonal at 0.")
        st.selectbox("Head to enlarge", heads, key="inspect-head", persist_state=KEEP)
        plot(figs.attention_grid(run.patterns, (layer, head)), "inspect-grid", f"attention-grid-{name}")
        plot(figs.head_heatmap(run.patterns[layer, head], labels, f"{chosen}: attention pattern"),
             "inspect-head-figure", f"attention-{chosen}-{name}")

        show_source(ins.patterns_from_ids, GPT.run_with_cache)

        st.subheader("What one position attends to")
        query = st.select_slider("Query position", range(T), value=start_position, format_func=position_label,
                                 key=f"inspect-query-{T}", persist_state=KEEP)
        weights = run.patterns[:, :, query, : query + 1]
        rows = [(h, weights[layer, i]) for i, h in enumerate(heads[layer * cfg.n_head:(layer + 1) * cfg.n_head])]
        rows += [(f"mean of layer {layer}", weights[layer].mean(0)), ("mean of all heads", weights.mean((0, 1)))]
        st.caption(f"Shading is the weight relative to the row's largest (hover a character for the exact weight); "
                   f"the boxed character is the query, position {position_label(query)}.")
        for row_name, row in rows:
            shade = (row / row.max()).tolist()

            def tip(i, row=row):
                return f"position {i}: weight {float(row[i]):.3f}"

            left, right = st.columns([1, 9])
            left.markdown(f"**{row_name}**" if row_name == chosen else row_name)
            right.html(ins.highlight_html(run.pieces[: query + 1], shade, "31, 119, 180", tip, mark=query))

        st.subheader("Export the attention tensor")
        st.caption(f"Shape (layers, heads, query, key) = {tuple(run.patterns.shape)}.")
        csv_col, npy_col = st.columns(2)
        csv_col.download_button("Attention as CSV", lambda: ins.patterns_csv(run.patterns, run.pieces),
                                f"attention-{name}.csv", "text/csv", key="inspect-csv", on_click="ignore",
                                icon=":material/download:")
        npy_col.download_button("Attention as NPY", lambda: ins.patterns_npy(run.patterns), f"attention-{name}.npy",
                                "application/octet-stream", key="inspect-npy", on_click="ignore",
                                icon=":material/download:")

if predictions_tab.open:  # lazy: only the open tab computes and ships its figures
    with predictions_tab:
        st.subheader("Next-character distribution")
        position = st.select_slider("After position", range(T), value=start_position, format_func=position_label,
                                    key=f"inspect-position-{T}", persist_state=KEEP)
        # the distribution generation draws from: the sampling controls act on it at once
        c1, c2, c3 = st.columns(3)
        temperature = c1.slider(t("inspector.temperature"), 0.0, 2.0, 0.8, 0.05, key="inspect-temperature",
                                persist_state=KEEP, help=t("inspector.temperature_help"))
        top_k = c2.number_input(t("inspector.top_k"), 0, cfg.vocab_size, 0, key="inspect-gen-topk",
                                persist_state=KEEP, help=t("inspector.top_k_help"))
        # (a slider needs min < max: a one-character vocabulary has a single prediction to show)
        k = c3.slider(t("inspector.bars"), 1, cfg.vocab_size, min(10, cfg.vocab_size), key="inspect-topk",
                      persist_state=KEEP) if cfg.vocab_size > 1 else 1
        top = ins.top_predictions(run.logits, tokenizer, position, k, temperature, top_k or None)
        context_tail = ins.token_labels(run.pieces[max(0, position - 40): position + 1])
        plot(figs.prediction_bars(top, f"After …{''.join(context_tail)}"), "inspect-predictions",
             f"predictions-{name}")
        if position + 1 < T:
            actual = int(run.ids[position + 1])
            probs = ins.next_char_probs(run.logits, position, temperature, top_k or None)
            rank = int((probs > probs[actual]).sum()) + 1
            st.caption(f"The text continues with '{labels[position + 1]}': probability {float(probs[actual]):.3f}, "
                       f"rank {rank} of {cfg.vocab_size}.")

        st.subheader("Where the model is surprised")
        losses = ins.char_losses(run.logits, run.ids)
        st.caption(f"Each character is shaded by its loss −log p (fully red at {LOSS_CAP:.0f} nats or more); the first "
                   f"has nothing before it. Mean loss over this text: {float(losses[1:].mean()):.3f} nats.")
        st.html(ins.highlight_html(run.pieces, (losses / LOSS_CAP).tolist(), "230, 60, 50",
                                   lambda i: f"position {i}: loss {float(losses[i]):.2f} nats"))
        with st.expander("Loss per character as a chart"):
            plot(figs.loss_bars(losses, labels), "inspect-losses", f"losses-{name}")

        st.subheader("Generate from this text")
        st.caption(t("inspector.same_sampling", temperature=temperature, top_k=top_k or "—"))
        c1, c2 = st.columns(2)
        seed = c1.number_input("Seed", 0, 2**31 - 1, 0, key="inspect-seed", persist_state=KEEP)
        n_chars = c2.slider("Characters", 20, 500, 200, 10, key="inspect-gen-chars", persist_state=KEEP)
        if st.button("Generate", key="inspect-generate", type="primary"):
            st.session_state["inspect-generated"] = (text, ins.generate(
                model, tokenizer, text, n_chars, temperature, top_k or None, seed))
        generated = st.session_state.get("inspect-generated")
        if generated and generated[0] == text:
            prompt = tokenizer.decode(tokenizer.encode(text))
            st.html(ins.highlight_html(prompt + generated[1], [0.0] * len(prompt) + [0.3] * len(generated[1]),
                                       "44, 160, 44"))
            st.caption("Green: generated. The model sees at most its last "
                       f"{cfg.context} characters while it writes.")

if finder_tab.open:  # lazy: only the open tab computes and ships its figures
    with finder_tab:
        st.markdown(
            "Each score is the average attention weight a head puts on a particular key:\n"
            "- **previous token**: the character just before the query;\n"
            "- **first token**: position 0, a common place to park attention that has nowhere useful to go;\n"
            "- **induction**: the character that *followed an earlier occurrence* of the query's character. "
            "At the second *L* of a repeated *Lily*, such a head looks at the *i* after the first *L*, and can copy it "
            "forward. It is averaged over the queries whose character occurred before.\n\n"
            "Previous-token heads form within a few hundred steps. Induction heads need one of them in an earlier "
            "layer and usually appear much later in training, so a model trained for minutes may not have one yet: "
            "compare a longer run on the same text.")
        st.radio(t("inspector.finder.source"), SCORE_SOURCES, horizontal=True, key="inspect-score-source",
                 persist_state=KEEP, format_func=lambda s: t(f"inspector.finder.sources.{s}"),
                 help=t("inspector.finder.source_help"))
        if source == "text":
            scores = ins.head_scores(run.patterns, run.ids)
        else:
            scores, report = ins.repeated_sequence_scores(model)
            st.caption(t("inspector.finder.repeated", n=report.n_sequences, length=report.length))
            st.code("".join(ins.repeated_sequence_example(tokenizer, report.length)), language=None, wrap_lines=True)
            first, second = st.columns(2)
            first.metric(t("inspector.finder.first_copy"), f"{report.copy_losses[0]:.2f}")
            second.metric(t("inspector.finder.second_copy"), f"{report.copy_losses[1]:.2f}",
                          f"{report.copy_losses[1] - report.copy_losses[0]:+.2f}", delta_color="inverse",
                          help=t("inspector.finder.ratio", ratio=report.ratio))
        best = st.columns(len(figs.SCORE_LABELS))
        for col, (column, label) in zip(best, figs.SCORE_LABELS.items()):
            if scores[column].notna().any():
                top_row = scores.loc[scores[column].idxmax()]
                found = top_row[column] >= CLEAR_SCORE
                col.metric(f"Strongest {label} head", f"{top_row['head'] if found else 'none'} · {top_row[column]:.2f}",
                           help=None if found else f"No head reaches {CLEAR_SCORE}: the best is {top_row['head']}.")
            else:
                col.metric(f"Strongest {label} head", "—", help="No character of the text occurs twice.")
        plot(figs.score_heatmaps(scores, cfg.n_layer, cfg.n_head), "inspect-scores", f"head-scores-{name}")
        st.dataframe(scores.drop(columns=["layer", "head_index"]).set_index("head").round(3),
                     height=35 * (len(scores) + 1) + 3, key="inspect-score-table")
        show_source(ins.induction_targets, ins.head_scores)

if training_tab.open:  # lazy: only the open tab computes and ships its figures
    with training_tab:
        snapshots = []
        for snap_step, path in ins.training_steps(folder):
            try:
                snapshots.append((snap_step, load(path)))
            except (ckpt.CheckpointError, OSError) as e:
                st.warning(f"Skipping the weights of step {snap_step}: {e}")
        if len(snapshots) < 2:
            st.info(f"{name} has no intermediate snapshots. Set **Snapshot every** on the Train page (or "
                    "`--snapshot-every N` on the command line) to keep intermediate weights and watch its patterns "
                    "form.")
        else:
            chosen_step = st.select_slider("Training step", [s for s, _ in snapshots], value=snapshots[-1][0],
                                           key=f"inspect-step-{name}", persist_state=KEEP)
            snap_model, snap_tokenizer, _ = dict(snapshots)[chosen_step]
            snap_run = ins.inspect_text(snap_model, snap_tokenizer, text)
            plot(figs.attention_grid(snap_run.patterns, (layer, head), f"Attention at step {chosen_step}"),
                 "inspect-training-grid", f"attention-step-{chosen_step}-{name}")
            long = ins.scores_over_training([(s, m) for s, (m, _, _) in snapshots], tokenizer, scored_text())
            st.caption(t("inspector.training_scored_on", source=t(f"inspector.finder.sources.{source}")))
            plot(figs.scores_over_training_figure(long), "inspect-training-scores", f"scores-over-training-{name}")
