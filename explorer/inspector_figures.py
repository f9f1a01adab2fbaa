"""Plotly figures for the Inspect page, built from the tensors and tables of gptcore.inspector.

Every text a reader sees (titles, axis titles, legends, hover templates) comes from the inspector catalog. The
page redraws these on every click, so they stay small: one hover template per trace rather than a string per
cell, and the overview grid quantised to whole percent (uint8), a quarter of float32's bytes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from explorer.i18n import catalog, language, t
from gptcore.inspector import head_names

ATTENTION_SCALE = "Blues"
SCORE_SCALE = "Viridis"
SCORES = ("previous_token", "first_token", "induction")  # the head finder's columns, in the order shown
ATLAS_SCORES = ("induction", "previous_token", "first_token")  # the atlas's panels: what a learner looks for first
LAYER_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
HEAD_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
HEAD_MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "star")


def score_name(column: str) -> str:
    return t(f"inspector.finder.roles.{column}")


def worded(key: str, tokens: bool, **values) -> str:
    """t(key, …), or for a model that reads tokens rather than characters its entry under inspector.tokens, where
    the wording differs ("next token" for "next character")."""
    if tokens:
        variant = key.replace("inspector.", "inspector.tokens.", 1)
        if variant in catalog(language()):
            return t(variant, **values)
    return t(key, **values)


def percent(patterns: torch.Tensor) -> np.ndarray:
    """Attention weights as whole percent, uint8: what the grid draws (the enlarged head keeps every digit)."""
    return np.rint(patterns.float().numpy() * 100).astype(np.uint8)


def grid_gaps(T: int) -> tuple[int, int]:
    """(cells between the columns of heads, cells between the rows of layers): a row's gap holds its panel titles
    and as much space again, so that each title sits plainly on its own map rather than between two."""
    return max(1, round(0.05 * T)), max(6, round(0.22 * T))


def grid_layout(patterns: torch.Tensor) -> np.ndarray:
    """The (L, H, T, T) patterns in whole percent as one (rows, columns) image, the layers one below the other
    and the heads side by side, separated by grid_gaps cells of 0 (blank); its inverse is grid_panels."""
    L, H, T, _ = patterns.shape
    col, row = grid_gaps(T)
    image = np.zeros((L * (T + row), H * (T + col) - col), np.uint8)
    for layer, per_layer in enumerate(percent(patterns)):
        for head, pattern in enumerate(per_layer):
            image[row + layer * (T + row):][:T, head * (T + col):][:, :T] = pattern
    return image


def grid_panels(image: np.ndarray, n_layer: int, n_head: int, T: int) -> np.ndarray:
    """(L, H, T, T) back from a grid_layout image."""
    col, row = grid_gaps(T)
    return np.stack([np.stack([image[row + layer * (T + row):][:T, head * (T + col):][:, :T] for head in range(n_head)])
                     for layer in range(n_layer)])


def axis_names(n: int, T: int, gap: int, gap_first: bool, name) -> list[str]:
    """One category name per row (or column) of the grid: name(panel, position) for the cells of a panel, and
    for each gap cell a distinct run of spaces (a category needs a unique name; this one shows as nothing)."""
    names, gaps = [], 0
    for panel in range(n):
        cells = [name(panel, i) for i in range(T)]
        blank = []
        for _ in range(gap if gap_first or panel < n - 1 else 0):
            gaps += 1
            blank.append(" " * gaps)
        names += blank + cells if gap_first else cells + blank
    return names


GRID_WIDTH = 540  # px: the attention grid's width on a 1024-pixel projector's page (what sets its height)
GRID_TOP, GRID_BOTTOM = 60, 60  # px: the title; the colour bar


def attention_grid(patterns: torch.Tensor, selected: tuple[int, int] | None = None,
                   title: str | None = None, first_layer: int = 0) -> go.Figure:
    """Every head's (query × key) pattern in one grid; queries run down, keys across, as in the matrix. The
    patterns may be some layers only (a model of many heads shows one at a time): first_layer numbers them.

    One heatmap trace holds all the panels (grid_layout) in whole percent: a grid of 16 subplots takes the
    browser about three times as long to draw. Panel titles are annotations and each panel is outlined; the
    selected head's title is bold and its outline red. The hover reads the row's and the column's names.
    """
    L, H, T, _ = patterns.shape
    col, row = grid_gaps(T)
    row_name, column_name = (t(f"inspector.fig.{name}", layer="{0}", head="{0}", position="{1}").format
                             for name in ("grid_row", "grid_column"))
    y = axis_names(L, T, row, True, lambda panel, i: row_name(panel + first_layer, i))
    x = axis_names(H, T, col, False, column_name)
    titles, outlines = [], []  # (given to the layout at once: add_annotation and add_shape copy the list each call)
    for i, name in enumerate(head_names(first_layer + L, H)[first_layer * H:]):
        layer, head = divmod(i, H)
        left, top = head * (T + col), layer * (T + row) + row
        chosen = selected == (first_layer + layer, head)
        titles.append(dict(text=f"<b>▶ {name}</b>" if chosen else name, x=left + (T - 1) / 2, y=top - 0.5,
                           xref="x", yref="y", yanchor="bottom", showarrow=False, font=dict(size=14)))
        outlines.append(dict(type="rect", x0=left - 0.5, x1=left + T - 0.5, y0=top - 0.5, y1=top + T - 0.5,
                             xref="x", yref="y",
                             line=dict(color="#d62728" if chosen else "#d0d7e2", width=2 if chosen else 1)))
    axis = dict(showticklabels=False, ticks="", showgrid=False, zeroline=False)
    image = grid_layout(patterns)
    # Square cells, so the height follows the width the grid is drawn at: GRID_WIDTH, a projector's page. A wider
    # page centres it; a height for a wide page would leave bands of white above and below it on a projector.
    # The colour bar lies under the grid, so the grid has the page's whole width.
    layout = dict(
        title=dict(text=title or t("inspector.fig.grid_title")), annotations=titles, shapes=outlines,
        height=round(GRID_TOP + GRID_WIDTH * image.shape[0] / image.shape[1] + GRID_BOTTOM),
        margin=dict(l=10, r=10, t=GRID_TOP, b=GRID_BOTTOM), plot_bgcolor="white",
        xaxis=dict(type="category", **axis),
        yaxis=dict(type="category", autorange="reversed", scaleanchor="x", constrain="domain", **axis),
        coloraxis=dict(colorscale=ATTENTION_SCALE, cmin=0, cmax=100, colorbar=dict(
            title=dict(text=t("inspector.fig.weight_percent"), side="right"), ticksuffix="%", orientation="h",
            x=1, xanchor="right", y=-12 / GRID_WIDTH, yanchor="top", len=0.5, thickness=12)))
    return go.Figure(go.Heatmap(z=image, x=x, y=y, coloraxis="coloraxis",
                                hovertemplate=t("inspector.fig.grid_hover") + "<extra></extra>"), layout)


def word_ticks(labels: list[str]) -> tuple[list[float], list[str]]:
    """Ticks that write each word of a text of characters once, centred over its columns (a space shown as ␣ ends a
    word and stays unwritten): the places (column numbers) and the words."""
    places, words, start = [], [], 0
    for end, label in enumerate([*labels, "␣"]):
        if label == "␣":
            if end > start:
                places.append((start + end - 1) / 2)
                words.append("".join(labels[start:end]))
            start = end + 1
    return places, words


def head_heatmap(pattern: torch.Tensor, labels: list[str], title: str, query: int | None = None) -> go.Figure:
    """One head's pattern with its characters written along both axes, both in the hover, the query row boxed.

    Rows are 14 px high at full context (18 px for short texts) and the cells fill the width rather than stay
    square: across the top a short text names every key character in a 12 px font, a long one writes each word
    once over its columns in an 11 px font (a column is then narrower than a character); the query characters
    down the left get an upright 12-14 px font on a cell as high as the row, easy to read and to click. The axes
    are categories named "position 'character'", so the hover shows both without a T×T array of hover texts. The
    query characters are a scatter of their own (trace 1): a heatmap cannot be selected, a scatter point can, so a
    click on one makes it the query (its customdata is the position).
    """
    T = len(labels)
    long = T > 64
    row = 14 if long else 18  # px per query row
    names = [f"{i} '{c}'" for i, c in enumerate(labels)]
    widest = max(map(len, labels), default=1)
    # tokens of several characters: a query strip wide enough for them, and the keys upright once they would touch
    strip = max(0.032, min(0.25, (7 * min(widest, 10) + 14) / 560))  # (of a chart 560 px wide: a 1024 px screen)
    upright = widest > 1 and T * min(widest, 10) > 90
    ticks = [label if len(label) <= 10 else label[:9] + "…" for label in labels]
    # a long text of characters: a key column is too narrow for a readable character, so each word is written once
    # across its own columns; a short one (or tokens) names every column
    key_ticks = word_ticks(labels) if long and widest == 1 else (names, ticks)
    key_font = dict(size=11 if long else 12, family="monospace")
    query_font = dict(size=12 if long else 14, family="monospace", color="#1f2937")
    heatmap = go.Heatmap(
        z=pattern.float().numpy(), x=names, y=names, zmin=0, zmax=1, colorscale=ATTENTION_SCALE,
        colorbar=dict(title=dict(text=t("inspector.fig.weight"), side="right"), orientation="h", thickness=10,
                      lenmode="pixels", len=300, x=1, xanchor="right", yref="container", y=0, yanchor="bottom"),
        hovertemplate=t("inspector.fig.head_hover") + "<extra></extra>")
    rows = go.Scatter(x=[0] * T, y=names, xaxis="x2", mode="markers+text", text=ticks, textfont=query_font,
                      textposition="middle center", customdata=list(range(T)),
                      marker=dict(size=row - 1, color="rgba(214, 39, 40, 0.08)", symbol="square",
                                  line=dict(color="rgba(214, 39, 40, 0.25)", width=1)),
                      selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)),
                      hovertemplate=t("inspector.fig.query_hover") + "<extra></extra>", showlegend=False)
    # the band above the plot holds the key characters and their axis title, so the title stays clear of them
    # wherever it is placed; a fixed range: autorange would pad it for the strip's markers
    keys_band = 70 + (7 * min(widest, 10) if upright else 0)
    # the colour bar lies under the plot, so that the key columns have the whole width (its title beside the bar)
    margin_top, margin_bottom = 60, 50
    height = row * T + 60 + margin_bottom + keys_band
    # the query row boxed: the row "What one position attends to" spells out below
    box = [] if query is None else [dict(type="rect", x0=-0.5, x1=T - 0.5, y0=query - 0.5, y1=query + 0.5, xref="x",
                                         yref="y", line=dict(color="#d62728", width=2))]
    layout = dict(  # (one dict, validated once: each update_* call validates again)
        xaxis=dict(title=t("inspector.fig.key_axis"), side="top", tickangle=-90 if upright else 0, type="category",
                   tickmode="array", tickvals=key_ticks[0], ticktext=key_ticks[1], showgrid=False, tickfont=key_font,
                   ticks="",
                   domain=[strip + 0.008, 1]),
        xaxis2=dict(domain=[0, strip], range=[-0.5, 0.5], visible=False, fixedrange=True),
        yaxis=dict(title=t("inspector.fig.query_axis"), range=[T - 0.5, -0.5], type="category", showticklabels=False,
                   showgrid=False, ticks="", domain=[0, 1 - keys_band / (height - margin_top - margin_bottom)],
                   anchor="free", position=0),  # (at the left edge: its title left of the query characters)
        shapes=box, title=title, height=height, margin=dict(l=40, r=10, t=margin_top, b=margin_bottom),
        clickmode="event+select")
    return go.Figure([heatmap, rows], layout)


def compact_map(pattern: torch.Tensor, labels: list[str], title: str, query: int | None = None,
                height: int = 360) -> go.Figure:
    """One head's pattern in a fixed height, for two side by side: no tick per token (the hover names both), the
    query's row boxed."""
    T = len(labels)
    names = [f"{i} '{c}'" for i, c in enumerate(labels)]
    box = [] if query is None else [dict(type="rect", x0=-0.5, x1=T - 0.5, y0=query - 0.5, y1=query + 0.5, xref="x",
                                         yref="y", line=dict(color="#d62728", width=2))]
    hidden = dict(type="category", showticklabels=False, ticks="", showgrid=False)
    return go.Figure(go.Heatmap(z=pattern.float().numpy(), x=names, y=names, zmin=0, zmax=1,
                                colorscale=ATTENTION_SCALE, showscale=False,
                                hovertemplate=t("inspector.fig.head_hover") + "<extra></extra>"),
                     dict(title=title, height=height, margin=dict(l=30, r=10, t=50, b=30), shapes=box,
                          xaxis=dict(title=t("inspector.fig.key_axis"), **hidden),
                          yaxis=dict(title=t("inspector.fig.query_axis"), autorange="reversed", **hidden)))


