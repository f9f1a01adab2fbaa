import time

import plotly.graph_objects as go
import streamlit as st

from explorer.demo_plots import layer_figure, race_loss_figure
from explorer.jobs import JobRefused
from explorer.ui import job_progress, job_registry, show_source
from gptcore.demos import norms
from gptcore.model import Block, RMSNorm

RACE_KIND = "norm race"
NORM_RACE_KIND = "norm type race"
COLORS = {v.label: c for v, c in zip(norms.ALL_VARIANTS, ("#1f77b4", "#17becf", "#d62728", "#ff7f0e"))}
NORM_COLORS = {"RMSNorm": "#1f77b4", "LayerNorm": "#2ca02c"}

time_norms = st.cache_data(norms.time_norms)
registry = job_registry()

st.title("The residual stream and normalization")
st.markdown(
    """
Two ideas make a deep stack of attention and FFN layers trainable at all.

**The residual stream.** No sub-layer replaces its input; each computes a change and adds it: *x ← x + f(x)*.
Picture one vector per position flowing from the embedding up to the output head, with every sub-layer reading
it and writing an update back into it. The derivative of a sum passes unchanged to each of its terms, so the
loss's gradient reaches the lowest layers along the stream itself, however weak the path through each *f* is.

**Normalization, and where it sits.** Left alone, the size of the stream drifts as layers pile up, so norms
rescale it — and their position matters. The 2017 Transformer normalizes *after* each addition,
*x ← Norm(x + f(x))* (**post-norm**): the stream itself is rescaled after every sub-layer, and a gradient on its
way down must pass through every one of those norms. Deep post-norm models are fragile and lean on a careful
learning-rate warmup. From GPT-2 on, nearly every model normalizes only what enters each branch,
*x ← x + f(Norm(x))* (**pre-norm**), which leaves the stream an unbroken chain of sums. The stream then grows
with depth, so pre-norm models apply one last norm before the output head.
"""
)
show_source(Block, label="gptcore's Block: both placements")


def format_seconds(s) -> str:
    return "—" if s is None else f"{int(s) // 60}:{int(s) % 60:02d}"


def start_race(kind: str, race: norms.NormRace) -> None:
    try:
        registry.start(f"{kind} {time.strftime('%H:%M:%S')}", kind,
                       lambda job, race=race: norms.run_norm_race(job, race), threads=1)
    except JobRefused as e:
        st.error(str(e))


def race_view(kind: str, prefix: str, colors: dict, per_layer: bool, live: bool):
    """The newest race of this kind; until it has a step to draw, the charts keep showing the previous one."""
    job = registry.latest(kind)
    snap = job.snapshot()
    data = snap.data
    job_progress(job, snap, f"{snap.name}: {snap.status}", f"{prefix}-stop")
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Steps", f"{data.get('steps_done', 0)} / {data.get('steps_total', 0)}")
    m2.metric("Tokens / s", f"{data.get('tokens_per_s', 0):,.0f}")
    m3.metric("ETA", format_seconds(data.get("eta_s")) if snap.active else
              "done" if snap.status == "finished" else "—")
    m4.metric("Status", snap.status)
    st.caption(" · ".join(f"**{label}**: {status}" for label, status in data.get("runs", {}).items()))
    shown_key = f"{prefix}-shown"
    if data.get("loss"):
        st.session_state[shown_key] = snap.name
    elif (previous := registry.get(st.session_state.get(shown_key, ""))) not in (None, job):
        before = previous.snapshot()
        st.caption(f"Showing the previous race ({before.name}) until the new one reports its first step.")
        data = before.data
    frames = norms.race_frames(data)
    st.plotly_chart(race_loss_figure(frames["loss"], colors), key=f"{prefix}-loss")
    if not frames["results"].empty:
        st.dataframe(frames["results"].style.format({"s / step": "{:.3f}", "final val loss": "{:.3f}"}),
                     hide_index=True, key=f"{prefix}-results")
    if per_layer:
        when = st.radio("Per-layer views at", ["latest", "first"], horizontal=True, key="norm-when",
                        format_func={"latest": "the latest probe", "first": "initialisation (step 0)"}.get)
        left, right = st.columns(2)
        left.plotly_chart(layer_figure(norms.at_probe(frames["grads"], when), colors, "Gradient norm per block",
                                       "‖∂loss/∂block‖", log=True), key="norm-grads")
        right.plotly_chart(layer_figure(norms.at_probe(frames["resid"], when), colors,
                                        "Residual stream norm after each block", "mean ‖x‖ per position"),
                           key="norm-resid")
        st.caption("Layer 0 of the residual plot is the embedding output. Gradient norms are averaged over the "
                   "steps since the previous probe.")
        if when == "first":
            st.caption("Probes are taken before each step's update. Warmup only changes the updates, so at "
                       "initialisation each with/without-warmup pair of lines coincides (one hides the other).")
    if live and not snap.active:
        st.rerun()  # stop polling: a full rerun redraws this without run_every


