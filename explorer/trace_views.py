"""The Trace page's tabs: stepping through one prediction, the logit lens, attribution, ablation and patching.

Attribution reads the direct path and ablation the total effect, so the Attribution tab shows both side by side, and
the Patching tab shows the composition that accounts for the difference (gptcore.circuits).

Each tab takes a `Traced` (the checkpoint, the text and the traced position) rather than reading the page's
globals; the forward passes behind them are cached per checkpoint version, device and text, so a click redraws.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from gptcore import circuits, interp
from gptcore import inspector as ins
from gptcore.errors import InputError, UserError

from . import trace_figures as figs
from .checkpoints import Opened, WeightsKey, load_cached
from .i18n import say, t
from .ui import show_chart

PLAY_SECONDS = 1.5  # per stage, while playing through
NO_MODEBAR = {"displayModeBar": False}


# --- cached work -------------------------------------------------------------------------------------------------

@st.cache_resource(max_entries=16, show_spinner=False)
def captured(key: WeightsKey, ids: tuple[int, ...]) -> interp.Capture:
    """One forward pass with every hook point observed, per checkpoint and text: every tab reads from it."""
    return interp.capture(load_cached(*key)[0], torch.tensor(ids))


@st.cache_resource(max_entries=64, show_spinner=False)
def traced(key: WeightsKey, ids: tuple[int, ...], position: int, temperature: float,
           top_k: int | None) -> interp.Trace:
    model, tokenizer, _ = load_cached(*key)
    return interp.trace(model, torch.tensor(ids), position, captured(key, ids), tokenizer, temperature, top_k)


@st.cache_resource(max_entries=16, show_spinner=False)
def lens_cached(key: WeightsKey, ids: tuple[int, ...]) -> interp.LogitLens:
    return interp.logit_lens(load_cached(*key)[0], captured(key, ids))


@st.cache_resource(max_entries=8, show_spinner=False)
def means_cached(key: WeightsKey) -> dict[str, torch.Tensor]:
    """Each head's and FFN's mean over the fixed reference text: what mean ablation puts in their place."""
    model, tokenizer, _ = load_cached(*key)
    return interp.reference_means(model, tokenizer)


@st.cache_resource(max_entries=32, show_spinner=False)
def effects_cached(key: WeightsKey, ids: tuple[int, ...], position: int, target: int, foil: int):
    return circuits.effects(load_cached(*key)[0], captured(key, ids), position, target, foil, means_cached(key))


@st.cache_resource(max_entries=16, show_spinner=False)
def sides_cached(key: WeightsKey, clean: str, corrupted: str, good: str, bad: str, receiver: str):
    """The share each sender restores through each side of the receiver head (rows: the whole input, then heads)."""
    model = load_cached(*key)[0]
    setup, _ = patched_heads(key, clean, corrupted, good, bad)
    layer, _ = interp.parse_component(model, receiver)
    return circuits.patch_sides(model, setup, receiver, [None] + circuits.senders_before(model, layer))


@st.cache_resource(max_entries=8, show_spinner=False)
def patched_heads(key: WeightsKey, clean: str, corrupted: str, good: str, bad: str):
    """The pair run and checked, and the share each head restores: kept while the prompts stay as they are."""
    model, tokenizer, _ = load_cached(*key)
    setup = interp.patching_setup(model, tokenizer, clean, corrupted, good, bad)
    return setup, interp.patch_heads(model, setup).numpy()


@dataclass(frozen=True)
class Traced:
    """What every tab reads: the checkpoint, the text's ids and the traced position with its sampling settings."""
    opened: Opened
    ids: tuple[int, ...]
    position: int
    temperature: float
    top_k: int | None

    @property
    def model(self):
        return self.opened.model

    @property
    def tokenizer(self):
        return self.opened.tokenizer

    @property
    def cap(self) -> interp.Capture:
        return captured(self.opened.key, self.ids)

    @property
    def means(self) -> dict[str, torch.Tensor]:
        return means_cached(self.opened.key)

    @property
    def trace(self) -> interp.Trace:
        return traced(self.opened.key, self.ids, self.position, self.temperature, self.top_k)

    @property
    def labels(self) -> list[str]:  # each position's token made visible (␣ for a space)
        return [self.tokenizer.display(i) for i in self.ids]

    @property
    def vocab(self) -> list[str]:  # the label of every token id
        return [self.tokenizer.display(i) for i in range(self.model.cfg.vocab_size)]

    @property
    def real_next(self) -> int | None:
        return self.ids[self.position + 1] if self.position + 1 < len(self.ids) else None


