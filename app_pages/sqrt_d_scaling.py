import math

import streamlit as st

from explorer import demo_plots as plots
from explorer.i18n import scoped
from explorer.links import linked
from explorer.tables import shown_table
from explorer.ui import show_chart, show_source
from gptcore.demos import scaling
from gptcore.model import Attention

DIMS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
N_KEYS = 32
N_QUERIES = 2_000  # one set of draws per d behind the bars, the table and the curve
PAGE = "sqrt_d_scaling"

variance_table = st.cache_data(scaling.variance_table, show_spinner=False)
score_samples = st.cache_data(scaling.score_samples, show_spinner=False)
attention_stats = st.cache_data(scaling.attention_stats, show_spinner=False)
entropy_vs_d = st.cache_data(scaling.entropy_vs_d, show_spinner=False)
attention_rows = st.cache_data(scaling.attention_rows, show_spinner=False)
tr = scoped(PAGE)

st.title(tr("title"))
st.markdown(tr("intro"))

# --- the tutorial's measurement --------------------------------------------------------------------------
st.header(tr("variance.heading"))
st.markdown(tr("variance.draws"))
table = variance_table()
plain, sharp = scaling.softmax_pair()
# the tutorial's printout, its two softmax tensors a line each: on one line they run off a projector's page
st.code(f"{scaling.variance_printout(table)}\n{plain}\n{sharp}", language="text")
st.markdown(tr("variance.softmax"))
show_source(scaling.variance_table, scaling.dot_products, scaling.softmax_pair)

# --- interactive d ---------------------------------------------------------------------------------------
st.header(tr("head.heading"))
d = linked(st.select_slider, tr("head.slider"), DIMS, value=64, key="scaling-d")
show_chart(plots.score_histograms(score_samples(d), tr("head.hist_title", d=d), tr("head.hist_x"), tr("head.hist_y")),
           key="scaling-hist")

uniform = math.log(N_KEYS)
st.markdown(tr("head.body", keys=N_KEYS, queries=N_QUERIES, uniform=uniform))
raw, scaled = attention_rows(d, N_KEYS, N_QUERIES)  # the bars show the first query
show_chart(plots.softmax_rows_figure(raw[0], scaled[0], tr("head.row_title"), tr("head.row_x"), tr("head.row_y")),
           key="scaling-row")
st.dataframe(shown_table(attention_stats(d, N_KEYS, N_QUERIES), PAGE, precision=3), hide_index=True,
             key="scaling-stats")
curve = entropy_vs_d(tuple(DIMS), N_KEYS, N_QUERIES)
show_chart(plots.entropy_figure(curve, d, uniform, tr("head.uniform", keys=N_KEYS), tr("head.entropy_title"),
                                tr("head.entropy_y")), key="scaling-entropy")
show_source(scaling.score_samples, scaling.attention_rows, scaling.attention_stats, scaling.entropy)

# --- gradients -------------------------------------------------------------------------------------------
st.header(tr("gradient.heading"))
st.markdown(tr("gradient.body"))
factor = linked(st.select_slider, tr("gradient.slider"), [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64], value=16,
                key="scaling-factor")
grad = st.cache_data(scaling.gradient_vs_scale, show_spinner=False)()
names = {"jacobian norm": tr("gradient.norm"), "largest weight": tr("gradient.largest")}
left, right = st.columns([3, 2])
show_chart(plots.jacobian_figure(grad, factor, names, tr("gradient.curve_title"), tr("gradient.factor"),
                                 tr("gradient.norm_axis")), where=left, key="scaling-jacobian-curve")
p = scaling.softmax_pair(factor=factor)[1]
weights = "[" + ", ".join(f"{v:.3g}" for v in p.tolist()) + "]"
jacobian = scaling.softmax_jacobian(p)
limit = plots.symmetric_limit(jacobian)
show_chart(plots.weights_heatmap(jacobian, zmin=-limit, zmax=limit, colorscale="RdBu", fmt=".1e",
                                 x_title=tr("gradient.jacobian_x"), y_title=tr("gradient.jacobian_y"),
                                 hover=tr("gradient.jacobian_hover"),
                                 title=tr("gradient.jacobian_title", factor=factor, weights=weights)),
           where=right, key="scaling-jacobian")
show_source(scaling.softmax_jacobian, scaling.gradient_vs_scale, Attention)
