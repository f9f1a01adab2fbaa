import numpy as np
import plotly.graph_objects as go
import streamlit as st

from explorer.demo_plots import weights_heatmap
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
previous word" means the same at position 5 and at position 500. We want the score of a query at position *m*
against a key at position *n* to depend on *m − n* only.

Rotations give exactly that. Rotate a 2-D query by the angle *mθ* and a key by *nθ*: the dot product of two
vectors depends only on the angle between them, here *(m − n)θ*. **RoPE** (rotary position embedding) pairs up
the channels of each head, (0, 1), (2, 3), …, and turns pair *i* by *position × θᵢ* with *θᵢ = base^(−2i/d)*.
It is applied to q and k inside every attention layer — never to v, never to the residual stream — and it has
nothing to learn: the cos/sin tables are computed once.
"""
)
theta = st.select_slider("Base θ (the tutorial and LLaMA use 10,000)", THETAS, value=10_000, key="rope-theta")

# --- invariance -----------------------------------------------------------------------------------------
st.header("1 · Only the offset matters")
st.markdown(
    """
The tutorial's check: *q* and *k* = randn(1, 64) from seed 0, rotated by gptcore's `rope_tables` and
`apply_rope` (the functions the model runs) to three pairs of positions two apart. For contrast, the last
column adds a random vector per position instead — the GPT-2 way of learned absolute positions. Add a pair of your
own below.
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
diagonal (*m − n* fixed); with added absolute position vectors it is noise, because the score also depends on
where the pair sits. The number under each map is the largest spread of values along any one diagonal.
"""
)
rope_grid, absolute_grid = rope.rope_score_grid(q, k, GRID, theta), rope.absolute_score_grid(q, k, GRID)
left, right = st.columns(2)
for column, grid, name in ((left, rope_grid, "RoPE"), (right, absolute_grid, "absolute positions")):
    limit = grid.abs().max().item()
    column.plotly_chart(weights_heatmap(grid, title=f"q·k with {name}", zmin=-limit, zmax=limit, colorscale="RdBu",
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
radius = float(np.hypot(path["x"][0], path["y"][0]))
circle = np.linspace(0, 2 * np.pi, 200)
fig = go.Figure()
fig.add_scatter(x=radius * np.cos(circle), y=radius * np.sin(circle), mode="lines", line=dict(color="lightgrey",
                dash="dot"), name="circle", hoverinfo="skip")
sweep = rope.pair_path(q, pair, np.linspace(0, steps, 50 * steps + 1), theta)  # fractional positions
fig.add_scatter(x=sweep["x"], y=sweep["y"], mode="lines", line=dict(color="#1f77b4", width=3),
                name=f"angle swept from 0 to {steps}", hoverinfo="skip")
label_every = max(1, steps // 12)  # beyond a dozen labels the numbers pile on top of each other
first_turn = 2 * np.pi / path["angle (rad)"][1] if steps else np.inf  # positions after it land on earlier ones
for row in path.itertuples():
    labelled = row.position % label_every == 0 and row.position + label_every / 2 < first_turn or row.position == steps
    label = str(row.position) if labelled else ""
    fig.add_scatter(x=[0, row.x], y=[0, row.y], mode="lines+markers+text", showlegend=False,
                    marker=dict(size=[0, 7], color=[row.position] * 2, colorscale="Viridis", cmin=0, cmax=steps),
                    line=dict(color="rgba(31,119,180,0.35)"), text=["", label],
                    textposition="top center", hovertemplate=f"position {row.position}<extra></extra>")
fig.update_layout(height=480, margin=dict(l=10, r=10, t=40, b=10), xaxis_title=f"channel {2 * pair}",
                  yaxis_title=f"channel {2 * pair + 1}", yaxis_scaleanchor="x",
                  title=f"q's pair {pair} at positions 0–{steps}: "
                        f"θ_{pair} = {path['angle (rad)'][1]:.4g} rad per token")
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
The early pairs spin fast and resolve nearby offsets; the late ones spin slowly and still tell apart tokens
hundreds or thousands of positions away — the many-frequencies idea of the original sinusoidal encoding. A larger
base slows the late pairs further, which is one of the tricks for stretching a model to longer contexts.
"""
)
freqs = rope.frequency_table(D, theta)
fig = go.Figure()
fig.add_scatter(x=freqs["pair"], y=freqs["θ_i (rad/token)"], mode="lines+markers", name="θ_i (rad/token)")
fig.add_scatter(x=freqs["pair"], y=freqs["wavelength (tokens)"], mode="lines+markers",
                name="wavelength 2π/θ_i (tokens)")
fig.update_layout(height=340, margin=dict(l=10, r=10, t=40, b=10), yaxis_type="log", xaxis_title="pair i",
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
    "RoPE turns q and k by angles proportional to their positions, so their dot product sees only the "
    "difference of the angles, i.e. m − n; the angles come from fixed frequencies, so nothing is learned. It is "
    "applied inside each attention layer, not added to the embeddings, and v is left alone: position only "
    "needs to shape the scores, not the content that gets mixed.",
)
