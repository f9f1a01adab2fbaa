"""Plotly figures shared by the attention concept pages."""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from gptcore.tokenizer import VISIBLE

from .i18n import say, t
from .ui import TITLE_ROOM, broken_lines


def weights_heatmap(z, x_labels=None, y_labels=None, title: str = "", zmin: float | None = 0.0,
                    zmax: float | None = 1.0, colorscale: str = "Blues", fmt: str = ".2f",
                    x_title: str = "", y_title: str = "", height: int = 340,
                    annotate: bool | None = None, hover: str = "%{y}, %{x}: %{z:.4f}<extra></extra>") -> go.Figure:
    """A (rows, cols) matrix with row 0 on top; cells show their values when annotate (default: small matrices).
    Every text (title, axis titles, hover template) comes from the page, in its reader's language."""
    z = z.detach().numpy() if isinstance(z, torch.Tensor) else z
    rows, cols = len(z), len(z[0])
    show_text = rows * cols <= 400 if annotate is None else annotate
    return go.Figure(go.Heatmap(
        z=z, x=x_labels if x_labels is not None else list(range(cols)),
        y=y_labels if y_labels is not None else list(range(rows)), zmin=zmin, zmax=zmax, colorscale=colorscale,
        text=[[cell_text(v, fmt) for v in row] for row in z] if show_text else None,
        texttemplate="%{text}" if show_text else None, hovertemplate=hover,
        colorbar=dict(exponentformat="e")),  # (Plotly's default writes 1e-7 as 100n)
        dict(title=title, height=height, margin=dict(l=10, r=10, t=40 if title else 10, b=10),
             xaxis=dict(title=x_title, type="category", side="bottom"),
             yaxis=dict(title=y_title, type="category", autorange="reversed")))


def heatmap_row(panels: dict, zmin: float, zmax: float, colorscale: str, fmt: str, x_title: str, y_title: str,
                hover: str, height: int) -> go.Figure:
    """Several matrices side by side on one colour scale, values printed in the cells."""
    # one row of query labels, on the left: between the panels they would crowd the cells of the one before
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels), horizontal_spacing=0.03,
                        shared_yaxes=True)
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


TOP_MARGIN = 70  # room for subplot titles below the toolbar band (explorer.ui.show_chart keeps at least that)


def log_ticks(values) -> dict:
    """Axis settings for a log axis that names exactly the given values (Plotly's default writes 2, 5 between
    powers of ten and drops the leading digit)."""
    return dict(type="log", tickvals=list(values), ticktext=[f"{v:g}" for v in values])


# --- From averaging to attention page --------------------------------------------------------------------

def row_sums_figure(queries: list[str], sums: dict, title: str, height: int = 520) -> go.Figure:
    """Each query's total attention weight, one horizontal bar per recipe (legend name -> values)."""
    fig = go.Figure()
    for name, values in sums.items():
        fig.add_bar(y=queries, x=values, name=name, orientation="h")
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10), title=title,
                      yaxis=dict(autorange="reversed", type="category"), xaxis_range=[0, 1.05],
                      legend=dict(orientation="h", y=-0.12))
    return fig


def curves_figure(curves: dict, colors, title: str, x_title: str, y_title: str, height: int = 340) -> go.Figure:
    """Lines (legend name -> (x, y)), in the given colours."""
    fig = go.Figure()
    for (name, (x, y)), color in zip(curves.items(), colors):
        fig.add_scatter(x=x, y=y, name=name, mode="lines", line_color=color)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10), xaxis_title=x_title, yaxis_title=y_title,
                      title=title)
    return fig


# --- √d scaling page ---------------------------------------------------------------------------------------
# Every control of the page redraws all its figures, so each is built in one go (traces and layout validated
# once): add_hline and add_vline search every trace for the axes, and each update_* validates again.

RAW, SCALED = "#d62728", "#1f77b4"  # unscaled and scaled scores, the same on every figure of the page
MARGIN = dict(l=10, r=10, t=40, b=10)


