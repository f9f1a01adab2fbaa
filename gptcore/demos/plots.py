"""Plotly figures shared by the attention concept pages."""
from __future__ import annotations

import plotly.graph_objects as go
import torch


def weights_heatmap(z, x_labels=None, y_labels=None, title: str = "", zmin: float | None = 0.0,
                    zmax: float | None = 1.0, colorscale: str = "Blues", fmt: str = ".2f",
                    x_title: str = "key position j", y_title: str = "query position i", height: int = 340,
                    annotate: bool | None = None) -> go.Figure:
    """A (rows, cols) matrix with row 0 on top; cells show their values when annotate (default: small matrices)."""
    z = z.detach().numpy() if isinstance(z, torch.Tensor) else z
    rows, cols = len(z), len(z[0])
    show_text = rows * cols <= 400 if annotate is None else annotate
    fig = go.Figure(go.Heatmap(
        z=z, x=x_labels if x_labels is not None else list(range(cols)),
        y=y_labels if y_labels is not None else list(range(rows)), zmin=zmin, zmax=zmax, colorscale=colorscale,
        text=[[format(v, fmt) for v in row] for row in z] if show_text else None,
        texttemplate="%{text}" if show_text else None, hovertemplate="row %{y}, col %{x}: %{z:.4f}<extra></extra>"))
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=40 if title else 10, b=10))
    fig.update_xaxes(title=x_title, type="category", side="bottom")
    fig.update_yaxes(title=y_title, type="category", autorange="reversed")
    return fig
