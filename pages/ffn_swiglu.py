import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from explorer.demo_plots import TOP_MARGIN
from explorer.ui import quiz, show_source
from gptcore.config import ConfigError, swiglu_hidden
from gptcore.demos import ffn
from gptcore.model import FeedForward

MULTIPLES = [1, 8, 64, 128, 256]
COLORS = {"ReLU": "#7f7f7f", "GELU": "#2ca02c", "SiLU": "#d62728"}

activation_curves = st.cache_data(ffn.activation_curves)
ffn_budget = st.cache_data(ffn.ffn_budget)


@st.cache_data
def gate_readout(d_model: int, n_tokens: int, seed: int):
    layer = ffn.feedforward(d_model, swiglu_hidden(d_model), seed=seed)
    readout = ffn.gate_readout(layer, ffn.sample_tokens(n_tokens, d_model, seed + 1))
    return {name: t.numpy() for name, t in readout.items()}, ffn.gate_stats(readout)


st.title("The feed-forward layer and SwiGLU")
st.markdown(
    """
Attention gathers: what it hands each position is a weighted sum of value vectors from other positions, a linear
mix with little processing of its own. The per-position thinking happens in the block's second half, the
feed-forward network (FFN): each position's vector, alone, is blown up to *d_ff* dimensions, passed through a
nonlinearity and projected back down to *d_model*. In the original Transformer the nonlinearity was ReLU and
*d_ff* was 4·*d_model*.

The LLaMA family replaces it with a **gated** FFN, SwiGLU:

*FFN(x) = W₂ ( SiLU(W₁x) ⊙ W₃x ),  SiLU(z) = z·σ(z)*

Two projections of *x* are computed side by side. One goes through SiLU; the other stays linear and, multiplied
in element by element, sets how much of each hidden unit reaches W₂ — it *gates* it. In Shazeer's 2020
comparison the gated variants beat ReLU and GELU at matched compute, without an explanation of why, and there
is still no accepted theory of it.
"""
)

# --- activations -----------------------------------------------------------------------------------------
st.header("1 · SiLU next to ReLU and GELU")
shown = st.multiselect("Activations", list(COLORS), default=list(COLORS), key="ffn-acts")
zoom = st.select_slider("Range of z", [1.0, 2.0, 5.0, 10.0], value=5.0, key="ffn-range")
curves = activation_curves(-zoom, zoom)
if shown:
    fig = go.Figure()
    for name in shown:
        fig.add_scatter(x=curves["z"], y=curves[name], name=name, mode="lines", line_color=COLORS[name])
    fig.update_layout(height=330, margin=dict(l=10, r=10, t=30, b=10), xaxis_title="z", yaxis_title="activation")
    st.plotly_chart(fig, key="ffn-curves")
else:
    st.info("Pick at least one activation to plot.")
low = curves.loc[curves["SiLU"].idxmin()]
st.markdown(
    f"""
SiLU is smooth and lets small negative values through: its minimum on this range is
**{low['SiLU']:.4f} at z = {low['z']:.2f}**. ReLU cuts at 0 with a kink; GELU is almost the same shape as SiLU.
For large |z| all three agree: ≈ z on the right, ≈ 0 on the left.
"""
)
show_source(ffn.activation_curves)

# --- the gate --------------------------------------------------------------------------------------------
st.header("2 · The gate at work")
st.markdown(
    """
A gptcore `FeedForward` with *d_ff = 8/3·d* (rounded up to a multiple of 8) applied to a few random token
vectors. Forward hooks catch the two branches and the product the model actually hands to *W₂*. Where the
SiLU branch is ≈ 0 the unit is off whatever the gate says; where it is on, the linear gate scales it and can
flip its sign — something a plain ReLU unit, which only outputs ≥ 0, cannot do by itself.
"""
)
c1, c2, c3, c4 = st.columns(4)
d_model = c1.selectbox("d_model", [16, 32, 64, 128], index=1, key="ffn-gate-d")
n_tokens = c2.slider("Tokens", 2, 16, 8, key="ffn-gate-tokens")
seed = c3.number_input("Seed", 0, 10_000, 0, key="ffn-gate-seed")
n_units = c4.slider("Hidden units shown", 8, 64, 32, step=8, key="ffn-gate-units")
readout, stats = gate_readout(d_model, n_tokens, int(seed))
panels = ["silu(w1 x)", "w3 x", "silu(w1 x) ⊙ w3 x"]
heat = make_subplots(rows=1, cols=3, subplot_titles=panels, horizontal_spacing=0.06)
limit = max(abs(readout[p][:, :n_units]).max() for p in panels)
for col, name in enumerate(panels, start=1):
    heat.add_heatmap(z=readout[name][:, :n_units], colorscale="RdBu", zmid=0, zmin=-limit, zmax=limit,
                     showscale=col == 3, row=1, col=col,
                     hovertemplate="token %{y}, unit %{x}: %{z:.3f}<extra>" + name + "</extra>")