def vline(x: float, dash: str = "dash") -> dict:
    """A grey line at x from the bottom of the plot to its top (what add_vline draws)."""
    return dict(type="line", x0=x, x1=x, xref="x", y0=0, y1=1, yref="y domain", line=dict(color="grey", dash=dash))


def score_histograms(samples, title: str, x_title: str, y_title: str) -> go.Figure:
    """The raw and scaled scores (columns "q·k", "q·k/√d") as two overlaid histograms."""
    return go.Figure([go.Histogram(x=samples[column], name=column, nbinsx=80, opacity=0.6, marker_color=color)
                      for column, color in (("q·k", RAW), ("q·k/√d", SCALED))],
                     dict(barmode="overlay", height=330, margin=MARGIN, xaxis_title=x_title, yaxis_title=y_title,
                          title=title))


def softmax_rows_figure(raw, scaled, title: str, x_title: str, y_title: str) -> go.Figure:
    """One query's softmax weights over its keys, from the raw and from the scaled scores."""
    keys = list(range(len(raw)))
    return go.Figure([go.Bar(x=keys, y=raw.softmax(-1).numpy(), name="softmax(q·k)", marker_color=RAW),
                      go.Bar(x=keys, y=scaled.softmax(-1).numpy(), name="softmax(q·k/√d)", marker_color=SCALED)],
                     # (up to 1.1: the tick "1" at the plot's very top would run into the title above it)
                     dict(height=300, margin=MARGIN, xaxis_title=x_title, yaxis_title=y_title, yaxis_range=[0, 1.1],
                          title=title))


def entropy_figure(curve, d: int, uniform: float, uniform_label: str, title: str, y_title: str) -> go.Figure:
    """Mean attention entropy against the head size (log axis naming every d), the uniform ceiling, the chosen d."""
    ceiling = dict(type="line", x0=0, x1=1, xref="x domain", y0=uniform, y1=uniform, yref="y", line=dict(dash="dot"))
    label = dict(text=uniform_label, x=1, xref="x domain", xanchor="right", y=uniform, yref="y", yanchor="bottom",
                 showarrow=False)
    return go.Figure([go.Scatter(x=curve["d"], y=curve[column], name=column, mode="lines+markers", line_color=color)
                      for column, color in (("q·k", RAW), ("q·k/√d", SCALED))],
                     dict(shapes=[ceiling, vline(d)], annotations=[label], height=320, margin=MARGIN,
                          xaxis=dict(title="d", **log_ticks(curve["d"])), yaxis_title=y_title, title=title))


def jacobian_figure(grad, factor: float, names: dict, title: str, x_title: str, y_title: str) -> go.Figure:
    """The softmax Jacobian's norm (left axis, titled in words: a rotated ‖J‖ reads as three bars) and the largest
    weight (right axis) against the factor on the scores; names: legend names of the columns "jacobian norm" and
    "largest weight"."""
    return go.Figure(
        [go.Scatter(x=grad["factor"], y=grad["jacobian norm"], name=names["jacobian norm"], mode="lines"),
         go.Scatter(x=grad["factor"], y=grad["largest weight"], name=names["largest weight"], mode="lines",
                    yaxis="y2")],
        dict(shapes=[vline(factor)], height=360, margin=MARGIN,
             xaxis=dict(title=x_title, **log_ticks([0.1, 0.3, 1, 3, 10, 30, 100])), yaxis_title=y_title,
             yaxis2=dict(title=names["largest weight"], overlaying="y", side="right", range=[0, 1.05],
                         tickvals=[0, 0.25, 0.5, 0.75, 1]),
             title=title, legend=dict(orientation="h", y=-0.25)))


def symmetric_limit(z, quantile: float = 0.99) -> float:
    """A colour scale ±limit that fits the data: the quantile of |z| (a fixed ±0.25 leaves values of 1e-7 white)."""
    z = z.detach().numpy() if isinstance(z, torch.Tensor) else np.asarray(z)
    return float(np.quantile(np.abs(z), quantile)) or 1.0


