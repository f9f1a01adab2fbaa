"""Trace: one prediction followed through every stage of the forward pass, and four ways to ask what it used."""
import time
from pathlib import Path

import numpy as np
import streamlit as st
import torch

from explorer import trace_figures as figs
from explorer.i18n import say, t
from explorer.ui import ACTIVE_CHECKPOINT, default_checkpoint
from gptcore import checkpoint as ckpt
from gptcore import inspector as ins
from gptcore import interp
from gptcore.data import unknown_warning
from gptcore.errors import UserError

PLAY_SECONDS = 1.5  # per stage, while playing through
TABS = ("step", "lens", "attribution", "ablation", "patching")


# --- cached work: a click on this page only redraws -----------------------------------------------------------------

@st.cache_resource(max_entries=8, show_spinner=False)
def load_cached(path: str, mtime: float):
    """(model, tokenizer, step); mtime in the key reloads a file a new run overwrote."""
    return ckpt.load_weights(Path(path))


@st.cache_resource(max_entries=16, show_spinner=False)
def captured(path: str, mtime: float, ids: tuple[int, ...]) -> interp.Capture:
    """One forward pass with every hook point observed, per checkpoint and text: every tab reads from it."""
    return interp.capture(load_cached(path, mtime)[0], torch.tensor(ids))


@st.cache_resource(max_entries=64, show_spinner=False)
def traced(path: str, mtime: float, ids: tuple[int, ...], position: int, temperature: float,
           top_k: int | None) -> interp.Trace:
    model, tokenizer, _ = load_cached(path, mtime)
    return interp.trace(model, torch.tensor(ids), position, captured(path, mtime, ids), tokenizer, temperature, top_k)


@st.cache_resource(max_entries=16, show_spinner=False)
def lens_cached(path: str, mtime: float, ids: tuple[int, ...]) -> interp.LogitLens:
    return interp.logit_lens(load_cached(path, mtime)[0], captured(path, mtime, ids))


def pick_point(chart_key: str, state_key: str) -> None:
    """on_select: a clicked point's customdata (a position or a stage index) becomes state_key's value."""
    points = st.session_state[chart_key].selection.points
    if points:
        data = points[0]["customdata"]
        st.session_state[state_key] = int(data[0] if isinstance(data, list) else data)


# --- checkpoint and text ----------------------------------------------------------------------------------------------

st.title(t("trace.title"))
st.markdown(t("trace.intro"))

folders = ckpt.list_checkpoints()
if not folders:
    st.info(t("trace.no_checkpoint"))
    st.stop()
names = [p.name for p in folders]
if st.session_state.get("trace-checkpoint") not in names:
    st.session_state["trace-checkpoint"] = default_checkpoint(names)


def remember_checkpoint() -> None:
    st.session_state[ACTIVE_CHECKPOINT] = st.session_state["trace-checkpoint"]


name = st.selectbox(t("trace.checkpoint"), names, key="trace-checkpoint", on_change=remember_checkpoint)
weights = folders[names.index(name)] / "model.safetensors"
key = (str(weights), weights.stat().st_mtime)
try:
    model, tokenizer, step = load_cached(*key)
except ckpt.CheckpointError as e:
    st.error(t("trace.cannot_load", name=name, error=say(e)))
    st.stop()
cfg = model.cfg
vocab = [tokenizer.display(i) for i in range(cfg.vocab_size)]

left, middle, right = st.columns([6, 1.3, 1.3])
text = left.text_area(t("trace.text"), ins.DEFAULT_TEXT, height=100, key="trace-text", help=t("trace.text_help"))
temperature = middle.slider(t("trace.temperature"), 0.0, 2.0, 1.0, 0.05, key="trace-temperature",
                            help=t("trace.temperature_help"))
top_k = right.number_input(t("trace.top_k"), 0, cfg.vocab_size, 0, key="trace-top-k", help=t("trace.top_k_help"))
ids, unknown, truncated = ins.prepare_ids(tokenizer, text, cfg.context)
if warning := unknown_warning(unknown):
    st.warning(say(warning))
if truncated:
    st.warning(t("trace.truncated", context=cfg.context, left_out=truncated))
if not ids:
    st.error(t("trace.no_known"))
    st.stop()
ids = tuple(ids)
T = len(ids)
pieces = tokenizer.pieces(ids)  # each position's text: a character, or a BPE token
labels = [tokenizer.display(i) for i in ids]
cap = captured(*key, ids)

# --- the position -------------------------------------------------------------------------------------------------