heat.update_yaxes(autorange="reversed")
heat.update_yaxes(title_text="token", row=1, col=1)
heat.update_xaxes(title_text="hidden unit")
heat.update_layout(height=380, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10))
st.plotly_chart(heat, key="ffn-gate")
st.caption(f"d_ff = {swiglu_hidden(d_model)} hidden units; the first {min(n_units, swiglu_hidden(d_model))} shown.")
st.dataframe(stats.style.format(precision=3), hide_index=True, key="ffn-gate-stats")
show_source(ffn.gate_readout, ffn.feedforward, FeedForward)

# --- parameter budget ------------------------------------------------------------------------------------
st.header("3 · Why d_ff = 8/3 · d_model")
st.markdown(
    """
The classic MLP has two *d × 4d* matrices: *2·d·4d = 8d²* parameters (and FLOPs per token in proportion).
SwiGLU has three matrices, so it shrinks the hidden width to ⅔ of 4d: *3·d·(8/3)d = 8d²* — the same budget.
Real models round *d_ff* up to a multiple of 8, 64 or 256 so the matrix multiplies tile well on hardware.
"""
)
examples = [("the tutorial's model", 128, 8), ("LLaMA-2-7B", 4096, 256)]
st.table([{"model": name, "d_model": d, "8/3·d": f"{8 * d / 3:.2f}", "multiple": m, "d_ff": swiglu_hidden(d, m)}
          for name, d, m in examples])
c1, c2 = st.columns(2)
calc_d = c1.number_input("d_model", 1, 4096, 128, key="ffn-calc-d")
multiple = c2.selectbox("Round d_ff up to a multiple of", MULTIPLES, index=1, key="ffn-calc-multiple")
try:
    budget = ffn_budget(int(calc_d), multiple)
except ConfigError as e:
    st.error(f"Cannot build that layer: {e}")
    st.stop()
d_ff = int(budget.loc[1, "d_ff"])
m1, m2, m3 = st.columns(3)
m1.metric("8/3 · d_model", f"{8 * calc_d / 3:,.2f}")
m2.metric("d_ff (rounded up)", f"{d_ff:,}")
m3.metric("SwiGLU ÷ 4d-MLP parameters", f"{budget.loc[1, 'formula'] / budget.loc[0, 'formula']:.4f}")
st.dataframe(budget.style.format({"formula": "{:,}", "counted in FeedForward": "{:,}", "d_ff": "{:,}",
                                  "÷ 8d²": "{:.4f}"}), hide_index=True, key="ffn-budget")
if (budget["formula"] == budget["counted in FeedForward"]).all():
    st.caption("✓ Every formula matches the parameter count of a real gptcore FeedForward of that shape.")
else:
    st.error("A formula disagrees with the real module's parameter count.")
counted = budget["counted in FeedForward"]
bars = go.Figure(go.Bar(x=budget["FFN"], y=counted, marker_color=["#7f7f7f", "#d62728", "#ff9896"],
                        text=[f"{v:,}" for v in counted], textposition="auto"))
bars.add_hline(y=8 * calc_d ** 2, line_dash="dot", annotation_text="8·d²")
bars.update_layout(height=300, margin=dict(l=10, r=10, t=30, b=10), yaxis_title="parameters per FFN")
st.plotly_chart(bars, key="ffn-budget-bars")
show_source(swiglu_hidden, ffn.ffn_budget, ffn.count_feedforward)

quiz("ffn-dff", "A SwiGLU FFN has three matrices W₁, W₂, W₃. To give it the same number of parameters as an "
     "ordinary two-matrix FFN with d_ff = 4·d_model, what should d_ff be?",
     ["4·d_model", "2·d_model", "8/3·d_model", "12·d_model"], {2},
     "The plain FFN has 2·d·4d = 8d² parameters. SwiGLU has 3·d·d_ff, and 3·d·d_ff = 8d² gives "
     "d_ff = 8/3·d_model (in practice rounded up to a hardware-friendly multiple: 344 for d = 128, 11008 for "
     "LLaMA-2-7B's 4096). 4·d would cost 12d², 1.5× as much; 2·d would cost only 6d².")