def dotted_vline(fig: go.Figure, x: float, col: int) -> None:
    """A dotted grey line at x across the subplot in column `col` of a one-row grid: what add_vline draws, without
    its search of every trace for the subplot's axes (tens of milliseconds per line on these figures)."""
    axis = "" if col == 1 else str(col)
    fig.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, xref=f"x{axis}", yref=f"y{axis} domain",
                  line=dict(dash="dot", color="grey"))


# --- Hyperparameters page ---------------------------------------------------------------------------------

MEMORY_PARTS = {"weights": "#1f77b4", "gradients": "#ff7f0e", "AdamW m + v": "#2ca02c", "master weights": "#9467bd"}
PATCH_COLORS = ("#7f7f7f", "#1f77b4", "#d62728")  # no patch, QK-norm, soft-cap


def costs_figure(memory, curve, context: int) -> go.Figure:
    """Stacked training memory per precision, and training FLOPs per token against the context length."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=[
        t("hyperparameters.fig.memory_title"), t("hyperparameters.fig.flops_title")])
    precisions = [say(p) for p in memory["precision"]]
    for part, color in MEMORY_PARTS.items():
        fig.add_bar(x=precisions, y=memory[part], name=t(f"hyperparameters.columns.{part}"), marker_color=color,
                    row=1, col=1)
    for column, color in (("6N", "#1f77b4"), ("attention", "#d62728"), ("training total", "#000000")):
        fig.add_scatter(x=curve["context"], y=curve[column], name=t(f"hyperparameters.fig.curve.{column}"),
                        mode="lines", line_color=color, row=1, col=2)
    dotted_vline(fig, context, col=2)
    fig.update_layout(barmode="stack", height=400, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(title_text=t("hyperparameters.fig.context"), row=1, col=2, **log_ticks(curve["context"][::2]))
    fig.update_yaxes(type="log", exponentformat="power", dtick=1, row=1, col=2)  # powers of ten only
    return fig


def drift_figure(curves, probs, scale: float) -> go.Figure:
    """Entropy and max probability of one attention row against the drift, and its weights at `scale`; one
    colour per patch (the columns of `probs`: no patch, QK-norm, soft-cap)."""
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07, subplot_titles=[
        t("hyperparameters.fig.entropy"), t("hyperparameters.fig.max_prob"),
        t("hyperparameters.fig.weights_at", scale=scale)])
    for name, color in zip(probs.columns, PATCH_COLORS):
        rows, shown = curves[curves["patch"] == name], say(name)
        fig.add_scatter(x=rows["scale"], y=rows["entropy (nats)"], name=shown, legendgroup=shown, line_color=color,
                        row=1, col=1)
        fig.add_scatter(x=rows["scale"], y=rows["max prob"], name=shown, legendgroup=shown, line_color=color,
                        showlegend=False, row=1, col=2)
        fig.add_bar(x=list(range(len(probs))), y=probs[name], name=shown, legendgroup=shown, marker_color=color,
                    showlegend=False, row=1, col=3)
    for col in (1, 2):
        dotted_vline(fig, scale, col)
        fig.update_xaxes(title_text=t("hyperparameters.fig.drift"), row=1, col=col, **log_ticks([0.25, 1, 4, 16, 64]))
    fig.update_xaxes(title_text=t("hyperparameters.fig.key"), row=1, col=3)
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), barmode="group",
                      legend=dict(orientation="h", y=-0.25))
    return fig


def z_loss_figure(sweep, terms: dict, shift: float, labels: list[str], top: int = 12) -> go.Figure:
    """z-loss against the common shift, and the two gradients on the most likely characters at `shift`. Every
    y axis writes small numbers as 1e-4, never with an SI prefix (Plotly's default would print 100μ)."""
    order = terms["probs"].argsort(descending=True)[:top].tolist()
    chars = [labels[i] for i in order]
    ce_grad, z_grad = terms["cross-entropy gradient"], terms["z-loss gradient"]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=[
        t("hyperparameters.fig.z_title", ce=terms["cross-entropy"]),
        t("hyperparameters.fig.ce_grad_title", total=ce_grad.sum().item()),
        t("hyperparameters.fig.z_grad_title", total=z_grad.sum().item())])
    fig.add_scatter(x=sweep["shift"], y=sweep["z-loss"], mode="lines", line_color="#9467bd", name="z-loss",
                    hovertemplate=t("hyperparameters.fig.z_hover"), row=1, col=1)
    dotted_vline(fig, shift, col=1)
    bar_hover = "'%{x}': %{y:.2e}<extra></extra>"
    fig.add_bar(x=chars, y=ce_grad[order].numpy(), marker_color="#1f77b4", name="cross-entropy",
                hovertemplate=bar_hover, row=1, col=2)
    fig.add_bar(x=chars, y=z_grad[order].numpy(), marker_color="#9467bd", name="z-loss", hovertemplate=bar_hover,
                row=1, col=3)
    fig.update_xaxes(title_text=t("hyperparameters.fig.shift"), row=1, col=1)
    for col in (2, 3):  # every character named, small and upright: a bar is about 12 px wide on a projector
        fig.update_xaxes(title_text=t("hyperparameters.fig.likely"), type="category", tickmode="array", tickvals=chars,
                         ticktext=chars, tickangle=0, tickfont=dict(size=10), row=1, col=col)
    fig.update_yaxes(exponentformat="e")
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), showlegend=False)
    return fig