def race_panel(kind: str, prefix: str, colors: dict, per_layer: bool) -> None:
    job = registry.latest(kind)
    if job is None:
        st.info("Press **Train** to start; the curves stream in here.")
        return
    live = job.snapshot().active
    st.fragment(race_view, run_every=1 if live else None)(kind, prefix, colors, per_layer, live)


# --- the placement race ----------------------------------------------------------------------------------
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
if st.button("Train", key="norm-start", type="primary", disabled=not picked):
    start_race(RACE_KIND, norms.NormRace(n_layer=n_layer, d_model=d_model, steps=steps, lr=lr,
                                         warmup=min(warmup, steps), probe_every=max(1, steps // 20),
                                         variants=tuple(v for v in norms.ALL_VARIANTS if v.label in picked)))
if not picked:
    st.warning("Pick at least one variant to train.")
race_panel(RACE_KIND, "norm", COLORS, per_layer=True)
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
LayerNorm centres a vector (subtracts its mean), divides it by its standard deviation, and then applies a learned
gain *γ* and shift *β*. RMSNorm leaves out the centring and the shift and only divides by the root mean square:
*x / √(mean(x²) + ε) · γ*. Trained, the two end up about equally good (section 3 runs both). RMSNorm is the
simpler of the two, and since a norm does next to no arithmetic but has to read and write the whole activation,
every reduction pass it skips is memory traffic saved on hardware where that traffic is the bottleneck. Modern
models also dropped the biases of their Linear layers; PaLM gives training stability at scale as its reason,
with fewer parameters and less traffic as side benefits.
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

# --- RMSNorm vs LayerNorm, trained -----------------------------------------------------------------------
st.header("3 · RMSNorm against LayerNorm, trained")
norm_defaults = norms.NormRace(n_layer=4, d_model=64, context=64, steps=300, lr=3e-3, warmup=30, probe_every=50,
                               eval_batches=20, variants=norms.NORM_VARIANTS)
st.markdown(
    f"""
The same model twice — pre-norm with warmup, {norm_defaults.n_layer} layers by default, the tutorial's shape at a
smaller width — once with RMSNorm everywhere (`GPTConfig(norm="rms")`, as in the tutorial) and once with
LayerNorm (`norm="layer"`), from the same seed on the same batches. The table gives each one's validation loss at
the last step (over {norm_defaults.eval_batches} batches) and its wall time per step on this machine. About half a
minute with the defaults.
"""
)
c1, c2, c3 = st.columns(3)
type_layers = c1.slider("Layers", 1, 8, norm_defaults.n_layer, key="normtype-layers")
type_width = c2.selectbox("d_model", [32, 64, 128], index=1, key="normtype-width")
type_steps = c3.slider("Steps per variant", 50, 1000, norm_defaults.steps, step=50, key="normtype-steps")
if st.button("Train", key="normtype-start", type="primary"):
    start_race(NORM_RACE_KIND, norms.NormRace(
        n_layer=type_layers, d_model=type_width, context=64, steps=type_steps, lr=3e-3, warmup=type_steps // 10,
        probe_every=type_steps, eval_batches=norm_defaults.eval_batches, variants=norms.NORM_VARIANTS))
race_panel(NORM_RACE_KIND, "normtype", NORM_COLORS, per_layer=False)
st.caption("Expect the two loss curves to lie on top of each other, with differences of the size that another "
           "seed would give; the time per step follows the kernels measured in section 2.")