def pick_point(chart_key: str, state_key: str) -> None:
    """on_select: a clicked point's customdata (a position or a stage index) becomes state_key's value."""
    points = st.session_state[chart_key].selection.points
    if points:
        data = points[0]["customdata"]
        st.session_state[state_key] = int(data[0] if isinstance(data, list) else data)


def with_progress(label: str, sweep, *args):
    """sweep(*args, progress=…) with a progress bar that goes once it is done."""
    bar = st.progress(0.0, text=label)
    result = sweep(*args, progress=lambda done, total: bar.progress(
        done / total, text=t("trace.progress", label=label, done=done, total=total)))
    bar.empty()
    return result


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


def step_through(view: Traced) -> None:
    """The pass diagram and the current stage; while playing, a timer reruns only this part."""
    st.fragment(_step_through, run_every=PLAY_SECONDS if st.session_state.get("trace-playing") else None)(view)


def _step_through(view: Traced) -> None:
    tr = view.trace
    n = len(tr.stages)
    if not 0 <= st.session_state.get("trace-stage", -1) < n:
        st.session_state["trace-stage"] = 0
    playing = st.session_state.get("trace-playing", False)
    # the timer reruns this fragment every PLAY_SECONDS; any other rerun while playing does not step
    if playing and time.monotonic() - st.session_state.get("trace-advanced", 0.0) > 0.8 * PLAY_SECONDS:
        move(1, n)
        st.session_state["trace-advanced"] = time.monotonic()
    titles = [stage_title(s) for s in tr.stages]
    show_chart(figs.pass_diagram(tr, st.session_state["trace-stage"], titles), key="trace-diagram",
                    on_select=lambda: pick_point("trace-diagram", "trace-stage"), selection_mode="points",
                    config=NO_MODEBAR)
    back, forward, play, slider = st.columns([1.3, 1.3, 1.3, 6], vertical_alignment="bottom")
    back.button(t("trace.previous"), key="trace-back", on_click=move, args=(-1, n), width="stretch")
    forward.button(t("trace.next"), key="trace-forward", on_click=move, args=(1, n), width="stretch")
    if play.button(t("trace.pause") if playing else t("trace.play"), key="trace-play", on_click=toggle_play,
                   args=(n,), width="stretch"):
        st.rerun()  # the whole page, so the fragment's timer starts or stops
    index = slider.select_slider(t("trace.stage"), range(n), key="trace-stage",
                                 format_func=lambda i: f"{i + 1}/{n} · {titles[i]}")
    show_stage(view, tr.stages[index], f"{index + 1}/{n}", titles[index])
    if playing and index == n - 1:  # the end: stop the timer
        st.session_state["trace-playing"] = False
        st.rerun()


def show_stage(view: Traced, stage: interp.Stage, counter: str, title: str) -> None:
    """One stage: where it sits, its shape and hook point, what it does, its figure and the source behind it."""
    st.subheader(f"{counter} · {t(f'trace.sections.{stage.section}')} · {title}")
    shape = "×".join(map(str, stage.shape)) or "1"
    if stage.hook and stage.hook.endswith("hook_q") and {"k", "v"} <= set(stage.parts):  # q, k and v in one figure
        hooks = " · ".join(f"`{stage.hook[:-1] + name}`" for name in "qkv")
        st.caption(t("trace.shape_each", shape=shape) + " · " + hooks)
    else:
        st.caption(t("trace.shape", shape=shape) + (f" · `{stage.hook}`" if stage.hook else ""))
    st.markdown(t(f"trace.describe.{stage.description}"))
    pieces = view.tokenizer.pieces(view.ids)  # each position's text: a character, or a BPE token
    fig, blocks = figs.stage_view(stage, view.trace, view.labels, view.vocab, pieces, view.model.cfg.ffn)
    if fig is not None:
        show_chart(fig, key="trace-stage-figure", config=NO_MODEBAR)
    for block in blocks:
        st.html(block)
    if stage.sources:
        st.caption(t("trace.source", where=" · ".join(f"`{s.where}`" for s in stage.sources)))
        st.code("\n".join(s.text for s in stage.sources), language="python")
    if stage.unobserved:
        st.caption(t("trace.unobserved", where=f"`{stage.unobserved.where}`"))
        st.code(stage.unobserved.text, language="python")