# --- Multi-head page --------------------------------------------------------------------------------------

WORD_TICK = 8  # the most characters one key label spans: a longer run without a blank is named in pieces
BLANKS = set(VISIBLE.values())  # whitespace as gptcore.tokenizer.visible shows it: where one key label ends


def word_ticks(labels: list[str]) -> list[tuple[int, str]]:
    """(position, text) key labels that name whole words: a projector's mosaic has about 5 px a character, too
    narrow for a label each, but a word written once over the middle of its characters reads as the text does."""
    ticks, start = [], 0
    for end in range(len(labels) + 1):
        if end == len(labels) or labels[end] in BLANKS or end - start == WORD_TICK:
            if end > start:
                ticks.append(((start + end - 1) // 2, "".join(labels[start:end])))
            start = end + (end < len(labels) and labels[end] in BLANKS)
    return ticks


def head_grid(patterns, labels: list[str], titles: list[str], x_title: str, y_title: str, columns: int = 2,
              hover: str = "%{y} → %{x}: %{z:.3f}<extra></extra>") -> go.Figure:
    """Attention patterns (H, T, T) of one layer as one mosaic, `columns` heads to a row, characters on both axes.

    One heatmap on one pair of axes, the heads' blocks apart by a blank gap: the browser lays out and measures the
    tick labels of every axis, so a subplot per head (eight axes of T labels) would take most of the page's drawing.
    Each axis is categorical: position i of block b is named "i 'c'" plus b zero-width spaces (invisible, but a
    name of its own), so the hover, the page's template (%{y} the query, %{x} the key), names both characters."""
    patterns = patterns.detach().float().numpy() if isinstance(patterns, torch.Tensor) else np.asarray(patterns)
    heads, T = len(patterns), len(labels)
    rows = -(-heads // columns)
    gap = max(2, T // 12)
    z = np.full((rows * (T + gap) - gap, columns * (T + gap) - gap), np.nan)
    for h, pattern in enumerate(patterns):
        top, left = h // columns * (T + gap), h % columns * (T + gap)
        z[top:top + T, left:left + T] = pattern
    fig = go.Figure(go.Heatmap(z=z, x=mosaic_names(labels, columns, gap), y=mosaic_names(labels, rows, gap), zmin=0,
                               zmax=1, colorscale="Blues", hoverongaps=False, hovertemplate=hover))
    for h, title in enumerate(titles):  # each head's title over its block (positions on a category axis: indices),
        # in lines as wide as its block on a projector, so that two titles side by side never run into each other
        fig.add_annotation(x=h % columns * (T + gap) + (T - 1) / 2, y=h // columns * (T + gap) - 0.5,
                           text=broken_lines(title, TITLE_ROOM / columns - 80, 12), font=dict(size=12),
                           showarrow=False, yanchor="bottom", yshift=4)
    # no grid: it would run through the gaps between the blocks
    axis = dict(type="category", tickmode="array", tickangle=0, tickfont=dict(size=12), showgrid=False)
    # every other word a line lower, so that neighbours never run into each other (the hover names each key)
    names, words = tick_names(labels, columns), word_ticks(labels)
    fig.update_xaxes(tickvals=[names[b * T + i] for b in range(columns) for i, _ in words],
                     ticktext=[("<br>" if n % 2 else "") + word for _ in range(columns) for n, (_, word) in
                               enumerate(words)], title=x_title, **{**axis, "tickfont": dict(size=11), "ticks": ""})
    fig.update_yaxes(tickvals=tick_names(labels, rows), ticktext=labels * rows, autorange="reversed", title=y_title,
                     **axis)
    side = max(360, 14 * T + 80)  # about 14 px per character keeps every tick label readable
    fig.update_layout(height=rows * side, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10))
    return fig


def tick_names(labels: list[str], blocks: int) -> list[str]:
    """The category names of every block's positions, block after block."""
    return [f"{i} '{c}'" + "\u200b" * b for b in range(blocks) for i, c in enumerate(labels)]


def mosaic_names(labels: list[str], blocks: int, gap: int) -> list[str]:
    """One axis of the mosaic: each block's position names, and between blocks `gap` blank names of their own."""
    names = tick_names(labels, blocks)
    T = len(labels)
    out: list[str] = []
    for b in range(blocks):
        if b:
            out += ["\u2060" * (b * gap + g + 1) for g in range(gap)]  # word joiners: invisible, and unique
        out += names[b * T:(b + 1) * T]
    return out


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


def rope_pair_figure(path, sweep, steps: int, texts: dict) -> go.Figure:
    """One channel pair of q rotated to positions 0..steps: arrows from the origin, the swept arc, a circle.
    texts: the page's words for "title", "x_title", "y_title", "circle", "swept" and "position" (hover)."""
    radius = float(np.hypot(path["x"][0], path["y"][0]))
    circle = np.linspace(0, 2 * np.pi, 200)
    fig = go.Figure()
    fig.add_scatter(x=radius * np.cos(circle), y=radius * np.sin(circle), mode="lines", hoverinfo="skip",
                    line=dict(color="lightgrey", dash="dot"), name=texts["circle"])
    fig.add_scatter(x=sweep["x"], y=sweep["y"], mode="lines", line=dict(color="#1f77b4", width=3),
                    name=texts["swept"], hoverinfo="skip")
    for row in path.itertuples():
        fig.add_scatter(x=[0, row.x], y=[0, row.y], mode="lines+markers", showlegend=False,
                        marker=dict(size=[0, 7], color=[row.position] * 2, colorscale="Viridis", cmin=0, cmax=steps),
                        line=dict(color="rgba(31,119,180,0.35)"),
                        hovertemplate=f"{texts['position']} {row.position}<extra></extra>")
    # the position labels sit on a ring outside the circle, clear of the arc and of the markers on it
    labels = pair_labels(path["angle (rad)"].tolist())
    ring, where = LABEL_RING * radius, np.arctan2(path["y"], path["x"])
    fig.add_scatter(x=ring * np.cos(where), y=ring * np.sin(where), mode="text",
                    text=labels, textfont=dict(size=11), showlegend=False, hoverinfo="skip")
    reach = 1.35 * radius
    fig.update_layout(height=480, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), xaxis_title=texts["x_title"],
                      yaxis_title=texts["y_title"], xaxis_range=[-reach, reach], yaxis_range=[-reach, reach],
                      yaxis_scaleanchor="x", legend=dict(orientation="h", y=-0.18, yanchor="top"), title=texts["title"])
    return fig


LABEL_RING = 1.18  # the radius of the position labels, as a multiple of the circle's


def frequencies_figure(freqs, names: dict, title: str, x_title: str) -> go.Figure:
    """Per-pair columns of `freqs` (column -> legend name) on one log axis, powers of ten written as 10ⁿ."""
    fig = go.Figure()
    for column, name in names.items():
        fig.add_scatter(x=freqs["pair"], y=freqs[column], mode="lines+markers", name=name)
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), yaxis_type="log", xaxis_title=x_title,
                      yaxis_exponentformat="power", legend=dict(orientation="h", y=-0.26, yanchor="top"), title=title)
    return fig