def prediction_bars(top: pd.DataFrame, title: str, tokens: bool = False, height: int = 400) -> go.Figure:
    """The k most likely next characters (or tokens); every bar named, however many (the font shrinks from 16 to
    11 px)."""
    k = len(top)
    labels = top["label"].tolist()
    # many bars: the percentages stand upright, and the bars below 0.1 % (most of them) go without one
    text = [f"{p:.1%}" if k <= 20 or p >= 0.001 else "" for p in top["probability"]]
    fig = go.Figure(go.Bar(x=labels, y=top["probability"], text=text, textposition="outside",
                           textangle=0 if k <= 20 else -90, textfont=dict(size=12 if k <= 20 else 11),
                           constraintext="none", cliponaxis=False, marker_color="#4c78a8",
                           hovertemplate=t("inspector.fig.bar_hover") + "<extra></extra>"))
    words = max(map(len, labels), default=1) > 2  # (a real model's tokens: slanted, or their names would touch)
    fig.update_xaxes(type="category", tickmode="array", tickvals=labels, ticktext=labels, tickangle=-40 if words else 0,
                     tickfont=dict(size=13 if words else 16 if k <= 30 else 13 if k <= 50 else 11, family="monospace"),
                     title=worded("inspector.fig.next_char", tokens))
    headroom = 1.2 if k <= 20 else 1.35  # room for the percentages above the bars
    fig.update_yaxes(title=t("inspector.fig.probability"),
                     range=[0, min(1.1, float(top["probability"].max()) * headroom + 0.02)])
    fig.update_layout(title=title, height=height, margin=dict(t=60, b=10))
    return fig


