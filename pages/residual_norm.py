import time

import plotly.graph_objects as go
import streamlit as st

from explorer.jobs import JobRefused
from explorer.ui import job_progress, job_registry, show_source
from gptcore.demos import norms
from gptcore.model import Block, RMSNorm

RACE_KIND = "norm race"
COLORS = {v.label: c for v, c in zip(norms.ALL_VARIANTS, ("#1f77b4", "#17becf", "#d62728", "#ff7f0e"))}

time_norms = st.cache_data(norms.time_norms)

st.title("The residual stream and normalization")
st.markdown(
    """
Stacking dozens of attention and FFN layers works because of two things.

**Residual connections.** Every sub-layer is written *x = x + f(x)*. Think of *x* as a **residual stream** that
runs from the embeddings to the output: each sub-layer reads from it and adds its result back. In the backward
pass an addition passes the gradient through unchanged, so even if *f*'s own gradient is tiny, the bottom layers
still hear from the loss.

**Normalization, and where it goes.** Left alone, the scale of the activations drifts from layer to layer. The
original Transformer is **post-norm**, *x = Norm(x + f(x))*: the trunk itself is normalized after every
sub-layer, so a gradient has to cross every norm on its way down. Deep post-norm stacks are hard to train and
want a careful learning-rate warmup. GPT-2 and almost everything since are **pre-norm**, *x = x + f(Norm(x))*:
the norm sits only at the entrance of each branch and the trunk is a clean chain of additions. The price is a
stream whose scale grows with depth, so pre-norm models add one **final norm** before the output head.
"""
)
show_source(Block, label="gptcore's Block: both placements")

# --- the race --------------------------------------------------------------------------------------------
st.header("1 · Pre-norm against post-norm, trained live")
defaults = norms.NormRace()
st.markdown(
    f"""
A deep, narrow model — by default {defaults.n_layer} layers of width {defaults.d_model} — trained with gptcore's
`Trainer` in up to four variants: the norm before or after the residual add, each with and without a linear
warmup (then cosine decay). All variants start from the same seed and see the same batches of the built-in
stories. While they train, the page records the gradient norm of every block after each backward pass, and the
size of the residual stream after every block (through the `blocks.{{i}}.hook_resid_post` hook points) on a fixed
batch. The default run takes about a minute on two cores; the page stays usable meanwhile.
"""
)
c1, c2, c3, c4 = st.columns(4)
n_layer = c1.slider("Layers", 2, 24, defaults.n_layer, key="norm-layers")
d_model = c2.selectbox("d_model", [16, 32, 64], index=1, key="norm-width")
steps = c3.slider("Steps per variant", 10, 400, defaults.steps, step=10, key="norm-steps")
lr = c4.select_slider("Peak learning rate", [1e-3, 3e-3, 1e-2, 2e-2, 3e-2], value=defaults.lr, key="norm-lr")
c1, c2 = st.columns([1, 3])
warmup = c1.slider("Warmup steps (when on)", 1, 100, defaults.warmup, key="norm-warmup")
picked = c2.multiselect("Variants", list(COLORS), default=list(COLORS), key="norm-variants")
race = norms.NormRace(n_layer=n_layer, d_model=d_model, steps=steps, lr=lr, warmup=min(warmup, steps),
                      probe_every=max(1, steps // 20),
                      variants=tuple(v for v in norms.ALL_VARIANTS if v.label in picked))

registry = job_registry()
if st.button("Train", key="norm-start", type="primary", disabled=not picked):
    try:
        registry.start(f"norm race {time.strftime('%H:%M:%S')}", RACE_KIND,
                       lambda job, race=race: norms.run_norm_race(job, race), threads=1)
    except JobRefused as e:
        st.error(str(e))
if not picked:
    st.warning("Pick at least one variant to train.")


def format_seconds(s) -> str:
    return "—" if s is None else f"{int(s) // 60}:{int(s) % 60:02d}"


def loss_figure(loss) -> go.Figure:
    fig = go.Figure()
    for label, rows in loss.groupby("variant", sort=False):
        fig.add_scatter(x=rows["step"], y=rows["loss"], mode="lines", line=dict(color=COLORS[label], width=1),
                        opacity=0.25, showlegend=False, hoverinfo="skip")
        fig.add_scatter(x=rows["step"], y=rows["smoothed"], mode="lines", name=label, line_color=COLORS[label])
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=40, b=10), xaxis_title="step",
                      yaxis_title="training loss (nats)", title="Training loss (faint: per step, bold: moving average)")
    return fig


def layer_figure(frame, title: str, y_title: str, log: bool = False) -> go.Figure:
    fig = go.Figure()
    for label, rows in frame.groupby("variant", sort=False):
        fig.add_scatter(x=rows["layer"], y=rows["norm"], mode="lines+markers", name=label,
                        line_color=COLORS[label])
    fig.update_layout(height=330, margin=dict(l=10, r=10, t=40, b=10), title=title, xaxis_title="layer",
                      yaxis_title=y_title, yaxis_type="log" if log else "linear")
    return fig