# --- FFN page ---------------------------------------------------------------------------------------------

ACTIVATION_COLORS = {"ReLU": "#7f7f7f", "GELU": "#2ca02c", "SiLU": "#d62728"}


def activation_figure(curves, shown: list[str]) -> go.Figure:
    """The activations picked, each over the same grid of z."""
    fig = go.Figure()
    for name in shown:
        fig.add_scatter(x=curves["z"], y=curves[name], name=name, mode="lines", line_color=ACTIVATION_COLORS[name])
    fig.update_layout(height=330, margin=dict(l=10, r=10, t=30, b=10), xaxis_title="z",
                      yaxis_title=t("ffn_swiglu.fig.activation"))
    return fig


def gate_figure(readout: dict, n_units: int) -> go.Figure:
    """The SiLU branch, the linear gate and their product (what W₂ receives) side by side, one colour scale."""
    panels = ["silu(w1 x)", "w3 x", "silu(w1 x) ⊙ w3 x"]
    fig = make_subplots(rows=1, cols=3, subplot_titles=panels, horizontal_spacing=0.06)
    limit = max(abs(readout[p][:, :n_units]).max() for p in panels)
    for col, name in enumerate(panels, start=1):
        fig.add_heatmap(z=readout[name][:, :n_units], colorscale="RdBu", zmid=0, zmin=-limit, zmax=limit,
                        showscale=col == 3, row=1, col=col,
                        hovertemplate=t("ffn_swiglu.fig.gate_hover") + "<extra>" + name + "</extra>")
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text=t("ffn_swiglu.fig.token"), row=1, col=1)
    fig.update_xaxes(title_text=t("ffn_swiglu.fig.unit"))
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10))
    return fig


