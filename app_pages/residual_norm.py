import streamlit as st

from explorer.demo_plots import layer_figure, norm_vector_figure, race_loss_figure
from explorer.i18n import t
from explorer.links import linked
from explorer.races import race_header, race_title, run_states, start_race
from explorer.real_model import exponent, models_table, real_model_panel
from explorer.tables import shown_table
from explorer.ui import job_registry, show_chart, show_source
from gptcore.demos import norms
from gptcore.demos import real_models as rm
from gptcore.model import Block, RMSNorm
from gptcore.published import QWEN3_0_6B, SMOLLM2_135M

RACE_KIND = "norm race"
NORM_RACE_KIND = "norm type race"
COLORS = {v.label: c for v, c in zip(norms.ALL_VARIANTS, ("#1f77b4", "#17becf", "#d62728", "#ff7f0e"))}
NORM_COLORS = {"RMSNorm": "#1f77b4", "LayerNorm": "#2ca02c"}

time_norms = st.cache_data(norms.time_norms, show_spinner=False)
registry = job_registry()


def variant_names() -> dict[str, str]:
    """Each variant's label (its key in a race's data) → its name in this tab's language."""
    names = {v.label: t(f"residual_norm.variant.{v.placement}_{'warmup' if v.warmup else 'no_warmup'}")
             for v in norms.ALL_VARIANTS}
    return names | {v.label: v.label for v in norms.NORM_VARIANTS}  # RMSNorm, LayerNorm: names as they are


st.title(t("residual_norm.title"))
st.markdown(t("residual_norm.intro"))
show_source(Block, label=t("residual_norm.block_source"))


def start_norm_race(kind: str, race: norms.NormRace) -> None:
    start_race(kind, lambda job, race=race: norms.run_norm_race(job, race), threads=1)


def previous_race(kind: str, current):
    """A snapshot of the newest other race of this kind that has drawn at least one step, or None."""
    earlier = [j.snapshot() for j in list(registry.jobs.values()) if j is not current and j.state.kind == kind]
    return max((s for s in earlier if s.data.get("loss")), key=lambda s: s.started, default=None)


def race_view(kind: str, prefix: str, colors: dict, per_layer: bool, live: bool):
    """The newest race of this kind; until it has a step to draw, the charts keep showing the previous one."""
    job = registry.latest(kind)
    snap = job.snapshot()
    data, names = snap.data, variant_names()
    race_header(job, snap, race_title(snap), f"{prefix}-stop")
    st.caption(run_states(data, names))
    if not data.get("loss") and (before := previous_race(kind, job)) is not None:
        st.caption(t("residual_norm.race.showing_previous", name=race_title(before)))
        data = before.data
    frames = norms.race_frames(data)
    show_chart(race_loss_figure(frames["loss"], colors, names), key=f"{prefix}-loss")
    if not frames["results"].empty:
        results = frames["results"].assign(variant=frames["results"]["variant"].map(names))
        st.dataframe(shown_table(results, "residual_norm", {"s / step": "{:.3f}", "final val loss": "{:.3f}"}),
                     hide_index=True, key=f"{prefix}-results")
    if per_layer:
        when = st.radio(t("residual_norm.layers.when"), ["latest", "first"], horizontal=True, key="norm-when",
                        format_func=lambda w: t(f"residual_norm.layers.{w}"))
        left, right = st.columns(2)
        show_chart(layer_figure(norms.at_probe(frames["grads"], when), colors, names,
                                t("residual_norm.layers.grads_title"), "‖∂loss/∂block‖", log=True),
                   where=left, key="norm-grads")
        show_chart(layer_figure(norms.at_probe(frames["resid"], when), colors, names,
                                t("residual_norm.layers.resid_title"), t("residual_norm.layers.resid_axis")),
                   where=right, key="norm-resid")
        st.caption(t("residual_norm.layers.caption"))
        if when == "first":
            st.caption(t("residual_norm.layers.at_init"))
    if live and not snap.active:
        st.rerun()  # stop polling: a full rerun redraws this without run_every


def race_panel(kind: str, prefix: str, colors: dict, per_layer: bool) -> None:
    job = registry.latest(kind)
    if job is None:
        st.info(t("residual_norm.race.press_train"))
        return
    live = job.snapshot().active
    st.fragment(race_view, run_every=1 if live else None)(kind, prefix, colors, per_layer, live)


# --- the placement race ----------------------------------------------------------------------------------
st.header(t("residual_norm.placement.header"))
defaults = norms.NormRace()
st.markdown(t("residual_norm.placement.text", n_layer=defaults.n_layer, d_model=defaults.d_model))
c1, c2, c3, c4 = st.columns(4)
n_layer = linked(c1.slider, t("residual_norm.placement.layers"), 2, 24, defaults.n_layer, key="norm-layers")
d_model = linked(c2.selectbox, "d_model", [16, 32, 64], index=1, key="norm-width")
steps = linked(c3.slider, t("residual_norm.placement.steps"), 10, 400, defaults.steps, step=10, key="norm-steps")
lr = linked(c4.select_slider, t("residual_norm.placement.lr"), [1e-3, 3e-3, 1e-2, 2e-2, 3e-2], value=defaults.lr,
           key="norm-lr")
