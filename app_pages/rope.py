from dataclasses import replace

import numpy as np
import streamlit as st

from explorer.demo_plots import frequencies_figure, rope_pair_figure, weights_heatmap
from explorer.i18n import scoped
from explorer.links import linked
from explorer.real_model import models_table, real_model_panel
from explorer.tables import shown_table
from explorer.ui import quiz, show_chart, show_source
from gptcore.config import GPTConfig
from gptcore.demos import real_models as rm
from gptcore.demos import rope
from gptcore.model import apply_rope, rope_frequencies, rope_tables, scaled_frequencies
from gptcore.published import LLAMA_3_2_1B, SMOLLM2_135M

D = 64  # the tutorial's vector width
GRID = 48  # positions in the score heatmaps
THETAS = [100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 500_000, 1_000_000]
PAGE = "rope"

q, k = rope.tutorial_qk(D)
tr = scoped(PAGE)

st.title(tr("title"))
st.markdown(tr("intro"))
theta = linked(st.select_slider, tr("theta"), THETAS, value=10_000, format_func=lambda v: f"{v:,}",
               key="rope-theta")

# --- invariance -----------------------------------------------------------------------------------------
st.header(tr("offset.heading"))
st.markdown(tr("offset.body"))
c1, c2 = st.columns(2)
m = linked(c1.number_input, tr("offset.m"), 0, 4096, 500, key="rope-m")
n = linked(c2.number_input, tr("offset.n"), 0, 4096, 498, key="rope-n")
table = rope.invariance_table(q, k, rope.TUTORIAL_PAIRS + ((int(m), int(n)),), theta)
st.code("\n".join(f"m={r['m']:4d} n={r['n']:4d} m-n={r['m − n']}  q.k={r['RoPE q·k']:.4f}"
                  for r in table.to_dict("records")), language="text")
st.dataframe(shown_table(table, PAGE, formats={"RoPE q·k": "{:.4f}", "absolute q·k": "{:.4f}"}), hide_index=True,
             key="rope-table")
show_source(rope.tutorial_qk, rope.rotate, rope.rope_score, rope_tables, apply_rope)

# --- score grids -----------------------------------------------------------------------------------------
st.header(tr("grid.heading"))
st.markdown(tr("grid.body", last=GRID - 1))
rope_grid, absolute_grid = rope.rope_score_grid(q, k, GRID, theta), rope.absolute_score_grid(q, k, GRID)
left, right = st.columns(2)
for column, grid, name, key in ((left, rope_grid, "rope", "rope-grid-RoPE"),
                                (right, absolute_grid, "absolute", "rope-grid-absolute")):
    limit = grid.abs().max().item()
    show_chart(weights_heatmap(grid, title=tr(f"grid.{name}_title"), zmin=-limit, zmax=limit,
                               colorscale="RdBu", x_title=tr("grid.x_title"), y_title=tr("grid.y_title"),
                               hover=tr("grid.hover"), height=420), where=column, key=key)
    column.metric(tr(f"grid.{name}_spread"), f"{rope.diagonal_spread(grid):.2e}")
show_source(rope.rope_score_grid, rope.absolute_score_grid, rope.absolute_positions, rope.diagonal_spread)

# --- one pair rotating -----------------------------------------------------------------------------------
st.header(tr("pair.heading"))
c1, c2 = st.columns(2)
pair = linked(c1.slider, tr("pair.slider"), 0, D // 2 - 1, 6, key="rope-pair")
steps = linked(c2.slider, tr("pair.steps"), 1, 64, 12, key="rope-steps")
path = rope.pair_path(q, pair, range(steps + 1), theta)
sweep = rope.pair_path(q, pair, np.linspace(0, steps, 50 * steps + 1), theta)  # fractional positions
texts = {"title": tr("pair.title", pair=pair, steps=steps, theta=path["angle (rad)"][1]),
         "x_title": tr("pair.channel", c=2 * pair), "y_title": tr("pair.channel", c=2 * pair + 1),
         "circle": tr("pair.circle"), "swept": tr("pair.swept", steps=steps), "position": tr("pair.position")}
left, right = st.columns([3, 2])
show_chart(rope_pair_figure(path, sweep, steps, texts), where=left, key="rope-pair-plot")
right.markdown(tr("pair.body"))
right.dataframe(shown_table(path, PAGE, precision=3), hide_index=True, height=300, key="rope-path-table")
show_source(rope.pair_path)

# --- frequencies -----------------------------------------------------------------------------------------
st.header(tr("frequencies.heading"))
st.markdown(tr("frequencies.body"))
names = {"θ_i (rad/token)": tr("frequencies.theta_name"), "wavelength (tokens)": tr("frequencies.wavelength_name")}
show_chart(frequencies_figure(rope.frequency_table(D, theta), names, tr("frequencies.title", d=D, theta=theta),
                              tr("frequencies.x_title")), key="rope-freqs")
show_source(rope.frequency_table, rope_frequencies)
with real_model_panel("rope-real"):
    smol = rm.rope_reach(SMOLLM2_135M.config)
    tutorial = rm.rope_reach(replace(SMOLLM2_135M.config, rope_theta=GPTConfig().rope_theta))  # same heads, θ 10,000
    st.markdown(tr("real.body", name=SMOLLM2_135M.name, theta=smol["θ"], ours=tutorial["θ"],
                   times=smol["θ"] / tutorial["θ"], d_head=smol["d_head"], pairs=smol["pairs"],
                   slow=smol["slowest wavelength"], slow_ours=tutorial["slowest wavelength"],
                   ratio=smol["slowest wavelength"] / tutorial["slowest wavelength"], context=smol["context"],
                   slower=smol["pairs slower than the context"], slower_ours=tutorial["pairs slower than the context"],
                   llama=LLAMA_3_2_1B.name, factor=LLAMA_3_2_1B.config.rope_factor))
    models_table(rm.rope_table(), {"θ": "{:,.0f}", "context": "{:,}", "slowest wavelength": "{:,.0f}"})
    show_source(rm.rope_reach, scaled_frequencies)

quiz("rope", tr("quiz.question"), [tr(f"quiz.options.{i}") for i in range(4)], {0, 1}, tr("quiz.explanation"))