def loss_bars(losses: torch.Tensor, labels: list[str], tokens: bool = False) -> go.Figure:
    """Loss of each character (or token) as a bar over its position: the same numbers as the coloured text."""
    values = losses.numpy()
    fig = go.Figure(go.Bar(x=list(range(len(labels))), y=values, customdata=labels, marker_color=values,
                           marker_colorscale="Reds", hovertemplate=t("inspector.fig.loss_hover") + "<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels,
                     tickfont=dict(size=10, family="monospace"), tickangle=0, title=t("inspector.fig.position"))
    fig.update_yaxes(title=t("inspector.fig.loss_axis"))
    fig.update_layout(title=worded("inspector.fig.loss_title", tokens), height=340, margin=dict(t=60, b=10))
    return fig


def head_atlas(scores: pd.DataFrame, n_layer: int, n_head: int, selected: tuple[int, int] | None = None,
               clear: float | None = None) -> go.Figure:
    """Every head's three scores as three layers × heads maps side by side; a click on a cell picks that head.

    A heatmap cannot be selected, so each map has a scatter over it (traces 1, 3, 5), one transparent square a
    cell, whose customdata is (layer, head, score): Plotly finds the nearest point to a click, drawn or not. The
    selected head is outlined in red on every map, and a head scoring at least `clear` is marked with a dot.
    Small models show each score in its cell; a model of many heads only in the hover.
    """
    fig = make_subplots(rows=1, cols=len(ATLAS_SCORES), subplot_titles=[score_name(c) for c in ATLAS_SCORES],
                        shared_yaxes=True, horizontal_spacing=0.04)
    heads, layers = [f"H{h}" for h in range(n_head)], [f"L{n}" for n in range(n_layer)]
    ticks = [str(h) for h in range(n_head)]  # (the heads' numbers alone: at 1024 px a map has 20 px a head)
    row_px = max(18, min(44, 640 // n_layer))
    few = n_layer * n_head <= 64
    hover = t("inspector.fig.atlas_hover") + "<extra></extra>"
    layer_of, head_of = np.repeat(np.arange(n_layer), n_head), np.tile(np.arange(n_head), n_layer)
    shapes = []
    for i, column in enumerate(ATLAS_SCORES):
        values = scores[column].to_numpy(dtype=float)
        fig.add_trace(go.Heatmap(z=values.reshape(n_layer, n_head), x=heads, y=layers, coloraxis="coloraxis",
                                 texttemplate="%{z:.2f}" if few else None, hoverinfo="skip"), row=1, col=i + 1)
        dots = [7 if clear is not None and not few and v >= clear else 0.1 for v in values]  # (0.1: unseen)
        fig.add_trace(go.Scatter(
            x=[heads[h] for h in head_of], y=[layers[n] for n in layer_of], mode="markers",
            customdata=np.stack([layer_of, head_of, values], 1).tolist(),  # (a plain list: a typed array would
            # come back from a click as an object of numbered keys)
            hovertemplate=hover.replace("{score}", score_name(column)),
            marker=dict(symbol="circle", size=dots, color="white",
                        line=dict(color="#222", width=[1 if d > 1 else 0 for d in dots])),
            selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)), showlegend=False),
            row=1, col=i + 1)
        if selected is not None:
            axis = "" if i == 0 else str(i + 1)
            shapes.append(dict(type="rect", xref=f"x{axis}", yref=f"y{axis}", x0=selected[1] - 0.5,
                               x1=selected[1] + 0.5, y0=selected[0] - 0.5, y1=selected[0] + 0.5,
                               line=dict(color="#d62728", width=3)))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", tickmode="array", tickvals=heads, ticktext=ticks, tickangle=0)
    fig.update_xaxes(title=t("inspector.attention.head"), col=2)
    fig.update_layout(title=t("inspector.fig.atlas_title"), height=170 + row_px * n_layer, margin=dict(t=80, b=40),
                      shapes=shapes, clickmode="event+select", hoverdistance=-1,
                      coloraxis=dict(colorscale=SCORE_SCALE, cmin=0, cmax=1,
                                     colorbar=dict(title=dict(text=t("inspector.fig.score")))))
    return fig


def head_style(layer: int, head: int) -> dict:
    """A colour per layer and a dash and marker per head: 16 heads, 16 looks, and a head's layer at a glance."""
    return dict(line=dict(color=LAYER_COLOURS[layer % len(LAYER_COLOURS)], dash=HEAD_DASHES[head % len(HEAD_DASHES)],
                          width=2),
                marker=dict(symbol=HEAD_MARKERS[head % len(HEAD_MARKERS)], size=7))


PANEL_HEIGHT = 300  # px of the score panels over training
AXIS_BAND = 70  # px under them for the step numbers and the axis title
LEGEND_ROW = 30  # px per row of the legend under them


def scores_over_training_figure(long: pd.DataFrame) -> go.Figure:
    """Each score (a panel) of every head (a line) at every saved step; a legend entry hides a head everywhere."""
    fig = make_subplots(rows=1, cols=len(SCORES), subplot_titles=[score_name(c) for c in SCORES],
                        shared_yaxes=True, horizontal_spacing=0.03)
    hover = t("inspector.fig.training_hover") + "<extra></extra>"
    heads = long[["head", "layer", "head_index"]].drop_duplicates().sort_values(["layer", "head_index"])
    for i, column in enumerate(SCORES):
        frame = long[long["score"] == column]
        for head, layer, index in heads.itertuples(index=False):
            rows = frame[frame["head"] == head].sort_values("step")
            fig.add_trace(go.Scatter(x=rows["step"], y=rows["value"], mode="lines+markers", name=head,
                                     legendgroup=head, showlegend=i == 0, hovertemplate=hover.replace("{head}", head),
                                     **head_style(int(layer), int(index))), row=1, col=i + 1)
    fig.update_yaxes(range=[0, 1])
    fig.update_yaxes(title=t("inspector.fig.score"), col=1)
    fig.update_xaxes(title=t("inspector.fig.step"))
    # a vertical legend of 16+ heads would outgrow the plot and scroll; below the panels it wraps, a row per layer.
    # It stands at the chart's foot, in a bottom margin made for its rows, clear of the axes' titles at any height.
    n_head = int(heads["head_index"].max()) + 1
    per_row = max(n_head, 4)
    legend_rows = -(-len(heads) // per_row)
    bottom = AXIS_BAND + LEGEND_ROW * (legend_rows + 1)  # (+1: the legend's title)
    fig.update_layout(title=t("inspector.fig.training_title"), height=80 + PANEL_HEIGHT + bottom,
                      margin=dict(t=80, b=bottom),
                      legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0,
                                  entrywidth=1 / per_row - 0.01,
                                  entrywidthmode="fraction", font=dict(size=13, family="monospace"),
                                  title=dict(text=t("inspector.fig.legend_title"), side="top")))
    return fig
