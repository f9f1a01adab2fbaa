"""Plotly figures for the Inspect page, built from the tensors and tables of gptcore.inspector."""
from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from gptcore.inspector import head_names

ATTENTION_SCALE = "Blues"
SCORE_LABELS = {"previous_token": "previous token", "first_token": "first token", "induction": "induction"}


def panel_domains(n: int, gap: float) -> list[tuple[float, float]]:
    """n equal [start, end] intervals of [0, 1] separated by gap."""
    size = (1 - gap * (n - 1)) / n
    return [(i * (size + gap), i * (size + gap) + size) for i in range(n)]


def attention_grid(patterns: torch.Tensor, selected: tuple[int, int] | None = None,
                   title: str = "Attention of every layer (rows) and head (columns)") -> go.Figure:
    """Every head's (query × key) pattern in one grid; queries run down, keys across, as in the matrix.

    The layout is written out as one dict (what make_subplots would build) because make_subplots plus
    per-axis updates cost most of a second for 16 panels, and the page redraws this on every change.
    """
    L, H, T, _ = patterns.shape
    names = head_names(L, H)
    columns, rows = panel_domains(H, 0.02), panel_domains(L, 0.25 / L)[::-1]  # layer 0 on top
    z = patterns.numpy()
    axis = dict(showticklabels=False, ticks="", showgrid=False, zeroline=False, constrain="domain")
    data, layout, titles = [], {}, []
    for i, name in enumerate(names):
        layer, head = divmod(i, H)
        n = "" if i == 0 else str(i + 1)
        data.append(dict(type="heatmap", z=z[layer, head], xaxis=f"x{n}", yaxis=f"y{n}", coloraxis="coloraxis",
                         name=name, hovertemplate=f"{name}<br>query %{{y}} → key %{{x}}<br>weight %{{z:.3f}}"
                                                  "<extra></extra>"))
        layout[f"xaxis{n}"] = dict(domain=columns[head], anchor=f"y{n}", **axis)
        # scaleanchor keeps the cells square, panel by panel
        layout[f"yaxis{n}"] = dict(domain=rows[layer], anchor=f"x{n}", autorange="reversed", scaleanchor=f"x{n}",
                                   **axis)
        label = f"<b>▶ {name}</b>" if selected == (layer, head) else name
        titles.append(dict(text=label, x=sum(columns[head]) / 2, y=rows[layer][1], xref="paper", yref="paper",
                           xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=14)))
    layout.update(title=dict(text=title), annotations=titles, height=120 + 230 * L,
                  margin=dict(l=10, r=10, t=90, b=10),
                  coloraxis=dict(colorscale=ATTENTION_SCALE, cmin=0, cmax=1, colorbar=dict(title=dict(text="weight"))))
    return go.Figure(dict(data=data, layout=layout))


def head_heatmap(pattern: torch.Tensor, labels: list[str], title: str) -> go.Figure:
    """One head's pattern with a character on every tick, and both characters in the hover.

    The axes are categories named "position 'character'", so the hover can show them without a T×T array of
    hover texts (which made this figure five times larger and slow to redraw on every click)."""
    T = len(labels)
    names = [f"{i} '{c}'" for i, c in enumerate(labels)]
    fig = go.Figure(go.Heatmap(
        z=pattern.numpy(), x=names, y=names, zmin=0, zmax=1, colorscale=ATTENTION_SCALE, colorbar=dict(title="weight"),
        hovertemplate="query %{y} → key %{x}<br>weight %{z:.3f}<extra></extra>"))
    axis = dict(type="category", tickmode="array", tickvals=names, ticktext=labels, showgrid=False,
                tickfont=dict(size=9 if T > 64 else 11, family="monospace"), constrain="domain")
    fig.update_xaxes(title="key (attended to)", side="top", tickangle=0, **axis)
    fig.update_yaxes(title="query (attending)", autorange="reversed", scaleanchor="x", **axis)
    fig.update_layout(title=title, height=max(460, 7 * T + 170), margin=dict(l=60, r=10, t=110, b=10))
    return fig


def prediction_bars(top: pd.DataFrame, title: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=top["label"], y=top["probability"], text=[f"{p:.1%}" for p in top["probability"]],
                           textposition="outside", marker_color="#4c78a8",
                           hovertemplate="'%{x}': %{y:.4f}<extra></extra>"))
    fig.update_xaxes(type="category", tickfont=dict(size=16, family="monospace"), title="next character")
    fig.update_yaxes(title="probability", range=[0, min(1.0, float(top["probability"].max()) * 1.2 + 0.02)])
    fig.update_layout(title=title, height=380, margin=dict(t=60, b=10))
    return fig


def loss_bars(losses: torch.Tensor, labels: list[str]) -> go.Figure:
    """Loss of each character as a bar over its position: the same numbers as the coloured text."""
    values = losses.numpy()
    fig = go.Figure(go.Bar(x=list(range(len(labels))), y=values, customdata=labels, marker_color=values,
                           marker_colorscale="Reds",
                           hovertemplate="%{x} '%{customdata}': %{y:.2f} nats<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels,
                     tickfont=dict(size=9, family="monospace"), tickangle=0)
    fig.update_yaxes(title="loss (nats)")
    fig.update_layout(title="Surprise at each character: −log p(character | everything before it)", height=320,
                      margin=dict(t=60, b=10))
    return fig


def score_heatmaps(scores: pd.DataFrame, n_layer: int, n_head: int) -> go.Figure:
    """The three head scores side by side as layer × head tables."""
    fig = make_subplots(rows=1, cols=len(SCORE_LABELS), subplot_titles=list(SCORE_LABELS.values()),
                        horizontal_spacing=0.06)
    for i, column in enumerate(SCORE_LABELS):
        grid = scores[column].to_numpy().reshape(n_layer, n_head)
        fig.add_trace(go.Heatmap(z=grid, x=[f"H{h}" for h in range(n_head)], y=[f"L{n}" for n in range(n_layer)],
                                 coloraxis="coloraxis", texttemplate="%{z:.2f}",
                                 hovertemplate="%{y}%{x}: %{z:.3f}<extra></extra>"), row=1, col=i + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title="Head scores (mean attention weight on the target keys)",
                      coloraxis=dict(colorscale="Viridis", cmin=0, cmax=1), height=140 + 45 * n_layer,
                      margin=dict(t=80, b=10))
    return fig


def scores_over_training_figure(long: pd.DataFrame) -> go.Figure:
    frame = long.assign(score=long["score"].map(SCORE_LABELS))
    fig = px.line(frame, x="step", y="value", color="head", facet_col="score", markers=True,
                  color_discrete_sequence=px.colors.qualitative.Dark24,  # 24 distinct colours: one per head
                  labels={"value": "score", "step": "training step"},
                  title="Head scores at each saved step")
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(range=[0, 1])
    # a vertical legend of 16+ heads would outgrow the plot and scroll; below the panels it wraps instead
    fig.update_layout(height=500, margin=dict(t=80, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, title=dict(text="head")))
    return fig