def race_view(job, live: bool):
    snap = job.snapshot()
    data = snap.data
    job_progress(job, snap, f"{snap.name}: {snap.status}", "norm-stop")
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Steps", f"{data.get('steps_done', 0)} / {data.get('steps_total', 0)}")
    m2.metric("Tokens / s", f"{data.get('tokens_per_s', 0):,.0f}")
    m3.metric("ETA", format_seconds(data.get("eta_s")) if snap.active else "done")
    m4.metric("Status", snap.status)
    st.caption(" · ".join(f"**{label}**: {status}" for label, status in data.get("runs", {}).items()))
    frames = norms.race_frames(data)
    st.plotly_chart(loss_figure(frames["loss"]), key="norm-loss")
    when = st.radio("Per-layer views at", ["latest", "first"], horizontal=True, key="norm-when",
                    format_func={"latest": "the latest probe", "first": "initialisation (step 0)"}.get)
    left, right = st.columns(2)
    left.plotly_chart(layer_figure(norms.at_probe(frames["grads"], when), "Gradient norm per block",
                                   "‖∂loss/∂block‖", log=True), key="norm-grads")
    right.plotly_chart(layer_figure(norms.at_probe(frames["resid"], when), "Residual stream norm after each block",
                                    "mean ‖x‖ per position"), key="norm-resid")
    st.caption("Layer 0 of the residual plot is the embedding output. Gradient norms are averaged over the steps "
               "since the previous probe.")
    if when == "first":
        st.caption("Probes are taken before each step's update. Warmup only changes the updates, so at "
                   "initialisation each with/without-warmup pair of lines coincides (one hides the other).")
    if live and not snap.active:
        st.rerun()  # stop polling: a full rerun redraws this without run_every


job = registry.latest(RACE_KIND)
if job is None:
    st.info("Press **Train** to start; loss curves and per-layer plots stream in here.")
else:
    live = job.snapshot().active
    st.fragment(race_view, run_every=1 if live else None)(job, live)
st.markdown(
    """
**What to look for.** With the defaults, post-norm without warmup ends visibly worse than the rest at this
learning rate; with a warmup it catches up, while pre-norm barely cares. In the gradient plot, post-norm sends the
most gradient to the blocks near the output and less and less further down through the trunk's norms (cleanest
with warmup); in pre-norm the top blocks get no more than the bottom ones, because the chain of additions hands
the loss signal to every block directly. The residual plot shows the price of pre-norm: its stream grows with
depth, while post-norm holds it at the norm's scale (√d_model when γ = 1) after every block.
"""
)
show_source(norms.run_norm_race, norms.block_grad_norms, norms.residual_norms)

# --- RMSNorm vs LayerNorm --------------------------------------------------------------------------------
st.header("2 · RMSNorm: LayerNorm without the centring")
st.markdown(
    """
LayerNorm subtracts the mean, divides by the standard deviation, then multiplies by *γ* and adds *β*. RMSNorm drops
the mean subtraction and *β*: it divides by the root mean square, *x / √(mean(x²) + ε) · γ*. Models train about
as well with either. RMSNorm is simpler, and a norm is memory-bound — its FLOPs are negligible but it reads and
writes the whole activation — so one reduction fewer is worth having. The same thinking removed the biases from
modern models' Linear layers.
"""
)
c1, c2, c3 = st.columns(3)
dim = c1.slider("Vector size", 4, 16, 8, key="norm-vec-d")
shift = c2.slider("Added mean (shift)", -3.0, 3.0, 1.0, step=0.25, key="norm-vec-shift")
vec_seed = c3.number_input("Seed", 0, 10_000, 0, key="norm-vec-seed")
x = norms.sample_vector(dim, shift, int(vec_seed))
outputs = norms.norm_outputs(x)
bars = go.Figure()
for column, color in zip(outputs.columns, ("#7f7f7f", "#1f77b4", "#d62728", "#ff9896")):
    bars.add_bar(x=list(range(dim)), y=outputs[column], name=column, marker_color=color)
bars.update_layout(barmode="group", height=340, margin=dict(l=10, r=10, t=30, b=10), xaxis_title="component",
                   yaxis_title="value")
st.plotly_chart(bars, key="norm-vec")
gap = (outputs["LayerNorm(x)"] - outputs["RMSNorm(x − mean)"]).abs().max()
st.markdown(
    f"""
With a non-zero mean the two disagree: RMSNorm keeps the offset (its output still has a non-zero mean), LayerNorm
removes it. Centre the vector first and RMSNorm gives LayerNorm's answer — largest difference here
**{gap:.1e}**. At *shift = 0* the vector's mean is only approximately 0, so they nearly agree.
"""
)
st.dataframe(norms.norm_summary(x).style.format({"mean": "{:.4f}", "RMS": "{:.4f}"}), hide_index=True,
             key="norm-summary")
left, right = st.columns(2)
left.markdown("**Parameters per norm at d_model = 128**")
left.dataframe(norms.norm_parameters(128), hide_index=True, key="norm-params")
right.markdown("**Measured time per call** (this machine, now)")
if right.button("Measure again", key="norm-time-again"):
    time_norms.clear()
right.dataframe(time_norms().style.format({"µs per call": "{:,.0f}"}), hide_index=True, key="norm-times")
right.caption(
    "The FLOPs hardly matter here; passes over memory do. Which norm wins on a CPU depends on how this PyTorch "
    "build implements each kernel (LayerNorm is one fused kernel, RMSNorm a few elementwise passes), on threads "
    "and on load. With fused kernels, as on GPUs, RMSNorm saves a reduction.")
show_source(RMSNorm, norms.norm_outputs, norms.time_norms)