def ffn_budget_figure(names: list[str], counted, d_model: int) -> go.Figure:
    """Parameters of each FFN variant, counted on the real module, against the 8·d² of the classic MLP."""
    fig = go.Figure(go.Bar(x=names, y=counted, marker_color=["#7f7f7f", "#d62728", "#ff9896"],
                           text=[f"{v:,}" for v in counted], textposition="auto",
                           hovertemplate="%{x}: %{y:,}<extra></extra>"))
    # the line's name right of the plot, clear of the bars (the last one reaches above the line)
    fig.add_hline(y=8 * d_model ** 2, line_dash="dot", annotation_text="8·d²", annotation_position="right")
    fig.update_layout(height=300, margin=dict(l=10, r=40, t=30, b=10), yaxis_title=t("ffn_swiglu.fig.parameters"))
    return fig


# --- Residual stream & norms page -------------------------------------------------------------------------

def race_loss_figure(loss, colors: dict, names: dict) -> go.Figure:
    """Per-step training loss of each variant (faint) and its moving average (bold); `names` labels the variants."""
    fig = go.Figure()
    for label, rows in loss.groupby("variant", sort=False):
        fig.add_scatter(x=rows["step"], y=rows["loss"], mode="lines", line=dict(color=colors[label], width=1),
                        opacity=0.25, showlegend=False, hoverinfo="skip")
        fig.add_scatter(x=rows["step"], y=rows["smoothed"], mode="lines", name=names[label], line_color=colors[label],
                        hovertemplate=t("residual_norm.fig.loss_hover"))
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), xaxis_title=t("residual_norm.fig.step"),
                      yaxis_title=t("residual_norm.fig.loss"), legend=dict(orientation="h", y=-0.2),
                      title=t("residual_norm.fig.loss_title"))
    return fig


