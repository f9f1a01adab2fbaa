import numpy as np
import plotly.graph_objects as go
import streamlit as st

from explorer.demo_plots import TOP_MARGIN, rope_pair_figure, weights_heatmap
from explorer.ui import quiz, show_source
from gptcore.demos import rope
from gptcore.model import apply_rope, rope_frequencies, rope_tables

D = 64  # the tutorial's vector width
GRID = 48  # positions in the score heatmaps
THETAS = [100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 500_000, 1_000_000]

q, k = rope.tutorial_qk(D)

st.title("RoPE: position by rotation")
st.markdown(
    """
Attention needs to know where tokens are, and what usually matters in language is *relative* position: "the
character before" should mean the same thing at position 5 and at position 500. So we would like the score of
a query at position *m* against a key at position *n* to depend on the two positions only through *m − n*.

Rotations give exactly that. A dot product depends on the lengths of its two vectors and on the angle between
them. Turn a 2-D query by the angle *mθ* and a key by *nθ*: the lengths stay as they were, and the angle between
the two changes by *(m − n)θ*. The score therefore depends on the content (*q* and *k*) and on the signed offset
*m − n* — never on *m* or *n* alone. **RoPE** (rotary position embedding) groups the channels of each head in
pairs, (0, 1), (2, 3), …, and turns pair *i* by *position × θᵢ*, with *θᵢ = base^(−2i/d)*. It acts on q and k
inside every attention layer, not on v and not on the residual stream, and it learns nothing: the cos/sin tables
are computed once.
"""
)
theta = st.select_slider("Base θ (the tutorial and LLaMA use 10,000)", THETAS, value=10_000, key="rope-theta")

# --- invariance -----------------------------------------------------------------------------------------
st.header("1 · Only the offset matters")
st.markdown(
    """
The tutorial's check: *q* and *k* = randn(1, 64) from seed 0, rotated by gptcore's `rope_tables` and
`apply_rope` (the functions the model runs) to three pairs of positions two apart. The last column is a
contrast, not a real model: it adds one random vector per position to *q* and *k* and skips the rotation — a
**stand-in for learned absolute positions**. (GPT-2's real version adds a trained position table to *x* before
the q/k/v projections; it shares the problem shown here, a score that depends on where the pair sits.) Add a pair
of your own below.
"""
)
c1, c2 = st.columns(2)
m = c1.number_input("Your query position m", 0, 4096, 500, key="rope-m")
n = c2.number_input("Your key position n", 0, 4096, 498, key="rope-n")
table = rope.invariance_table(q, k, rope.TUTORIAL_PAIRS + ((int(m), int(n)),), theta)
st.code("\n".join(f"m={r['m']:4d} n={r['n']:4d} m-n={r['m − n']}  q.k={r['RoPE q·k']:.4f}"
                  for r in table.to_dict("records")), language="text")
st.dataframe(table.style.format({"RoPE q·k": "{:.4f}", "absolute q·k": "{:.4f}"}), hide_index=True,
             key="rope-table")
show_source(rope.tutorial_qk, rope.rotate, rope.rope_score, rope_tables, apply_rope)

# --- score grids -----------------------------------------------------------------------------------------
st.header("2 · The score as a function of m and n")
st.markdown(
    f"""
The same *q* and *k* at every pair of positions up to {GRID - 1}. With RoPE the picture is constant along every
diagonal (*m − n* fixed); with the stand-in absolute position vectors it is noise, because the score also depends
on where the pair sits. The number under each map is the largest spread of values along any one diagonal.
"""
)
rope_grid, absolute_grid = rope.rope_score_grid(q, k, GRID, theta), rope.absolute_score_grid(q, k, GRID)
left, right = st.columns(2)
for column, grid, name in ((left, rope_grid, "RoPE"), (right, absolute_grid, "absolute positions")):
    limit = grid.abs().max().item()
    title = f"q·k with {name}" + (" (random stand-in)" if name != "RoPE" else "")
    column.plotly_chart(weights_heatmap(grid, title=title, zmin=-limit, zmax=limit, colorscale="RdBu",
                                        x_title="key position n", y_title="query position m", height=420),
                        key=f"rope-grid-{name}")
    column.metric(f"Spread along a diagonal, {name}", f"{rope.diagonal_spread(grid):.2e}")
