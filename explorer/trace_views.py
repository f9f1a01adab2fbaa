"""The Trace page's tabs: stepping through one prediction, the logit lens, attribution, ablation and patching.

Attribution reads the direct path and ablation the total effect, so the Attribution tab shows both side by side, and
the Patching tab shows the composition that accounts for the difference (gptcore.circuits).

Each tab takes a `Traced` (the checkpoint, the text and the traced position) rather than reading the page's
globals; the forward passes behind them are cached per checkpoint version, device and text, so a click redraws, and
the tabs are a fragment of their own: a tab switch reruns them alone. What a learner may doubt is explained where
it shows (explorer.trace_notes).

The same tabs open a real model (SmolLM2: 30 layers of 9 heads, a 49k-token vocabulary): what takes more than about
half a second (the lens at every nearby position, the total effects, the sweeps) waits for a click and shows its
progress, and the figures that list every head become one layer × head grid.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st
import torch

from gptcore import circuits, interp
from gptcore import inspector as ins
from gptcore.errors import InputError, UserError
from gptcore.heldout import HeldOut, held_out_text

from . import trace_figures as figs
from . import trace_link as link
from . import trace_notes as notes
from .checkpoints import Opened, WeightsKey, checkpoint_meta, load_cached
from .i18n import say, t
from .ui import show_chart

PLAY_SECONDS = 1.5  # per stage, while playing through
NO_MODEBAR = {"displayModeBar": False}
CAPTURE_BUDGET = 256 << 20  # bytes the capture of one traced text may take: it bounds the text on a real model
CAPTURE_CACHE = 512 << 20  # bytes the captures of every session may take together
QUICK_FLOPS = 2e10  # work the page does on its own when a tab opens (about half a second here); more waits for a click
DEEP = 8  # layers beyond which the lens leaves out the rows after each attention sublayer unless asked
SENDERS = 8  # the earlier heads a side-patching table lists on a model with many heads: the best restorers
FOILS = 500  # tokens offered as the foil of an attribution
HELD_OUT_CHARS = 1024  # characters of held-out text the heads are ranked on (in windows of the model's context)
HELD_OUT_CHARS_MANY = 256  # … on a model of many heads, where each of the hundreds of runs costs more
ALTERNATIVES = 20  # tokens offered to replace one of the learner's text in a corruption


# --- cached work -------------------------------------------------------------------------------------------------

class Kept:
    """Results shared by every session, the least recently used dropped first once they add up to more than
    `limit` (counted by `size`; the newest always stays). Used where st.cache_resource cannot do it: to bound the
    captures by bytes (a real model's capture of 90 tokens takes about 250 MB), and to keep the results of work
    that draws a progress bar, which a cached function must not."""

    def __init__(self, limit: int, size=lambda value: 1):
        self.lock, self.limit, self.size = threading.Lock(), limit, size
        self.kept: OrderedDict[tuple, object] = OrderedDict()

    def get(self, key: tuple, compute):
        with self.lock:
            if key in self.kept:
                self.kept.move_to_end(key)
                return self.kept[key]
        value = compute()  # (outside the lock: another session's cached result need not wait for this one)
        with self.lock:
            self.kept[key] = value
            while len(self.kept) > 1 and sum(map(self.size, self.kept.values())) > self.limit:
                self.kept.popitem(last=False)
        return value


@st.cache_resource(show_spinner=False)
def captures() -> Kept:
    return Kept(CAPTURE_CACHE, lambda cap: cap.nbytes)


@st.cache_resource(show_spinner=False)
def head_patching() -> Kept:
    return Kept(8)


def captured(key: WeightsKey, ids: tuple[int, ...]) -> interp.Capture:
    """One forward pass with every hook point observed, per checkpoint and text: every tab reads from it."""
    return captures().get((key, ids), lambda: interp.capture(load_cached(*key)[0], torch.tensor(ids)))


@st.cache_resource(max_entries=16, show_spinner=False)
def traced(key: WeightsKey, ids: tuple[int, ...], position: int, temperature: float,
           top_k: int | None) -> interp.Trace:
    model, tokenizer, _ = load_cached(*key)
    return interp.trace(model, torch.tensor(ids), position, captured(key, ids), tokenizer, temperature, top_k)


@st.cache_resource(max_entries=8, show_spinner=False)
def vocab_cached(key: WeightsKey) -> list[str]:
    """The label of every token id (49,152 of them for a real model: worth doing once)."""
    model, tokenizer, _ = load_cached(*key)
    return [tokenizer.display(i) for i in range(model.cfg.vocab_size)]


@st.cache_resource(max_entries=4, show_spinner=False)  # (61 rows × 49k tokens: 12 MB each on a real model)
def lens_column_cached(key: WeightsKey, ids: tuple[int, ...], position: int, attention: bool) -> interp.LensColumn:
    return interp.lens_column(load_cached(*key)[0], captured(key, ids), position, attention)


def lens_grid(key: WeightsKey, ids: tuple[int, ...], positions: tuple[int, ...], attention: bool,
              progress=None) -> interp.LensGrid:
    return interp.lens_grid(load_cached(*key)[0], captured(key, ids), list(positions), attention, progress)


@st.cache_resource(max_entries=8, show_spinner=False)
def lens_grid_cached(key: WeightsKey, ids: tuple[int, ...], positions: tuple[int, ...],
                     attention: bool) -> interp.LensGrid:
    return lens_grid(key, ids, positions, attention)


@st.cache_resource(max_entries=8, show_spinner=False)
def means_cached(key: WeightsKey) -> dict[str, torch.Tensor]:
    """Each head's and FFN's mean over the fixed reference text: what mean ablation puts in their place."""
    model, tokenizer, _ = load_cached(*key)
    return interp.reference_means(model, tokenizer)


def effects(key: WeightsKey, ids: tuple[int, ...], position: int, target: int, foil: int, progress=None):
    return circuits.effects(load_cached(*key)[0], captured(key, ids), position, target, foil, means_cached(key),
                            progress=progress)


@st.cache_resource(max_entries=32, show_spinner=False)
def effects_cached(key: WeightsKey, ids: tuple[int, ...], position: int, target: int, foil: int):
    return effects(key, ids, position, target, foil)


class Pair(NamedTuple):
    """A patching pair as ids: the clean and corrupted prompts and the two answers measured at their end."""
    clean: tuple[int, ...]
    corrupted: tuple[int, ...]
    good: int
    bad: int


def pair_setup(key: WeightsKey, pair: Pair) -> interp.PatchingSetup:
    """Both prompts run, their captures kept with the others (captures)."""
    return interp.PatchingSetup(captured(key, pair.clean), captured(key, pair.corrupted), pair.good, pair.bad)


@st.cache_resource(max_entries=16, show_spinner=False)
def sides_cached(key: WeightsKey, pair: Pair, receiver: str, senders: tuple[str, ...]):
    """The share each sender restores through each side of the receiver head (rows: the whole input, then heads)."""
    return circuits.patch_sides(load_cached(*key)[0], pair_setup(key, pair), receiver, [None, *senders])


def patched_heads(key: WeightsKey, pair: Pair, progress=None) -> np.ndarray:
    """The share each head restores: kept while the prompts stay as they are."""
    def compute() -> np.ndarray:
        return interp.patch_heads(load_cached(*key)[0], pair_setup(key, pair), progress=progress).numpy()
    return head_patching().get((key, pair), compute)


@st.cache_resource(max_entries=8, show_spinner=False)
def held_out_cached(key: WeightsKey, folder: str, chars: int) -> tuple[HeldOut, tuple[tuple[int, ...], ...]]:
    """Held-out text for the checkpoint (gptcore.heldout) and its ids cut into windows a trace can keep."""
    model, tokenizer, _ = load_cached(*key)
    held_out = held_out_text(checkpoint_meta(Path(folder)), chars)
    ids = tokenizer.encode(held_out.text)  # (a character the tokenizer lacks is left out)
    size = min(model.cfg.context, interp.traceable_tokens(model.cfg, CAPTURE_BUDGET))
    return held_out, tuple(tuple(ids[i:i + size]) for i in range(0, len(ids), size) if len(ids[i:i + size]) > 1)


def quick(model, positions: int, runs: int) -> bool:
    """Is `runs` passes over `positions` tokens little enough work to do as a tab opens (QUICK_FLOPS)?"""
    return 2 * model.cfg.n_params * positions * runs <= QUICK_FLOPS


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
        return vocab_cached(self.opened.key)

    @property
    def real_next(self) -> int | None:
        return self.ids[self.position + 1] if self.position + 1 < len(self.ids) else None


def pick_point(chart_key: str, state_key: str) -> None:
    """on_select: a clicked point's customdata (a position or a stage index) becomes state_key's value."""
    points = st.session_state[chart_key].selection.points
    if points:
        data = points[0]["customdata"]
        st.session_state[state_key] = int(data[0] if isinstance(data, list) else data)


def probability_caption(view: Traced) -> None:
    """The model's own probability of what comes next (temperature 1, as Inspect reports it), and beside it the
    sampled one where the page's temperature or top-k change it."""
    last = view.real_next is None
    probs = view.trace.logits.softmax(-1)
    token = int(probs.argmax()) if last else view.real_next
    said = notes.probability(view.position, view.vocab[token], float(probs[token]), last)
    if view.temperature != 1 or view.top_k:
        said += " " + notes.sampled(view.vocab[token], float(view.trace.probs[token]), view.temperature, view.top_k)
    st.caption(said)


@st.fragment
def tabs(view: Traced, text: str, start: int) -> None:
    """The tabs, lazy (only the open one runs) and a fragment of their own: a tab switch reruns this part alone,
    never the picker, the text strip or the forward pass above it. A position picked inside a tab (a click on the
    lens) reruns the whole page, which reads it."""
    if st.session_state.get("trace-position") != view.position:
        st.rerun()
    open_tab = st.session_state[link.VIEW.opened_tab] = link.open_tab()
    st.session_state["trace-tab"] = link.tab_label(open_tab)  # (after a language switch: its new name)
    show = {"step": step_through, "lens": lens_tab, "attribution": attribution_tab, "ablation": ablation_tab,
            "patching": patching_tab}
    containers = st.tabs([link.tab_label(tab) for tab in link.TABS], key="trace-tab", on_change="rerun")
    for tab, container in zip(link.TABS, containers):
        if container.open:
            with container:
                show[tab](view)
    link.keep(view.opened.name, text, view.position, start)


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
    link.keep_again()  # (this fragment reruns alone: the stage in the address)
    if playing and index == n - 1:  # the end: stop the timer
        st.session_state["trace-playing"] = False
        st.rerun()


def show_stage(view: Traced, stage: interp.Stage, counter: str, title: str) -> None:
    """One stage: where it sits, its shape and hook point, what it does, its figure and the source behind it."""
    st.subheader(f"{counter} · {t(f'trace.sections.{stage.section}')} · {title}")
    shape = "×".join(map(str, stage.shape)) or "1"
    cfg = view.model.cfg
    if stage.hook and stage.hook.endswith("hook_q") and {"k", "v"} <= set(stage.parts):  # q, k and v in one figure
        hooks = " · ".join(f"`{stage.hook[:-1] + name}`" for name in "qkv")
        if "kv_head" in stage.parts:  # grouped-query attention: fewer keys and values than queries
            words = t("trace.shape_gqa", shape=shape, kv_shape=f"{cfg.kv_heads}×{cfg.d_head}")
        else:
            words = t("trace.shape_each", shape=shape)
        st.caption(words + " · " + hooks)
    else:
        st.caption(t("trace.shape", shape=shape) + (f" · `{stage.hook}`" if stage.hook else ""))
    st.markdown(t(f"trace.describe.{stage.description}", n_head=cfg.n_head, kv_heads=cfg.kv_heads,
                  group=cfg.n_head // cfg.kv_heads))
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


def lens_rows(rows: list[str]) -> list[str]:
    return [lens_row_name(row) for row in rows]


def lens_tab(view: Traced) -> None:
    st.markdown(t("trace.lens.intro"))
    model, vocab, position, key = view.model, view.vocab, view.position, view.opened.key
    attention = True
    if model.cfg.n_layer > DEEP:  # 61 rows are two screens: the rows after each block unless asked for all
        attention = st.toggle(t("trace.lens.attention_rows"), key="trace-lens-attention",
                              help=t("trace.lens.attention_rows_help", rows=2 * model.cfg.n_layer + 1))
    column = lens_column_cached(key, view.ids, position, attention)
    rows = lens_rows(column.rows)
    positions = tuple(figs.window(position, len(view.ids), figs.lens_window(view.labels)))
    grid_key = ("lens", key, view.ids, positions, attention)
    cells = len(rows) * len(positions) * model.cfg.vocab_size * model.cfg.d_model
    if 2 * cells <= QUICK_FLOPS:
        grid = lens_grid_cached(key, view.ids, positions, attention)
    else:  # a real vocabulary: every cell is a product with the whole head, so the grid waits for a click
        if st.button(t("trace.lens.grid_button", rows=len(rows), positions=len(positions)), key="trace-lens-grid"):
            st.session_state["trace-lens-grid-result"] = (grid_key, with_progress(
                t("trace.lens.grid_running"), lens_grid, key, view.ids, positions, attention))
        result = st.session_state.get("trace-lens-grid-result")
        grid = result[1] if result and result[0] == grid_key else None
    if grid is not None:
        top = [[vocab[i] for i in row] for row in grid.top.tolist()]
        show_chart(figs.lens_figure(grid.true_next.numpy(), rows, view.labels, top, list(positions), position),
                   key="trace-lens", on_select=lambda: pick_point("trace-lens", "trace-position"),
                   selection_mode="points", config=NO_MODEBAR)
    show_chart(figs.lens_column(column.probs, rows, vocab), key="trace-lens-column", config=NO_MODEBAR)
    if view.real_next is not None:
        chances = column.probs[:, view.real_next].tolist()
        st.caption(t("trace.lens.true_next", char=vocab[view.real_next], values=", ".join(f"{p:.2f}" for p in chances)))
        row = column.readable_from(view.real_next)
        st.markdown(lens_readable(row, rows, vocab[view.real_next]))


def lens_readable(row: int | None, rows: list[str], char: str) -> str:
    """From which row of the lens on `char` is the top guess (row: readable_from's), in words."""
    if row is None:
        return t("trace.lens.never_top", char=char)
    if row == len(rows) - 1:  # (the last row is the model's own output)
        return t("trace.lens.only_output", char=char, row=rows[row])
    return t("trace.lens.readable", char=char, row=rows[row])


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
    # the runner-up first; of a real vocabulary the FOILS most likely (49k options would be sent on every rerun)
    foils = [i for i in logits.argsort(descending=True)[:FOILS + 1].tolist() if i != target][:FOILS]
    foil = right.selectbox(t("trace.attribution.foil"), foils, key=f"trace-foil-{position}-{target}",
                           format_func=lambda i: f"'{vocab[i]}' ({float(logits[i]):.2f})",
                           help=t("trace.attribution.foil_help"))
    try:
        attribution = interp.logit_attribution(view.model, view.cap, position, target, foil)
    except InputError as e:  # a post-norm model: its stream is no sum of the components' outputs
        st.info(say(e))
        return
    parts = attribution.parts
    cfg = view.model.cfg
    show_chart(figs.attribution_bars(parts, attribution.logit, vocab[target], vocab[foil],
                                     [component_name(c) for c in parts["component"]]),
               key="trace-attribution", config=NO_MODEBAR)
    if many_heads(view.model):  # every head and FFN, one layer a row
        show_chart(figs.component_grid(parts[parts["kind"] != "embedding"], "logit", cfg.n_layer, cfg.n_head,
                                       t("trace.attribution.grid_title", char=vocab[target], foil=vocab[foil]),
                                       t("trace.fig.contribution"), t("trace.fig.ffn")),
                   key="trace-attribution-grid", config=NO_MODEBAR)
    best = parts.loc[parts["logit"].abs().idxmax()]
    st.caption(t("trace.attribution.sum", total=attribution.total, logit=attribution.logit,
                 scale=attribution.scale, biggest=component_name(best["component"]), value=best["logit"]))
    frame = effects_section(view, target, foil)
    source_section(view, target, foil, frame)


def many_heads(model) -> bool:
    return model.cfg.n_layer * model.cfg.n_head > figs.MANY


def effects_section(view: Traced, target: int, foil: int):
    """Direct beside total: where they differ, the component works through later layers. On a model where the
    hundreds of ablated runs take seconds, they wait for a click. Returns the effects, or None before that."""
    st.subheader(t("trace.attribution.effects_heading"))
    st.markdown(t("trace.attribution.effects_intro"))
    key, cfg = view.opened.key, view.model.cfg
    runs = cfg.n_layer * (cfg.n_head + 1)
    if quick(view.model, view.position + 1, runs):
        frame = effects_cached(key, view.ids, view.position, target, foil)
    else:
        effects_key = ("effects", key, view.ids, view.position, target, foil)
        if st.button(t("trace.attribution.effects_button", runs=runs), key="trace-effects-button"):
            st.session_state["trace-effects-result"] = (effects_key, with_progress(
                t("trace.attribution.effects_running"), effects, key, view.ids, view.position, target, foil))
        result = st.session_state.get("trace-effects-result")
        if not (result and result[0] == effects_key):
            return None
        frame = result[1]
    show_chart(figs.effect_bars(frame, t("trace.attribution.effects_title", char=view.vocab[target],
                                         foil=view.vocab[foil])), key="trace-effects", config=NO_MODEBAR)
    if many_heads(view.model):
        show_chart(figs.component_grid(frame, "indirect", cfg.n_layer, cfg.n_head,
                                       t("trace.attribution.indirect_title"), t("trace.fig.indirect"),
                                       t("trace.fig.ffn")), key="trace-effects-grid", config=NO_MODEBAR)
    heads = frame[frame["head"].notna()]  # composition is heads reading heads: name the head it shows most in
    indirect = heads.loc[heads["indirect"].abs().idxmax()]
    change = notes.switched_off(float(indirect["total"]), view.vocab[target], view.vocab[foil])
    st.caption(t("trace.attribution.effects_caption", name=indirect["component"], change=change,
                 direct=indirect["direct"]))
    return frame


def source_section(view: Traced, target: int, foil: int, frame) -> None:
    """One head's direct effect split by the earlier position it read from; the head with the largest total effect
    first (the largest direct one before the total effects are known)."""
    st.subheader(t("trace.attribution.source_heading"))
    st.markdown(t("trace.attribution.source_intro"))
    names = [interp.head_label(layer, h) for layer in range(view.model.cfg.n_layer)
             for h in range(view.model.cfg.n_head)]
    if frame is not None:
        strongest = frame[frame["head"].notna()].set_index("component")["total"]
    else:
        strongest = interp.logit_attribution(view.model, view.cap, view.position, target, foil).parts.set_index(
            "component").loc[names, "logit"]
    default = strongest.abs().idxmax()
    state, context = st.session_state, (view.ids, view.position, target, foil)
    if (asked := link.asked_head()) in names:  # a link's head
        state["trace-source-head"], state["trace-source-for"] = asked, context
    elif state.get("trace-source-for") != context or state.get("trace-source-head") not in names:
        state["trace-source-head"], state["trace-source-for"] = default, context  # a new question: its own head
    head = st.selectbox(t("trace.attribution.source_head"), names, key="trace-source-head")
    state[link.HEAD_SHOWN] = None if head == default else head
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

def sweep_heads(model, caps: list[interp.Capture], mode, means, progress) -> pd.DataFrame:
    """ablation_sweep over one or more texts (windows of the held-out text), its losses averaged over every
    prediction they make: one row per head, the loss its absence costs most first."""
    done = [interp.ablation_sweep(model, cap, mode, means=means, progress=lambda i, n, k=k: progress(
        k * n + i, len(caps) * n)).set_index("component") for k, cap in enumerate(caps)]
    weights = np.array([len(cap.ids) - 1 for cap in caps], dtype=float)
    frame = sum(part[["loss", "loss increase"]] * weight for part, weight in zip(done, weights)) / weights.sum()
    return frame.reset_index().sort_values("loss increase", ascending=False, kind="stable").reset_index(drop=True)


def sweep_texts(view: Traced, source: str) -> tuple[list[interp.Capture], str | None]:
    """The texts a ranking runs on: the learner's own, or the held-out text's windows; and for the held-out text,
    the sentence that says which text it is."""
    if source == "text":
        return [view.cap], None
    chars = HELD_OUT_CHARS_MANY if many_heads(view.model) else HELD_OUT_CHARS
    held_out, windows = held_out_cached(view.opened.key, str(view.opened.folder), chars)
    n = sum(map(len, windows))
    start = "'" + " ".join(held_out.text[:80].split()) + "…'"
    said = t(f"trace.ablation.held_out_{held_out.source}", n=n, unit=notes.unit(view.opened.tokens),
             windows=len(windows), window=max(map(len, windows)), start=start)
    return [captured(view.opened.key, ids) for ids in windows], said


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
    means = view.means if mode == "mean" else None  # (the reference text's pass only when it is used)
    if chosen:
        ablation = interp.ablate(model, cap, chosen, mode, means)
        before, after = ablation.loss
        a, b, c = st.columns(3)
        a.metric(t("trace.ablation.loss_before"), f"{before:.3f}")
        b.metric(t("trace.ablation.loss_after"), f"{after:.3f}", f"{after - before:+.3f}", delta_color="inverse")
        c.metric(t("trace.ablation.prediction"), f"'{vocab[int(ablation.logits[position].argmax())]}'",
                 help=t("trace.ablation.prediction_help", before=vocab[int(view.trace.logits.argmax())]))
        probs = ins.sampling_distribution(ablation.logits[position], view.temperature, view.top_k)
        show_chart(figs.top_bars(probs, vocab, t("trace.ablation.probs_title", position=position),
                                      view.real_next), key="trace-ablation-probs", config=NO_MODEBAR)
    source = st.radio(t("trace.ablation.sweep_on"), ("text", "held_out"), key="trace-sweep-on", horizontal=True,
                      format_func=lambda s: t(f"trace.ablation.sources.{s}"), help=t("trace.ablation.sweep_on_help"))
    sweep_key = ("sweep", view.opened.key, view.ids if source == "text" else source, mode)
    if st.button(t("trace.ablation.sweep"), key="trace-sweep"):
        caps, said = sweep_texts(view, source)
        st.session_state["trace-sweep-result"] = (sweep_key, with_progress(
            t("trace.ablation.sweeping"), sweep_heads, model, caps, mode, means), said,
            sum(len(c.ids) - 1 for c in caps))
    result = st.session_state.get("trace-sweep-result")
    if result and result[0] == sweep_key:
        _, frame, said, predicted = result
        mode_name = t(f"trace.ablation.modes.{mode}")
        title = t("trace.ablation.sweep_title" if len(frame) <= figs.MANY else "trace.ablation.sweep_top_title",
                  mode=mode_name, k=figs.TOP)
        show_chart(figs.sweep_bars(frame, title), key="trace-sweep-bars", config=NO_MODEBAR)
        if many_heads(model):  # every head, one layer a row
            cfg = model.cfg
            grid = np.full((cfg.n_layer, cfg.n_head), np.nan)
            for name, increase in zip(frame["component"], frame["loss increase"]):
                layer, head = interp.parse_component(model, name)
                grid[layer, head] = increase
            show_chart(figs.head_grid(grid, t("trace.ablation.sweep_grid_title", mode=mode_name),
                                      t("trace.fig.loss_increase_short")), key="trace-sweep-grid", config=NO_MODEBAR)
        st.caption(t("trace.ablation.sweep_caption" if said is None else "trace.ablation.sweep_caption_held_out",
                     head=frame.loc[0, "component"], increase=frame.loc[0, "loss increase"]))
        if said:
            st.caption(said)
        if note := notes.lowering(frame, mode, predicted, view.opened.tokens, held_out=said is not None):
            st.info(note)


# --- activation patching ----------------------------------------------------------------------------------------------

@st.fragment
def patching_tab(view: Traced) -> None:
    st.markdown(t("trace.patching.intro"))
    opened = view.opened
    model, tokenizer, cfg = opened.model, opened.tokenizer, opened.model.cfg
    pairs = {p.id: p for p in interp.patching_pairs(tokenizer)}
    choice = st.selectbox(t("trace.patching.pair"), [OWN, *pairs], key="trace-pair",
                          format_func=lambda p: t(f"trace.pairs.{p}.name"))
    pair = own_pair(view) if choice == OWN else text_pair(opened, pairs[choice])
    if pair is None:
        return
    setup = pair_setup(opened.key, pair)
    a, b = st.columns(2)
    a.metric(t("trace.patching.clean_difference"), f"{setup.clean_difference:+.2f}")
    b.metric(t("trace.patching.corrupted_difference"), f"{setup.corrupted_difference:+.2f}")
    good, bad = tokenizer.display(setup.good), tokenizer.display(setup.bad)
    st.caption(t("trace.patching.measure", good=good, bad=bad))
    heads = with_progress(t("trace.patching.running_heads"), patched_heads, opened.key, pair)
    show_chart(figs.head_grid(heads, t("trace.patching.heads_title"), t("trace.fig.restored")),
               key="trace-patch-heads", config=NO_MODEBAR)
    best = np.unravel_index(np.nanargmax(heads), heads.shape)
    name = f"L{best[0]}H{best[1]}"
    st.caption(t("trace.patching.heads_caption", head=name, share=notes.percent(float(heads[best]))))
    if note := notes.overshoot(name, float(heads[best]), setup.clean_difference, setup.corrupted_difference, good, bad):
        st.info(note)
    if cfg.n_layer > 1:
        sides_section(opened, heads, pair, setup)
    prompt_labels = [tokenizer.display(i) for i in setup.clean.ids.tolist()]
    residual_rows = [t("trace.lens.embedding")] + [t("trace.lens.block", layer=i) for i in range(cfg.n_layer)]
    st.subheader(t("trace.patching.positions_heading"))
    picked = picked_heads(model, heads)
    sweeps = {"residual": (interp.patch_residual, residual_rows),
              "head_position": (lambda model, setup, progress: interp.patch_heads_by_position(
                  model, setup, progress=progress, heads=picked), [interp.head_label(*h) for h in picked])}
    for sweep, (run, rows) in sweeps.items():  # the longer sweeps run on request, with a progress bar
        state = f"trace-patch-{sweep}"
        sweep_key = (opened.key, pair, tuple(picked) if sweep == "head_position" else ())
        if st.button(t(f"trace.patching.run_{sweep}"), key=f"{state}-button"):
            shares = with_progress(t(f"trace.patching.running_{sweep}"), run, model, setup)
            st.session_state[state] = (sweep_key, shares.numpy())
        result = st.session_state.get(state)
        if result and result[0] == sweep_key:
            show_chart(figs.position_grid(result[1], rows, prompt_labels, t(f"trace.patching.{sweep}_title")),
                       key=f"{state}-figure", config=NO_MODEBAR)


OWN = "own"  # the pair made of the learner's own text and position


def shown_answer(answer: str) -> str:
    """An answer as its box shows it: a space as ␣, which an empty-looking box would hide."""
    return answer.replace(" ", "␣")


def typed_answer(answer: str) -> str:
    return answer.replace("␣", " ")


def text_pair(opened: Opened, pair: interp.PatchingPair) -> Pair | None:
    """A built-in pair, its prompts and answers editable; None (with the reason said) when they do not fit."""
    st.caption(t(f"trace.pairs.{pair.id}.about"))
    c1, c2 = st.columns(2)
    clean = c1.text_area(t("trace.patching.clean"), pair.clean, key=f"trace-clean-{pair.id}", height=90)
    corrupted = c2.text_area(t("trace.patching.corrupted"), pair.corrupted, key=f"trace-corrupted-{pair.id}",
                             height=90)
    good = c1.text_input(t("trace.patching.clean_answer"), shown_answer(pair.clean_answer),
                         key=f"trace-good-{pair.id}", help=t("trace.patching.answer_help"))
    bad = c2.text_input(t("trace.patching.corrupted_answer"), shown_answer(pair.corrupted_answer),
                        key=f"trace-bad-{pair.id}", help=t("trace.patching.answer_help"))
    try:
        setup = interp.patching_setup(opened.model, opened.tokenizer, clean, corrupted, typed_answer(good),
                                      typed_answer(bad), run=lambda ids: captured(opened.key, tuple(ids.tolist())))
    except UserError as e:
        st.error(say(e))
        return None
    return Pair(tuple(setup.clean.ids.tolist()), tuple(setup.corrupted.ids.tolist()), setup.good, setup.bad)


def copied_from(ids: tuple[int, ...], position: int, token: int) -> int | None:
    """The latest earlier place where `token` followed the token at `position`: what copying the text's earlier
    saying would bring here (None when the text never had it there)."""
    return next((j for j in range(position, 0, -1) if ids[j] == token and ids[j - 1] == ids[position]), None)


def own_pair(view: Traced) -> Pair | None:
    """The learner's text up to the traced position, and the same with one token replaced (by default the one that
    copying would bring to the position, by the model's likeliest other guess there); None when that changes nothing
    the measure sees (said)."""
    ids, position, vocab, labels = view.ids, view.position, view.vocab, view.labels
    logits = view.cap.logits
    good = view.real_next if view.real_next is not None else int(view.trace.logits.argmax())
    clean = ids[:position + 1]
    copied = copied_from(ids, position, good)
    start = position if copied is None else copied
    st.caption(t("trace.pairs.own.about"))
    st.caption(t("trace.patching.own_prompt", position=position, prompt="'" + "".join(labels[:position + 1]) + "'"))
    state = st.session_state
    if state.get("trace-corrupt-for") != (ids, position) or state.get("trace-corrupt-at", position + 1) > position:
        state["trace-corrupt-at"], state["trace-corrupt-for"] = start, (ids, position)
    why = t("trace.patching.corrupt_own") if copied is None else t("trace.patching.corrupt_copied", position=position)
    left, right = st.columns(2)
    at = left.select_slider(t("trace.patching.corrupt_at"), range(position + 1), key="trace-corrupt-at",
                            format_func=lambda i: f"{i} '{labels[i]}'",
                            help=t("trace.patching.corrupt_at_help", start=f"{start} '{labels[start]}'", why=why))
    guesses = logits[at - 1].argsort(descending=True).tolist() if at else list(range(len(vocab)))
    alternatives = [i for i in guesses[:ALTERNATIVES + 1] if i != ids[at]][:ALTERNATIVES]
    replacement = right.selectbox(t("trace.patching.corrupt_with"), alternatives, key=f"trace-corrupt-with-{at}",
                                  format_func=lambda i: f"'{vocab[i]}'", help=t("trace.patching.corrupt_with_help"))
    corrupted = clean[:at] + (replacement,) + clean[at + 1:]
    guess = int(captured(view.opened.key, corrupted).logits[-1].argmax())
    bad = guess if guess != good else interp.runner_up(logits[position], good)
    st.caption(t("trace.patching.own_answers", position=position, good=vocab[good], bad=vocab[bad],
                 good_why=t("trace.patching.good_next" if view.real_next is not None else "trace.patching.good_guess"),
                 bad_why=t("trace.patching.bad_corrupted" if guess != good else "trace.patching.bad_runner_up")))
    pair = Pair(clean, corrupted, good, bad)
    setup = pair_setup(view.opened.key, pair)
    if abs(setup.clean_difference - setup.corrupted_difference) < 1e-3:
        st.info(t("trace.patching.own_same"))
        return None
    return pair


def picked_heads(model, heads: np.ndarray) -> list[tuple[int, int]]:
    """The heads to patch position by position: all of them on a small model; on a model with hundreds, the ones
    the learner picks, starting with the best restorers of the head grid."""
    cfg = model.cfg
    if not many_heads(model):
        return [(layer, head) for layer in range(cfg.n_layer) for head in range(cfg.n_head)]
    names = [interp.head_label(layer, head) for layer in range(cfg.n_layer) for head in range(cfg.n_head)]
    best = [names[i] for i in np.argsort(-np.nan_to_num(np.abs(heads)).ravel(), kind="stable")[:cfg.n_head]]
    chosen = st.multiselect(t("trace.patching.position_heads"), names, default=sorted(best, key=names.index),
                            key="trace-position-heads", help=t("trace.patching.position_heads_help"))
    return [interp.parse_component(model, name) for name in sorted(chosen, key=names.index)]


def default_receiver(heads: np.ndarray) -> str:
    """The head to patch the inputs of first: the best restorer of the deepest layer where one restores half or
    more (a head late in a circuit has the most senders to show), else the best beyond layer 0."""
    for layer in reversed(range(1, heads.shape[0])):
        if np.nanmax(heads[layer]) >= 0.5:
            return interp.head_label(layer, int(np.nanargmax(heads[layer])))
    layer, head = np.unravel_index(np.nanargmax(heads[1:]), heads[1:].shape)
    return interp.head_label(int(layer) + 1, int(head))


def sides_section(opened: Opened, heads: np.ndarray, pair: Pair, setup: interp.PatchingSetup) -> None:
    """Which earlier head feeds the receiver, and through which of its inputs."""
    model, cfg, state = opened.model, opened.model.cfg, st.session_state
    st.subheader(t("trace.patching.sides_heading"))
    st.markdown(t("trace.patching.sides_intro"))
    receivers = [interp.head_label(i, h) for i in range(1, cfg.n_layer) for h in range(cfg.n_head)]
    default = default_receiver(heads)
    if (asked := link.asked_head()) in receivers:  # a link's head
        state["trace-receiver"], state["trace-receiver-for"] = asked, pair
    elif state.get("trace-receiver-for") != pair or state.get("trace-receiver") not in receivers:
        state["trace-receiver"], state["trace-receiver-for"] = default, pair  # a new pair: its own receiver
    receiver = st.selectbox(t("trace.patching.receiver"), receivers, key="trace-receiver",
                            help=t("trace.patching.receiver_help", head=default))
    state[link.HEAD_SHOWN] = None if receiver == default else receiver
    link.keep_again()  # (the patching tab reruns alone: the receiver in the address)
    layer, _ = interp.parse_component(model, receiver)
    senders = circuits.senders_before(model, layer)
    if many_heads(model):  # hundreds of senders: the embedding and the earlier heads that restore most, or a pick
        earlier = np.nan_to_num(np.abs(heads[:layer])).ravel()
        best = [interp.head_label(*divmod(int(i), cfg.n_head)) for i in np.argsort(-earlier, kind="stable")[:SENDERS]]
        default_senders = [name for name in senders if name in best or name == circuits.EMBEDDING]
        senders = st.multiselect(t("trace.patching.senders"), senders, default=default_senders,
                                 key=f"trace-senders-{receiver}", format_func=sender_name,
                                 help=t("trace.patching.senders_help", n=SENDERS))
    shares = sides_cached(opened.key, pair, receiver, tuple(senders))
    rows = [sender_name(name) for name in shares.index]
    columns = [t(f"trace.patching.sides.{side}") for side in circuits.SIDES]
    show_chart(figs.side_grid(shares.to_numpy(), rows, columns, t("trace.patching.sides_title", head=receiver)),
               key="trace-patch-sides", config=NO_MODEBAR)
    st.markdown(notes.path(receiver, shares.iloc[0].to_dict()))
    strongest = strongest_sender(shares.iloc[1:], rows[1:], columns)
    st.caption(t("trace.patching.sides_caption", head=receiver, **strongest))
    values = shares.to_numpy()  # the cell that restores most, the whole clean input's included
    row, side = np.unravel_index(np.nanargmax(values), values.shape)
    name = t("trace.notes.sender_side", sender=rows[row], head=receiver, side=columns[side])
    if note := notes.overshoot(name, float(values[row, side]), setup.clean_difference, setup.corrupted_difference,
                               opened.tokenizer.display(setup.good), opened.tokenizer.display(setup.bad)):
        st.info(note)


def strongest_sender(senders, rows: list[str], columns: list[str]) -> dict:
    """The sender and side that restore most (none when no sender is listed)."""
    if senders.empty:
        return {"sender": "—", "side": "—", "share": float("nan")}
    values = senders.to_numpy()
    sender, side = np.unravel_index(np.nanargmax(values), values.shape)
    return {"sender": rows[sender], "side": columns[side], "share": notes.percent(float(values[sender, side]))}


def sender_name(name: str) -> str:
    if not name:
        return t("trace.patching.whole_input")
    return t("trace.embedding_row") if name == circuits.EMBEDDING else name