def layer_figure(frame, colors: dict, names: dict, title: str, y_title: str, log: bool = False) -> go.Figure:
    """One line per variant over the layers. No legend: two of these stand side by side under the loss chart,
    which names the same colours, and a legend below each would take the height its plot needs."""
    fig = go.Figure()
    for label, rows in frame.groupby("variant", sort=False):
        fig.add_scatter(x=rows["layer"], y=rows["norm"], mode="lines+markers", name=names[label],
                        line_color=colors[label], showlegend=False,
                        hovertemplate=t("residual_norm.fig.layer_hover"))
    dtick = 1 if frame["layer"].nunique() <= 16 else None
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), title=title,
                      xaxis=dict(title=t("residual_norm.fig.layer"), dtick=dtick),
                      yaxis=dict(title=y_title, type="log" if log else "linear", exponentformat="power"))
    return fig


NORM_VECTOR_COLORS = ("#7f7f7f", "#1f77b4", "#d62728", "#ff9896")


def norm_vector_figure(outputs) -> go.Figure:
    """The vector and its three normalised versions, component by component."""
    fig = go.Figure()
    for column, color in zip(outputs.columns, NORM_VECTOR_COLORS):
        fig.add_bar(x=list(range(len(outputs))), y=outputs[column], name=column, marker_color=color)
    fig.update_layout(barmode="group", height=340, margin=dict(l=10, r=10, t=30, b=10),
                      xaxis_title=t("residual_norm.fig.component"), yaxis_title=t("residual_norm.fig.value"))
    return fig


# --- Assembled GPT page -----------------------------------------------------------------------------------

def merge_layout_figure(values, title: str) -> go.Figure:
    """Where each channel of the merged (T, H·d_head) tensor came from. A value v = 100·h + t is printed as
    'h{h} t{t}' and coloured by its head h; past 16 channels the two parts stack, so every cell stays legible."""
    values = values.detach().numpy() if isinstance(values, torch.Tensor) else values
    cols = len(values[0])
    narrow = cols > 16
    labels = [[f"h{int(v) // 100}{'<br>' if narrow else ' '}t{int(v) % 100}" for v in row] for row in values.tolist()]
    head = values // 100
    n_heads = int(head.max()) + 1
    palette = qualitative.Pastel1 * 2
    scale = [[h / max(1, n_heads - 1), palette[h]] for h in range(max(2, n_heads))]  # one colour per head
    fig = go.Figure(go.Heatmap(z=head, text=labels, texttemplate="%{text}", colorscale=scale, zmin=0,
                               zmax=max(1, n_heads - 1), showscale=False, xgap=1, ygap=1, textfont=dict(size=12),
                               hovertemplate=t("assembled_gpt.fig.merge_hover")))
    fig.update_layout(title=title, height=90 + (56 if narrow else 40) * len(values),
                      margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title=t("assembled_gpt.fig.channel"), dtick=1)
    fig.update_yaxes(title=t("assembled_gpt.fig.row"), autorange="reversed", dtick=1)
    return fig


def shares_figure(shares, total: int) -> go.Figure:
    """Where the parameters live: one bar per part, its count and share printed on it."""
    fig = go.Figure(go.Bar(x=shares["parameters"], y=[say(p) for p in shares["part"]], orientation="h",
                           text=[f"{p:,} ({s:.1%})" for p, s in zip(shares["parameters"], shares["share"])],
                           textposition="auto", marker_color="#1f77b4", hovertemplate="%{y}: %{x:,}<extra></extra>"))
    fig.update_layout(height=300, margin=dict(l=10, r=10, t=40, b=10), xaxis_title=t("assembled_gpt.fig.parameters"),
                      yaxis_autorange="reversed", title=t("assembled_gpt.fig.shares_title", total=total))
    return fig


NODE_COLORS = {"embedding": "#dbe9f6", "norm": "#eeeeee", "attention": "#fde0c5", "ffn": "#d9f0d3", "add": "#ffffff"}


LINE_PX, GAP_PX, ADD_PX = 15, 16, 20  # a label's line, the arrow between two nodes, the + circle (diagram pixels)
BOX_X, TRUNK_X, SKIP_X = (0.16, 0.68), 0.42, 0.76  # across the width: the boxes, the trunk, the residual line