c1, c2 = st.columns([1, 3])
warmup = linked(c1.slider, t("residual_norm.placement.warmup"), 1, 100, defaults.warmup, key="norm-warmup")
picked = linked(c2.multiselect, t("residual_norm.placement.variants"), list(COLORS), default=list(COLORS),
                format_func=variant_names().get, key="norm-variants")
if st.button(t("residual_norm.train"), key="norm-start", type="primary", disabled=not picked):
    start_norm_race(RACE_KIND, norms.NormRace(n_layer=n_layer, d_model=d_model, steps=steps, lr=lr,
                                         warmup=min(warmup, steps), probe_every=max(1, steps // 20),
                                         variants=tuple(v for v in norms.ALL_VARIANTS if v.label in picked)))
if not picked:
    st.warning(t("residual_norm.placement.pick_one"))
race_panel(RACE_KIND, "norm", COLORS, per_layer=True)
st.markdown(t("residual_norm.placement.look_for"))
show_source(norms.run_norm_race, norms.block_grad_norms, norms.residual_norms)

# --- RMSNorm vs LayerNorm --------------------------------------------------------------------------------
st.header(t("residual_norm.rms.header"))
st.markdown(t("residual_norm.rms.text"))
c1, c2, c3 = st.columns(3)
dim = linked(c1.slider, t("residual_norm.rms.size"), 4, 16, 8, key="norm-vec-d")
shift = linked(c2.slider, t("residual_norm.rms.shift"), -3.0, 3.0, 1.0, step=0.25, key="norm-vec-shift")
vec_seed = linked(c3.number_input, t("residual_norm.rms.seed"), 0, 10_000, 0, key="norm-vec-seed")
x = norms.sample_vector(dim, shift, int(vec_seed))
outputs = norms.norm_outputs(x)
show_chart(norm_vector_figure(outputs), key="norm-vec")
gap = (outputs["LayerNorm(x)"] - outputs["RMSNorm(x − mean)"]).abs().max()
st.markdown(t("residual_norm.rms.reading", gap=gap))
st.dataframe(shown_table(norms.norm_summary(x), "residual_norm", {"mean": "{:.4f}", "RMS": "{:.4f}"}),
             hide_index=True, key="norm-summary")
left, right = st.columns(2)
left.markdown(t("residual_norm.rms.params_heading"))
left.dataframe(shown_table(norms.norm_parameters(128), "residual_norm"), hide_index=True, key="norm-params")
right.markdown(t("residual_norm.rms.time_heading"))
if right.button(t("residual_norm.rms.measure_again"), key="norm-time-again"):
    time_norms.clear()
right.dataframe(shown_table(time_norms(), "residual_norm", {"µs per call": "{:,.0f}"}), hide_index=True,
                key="norm-times")
right.caption(t("residual_norm.rms.time_caption"))
show_source(RMSNorm, norms.norm_outputs, norms.time_norms)
with real_model_panel("norm-real"):
    smol, qwen = rm.norm_count(SMOLLM2_135M.config), QWEN3_0_6B.config
    st.markdown(t("residual_norm.real.body", name=SMOLLM2_135M.name, eps=exponent(smol["ε"]), norms=smol["norms"],
                  L=SMOLLM2_135M.config.n_layer, gains=smol["gains"], share=smol["share of parameters"],
                  qwen=QWEN3_0_6B.name, qwen_eps=exponent(qwen.norm_eps)))
    models_table(rm.norm_table(), {"ε": exponent, "gains": "{:,}", "share of parameters": "{:.3%}"})
    show_source(rm.norm_count)

# --- RMSNorm vs LayerNorm, trained -----------------------------------------------------------------------
st.header(t("residual_norm.trained.header"))
norm_defaults = norms.NormRace(n_layer=4, d_model=64, context=64, steps=300, lr=3e-3, warmup=30, probe_every=50,
                               eval_batches=20, variants=norms.NORM_VARIANTS)
st.markdown(t("residual_norm.trained.text", n_layer=norm_defaults.n_layer, eval_batches=norm_defaults.eval_batches))
c1, c2, c3 = st.columns(3)
type_layers = linked(c1.slider, t("residual_norm.placement.layers"), 1, 8, norm_defaults.n_layer,
                     key="normtype-layers")
type_width = linked(c2.selectbox, "d_model", [32, 64, 128], index=1, key="normtype-width")
type_steps = linked(c3.slider, t("residual_norm.placement.steps"), 50, 1000, norm_defaults.steps, step=50,
                    key="normtype-steps")
if st.button(t("residual_norm.train"), key="normtype-start", type="primary"):
    start_norm_race(NORM_RACE_KIND, norms.NormRace(
        n_layer=type_layers, d_model=type_width, context=64, steps=type_steps, lr=3e-3, warmup=type_steps // 10,
        probe_every=type_steps, eval_batches=norm_defaults.eval_batches, variants=norms.NORM_VARIANTS))
race_panel(NORM_RACE_KIND, "normtype", NORM_COLORS, per_layer=False)
st.caption(t("residual_norm.trained.expect"))