# --- logit lens -----------------------------------------------------------------------------------------------------

def lens_row_name(row: str) -> str:
    """ "embedding", "attention 2", "block 2" in the page's language."""
    if row == "embedding":
        return t("trace.lens.embedding")
    kind, layer = row.split()
    return t(f"trace.lens.{kind}", layer=int(layer))


def lens_rows(lens: interp.LogitLens) -> list[str]:
    return [lens_row_name(row) for row in lens.rows]


def lens_tab(view: Traced) -> None:
    st.markdown(t("trace.lens.intro"))
    lens, vocab, position = lens_cached(view.opened.key, view.ids), view.vocab, view.position
    p_true = np.full((len(lens.rows), len(view.ids)), np.nan)
    p_true[:, :-1] = lens.true_next().numpy()
    top = [[vocab[i] for i in row] for row in lens.top(1).indices[..., 0].tolist()]
    show_chart(figs.lens_figure(p_true, lens_rows(lens), view.labels, top, position), key="trace-lens",
                    on_select=lambda: pick_point("trace-lens", "trace-position"), selection_mode="points",
                    config=NO_MODEBAR)
    show_chart(figs.lens_column(lens.probs[:, position], lens_rows(lens), vocab), key="trace-lens-column",
                    config=NO_MODEBAR)
    if view.real_next is not None:
        st.caption(t("trace.lens.true_next", char=vocab[view.real_next],
                     values=", ".join(f"{p:.2f}" for p in p_true[:, position])))
        row = lens.readable_from(position, view.real_next)
        if row is None:
            st.markdown(t("trace.lens.never_top", char=vocab[view.real_next]))
        else:
            st.markdown(t("trace.lens.readable", char=vocab[view.real_next], row=lens_rows(lens)[row]))


# --- direct logit attribution --------------------------------------------------------------------------------------

def component_name(name: str) -> str:
    return t("trace.embedding_row") if name == "embedding" else name


def attribution_tab(view: Traced) -> None:
    st.markdown(t("trace.attribution.intro"))
    vocab, real_next, position = view.vocab, view.real_next, view.position
    logits = view.trace.logits
    candidates = list(dict.fromkeys(([real_next] if real_next is not None else []) +
                                    logits.topk(min(5, len(vocab))).indices.tolist()))
    left, right = st.columns(2)
    target = left.selectbox(t("trace.attribution.target"), candidates, key=f"trace-target-{position}",
                            format_func=lambda i: t("trace.attribution.option", char=vocab[i],
                                                    real=t("trace.attribution.real") if i == real_next else ""))
    foils = [i for i in logits.argsort(descending=True).tolist() if i != target]  # the runner-up first
    foil = right.selectbox(t("trace.attribution.foil"), foils, key=f"trace-foil-{position}-{target}",
                           format_func=lambda i: f"'{vocab[i]}' ({float(logits[i]):.2f})",
                           help=t("trace.attribution.foil_help"))
    try:
        attribution = interp.logit_attribution(view.model, view.cap, position, target, foil)
    except InputError as e:  # a post-norm model: its stream is no sum of the components' outputs
        st.info(say(e))
        return
    parts = attribution.parts
    show_chart(figs.attribution_bars(parts, attribution.logit, vocab[target], vocab[foil],
                                     [component_name(c) for c in parts["component"]]),
               key="trace-attribution", config=NO_MODEBAR)
    best = parts.loc[parts["logit"].abs().idxmax()]
    st.caption(t("trace.attribution.sum", total=attribution.total, logit=attribution.logit,
                 scale=attribution.scale, biggest=component_name(best["component"]), value=best["logit"]))
    effects_section(view, target, foil)
    source_section(view, target, foil)


