import math

import plotly.graph_objects as go
import streamlit as st

from explorer.demo_plots import log_ticks, weights_heatmap
from explorer.ui import show_source
from gptcore.demos import scaling
from gptcore.model import Attention

DIMS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
N_KEYS = 32
N_QUERIES = 2_000  # one set of draws per d behind the bars, the table and the curve

variance_table = st.cache_data(scaling.variance_table)
score_samples = st.cache_data(scaling.score_samples)
attention_stats = st.cache_data(scaling.attention_stats)
entropy_vs_d = st.cache_data(scaling.entropy_vs_d)
attention_rows = st.cache_data(scaling.attention_rows)

st.title("Why divide by √d_k")
st.markdown(
    """
A score is a dot product *q · k = Σᵢ qᵢkᵢ*, a sum of *d* terms. When the entries of *q* and *k* are independent
with variance 1, every term has variance 1 and the sum has variance **d**: the wider the head, the larger the
scores. Softmax reacts badly to large inputs — it turns them into a near one-hot vector where one key takes all
the weight. Dividing by √d brings the variance back to 1 for every head size. In gptcore, `Attention` does this
with `scale = 1/√d_head` (switched off by `GPTConfig(scale_attention=False)`).
"""
)

# --- the tutorial's measurement --------------------------------------------------------------------------
st.header("1 · The variance of q·k grows with d")
st.markdown("10,000 random pairs per *d* from one generator seeded with 0 — the tutorial's draws, in its order:")
table = variance_table()
plain, sharp = scaling.softmax_pair()
st.code(f"{scaling.variance_printout(table)}\n{plain} {sharp}", language="text")
st.markdown(
    """
The last line is softmax of the scores [1, 2, 3] and of the same scores ×16: the ranking is unchanged, but ×16
hands practically all of the weight to the largest score.
"""
)
show_source(scaling.variance_table, scaling.dot_products, scaling.softmax_pair)

# --- interactive d ---------------------------------------------------------------------------------------
st.header("2 · Pick a head size")
d = st.select_slider("Head dimension d", DIMS, value=64, key="scaling-d")
samples = score_samples(d)
fig = go.Figure()
for column, color in (("q·k", "#d62728"), ("q·k/√d", "#1f77b4")):
    fig.add_histogram(x=samples[column], name=column, nbinsx=80, opacity=0.6, marker_color=color)
fig.update_layout(barmode="overlay", height=330, margin=dict(l=10, r=10, t=40, b=10), xaxis_title="score",
                  yaxis_title="count", title=f"10,000 scores at d = {d}")
st.plotly_chart(fig, key="scaling-hist")

st.markdown(
    f"""
What does that spread do to attention? One query against {N_KEYS} random keys: softmax of the raw scores
(red) versus the scaled ones (blue). The table and the entropy curve below average over {N_QUERIES:,} such queries
(the same draws, so they agree at every d); the entropy of a uniform row is log {N_KEYS} = {math.log(N_KEYS):.2f}
nats, of a one-hot row 0.
"""
)
raw, scaled = attention_rows(d, N_KEYS, N_QUERIES)  # the bars show the first query
bars = go.Figure()
bars.add_bar(x=list(range(N_KEYS)), y=raw[0].softmax(-1).numpy(), name="softmax(q·k)", marker_color="#d62728")
bars.add_bar(x=list(range(N_KEYS)), y=scaled[0].softmax(-1).numpy(), name="softmax(q·k/√d)", marker_color="#1f77b4")
bars.update_layout(height=300, margin=dict(l=10, r=10, t=40, b=10), xaxis_title="key", yaxis_title="weight",
                   yaxis_range=[0, 1], title="Attention weights of one query")
st.plotly_chart(bars, key="scaling-row")
st.dataframe(attention_stats(d, N_KEYS, N_QUERIES).style.format(precision=3), hide_index=True, key="scaling-stats")

curve = entropy_vs_d(tuple(DIMS), N_KEYS, N_QUERIES)
ent = go.Figure()
for column, color in (("q·k", "#d62728"), ("q·k/√d", "#1f77b4")):
    ent.add_scatter(x=curve["d"], y=curve[column], name=column, mode="lines+markers", line_color=color)
ent.add_hline(y=math.log(N_KEYS), line_dash="dot", annotation_text=f"uniform: log {N_KEYS}")
ent.add_vline(x=d, line_dash="dash", line_color="grey")
ent.update_layout(height=320, margin=dict(l=10, r=10, t=40, b=10), xaxis=dict(title="d", **log_ticks(DIMS)),
                  yaxis_title="mean entropy (nats)", title="Attention entropy against head size")
st.plotly_chart(ent, key="scaling-entropy")
show_source(scaling.score_samples, scaling.attention_rows, scaling.attention_stats, scaling.entropy)

# --- gradients -------------------------------------------------------------------------------------------
st.header("3 · Saturated softmax, vanishing gradient")
st.markdown(
    """
The gradient of the softmax output with respect to its input is the Jacobian *J = diag(p) − p pᵀ*. When one
weight is ≈ 1 and the rest ≈ 0, every entry of *J* is ≈ 0: whatever the loss says, almost nothing flows back into
the scores, and so into W_Q and W_K. Multiply the scores [1, 2, 3] by a growing factor and watch the Jacobian's
norm collapse; the median row of the unscaled attention above shows the same effect as *d* grows.
"""
)
factor = st.select_slider("Factor on the scores [1, 2, 3]", [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64], value=16,
                          key="scaling-factor")
grad = st.cache_data(scaling.gradient_vs_scale)()
norm = go.Figure()
norm.add_scatter(x=grad["factor"], y=grad["jacobian norm"], name="‖J‖ (Frobenius)", mode="lines")
norm.add_scatter(x=grad["factor"], y=grad["largest weight"], name="largest weight", mode="lines", yaxis="y2")
norm.add_vline(x=factor, line_dash="dash", line_color="grey")
norm.update_layout(height=360, margin=dict(l=10, r=10, t=40, b=10),
                   xaxis=dict(title="factor", **log_ticks([0.1, 0.3, 1, 3, 10, 30, 100])),
                   yaxis_title="‖J‖", yaxis2=dict(title="largest weight", overlaying="y", side="right", range=[0, 1.05],
                              tickvals=[0, 0.25, 0.5, 0.75, 1]),
                   title="Gradient through softmax against the size of the scores",
                   legend=dict(orientation="h", y=-0.25))
left, right = st.columns([3, 2])
left.plotly_chart(norm, key="scaling-jacobian-curve")
p = scaling.softmax_pair(factor=factor)[1]
right.plotly_chart(weights_heatmap(scaling.softmax_jacobian(p), zmin=-0.25, zmax=0.25, colorscale="RdBu",
                                   fmt=".1e", x_title="input score", y_title="output weight",
                                   title=f"J at ×{factor}: weights {[round(v, 3) for v in p.tolist()]}"),
                   key="scaling-jacobian")
show_source(scaling.softmax_jacobian, scaling.gradient_vs_scale, Attention)
