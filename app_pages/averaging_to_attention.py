import time

import pandas as pd
import streamlit as st

from explorer.demo_plots import curves_figure, row_sums_figure, weights_heatmap
from explorer.i18n import say, scoped, t
from explorer.jobs import JobRefused
from explorer.links import linked
from explorer.ui import job_progress, job_registry, quiz, show_chart, show_source, story_break_note, with_story_breaks
from gptcore.demos import averaging as avg
from gptcore.model import Attention

LEAK_JOB = "mask-leak"  # a name, shown as is in the sidebar and in a refusal
LEAK_COLORS = ("#1f77b4", "#d62728")
text_attention = st.cache_data(avg.text_attention, show_spinner=False)
tr = scoped("averaging_to_attention")

st.title(tr("title"))
st.markdown(tr("intro"))

# --- the causal average, three ways ----------------------------------------------------------------------
st.header(tr("three_ways.heading"))
st.markdown(tr("three_ways.body"))
example = avg.averaging_example()
st.code(avg.tutorial_printout(example), language="text")


def rows(tensor) -> list[str]:
    return ["[" + ", ".join(f"{v:.4f}" for v in row) + "]" for row in tensor.tolist()]


columns = {name: tr(f"three_ways.columns.{name}") for name in ("position", "loop", "matmul", "softmax")}
table = pd.DataFrame({columns["position"]: range(4), columns["loop"]: rows(example.loop[0]),
                      columns["matmul"]: rows(example.matmul[0]), columns["softmax"]: rows(example.softmax[0])})
st.dataframe(table, hide_index=True, key="three-ways-table")

T = linked(st.slider, tr("three_ways.slider"), 2, 12, 4, key="avg-T")
bigger = avg.averaging_example(T=T)
axes = dict(x_title=tr("attention.x_title"), y_title=tr("attention.y_title"), hover=tr("attention.hover"))
left, right = st.columns(2)
show_chart(weights_heatmap(bigger.matmul_weights, title=tr("three_ways.matmul_title"), **axes),
           where=left, key="avg-matmul")
show_chart(weights_heatmap(bigger.softmax_weights, title=tr("three_ways.softmax_title"), **axes),
           where=right, key="avg-softmax")
gap = max((bigger.loop - bigger.matmul).abs().max().item(), (bigger.loop - bigger.softmax).abs().max().item())
st.metric(tr("three_ways.gap"), f"{gap:.1e}")
show_source(avg.averaging_example, avg.average_by_loop, avg.average_weights, avg.masked_softmax)

# --- data-dependent scores -------------------------------------------------------------------------------
st.header(tr("attention.heading"))
st.markdown(tr("attention.body"))
c1, c2, c3 = st.columns([2, 1, 1])
text = linked(c1.text_input, tr("attention.text"), "Lucy saw a cat. Lucy", max_chars=24, key="att-text")
mode = linked(c2.radio, tr("attention.mode"), ["tied", "random"], format_func=lambda m: tr(f"attention.modes.{m}"),
              key="att-mode")
seed = linked(c3.number_input, tr("attention.seed"), 0, 10_000, 0, key="att-seed")
sharpness = linked(st.slider, tr("attention.sharpness"), 0.0, 4.0, 1.0, 0.25, key="att-sharpness")
tied = mode == "tied"

if not text:
    st.warning(tr("attention.empty"))
else:
    labels = [f"{i}:{c if c != ' ' else '␣'}" for i, c in enumerate(text)]
    weights = text_attention(text, sharpness, tied, causal=True, seed=int(seed))
    show_chart(weights_heatmap(weights, labels, labels, title=tr("attention.weights_title"), fmt=".1f",
                               height=520, **axes), key="att-weights")
    show_source(avg.text_attention, avg.attention_module, avg.run_attention, Attention)

    # --- mask after softmax ------------------------------------------------------------------------------
    st.header(tr("order.heading"))
    st.markdown(tr("order.body"))
    leaky = avg.zero_future(text_attention(text, sharpness, tied, causal=False, seed=int(seed)))
    sums = {tr("order.mask_first"): weights.sum(-1).numpy(), tr("order.softmax_first"): leaky.sum(-1).numpy()}
    left, right = st.columns(2)
    show_chart(weights_heatmap(leaky, labels, labels, title=tr("order.after_title"), height=520,
                               annotate=len(text) <= 10, **axes), where=left, key="att-after")
    show_chart(row_sums_figure(labels, sums, tr("order.sums_title")), where=right, key="row-sums-chart")
    frame = pd.DataFrame(sums, index=pd.Index(labels, name=tr("order.query")))
    st.dataframe(frame.T.style.format(precision=3), key="row-sums")
    show_source(avg.zero_future)

# --- what leaks ------------------------------------------------------------------------------------------
st.header(tr("leak.heading"))
setup = avg.LEAK_SETUP
st.markdown(tr("leak.body", chars=setup.corpus_chars, steps=setup.train.steps + 1, batch=setup.train.batch_size,
               context=setup.model.context))
registry = job_registry()
if st.button(tr("leak.start"), key="leak-start", type="primary"):
    try:
        registry.start(LEAK_JOB, "concept demo", avg.leak_job, threads=1)
    except JobRefused as e:
        st.error(say(e))

job = registry.get(LEAK_JOB)


def variant_name(variant: str) -> str:
    return tr(f"leak.variants.{variant}")


def progress_line(snap) -> str:
    seconds = time.time() - snap.started
    if "training" in snap.data:
        return tr("leak.progress", variant=variant_name(snap.data["training"]), step=snap.data["training/step"],
                  seconds=seconds)
    return tr("leak.progress_idle", status=t(f"ui.status.{snap.status}"), seconds=seconds)


if job is None:
    st.info(tr("leak.waiting"))
else:
    live = job.snapshot().active

    @st.fragment(run_every=1 if live else None)
    def leak_progress():
        snap = job.snapshot()
        job_progress(job, snap, progress_line(snap), "leak-stop")
        if snap.status in ("finished", "stopped"):
            st.caption(tr(f"leak.ended.{snap.status}", seconds=snap.ended - snap.started))
        curves = {variant_name(v): (snap.data.get(f"{v}/step", []), snap.data.get(f"{v}/loss", []))
                  for v, _ in avg.LEAK_VARIANTS}
        show_chart(curves_figure(curves, LEAK_COLORS, tr("leak.curves_title"), tr("leak.x_title"),
                                 tr("leak.y_title")), key="leak-curves")
        for column, (variant, _) in zip(st.columns(len(avg.LEAK_VARIANTS)), avg.LEAK_VARIANTS):
            val = snap.data.get(f"{variant}/val")
            column.metric(tr("leak.val", variant=variant_name(variant)), "—" if val is None else f"{val:.3f}")
            if f"{variant}/sample" in snap.data:
                column.caption(tr("leak.sample", variant=variant_name(variant)))
                column.code(with_story_breaks(snap.data[f"{variant}/sample"]), language="text", wrap_lines=True)
        if any(f"{variant}/sample" in snap.data for variant, _ in avg.LEAK_VARIANTS):
            story_break_note()
        if live and not snap.active:
            st.rerun()  # stop polling: a full rerun redraws this without run_every

    leak_progress()
show_source(avg.leak_experiment, avg.leak_job)

quiz("causal-mask", tr("quiz.question"), [tr(f"quiz.options.{i}") for i in range(4)], {1}, tr("quiz.explanation"))