if not 0 <= st.session_state.get("trace-position", -1) < T:
    again = ins.repeat_position(pieces)  # where a name comes back is where copying shows
    st.session_state["trace-position"] = T - 1 if again is None else again
st.caption(t("trace.pick_position"))
st.plotly_chart(figs.text_strip(labels, st.session_state["trace-position"]), key="trace-strip", on_select=lambda:
                pick_point("trace-strip", "trace-position"), selection_mode="points", config={"displayModeBar": False})
position = st.select_slider(t("trace.position"), range(T), key="trace-position",
                            format_func=lambda i: f"{i} '{labels[i]}'")
top_k_or_none = int(top_k) or None
tr = traced(*key, ids, position, float(temperature), top_k_or_none)
real_next = ids[position + 1] if position + 1 < T else None

tabs = st.tabs([t(f"trace.tabs.{tab}") for tab in TABS], key="trace-tab", on_change="rerun")
open_tab = dict(zip(TABS, tabs))


# --- step through -------------------------------------------------------------------------------------------------

def stage_title(stage: interp.Stage) -> str:
    title = t(f"trace.stages.{stage.step}")
    return title if stage.layer is None else t("trace.in_layer", layer=stage.layer, title=title)


def move(by: int, n: int) -> None:
    st.session_state["trace-stage"] = min(max(st.session_state["trace-stage"] + by, 0), n - 1)


def toggle_play(n: int) -> None:
    playing = not st.session_state.get("trace-playing", False)
    st.session_state["trace-playing"] = playing
    st.session_state["trace-advanced"] = time.monotonic()  # the first step comes one interval after the click
    if playing and st.session_state["trace-stage"] == n - 1:
        st.session_state["trace-stage"] = 0


@st.fragment(run_every=PLAY_SECONDS if st.session_state.get("trace-playing") else None)
def step_through():
    n = len(tr.stages)
    if not 0 <= st.session_state.get("trace-stage", -1) < n:
        st.session_state["trace-stage"] = 0
    playing = st.session_state.get("trace-playing", False)
    # the timer reruns this fragment every PLAY_SECONDS; any other rerun while playing does not step
    if playing and time.monotonic() - st.session_state.get("trace-advanced", 0.0) > 0.8 * PLAY_SECONDS:
        move(1, n)
        st.session_state["trace-advanced"] = time.monotonic()
    titles = [stage_title(s) for s in tr.stages]
    st.plotly_chart(figs.pass_diagram(tr, st.session_state["trace-stage"], titles), key="trace-diagram",
                    on_select=lambda: pick_point("trace-diagram", "trace-stage"), selection_mode="points",
                    config={"displayModeBar": False})
    back, forward, play, slider = st.columns([1.3, 1.3, 1.3, 6], vertical_alignment="bottom")
    back.button(t("trace.previous"), key="trace-back", on_click=move, args=(-1, n), width="stretch")
    forward.button(t("trace.next"), key="trace-forward", on_click=move, args=(1, n), width="stretch")
    if play.button(t("trace.pause") if playing else t("trace.play"), key="trace-play", on_click=toggle_play,
                   args=(n,), width="stretch"):
        st.rerun()  # the whole page, so the fragment's timer starts or stops
    index = slider.select_slider(t("trace.stage"), range(n), key="trace-stage",
                                 format_func=lambda i: f"{i + 1}/{n} · {titles[i]}")
    stage = tr.stages[index]
    st.subheader(f"{index + 1}/{n} · {t(f'trace.sections.{stage.section}')} · {titles[index]}")
    shape = "×".join(map(str, stage.shape)) or "1"
    if stage.hook and stage.hook.endswith("hook_q") and {"k", "v"} <= set(stage.parts):  # q, k and v in one figure
        hooks = " · ".join(f"`{stage.hook[:-1] + name}`" for name in "qkv")
        st.caption(t("trace.shape_each", shape=shape) + " · " + hooks)
    else:
        st.caption(t("trace.shape", shape=shape) + (f" · `{stage.hook}`" if stage.hook else ""))
    st.markdown(t(f"trace.describe.{stage.description}"))
    fig, blocks = figs.stage_view(stage, tr, labels, vocab, pieces, cfg.ffn)
    if fig is not None:
        st.plotly_chart(fig, key="trace-stage-figure", config={"displayModeBar": False})
    for block in blocks:
        st.html(block)
    if stage.sources:
        st.caption(t("trace.source", where=" · ".join(f"`{s.where}`" for s in stage.sources)))
        st.code("\n".join(s.text for s in stage.sources), language="python")
    if playing and index == n - 1:  # the end: stop the timer
        st.session_state["trace-playing"] = False
        st.rerun()