def effects_section(view: Traced, target: int, foil: int) -> None:
    """Direct beside total: where they differ, the component works through later layers."""
    st.subheader(t("trace.attribution.effects_heading"))
    st.markdown(t("trace.attribution.effects_intro"))
    frame = effects_cached(view.opened.key, view.ids, view.position, target, foil)
    show_chart(figs.effect_bars(frame, t("trace.attribution.effects_title", char=view.vocab[target],
                                         foil=view.vocab[foil])), key="trace-effects", config=NO_MODEBAR)
    heads = frame[frame["head"].notna()]  # composition is heads reading heads: name the head it shows most in
    indirect = heads.loc[heads["indirect"].abs().idxmax()]
    st.caption(t("trace.attribution.effects_caption", name=indirect["component"], direct=indirect["direct"],
                 total=indirect["total"]))


def source_section(view: Traced, target: int, foil: int) -> None:
    """One head's direct effect split by the earlier position it read from."""
    st.subheader(t("trace.attribution.source_heading"))
    st.markdown(t("trace.attribution.source_intro"))
    frame = effects_cached(view.opened.key, view.ids, view.position, target, foil)
    heads = frame[frame["head"].notna()]
    names = heads["component"].tolist()
    head = st.selectbox(t("trace.attribution.source_head"), names, key="trace-source-head",
                        index=int(heads["total"].abs().to_numpy().argmax()))
    layer, index = interp.parse_component(view.model, head)
    shares = circuits.source_attribution(view.model, view.cap, layer, index, view.position, target, foil)
    weights = view.cap[f"blocks.{layer}.attn.hook_pattern"][index, view.position, :view.position + 1]
    show_chart(figs.source_bars(shares.numpy(), weights.numpy(), view.labels, view.position,
                                t("trace.attribution.source_title", head=head)),
               key="trace-source", config=NO_MODEBAR)
    top = int(shares.abs().argmax())
    st.caption(t("trace.attribution.source_caption", head=head, position=top, char=view.labels[top],
                 value=float(shares[top]), weight=float(weights[top]), total=float(shares.sum())))


# --- ablation -----------------------------------------------------------------------------------------------------

def sweep_heads(model, cap, mode, means, progress):
    return interp.ablation_sweep(model, cap, mode, progress=progress, means=means)


@st.fragment
def ablation_tab(view: Traced) -> None:
    st.markdown(t("trace.ablation.intro"))
    model, cap, vocab, position = view.model, view.cap, view.vocab, view.position
    chosen = st.multiselect(t("trace.ablation.components"), interp.components(model), key="trace-ablate",
                            help=t("trace.ablation.components_help"), placeholder=t("trace.ablation.placeholder"))
    mode = st.radio(t("trace.ablation.mode"), interp.ABLATIONS, key="trace-ablate-mode", horizontal=True,
                    format_func=lambda m: t(f"trace.ablation.modes.{m}"))
    if len(view.ids) < 2:
        st.info(t("trace.ablation.too_short"))
        return
    if chosen:
        ablation = interp.ablate(model, cap, chosen, mode, view.means)
        before, after = ablation.loss
        a, b, c = st.columns(3)
        a.metric(t("trace.ablation.loss_before"), f"{before:.3f}")
        b.metric(t("trace.ablation.loss_after"), f"{after:.3f}", f"{after - before:+.3f}", delta_color="inverse")
        c.metric(t("trace.ablation.prediction"), f"'{vocab[int(ablation.logits[position].argmax())]}'",
                 help=t("trace.ablation.prediction_help", before=vocab[int(view.trace.logits.argmax())]))
        probs = ins.sampling_distribution(ablation.logits[position], view.temperature, view.top_k)
        show_chart(figs.top_bars(probs, vocab, t("trace.ablation.probs_title", position=position),
                                      view.real_next), key="trace-ablation-probs", config=NO_MODEBAR)
    sweep_key = ("sweep", view.opened.key, view.ids, mode)
    if st.button(t("trace.ablation.sweep"), key="trace-sweep"):
        st.session_state["trace-sweep-result"] = (sweep_key, with_progress(
            t("trace.ablation.sweeping"), sweep_heads, model, cap, mode, view.means))
    result = st.session_state.get("trace-sweep-result")
    if result and result[0] == sweep_key:
        frame = result[1]
        title = t("trace.ablation.sweep_title", mode=t(f"trace.ablation.modes.{mode}"))
        show_chart(figs.sweep_bars(frame, title), key="trace-sweep-bars", config=NO_MODEBAR)
        st.caption(t("trace.ablation.sweep_caption", head=frame.loc[0, "component"],
                     increase=frame.loc[0, "loss increase"]))