def node_heights(nodes: list) -> list:
    """Each node's height in pixels: a box holds its label's lines; the input and output are one line of text."""
    return [ADD_PX if n["kind"] == "add" else LINE_PX + 4 if n["kind"] == "io"
            else LINE_PX * (say(n["label"]).count("<br>") + 1) + 10 for n in nodes]


def diagram_figure(diagram: dict) -> go.Figure:
    """The chain top to bottom, each label on its lines inside a box as wide as half the chart, so that the same
    text fits a projector's narrow page and a wide screen; dashed residual lines at the right of the boxes."""
    nodes, first, last = diagram["nodes"], *diagram["block"]
    heights = node_heights(nodes)
    band = 26  # above the block: its label
    tops, y = [], 6
    for i, h in enumerate(heights):
        y += band if i == first else 0
        tops.append(y)
        y += h + (GAP_PX if i < len(nodes) - 1 else 0)
        y += 10 if i == last else 0
    total = y + 6
    mid = [top + h / 2 for top, h in zip(tops, heights)]
    fig = go.Figure()
    fig.add_shape(type="rect", x0=0.04, x1=0.96, y0=tops[first] - band + 4, y1=tops[last] + heights[last] + 8,
                  line=dict(dash="dash", color="#999"))
    fig.add_annotation(x=0.06, y=tops[first] - band + 6, text=say(diagram["block_label"]), showarrow=False,
                       xanchor="left", yanchor="top", font=dict(size=12, color="#222"))
    for i, node in enumerate(nodes):
        label = say(node["label"])
        if node["kind"] == "add":
            fig.add_shape(type="circle", xref="x", yref="y", xsizemode="pixel", ysizemode="pixel", xanchor=TRUNK_X,
                          yanchor=mid[i], x0=-ADD_PX / 2, x1=ADD_PX / 2, y0=-ADD_PX / 2, y1=ADD_PX / 2,
                          fillcolor=NODE_COLORS["add"], line=dict(color="#666", width=1))
        elif node["kind"] in NODE_COLORS:
            fig.add_shape(type="rect", x0=BOX_X[0], x1=BOX_X[1], y0=tops[i], y1=tops[i] + heights[i],
                          fillcolor=NODE_COLORS[node["kind"]], line=dict(color="#666", width=1), layer="below")
        else:  # the input and the output: text on one line, no box
            label = label.replace("<br>", " ")
        fig.add_annotation(x=TRUNK_X, y=mid[i], text=label, showarrow=False, font=dict(size=11, color="#222"))
        if i:
            fig.add_annotation(x=TRUNK_X, y=tops[i], ax=TRUNK_X, ay=tops[i - 1] + heights[i - 1], xref="x",
                               yref="y", axref="x", ayref="y", text="", showarrow=True, arrowhead=2, arrowwidth=1.2)
    for a, b in diagram["residuals"]:
        leave = tops[a + 1] - GAP_PX / 2  # the trunk just above the branch it skips (inside the block)
        fig.add_shape(type="path", path=f"M {TRUNK_X},{leave} L {SKIP_X},{leave} L {SKIP_X},{mid[b]}",
                      line=dict(dash="dot", color="#1f77b4"))
        fig.add_annotation(x=TRUNK_X, y=mid[b], ax=SKIP_X, ay=mid[b], xref="x", yref="y", axref="x", ayref="y",
                           text="", showarrow=True, arrowhead=2, arrowcolor="#1f77b4", standoff=ADD_PX / 2)
        fig.add_annotation(x=SKIP_X + 0.01, y=(leave + mid[b]) / 2, text=t("assembled_gpt.fig.residual"),
                           showarrow=False, xanchor="left", font=dict(size=10, color="#1f77b4"))
    fig.update_xaxes(visible=False, range=[0, 1], fixedrange=True)
    fig.update_yaxes(visible=False, range=[total, 0], fixedrange=True)  # one unit a pixel, top to bottom
    fig.update_layout(height=total, margin=dict(l=0, r=0, t=0, b=0), plot_bgcolor="white", showlegend=False)
    return fig