if open_tab["step"].open:
    with open_tab["step"]:
        step_through()


# --- logit lens -----------------------------------------------------------------------------------------------------

def lens_rows(lens: interp.LogitLens) -> list[str]:
    return [t("trace.lens.embedding") if row == "embedding" else t("trace.lens.block", layer=i - 1)
            for i, row in enumerate(lens.rows)]


if open_tab["lens"].open:
    with open_tab["lens"]:
        st.markdown(t("trace.lens.intro"))
        lens = lens_cached(*key, ids)
        p_true = np.full((len(lens.rows), T), np.nan)
        p_true[:, :-1] = lens.true_next().numpy()
        top = [[vocab[i] for i in row] for row in lens.top(1).indices[..., 0].tolist()]
        st.plotly_chart(figs.lens_figure(p_true, lens_rows(lens), labels, top, position), key="trace-lens",
                        on_select=lambda: pick_point("trace-lens", "trace-position"), selection_mode="points",
                        config={"displayModeBar": False})
        st.plotly_chart(figs.lens_column(lens.probs[:, position], lens_rows(lens), vocab), key="trace-lens-column",
                        config={"displayModeBar": False})
        if real_next is not None:
            st.caption(t("trace.lens.true_next", char=vocab[real_next],
                         values=", ".join(f"{p:.2f}" for p in p_true[:, position])))


# --- direct logit attribution --------------------------------------------------------------------------------------

def component_name(name: str) -> str:
    return t("trace.embedding_row") if name == "embedding" else name


if open_tab["attribution"].open:
    with open_tab["attribution"]:
        st.markdown(t("trace.attribution.intro"))
        candidates = list(dict.fromkeys(([real_next] if real_next is not None else []) +
                                        tr.logits.topk(5).indices.tolist()))
        target = st.selectbox(t("trace.attribution.target"), candidates, key=f"trace-target-{position}",
                              format_func=lambda i: t("trace.attribution.option", char=vocab[i],
                                                      real=t("trace.attribution.real") if i == real_next else ""))
        attribution = interp.logit_attribution(model, cap, position, target)
        parts = attribution.parts
        st.plotly_chart(figs.attribution_bars(parts, attribution.logit, vocab[target],
                                              [component_name(c) for c in parts["component"]]),
                        key="trace-attribution", config={"displayModeBar": False})
        best = parts.loc[parts["logit"].abs().idxmax()]
        st.caption(t("trace.attribution.sum", total=attribution.total, logit=attribution.logit,
                     scale=attribution.scale, biggest=component_name(best["component"]), value=best["logit"]))


# --- ablation -----------------------------------------------------------------------------------------------------

def with_progress(label: str, sweep, *args):
    """sweep(*args, progress=…) with a progress bar that goes once it is done."""
    bar = st.progress(0.0, text=label)
    result = sweep(*args, progress=lambda done, total: bar.progress(
        done / total, text=t("trace.progress", label=label, done=done, total=total)))
    bar.empty()
    return result


@st.fragment
def ablation_tab() -> None:
    st.markdown(t("trace.ablation.intro"))
    chosen = st.multiselect(t("trace.ablation.components"), interp.components(model), key="trace-ablate",
                            help=t("trace.ablation.components_help"), placeholder=t("trace.ablation.placeholder"))
    mode = st.radio(t("trace.ablation.mode"), interp.ABLATIONS, key="trace-ablate-mode", horizontal=True,
                    format_func=lambda m: t(f"trace.ablation.modes.{m}"))
    if T < 2:
        st.info(t("trace.ablation.too_short"))
        return
    if chosen:
        ablation = interp.ablate(model, cap, chosen, mode)
        before, after = ablation.loss
        a, b, c = st.columns(3)
        a.metric(t("trace.ablation.loss_before"), f"{before:.3f}")
        b.metric(t("trace.ablation.loss_after"), f"{after:.3f}", f"{after - before:+.3f}", delta_color="inverse")
        c.metric(t("trace.ablation.prediction"), f"'{vocab[int(ablation.logits[position].argmax())]}'",
                 help=t("trace.ablation.prediction_help", before=vocab[int(tr.logits.argmax())]))
        probs = ins.sampling_distribution(ablation.logits[position], temperature, top_k_or_none)
        st.plotly_chart(figs.top_bars(probs, vocab, t("trace.ablation.probs_title", position=position), real_next),
                        key="trace-ablation-probs", config={"displayModeBar": False})
    sweep_key = ("sweep", name, ids, mode)
    if st.button(t("trace.ablation.sweep"), key="trace-sweep"):
        st.session_state["trace-sweep-result"] = (sweep_key, with_progress(
            t("trace.ablation.sweeping"), interp.ablation_sweep, model, cap, mode))
    result = st.session_state.get("trace-sweep-result")
    if result and result[0] == sweep_key:
        frame = result[1]
        title = t("trace.ablation.sweep_title", mode=t(f"trace.ablation.modes.{mode}"))
        st.plotly_chart(figs.sweep_bars(frame, title), key="trace-sweep-bars", config={"displayModeBar": False})
        st.caption(t("trace.ablation.sweep_caption", head=frame.loc[0, "component"],
                     increase=frame.loc[0, "loss increase"]))


