import streamlit as st

from explorer.demo_plots import ACTIVATION_COLORS, activation_figure, ffn_budget_figure, gate_figure
from explorer.i18n import say, t
from explorer.links import linked
from explorer.real_model import models_table, real_model_panel
from explorer.tables import pinned, shown_table
from explorer.ui import quiz, show_chart, show_source
from gptcore.config import ConfigError, swiglu_hidden
from gptcore.demos import ffn
from gptcore.demos import real_models as rm
from gptcore.model import FeedForward
from gptcore.published import SMOLLM2_135M

MULTIPLES = [1, 8, 64, 128, 256]

activation_curves = st.cache_data(ffn.activation_curves, show_spinner=False)
ffn_budget = st.cache_data(ffn.ffn_budget, show_spinner=False)


@st.cache_data(show_spinner=False)
def gate_readout(d_model: int, n_tokens: int, seed: int):
    layer = ffn.feedforward(d_model, swiglu_hidden(d_model), seed=seed)
    readout = ffn.gate_readout(layer, ffn.sample_tokens(n_tokens, d_model, seed + 1))
    return {name: t.numpy() for name, t in readout.items()}, ffn.gate_stats(readout)


st.title(t("ffn_swiglu.title"))
st.markdown(t("ffn_swiglu.intro"))

# --- activations -----------------------------------------------------------------------------------------
st.header(t("ffn_swiglu.acts.header"))
shown = linked(st.multiselect, t("ffn_swiglu.acts.pick"), list(ACTIVATION_COLORS), default=list(ACTIVATION_COLORS),
               key="ffn-acts")
zoom = linked(st.select_slider, t("ffn_swiglu.acts.range"), [1.0, 2.0, 5.0, 10.0], value=5.0, key="ffn-range")
curves = activation_curves(-zoom, zoom)
if shown:
    show_chart(activation_figure(curves, shown), key="ffn-curves")
else:
    st.info(t("ffn_swiglu.acts.none"))
low = curves.loc[curves["SiLU"].idxmin()]
st.markdown(t("ffn_swiglu.acts.reading", value=low["SiLU"], z=low["z"]))
show_source(ffn.activation_curves)

# --- the gate --------------------------------------------------------------------------------------------
st.header(t("ffn_swiglu.gate.header"))
st.markdown(t("ffn_swiglu.gate.text"))
c1, c2, c3, c4 = st.columns(4)
d_model = linked(c1.selectbox, "d_model", [16, 32, 64, 128], index=1, key="ffn-gate-d")
n_tokens = linked(c2.slider, t("ffn_swiglu.gate.tokens"), 2, 16, 8, key="ffn-gate-tokens")
seed = linked(c3.number_input, t("ffn_swiglu.gate.seed"), 0, 10_000, 0, key="ffn-gate-seed")
n_units = linked(c4.slider, t("ffn_swiglu.gate.units"), 8, 64, 32, step=8, key="ffn-gate-units")
readout, stats = gate_readout(d_model, n_tokens, int(seed))
show_chart(gate_figure(readout, n_units), key="ffn-gate")
st.caption(t("ffn_swiglu.gate.caption", d_ff=swiglu_hidden(d_model), shown=min(n_units, swiglu_hidden(d_model))))
st.dataframe(shown_table(stats, "ffn_swiglu", precision=3), hide_index=True, key="ffn-gate-stats")
show_source(ffn.gate_readout, ffn.feedforward, FeedForward)

# --- parameter budget ------------------------------------------------------------------------------------
st.header(t("ffn_swiglu.budget.header"))
st.markdown(t("ffn_swiglu.budget.text"))
examples = [(t("ffn_swiglu.budget.tutorial_model"), 128, 8), ("LLaMA-2-7B", 4096, 256)]
st.table([{t("ffn_swiglu.columns.model"): name, "d_model": f"{d:,}", "8/3·d": f"{8 * d / 3:,.2f}",
           t("ffn_swiglu.columns.multiple"): m, "d_ff": f"{swiglu_hidden(d, m):,}"} for name, d, m in examples])
with real_model_panel("ffn-real"):
    d, d_ff = SMOLLM2_135M.config.d_model, SMOLLM2_135M.config.d_ff
    st.markdown(t("ffn_swiglu.real.body", name=SMOLLM2_135M.name, d=d, d_ff=d_ff, hidden=swiglu_hidden(d),
                  weights=3 * d * d_ff, budget=8 * d ** 2))
    models_table(rm.ffn_table(), {"d_model": "{:,}", "8/3·d_model": "{:,.2f}", "d_ff": "{:,}"})
    show_source(rm.swiglu_rule)
c1, c2 = st.columns(2)
calc_d = linked(c1.number_input, "d_model", 1, 4096, 128, key="ffn-calc-d")
multiple = linked(c2.selectbox, t("ffn_swiglu.budget.multiple"), MULTIPLES, index=1, key="ffn-calc-multiple")
try:
    budget = ffn_budget(int(calc_d), multiple)
except ConfigError as e:
    st.error(t("ffn_swiglu.budget.cannot_build", error=e.message))
    st.stop()
d_ff = int(budget.loc[1, "d_ff"])
m1, m2, m3 = st.columns(3)
m1.metric("8/3 · d_model", f"{8 * calc_d / 3:,.2f}")
m2.metric(t("ffn_swiglu.budget.rounded"), f"{d_ff:,}")
m3.metric(t("ffn_swiglu.budget.ratio"), f"{budget.loc[1, 'formula'] / budget.loc[0, 'formula']:.4f}")
# the ratio and the two counts beside the pinned name, the shape after them: on a projector those scroll away
ratio_first = budget[["FFN", "÷ 8d²", "formula", "counted in FeedForward", "d_ff", "matrices"]]
st.dataframe(shown_table(ratio_first, "ffn_swiglu", {"formula": "{:,}", "counted in FeedForward": "{:,}",
                                                     "d_ff": "{:,}", "÷ 8d²": "{:.4f}"}),
             hide_index=True, key="ffn-budget", column_config=pinned("ffn_swiglu", "FFN"))
if (budget["formula"] == budget["counted in FeedForward"]).all():
    st.caption(t("ffn_swiglu.budget.matches"))
else:
    st.error(t("ffn_swiglu.budget.disagrees"))
show_chart(ffn_budget_figure([say(name) for name in budget["FFN"]], budget["counted in FeedForward"],
                             int(calc_d)), key="ffn-budget-bars")
show_source(swiglu_hidden, ffn.ffn_budget, ffn.count_feedforward)

quiz("ffn-dff", t("ffn_swiglu.quiz.question"), ["4·d_model", "2·d_model", "8/3·d_model", "12·d_model"], {2},
     t("ffn_swiglu.quiz.explanation"))
