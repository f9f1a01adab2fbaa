"""Plotly figures shared by the attention concept pages."""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.colors import qualitative
from plotly.subplots import make_subplots


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
        text=[[cell_text(v, fmt) for v in row] for row in z] if show_text else None,
        texttemplate="%{text}" if show_text else None, hovertemplate="row %{y}, col %{x}: %{z:.4f}<extra></extra>"))
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=40 if title else 10, b=10))
    fig.update_xaxes(title=x_title, type="category", side="bottom")
    fig.update_yaxes(title=y_title, type="category", autorange="reversed")
    return fig


def heatmap_row(panels: dict, zmin: float, zmax: float, colorscale: str, fmt: str, x_title: str, y_title: str,
                hover: str, height: int) -> go.Figure:
    """Several matrices side by side on one colour scale, values printed in the cells."""
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels), horizontal_spacing=0.06)
    for i, z in enumerate(panels.values()):
        z = z.detach().numpy() if isinstance(z, torch.Tensor) else z
        fig.add_heatmap(z=z, zmin=zmin, zmax=zmax, colorscale=colorscale, showscale=i == 0, row=1, col=i + 1,
                        text=[[cell_text(v, fmt) for v in row] for row in z.tolist()], texttemplate="%{text}",
                        hovertemplate=hover)
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text=y_title, row=1, col=1)
    fig.update_xaxes(title_text=x_title)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10))
    return fig


def cell_text(value: float, fmt: str) -> str:
    """A number for a heatmap cell: format(value, fmt), without the '-' of a value that rounds to zero."""
    text = format(value, fmt)
    return text[1:] if text.startswith("-") and float(text) == 0 else text


TOP_MARGIN = 70  # subplot titles sit below the Plotly toolbar that appears over a chart's top right


def log_ticks(values) -> dict:
    """Axis settings for a log axis that names exactly the given values (Plotly's default writes 2, 5 between
    powers of ten and drops the leading digit)."""
    return dict(type="log", tickvals=list(values), ticktext=[f"{v:g}" for v in values])


# --- Hyperparameters page ---------------------------------------------------------------------------------

MEMORY_PARTS = {"weights": "#1f77b4", "gradients": "#ff7f0e", "AdamW m + v": "#2ca02c", "master weights": "#9467bd"}
PATCH_COLORS = {"no patch": "#7f7f7f", "QK-norm": "#1f77b4", "soft-cap": "#d62728"}


