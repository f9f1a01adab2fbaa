"""Plotly figures for the Inspect page, built from the tensors and tables of gptcore.inspector."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .inspector import head_names

ATTENTION_SCALE = "Blues"
SCORE_LABELS = {"previous_token": "previous token", "first_token": "first token", "induction": "induction"}


def attention_grid(patterns: torch.Tensor, selected: tuple[int, int] | None = None,
                   title: str = "Attention of every layer (rows) and head (columns)") -> go.Figure:
    """Every head's (query × key) pattern in one grid; queries run down, keys across, as in the matrix."""
    L, H, T, _ = patterns.shape
    names = head_names(L, H)
    titles = [f"<b>▶ {n}</b>" if selected == divmod(i, H) else n for i, n in enumerate(names)]
    fig = make_subplots(rows=L, cols=H, subplot_titles=titles, horizontal_spacing=0.02,
                        vertical_spacing=0.25 / L)
    z = patterns.numpy()
    for layer in range(L):
        for head in range(H):
            fig.add_trace(go.Heatmap(
                z=z[layer, head], coloraxis="coloraxis", name=names[layer * H + head],
                hovertemplate=f"{names[layer * H + head]}<br>query %{{y}} → key %{{x}}<br>weight %{{z:.3f}}"
                              "<extra></extra>"), row=layer + 1, col=head + 1)
    fig.update_xaxes(showticklabels=False, constrain="domain")
    fig.update_yaxes(showticklabels=False, autorange="reversed", scaleanchor="x", constrain="domain")
    # scaleanchor="x" above ties every y axis to the first x axis; each panel needs its own pair.
    for i in range(L * H):
        suffix = "" if i == 0 else str(i + 1)
        fig.layout[f"yaxis{suffix}"].scaleanchor = f"x{suffix}"
    fig.update_layout(title=title, coloraxis=dict(colorscale=ATTENTION_SCALE, cmin=0, cmax=1,
                                                  colorbar=dict(title="weight")),
                      height=120 + 230 * L, margin=dict(l=10, r=10, t=90, b=10))
    return fig


def head_heatmap(pattern: torch.Tensor, labels: list[str], title: str) -> go.Figure:
    """One head's pattern with a character on every tick, and both characters in the hover."""
    T = len(labels)
    ticks = [f"{c}" for c in labels]
    hover = np.empty((T, T, 2), dtype=object)
    hover[:, :, 0] = np.array(labels, dtype=object)[:, None]
    hover[:, :, 1] = np.array(labels, dtype=object)[None, :]
    fig = go.Figure(go.Heatmap(
        z=pattern.numpy(), customdata=hover, zmin=0, zmax=1, colorscale=ATTENTION_SCALE,
        colorbar=dict(title="weight"),
        hovertemplate="query %{y} '%{customdata[0]}' → key %{x} '%{customdata[1]}'<br>weight %{z:.3f}"
                      "<extra></extra>"))
    axis = dict(tickmode="array", tickvals=list(range(T)), ticktext=ticks, tickangle=0,
                tickfont=dict(size=9 if T > 64 else 11, family="monospace"))
    size = max(420, 7 * T + 160)
    fig.update_xaxes(title="key (attended to)", side="top", **axis)
    fig.update_yaxes(title="query (attending)", autorange="reversed", **axis)
    fig.update_layout(title=title, height=size, margin=dict(l=60, r=10, t=110, b=10))
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
        fig.add_trace(go.Heatmap(z=grid, x=[f"H{h}" for h in range(n_head)], y=[f"L{l}" for l in range(n_layer)],
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
                  labels={"value": "score", "step": "training step"},
                  title="Head scores at each saved step")
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(range=[0, 1])
    fig.update_layout(height=380, margin=dict(t=80, b=10))
    return fig