if open_tab["ablation"].open:
    with open_tab["ablation"]:
        ablation_tab()


# --- activation patching ----------------------------------------------------------------------------------------------

@st.cache_resource(max_entries=8, show_spinner=False)
def patched_heads(path: str, mtime: float, clean: str, corrupted: str, good: str, bad: str):
    """The pair run and checked, and the share each head restores: kept while the prompts stay as they are."""
    model, tokenizer, _ = load_cached(path, mtime)
    setup = interp.patching_setup(model, tokenizer, clean, corrupted, good, bad)
    return setup, interp.patch_heads(model, setup).numpy()


@st.fragment
def patching_tab() -> None:
    st.markdown(t("trace.patching.intro"))
    pairs = {p.id: p for p in interp.PATCHING_PAIRS}
    pair = pairs[st.selectbox(t("trace.patching.pair"), list(pairs), key="trace-pair",
                              format_func=lambda p: t(f"trace.pairs.{p}.name"))]
    st.caption(t(f"trace.pairs.{pair.id}.about"))
    c1, c2 = st.columns(2)
    clean = c1.text_area(t("trace.patching.clean"), pair.clean, key=f"trace-clean-{pair.id}", height=90)
    corrupted = c2.text_area(t("trace.patching.corrupted"), pair.corrupted, key=f"trace-corrupted-{pair.id}",
                             height=90)
    good = c1.text_input(t("trace.patching.clean_answer"), pair.clean_answer, key=f"trace-good-{pair.id}")
    bad = c2.text_input(t("trace.patching.corrupted_answer"), pair.corrupted_answer, key=f"trace-bad-{pair.id}")
    try:
        setup, heads = patched_heads(*key, clean, corrupted, good, bad)
    except UserError as e:
        st.error(say(e))
        return
    a, b = st.columns(2)
    a.metric(t("trace.patching.clean_difference"), f"{setup.clean_difference:+.2f}")
    b.metric(t("trace.patching.corrupted_difference"), f"{setup.corrupted_difference:+.2f}")
    st.caption(t("trace.patching.measure", good=vocab[setup.good], bad=vocab[setup.bad]))
    st.plotly_chart(figs.head_grid(heads, t("trace.patching.heads_title"), t("trace.fig.restored")),
                    key="trace-patch-heads", config={"displayModeBar": False})
    best = np.unravel_index(np.nanargmax(heads), heads.shape)
    st.caption(t("trace.patching.heads_caption", head=f"L{best[0]}H{best[1]}", share=float(heads[best])))
    pair_key = (name, clean, corrupted, good, bad)
    prompt_labels = [tokenizer.display(i) for i in setup.clean.ids.tolist()]
    residual_rows = [t("trace.lens.embedding")] + [t("trace.lens.block", layer=i) for i in range(cfg.n_layer)]
    sweeps = {"residual": (interp.patch_residual, residual_rows),
              "head_position": (interp.patch_heads_by_position, ins.head_names(cfg.n_layer, cfg.n_head))}
    for sweep, (run, rows) in sweeps.items():  # the longer sweeps run on request, with a progress bar
        state = f"trace-patch-{sweep}"
        if st.button(t(f"trace.patching.run_{sweep}"), key=f"{state}-button"):
            shares = with_progress(t(f"trace.patching.running_{sweep}"), run, model, setup)
            st.session_state[state] = (pair_key, shares.numpy())
        result = st.session_state.get(state)
        if result and result[0] == pair_key:
            st.plotly_chart(figs.position_grid(result[1], rows, prompt_labels, t(f"trace.patching.{sweep}_title")),
                            key=f"{state}-figure", config={"displayModeBar": False})


if open_tab["patching"].open:
    with open_tab["patching"]:
        patching_tab()