def costs_figure(memory, curve, context: int) -> go.Figure:
    """Stacked training memory per precision, and training FLOPs per token against the context length."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["Training memory (GB)", "Training FLOPs per token vs context"],
                        horizontal_spacing=0.12)
    for part, color in MEMORY_PARTS.items():
        fig.add_bar(x=memory["precision"], y=memory[part], name=part, marker_color=color, row=1, col=1)
    for column, color in (("6N", "#1f77b4"), ("attention", "#d62728"), ("training total", "#000000")):
        fig.add_scatter(x=curve["context"], y=curve[column], name=column, mode="lines", line_color=color, row=1, col=2)
    fig.add_vline(x=context, line_dash="dot", line_color="grey", row=1, col=2)
    fig.update_layout(barmode="stack", height=400, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(title_text="context (tokens)", row=1, col=2, **log_ticks(curve["context"][::2]))
    fig.update_yaxes(type="log", exponentformat="power", row=1, col=2)
    return fig


def drift_figure(curves, probs, scale: float, cap: float) -> go.Figure:
    """Entropy and max probability of one attention row against the drift, and its weights at `scale`."""
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07,
                        subplot_titles=["Entropy (nats)", "Max probability", f"Weights at s = {scale:g}"])
    for name in ["no patch", "QK-norm", f"soft-cap {cap:g}"]:
        color = PATCH_COLORS[name.split(" ")[0] if name.startswith("soft") else name]
        rows = curves[curves["patch"] == name]
        fig.add_scatter(x=rows["scale"], y=rows["entropy (nats)"], name=name, legendgroup=name, line_color=color,
                        row=1, col=1)
        fig.add_scatter(x=rows["scale"], y=rows["max prob"], name=name, legendgroup=name, line_color=color,
                        showlegend=False, row=1, col=2)
        fig.add_bar(x=list(range(len(probs))), y=probs[name], name=name, legendgroup=name, marker_color=color,
                    showlegend=False, row=1, col=3)
    for col in (1, 2):
        fig.add_vline(x=scale, line_dash="dot", line_color="grey", row=1, col=col)
        fig.update_xaxes(title_text="drift s", row=1, col=col, **log_ticks([0.25, 1, 4, 16, 64]))
    fig.update_xaxes(title_text="key", row=1, col=3)
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), barmode="group",
                      legend=dict(orientation="h", y=-0.25))
    return fig


def z_loss_figure(sweep, terms: dict, shift: float, labels: list[str], top: int = 12) -> go.Figure:
    """z-loss against the common shift, and the two gradients on the most likely characters at `shift`."""
    order = terms["probs"].argsort(descending=True)[:top].tolist()
    chars = [labels[i] for i in order]
    ce_grad, z_grad = terms["cross-entropy gradient"], terms["z-loss gradient"]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=[
        f"z-loss (cross-entropy stays {terms['cross-entropy']:.3f})",
        f"∂ cross-entropy / ∂zᵢ (sum {ce_grad.sum().item():+.1e})",
        f"∂ z-loss / ∂zᵢ (sum {z_grad.sum().item():+.1e})"])
    fig.add_scatter(x=sweep["shift"], y=sweep["z-loss"], mode="lines", line_color="#9467bd", name="z-loss",
                    hovertemplate="shift %{x:.1f}: z-loss %{y:.2e}<extra></extra>", row=1, col=1)
    fig.add_vline(x=shift, line_dash="dot", line_color="grey", row=1, col=1)
    fig.add_bar(x=chars, y=ce_grad[order].numpy(), marker_color="#1f77b4", name="cross-entropy", row=1, col=2)
    fig.add_bar(x=chars, y=z_grad[order].numpy(), marker_color="#9467bd", name="z-loss", row=1, col=3)
    fig.update_xaxes(title_text="shift added to every logit", row=1, col=1)
    fig.update_xaxes(title_text="the most likely characters", type="category", row=1, col=2)
    fig.update_xaxes(title_text="the most likely characters", type="category", row=1, col=3)
    fig.update_yaxes(exponentformat="e", row=1, col=1)
    fig.update_yaxes(exponentformat="e", row=1, col=3)
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), showlegend=False)
    return fig


# --- Multi-head page --------------------------------------------------------------------------------------

def head_grid(patterns, labels: list[str], titles: list[str], columns: int = 2) -> go.Figure:
    """Attention patterns (H, T, T) of one layer, `columns` heads to a row, characters on both axes."""
    patterns = patterns.detach().numpy() if isinstance(patterns, torch.Tensor) else patterns
    rows = -(-len(patterns) // columns)
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=titles, horizontal_spacing=0.08,
                        vertical_spacing=0.12 / rows)
    ticks = list(range(len(labels)))
    for h, z in enumerate(patterns):
        fig.add_heatmap(z=z, x=ticks, y=ticks, zmin=0, zmax=1, colorscale="Blues", showscale=h == 0,
                        customdata=[[(labels[j], labels[i]) for j in ticks] for i in ticks],
                        hovertemplate="query %{y} '%{customdata[1]}' → key %{x} '%{customdata[0]}': "
                                      "%{z:.3f}<extra></extra>", row=h // columns + 1, col=h % columns + 1)
    axis = dict(tickmode="array", tickvals=ticks, ticktext=labels, tickangle=0, tickfont=dict(size=9))
    fig.update_xaxes(**axis)
    fig.update_yaxes(autorange="reversed", **axis)
    side = max(360, 11 * len(labels) + 80)  # about 11 px per character keeps every tick label readable
    fig.update_layout(height=rows * side, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10))
    return fig


# --- RoPE page --------------------------------------------------------------------------------------------

def pair_labels(angles, max_labels: int = 12, min_gap: float = 0.35) -> list[str]:
    """Labels for points at positions 0..n on a circle (angles in radians): about max_labels of them, none
    within min_gap radians of another. Positions that come back round onto a labelled point join its label
    ("1, 64"), and the last position is always named."""
    n = len(angles) - 1
    every = max(1, n // max_labels)
    labels = [""] * len(angles)
    placed: list[int] = []
    for pos in list(range(0, n + 1, every)) + ([n] if n % every else []):
        near = next((p for p in placed if circular_gap(angles[p], angles[pos]) < min_gap), None)
        if near is None:
            labels[pos] = str(pos)
            placed.append(pos)
        elif pos == n:
            labels[near] += f", {pos}"
    return labels


def circular_gap(a: float, b: float) -> float:
    gap = (a - b) % (2 * math.pi)
    return min(gap, 2 * math.pi - gap)


def rope_pair_figure(path, sweep, pair: int, steps: int) -> go.Figure:
    """One channel pair of q rotated to positions 0..steps: arrows from the origin, the swept arc, a circle."""
    radius = float(np.hypot(path["x"][0], path["y"][0]))
    circle = np.linspace(0, 2 * np.pi, 200)
    fig = go.Figure()
    fig.add_scatter(x=radius * np.cos(circle), y=radius * np.sin(circle), mode="lines", hoverinfo="skip",
                    line=dict(color="lightgrey", dash="dot"), name="circle")
    fig.add_scatter(x=sweep["x"], y=sweep["y"], mode="lines", line=dict(color="#1f77b4", width=3),
                    name=f"angle swept from 0 to {steps}", hoverinfo="skip")
    labels = pair_labels(path["angle (rad)"].tolist())
    for row, label in zip(path.itertuples(), labels):
        fig.add_scatter(x=[0, row.x], y=[0, row.y], mode="lines+markers+text", showlegend=False,
                        marker=dict(size=[0, 7], color=[row.position] * 2, colorscale="Viridis", cmin=0, cmax=steps),
                        line=dict(color="rgba(31,119,180,0.35)"), text=["", label], textposition="top center",
                        hovertemplate=f"position {row.position}<extra></extra>")
    fig.update_layout(height=480, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), xaxis_title=f"channel {2 * pair}",
                      yaxis_title=f"channel {2 * pair + 1}", yaxis_scaleanchor="x",
                      legend=dict(orientation="h", y=-0.15),
                      title=f"q's pair {pair} at positions 0–{steps}: "
                            f"θ_{pair} = {path['angle (rad)'][1]:.4g} rad per token")
    return fig


# --- Residual stream & norms page -------------------------------------------------------------------------

def race_loss_figure(loss, colors: dict) -> go.Figure:
    """Per-step training loss of each variant (faint) and its moving average (bold)."""
    fig = go.Figure()
    for label, rows in loss.groupby("variant", sort=False):
        fig.add_scatter(x=rows["step"], y=rows["loss"], mode="lines", line=dict(color=colors[label], width=1),
                        opacity=0.25, showlegend=False, hoverinfo="skip")
        fig.add_scatter(x=rows["step"], y=rows["smoothed"], mode="lines", name=label, line_color=colors[label])
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), xaxis_title="step",
                      yaxis_title="training loss (nats)", legend=dict(orientation="h", y=-0.2),
                      title="Training loss (faint: per step, bold: moving average)")
    return fig


def layer_figure(frame, colors: dict, title: str, y_title: str, log: bool = False) -> go.Figure:
    """One line per variant over the layers; the legend sits below, so two plots side by side keep their width."""
    fig = go.Figure()
    for label, rows in frame.groupby("variant", sort=False):
        fig.add_scatter(x=rows["layer"], y=rows["norm"], mode="lines+markers", name=label, line_color=colors[label])
    fig.update_layout(height=400, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), title=title,
                      xaxis=dict(title="layer", dtick=1 if frame["layer"].nunique() <= 16 else None),
                      yaxis=dict(title=y_title, type="log" if log else "linear", exponentformat="power"),
                      legend=dict(orientation="h", y=-0.25))
    return fig


# --- Assembled GPT page -----------------------------------------------------------------------------------

def merge_layout_figure(values, title: str) -> go.Figure:
    """Where each channel of the merged (T, H·d_head) tensor came from. A value v = 100·h + t is printed as
    'h{h} t{t}' and coloured by its head h."""
    values = values.detach().numpy() if isinstance(values, torch.Tensor) else values
    labels = [[f"h{int(v) // 100} t{int(v) % 100}" for v in row] for row in values.tolist()]
    head = values // 100
    n_heads, cols = int(head.max()) + 1, len(values[0])
    palette = qualitative.Pastel1 * 2
    scale = [[h / max(1, n_heads - 1), palette[h]] for h in range(max(2, n_heads))]  # one colour per head
    fig = go.Figure(go.Heatmap(z=head, text=labels, texttemplate="%{text}", colorscale=scale, zmin=0,
                               zmax=max(1, n_heads - 1), showscale=False, xgap=1, ygap=1,
                               textfont=dict(size=12 if cols <= 16 else 10),
                               hovertemplate="row %{y}, channel %{x}: %{text}<extra></extra>"))
    fig.update_layout(title=title, height=90 + 40 * len(values), margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title="channel of the merged vector", dtick=1)
    fig.update_yaxes(title="row", autorange="reversed", dtick=1)
    return fig


NODE_COLORS = {"embedding": "#dbe9f6", "norm": "#eeeeee", "attention": "#fde0c5", "ffn": "#d9f0d3", "add": "#ffffff"}


def diagram_figure(diagram: dict) -> go.Figure:
    """The chain left to right: boxes, arrows between neighbours, dashed residual arcs over the top."""
    fig = go.Figure()
    first, last = diagram["block"]
    fig.add_shape(type="rect", x0=first - 0.5, x1=last + 0.5, y0=-0.7, y1=1.05, line=dict(dash="dash", color="#999"))
    fig.add_annotation(x=(first + last) / 2, y=1.05, text=diagram["block_label"], showarrow=False, yanchor="bottom",
                       font=dict(size=12, color="#222"))
    for i, node in enumerate(diagram["nodes"]):
        half = 0.16 if node["kind"] == "add" else 0.46
        if node["kind"] in NODE_COLORS:
            fig.add_shape(type="circle" if node["kind"] == "add" else "rect", x0=i - half, x1=i + half,
                          y0=-half if node["kind"] == "add" else -0.5, y1=half if node["kind"] == "add" else 0.5,
                          fillcolor=NODE_COLORS[node["kind"]], line=dict(color="#666", width=1), layer="below")
        fig.add_annotation(x=i, y=0, text=node["label"], showarrow=False, font=dict(size=11, color="#222"))
        if i:
            prev = 0.16 if diagram["nodes"][i - 1]["kind"] == "add" else 0.46
            fig.add_annotation(x=i - half, y=0, ax=i - 1 + prev, ay=0, xref="x", yref="y", axref="x", ayref="y",
                               text="", showarrow=True, arrowhead=2, arrowwidth=1.2)
    for a, b in diagram["residuals"]:
        fig.add_shape(type="path", path=f"M {a},0.5 C {a},0.95 {b},0.95 {b},0.55",
                      line=dict(dash="dot", color="#1f77b4"))
        fig.add_annotation(x=b, y=0.17, ax=b, ay=0.55, xref="x", yref="y", axref="x", ayref="y", text="",
                           showarrow=True, arrowhead=2, arrowcolor="#1f77b4")
        fig.add_annotation(x=(a + b) / 2, y=0.93, text="residual", showarrow=False, font=dict(size=10, color="#1f77b4"))
    fig.update_xaxes(visible=False, range=[-0.55, len(diagram["nodes"]) - 0.45])
    fig.update_yaxes(visible=False, range=[-0.8, 1.35])
    fig.update_layout(height=230, margin=dict(l=0, r=0, t=0, b=0), plot_bgcolor="white", showlegend=False)
    return fig