show_source(rope.rope_score_grid, rope.absolute_score_grid, rope.absolute_positions, rope.diagonal_spread)

# --- one pair rotating -----------------------------------------------------------------------------------
st.header("3 · One channel pair, turning")
c1, c2 = st.columns(2)
pair = c1.slider("Channel pair i", 0, D // 2 - 1, 6, key="rope-pair")
steps = c2.slider("Positions shown", 1, 64, 12, key="rope-steps")
path = rope.pair_path(q, pair, range(steps + 1), theta)
sweep = rope.pair_path(q, pair, np.linspace(0, steps, 50 * steps + 1), theta)  # fractional positions
fig = rope_pair_figure(path, sweep, pair, steps)
left, right = st.columns([3, 2])
left.plotly_chart(fig, key="rope-pair-plot")
right.markdown(
    """
Each arrow is the same two channels of *q* after rotation to a position. Pair 0 turns a full radian per token;
late pairs barely move over dozens of tokens. The length never changes — RoPE only turns vectors, so it cannot
blow the scores up or shrink them.
"""
)
right.dataframe(path.style.format(precision=3), hide_index=True, height=300, key="rope-path-table")
show_source(rope.pair_path)

# --- frequencies -----------------------------------------------------------------------------------------
st.header("4 · Fast pairs and slow pairs")
st.markdown(
    """
Early pairs turn quickly and separate neighbouring offsets; late pairs turn so slowly that they still tell apart
tokens hundreds or thousands of positions away — the many-frequencies idea of the original sinusoidal encoding.

Since LLaMA, RoPE has been the default in nearly every open model, and the usual ways of stretching a trained
model to longer contexts work on these frequencies: raise the base, which slows every pair (the slider above;
Code Llama moved from 10,000 to 1,000,000), or **interpolate** — divide every θᵢ by the stretch factor, so that
positions up to the new length land on angles the model saw in training (position interpolation; NTK-aware
scaling and YaRN stretch the slow pairs more than the fast ones). Either way a short fine-tune usually follows.
"""
)
freqs = rope.frequency_table(D, theta)
fig = go.Figure()
fig.add_scatter(x=freqs["pair"], y=freqs["θ_i (rad/token)"], mode="lines+markers", name="θ_i (rad/token)")
fig.add_scatter(x=freqs["pair"], y=freqs["wavelength (tokens)"], mode="lines+markers",
                name="wavelength 2π/θ_i (tokens)")
fig.update_layout(height=360, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), yaxis_type="log", xaxis_title="pair i",
                  yaxis_exponentformat="power", legend=dict(orientation="h", y=-0.2),
                  title=f"Per-pair frequencies, d = {D}, base {theta:,}")
st.plotly_chart(fig, key="rope-freqs")
show_source(rope.frequency_table, rope_frequencies)

quiz(
    "rope",
    "Which statements about RoPE are true?",
    ["It makes the q·k score depend only on the relative position of the two tokens.",
     "It has no learnable parameters.",
     "Like GPT-2, it adds a position vector to the token embedding.",
     "It rotates q, k and v."],
    {0, 1},
    "RoPE turns q and k by angles proportional to their positions, so the positions reach their dot product "
    "only through the difference of the angles, i.e. through m − n; the angles come from fixed frequencies, so "
    "nothing is learned. It is "
    "applied inside each attention layer, not added to the embeddings, and v is left alone: position only "
    "needs to shape the scores, not the content that gets mixed.",
)