# --- activation patching ----------------------------------------------------------------------------------------------

@st.fragment
def patching_tab(opened: Opened) -> None:
    st.markdown(t("trace.patching.intro"))
    model, tokenizer, cfg = opened.model, opened.tokenizer, opened.model.cfg
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
        setup, heads = patched_heads(opened.key, clean, corrupted, good, bad)
    except UserError as e:
        st.error(say(e))
        return
    a, b = st.columns(2)
    a.metric(t("trace.patching.clean_difference"), f"{setup.clean_difference:+.2f}")
    b.metric(t("trace.patching.corrupted_difference"), f"{setup.corrupted_difference:+.2f}")
    st.caption(t("trace.patching.measure", good=tokenizer.display(setup.good), bad=tokenizer.display(setup.bad)))
    show_chart(figs.head_grid(heads, t("trace.patching.heads_title"), t("trace.fig.restored")),
                    key="trace-patch-heads", config=NO_MODEBAR)
    best = np.unravel_index(np.nanargmax(heads), heads.shape)
    st.caption(t("trace.patching.heads_caption", head=f"L{best[0]}H{best[1]}", share=float(heads[best])))
    if cfg.n_layer > 1:
        sides_section(opened, heads, (clean, corrupted, good, bad))
    pair_key = (opened.key, clean, corrupted, good, bad)
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
            show_chart(figs.position_grid(result[1], rows, prompt_labels, t(f"trace.patching.{sweep}_title")),
                            key=f"{state}-figure", config=NO_MODEBAR)


def default_receiver(heads: np.ndarray) -> str:
    """The head to patch the inputs of first: the best restorer of the deepest layer where one restores half or
    more (a head late in a circuit has the most senders to show), else the best beyond layer 0."""
    for layer in reversed(range(1, heads.shape[0])):
        if np.nanmax(heads[layer]) >= 0.5:
            return interp.head_label(layer, int(np.nanargmax(heads[layer])))
    layer, head = np.unravel_index(np.nanargmax(heads[1:]), heads[1:].shape)
    return interp.head_label(int(layer) + 1, int(head))


def sides_section(opened: Opened, heads: np.ndarray, pair: tuple[str, str, str, str]) -> None:
    """Which earlier head feeds the receiver, and through which of its inputs."""
    cfg = opened.model.cfg
    st.subheader(t("trace.patching.sides_heading"))
    st.markdown(t("trace.patching.sides_intro"))
    receivers = [interp.head_label(i, h) for i in range(1, cfg.n_layer) for h in range(cfg.n_head)]
    default = default_receiver(heads)
    if st.session_state.get("trace-receiver") not in receivers:
        st.session_state["trace-receiver"] = default
    receiver = st.selectbox(t("trace.patching.receiver"), receivers, key="trace-receiver",
                            help=t("trace.patching.receiver_help", head=default))
    shares = sides_cached(opened.key, *pair, receiver)
    rows = [sender_name(name) for name in shares.index]
    columns = [t(f"trace.patching.sides.{side}") for side in circuits.SIDES]
    show_chart(figs.side_grid(shares.to_numpy(), rows, columns, t("trace.patching.sides_title", head=receiver)),
               key="trace-patch-sides", config=NO_MODEBAR)
    whole = shares.iloc[0].to_numpy()
    senders = shares.iloc[1:].to_numpy()
    sender, side = np.unravel_index(np.nanargmax(senders), senders.shape)
    st.caption(t("trace.patching.sides_caption", head=receiver, whole_side=columns[int(np.nanargmax(whole))],
                 whole=float(np.nanmax(whole)), sender=rows[sender + 1], side=columns[side],
                 share=float(senders[sender, side])))


def sender_name(name: str) -> str:
    if not name:
        return t("trace.patching.whole_input")
    return t("trace.embedding_row") if name == circuits.EMBEDDING else name
