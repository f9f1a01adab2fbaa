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


def heatmap_row(panels: dict, zmin: float, zmax: float, colorscale: str, fmt: str, x_title: str, y_title: str,
                hover: str, height: int) -> go.Figure:
    """Several matrices side by side on one colour scale, values printed in the cells."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels), horizontal_spacing=0.06)
    for i, z in enumerate(panels.values()):
        z = z.detach().numpy() if isinstance(z, torch.Tensor) else z
        fig.add_heatmap(z=z, zmin=zmin, zmax=zmax, colorscale=colorscale, showscale=i == 0, row=1, col=i + 1,
                        text=[[format(v, fmt) for v in row] for row in z.tolist()], texttemplate="%{text}",
                        hovertemplate=hover)
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text=y_title, row=1, col=1)
    fig.update_xaxes(title_text=x_title)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10))
    return fig
