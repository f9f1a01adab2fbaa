"""Plotly figures (and two small HTML blocks) for the Trace page, drawn from gptcore.interp's stages and tables.

Every figure is sized to be read at 1440×900 beside the sidebar: bars or small heatmaps, the exact value of each
cell in its hover, no figure taller than a screen. Every word on them comes from the `trace.fig` catalog.
"""
from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
import torch
import torch.nn.functional as F

from explorer.i18n import t
from gptcore.interp import Stage, Trace
from gptcore.model import relu_squared

DIVERGING = "RdBu"  # negative red, positive blue, zero white: the colours of the concept pages
WEIGHTS = "Blues"
FONT = dict(size=13)
MONO = dict(family="monospace", size=13)
SECTION_COLOURS = {"input": "#72b7b2", "attention": "#4c78a8", "ffn": "#f58518", "output": "#54a24b"}
CURRENT = "#e45756"
ACTIVATIONS = {"swiglu": F.silu, "relu": F.relu, "gelu": F.gelu, "relu2": relu_squared}
WINDOW = 48  # positions a per-position figure shows at once, so each cell stays wide enough to read
WORD_WINDOW = 12  # … when the positions are tokens of several characters
LENS_WINDOW = 16  # positions of the logit lens, whose cells hold a guess each: readable on a 1024-pixel projector
CELL_TEXT = 5  # characters of a token a small cell shows (a longer one ends in …; its hover has all of it)
MANY = 32  # more heads than a bar chart names one by one: a layer × head grid shows them all, bars the largest
TOP = 24  # bars a chart of many components keeps: the largest by size
DIAGRAM_LAYERS = 6  # layers the pass diagram draws at once; the others fold into one row above and below


def _layout(fig: go.Figure, title: str, height: int, **kw) -> go.Figure:
    fig.update_layout(title=dict(text=title, font=dict(size=15)), height=height, font=FONT,
                      margin=dict(l=60, r=20, t=60, b=40), **kw)
    return fig


def wide(labels: list[str]) -> bool:
    """Are these position labels tokens of several characters (a BPE's words) rather than single characters?"""
    return max(map(len, labels), default=0) > 2


def window_size(labels: list[str]) -> int:
    return WORD_WINDOW if wide(labels) else WINDOW


def lens_window(labels: list[str]) -> int:
    return WORD_WINDOW if wide(labels) else LENS_WINDOW


def short(label: str, n: int = CELL_TEXT) -> str:
    return label if len(label) <= n else label[:n - 1] + "…"


def tick_angle(labels: list[str]) -> int:
    return -45 if wide(labels) else 0


def row_height(rows: int, roomy: int, tight: int = 22) -> int:
    """Pixels per row of a heatmap: roomy for a few rows, tight for the rows of a real model's 30 layers, so the
    figure stays about a screen tall and its labels stay readable."""
    return roomy if rows <= 16 else tight


def window(position: int, T: int, size: int = WINDOW) -> range:
    """`size` consecutive positions of 0…T-1 around `position` (all of them when T is small)."""
    start = min(max(0, position - size // 2), max(0, T - size))
    return range(start, min(T, start + size))


def position_names(labels: list[str], positions) -> list[str]:
    return [f"{i} '{labels[i]}'" for i in positions]


# --- the diagram of the whole pass ---------------------------------------------------------------------------------

def diagram_layers(tr: Trace, current: int, size: int = DIAGRAM_LAYERS) -> range:
    """The layers the diagram draws: `size` of them around the current stage's (all of them when there are few)."""
    n_layer = max((s.layer for s in tr.stages if s.layer is not None), default=-1) + 1
    stage = tr.stages[current]
    centre = stage.layer if stage.layer is not None else (0 if stage.section == "input" else n_layer - 1)
    first = min(max(0, centre - size // 2 + 1), max(0, n_layer - size))
    return range(first, min(n_layer, first + size))


def diagram_positions(tr: Trace, shown: range) -> list[tuple[int, int] | None]:
    """(column, row) of every stage: one row for the input, one per shown layer (after a folded row for the layers
    before them, if any), one for the output; None for a stage in a folded layer."""
    n_layer = max((s.layer for s in tr.stages if s.layer is not None), default=-1) + 1
    before = 1 if shown.start > 0 else 0
    output = 1 + before + len(shown) + (1 if shown.stop < n_layer else 0)
    columns: dict[int, int] = {}
    xy = []
    for stage in tr.stages:
        if stage.layer is not None and stage.layer not in shown:
            xy.append(None)
            continue
        row = 0 if stage.section == "input" else output if stage.section == "output" else \
            1 + before + stage.layer - shown.start
        xy.append((columns.get(row, 0), row))
        columns[row] = columns.get(row, 0) + 1
    return xy


def pass_diagram(tr: Trace, current: int, titles: list[str]) -> go.Figure:
    """Every stage as a box, in order, wired up; the current one lit and pointed at. A click selects a stage.

    A model deeper than DIAGRAM_LAYERS shows the layers around the current stage; the layers before and after fold
    into one row each, whose box jumps to the nearest folded layer."""
    shown = diagram_layers(tr, current)
    xy = diagram_positions(tr, shown)
    visible = [i for i, p in enumerate(xy) if p is not None]
    xs, ys = [xy[i][0] for i in visible], [xy[i][1] for i in visible]
    n_layer = max((s.layer for s in tr.stages if s.layer is not None), default=-1) + 1
    # every other label one line lower, so that neighbours' labels never run into each other on a narrow screen
    labels = [("<br>" if x % 2 else "") + t(f"trace.diagram.{tr.stages[i].step}") for i, x in zip(visible, xs)]
    colours = [CURRENT if i == current else SECTION_COLOURS[tr.stages[i].section] for i in visible]
    sizes = [34 if i == current else 24 for i in visible]
    shapes = ["×".join(map(str, s.shape)) or "1" for s in tr.stages]
    row_names = {0: t("trace.diagram.row_input"), max(ys): t("trace.diagram.row_output")}
    folds = []  # (row, name, the stage a click on the fold selects)
    if shown.start > 0:
        folds.append((1, t("trace.diagram.row_layers", first=0, last=shown.start - 1), shown.start - 1))
    if shown.stop < n_layer:
        folds.append((max(ys) - 1, t("trace.diagram.row_layers", first=shown.stop, last=n_layer - 1), shown.stop))
    row_names.update({1 + (1 if shown.start > 0 else 0) + i: t("trace.diagram.row_layer", layer=layer)
                      for i, layer in enumerate(shown)})
    row_names.update({row: name for row, name, _ in folds})
    n_rows = max(ys) + 1
    fig = go.Figure()
    # the vector's path: along each row (one row per block); a gap (None) where it moves on to the next row
    path_x, path_y = [], []
    for i, (x, y) in enumerate(zip(xs, ys)):
        if i and y != ys[i - 1]:
            path_x.append(None)
            path_y.append(None)
        path_x.append(x)
        path_y.append(y)
    fig.add_trace(go.Scatter(x=path_x, y=path_y, mode="lines", line=dict(color="#ccc", width=2), hoverinfo="skip",
                             showlegend=False))
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers+text", text=labels, textposition="bottom center", textfont=dict(size=12),
        customdata=[[i, titles[i], shapes[i]] for i in visible],
        marker=dict(symbol="square", size=sizes, color=colours, line=dict(color="white", width=1)),
        selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)),
        hovertemplate=t("trace.fig.diagram_hover") + "<extra></extra>", showlegend=False))
    if folds:
        first_stage = {s.layer: i for i, s in reversed(list(enumerate(tr.stages))) if s.layer is not None}
        fig.add_trace(go.Scatter(
            x=[0] * len(folds), y=[row for row, _, _ in folds], mode="markers+text", text=["⋮"] * len(folds),
            textposition="middle right", textfont=dict(size=16), showlegend=False,
            customdata=[[first_stage[layer], name, ""] for _, name, layer in folds],
            marker=dict(symbol="square", size=24, color="#ddd", line=dict(color="white", width=1)),
            selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)),
            hovertemplate=t("trace.fig.fold_hover") + "<extra></extra>"))
    at = visible.index(current)
    fig.add_annotation(x=xs[at], y=ys[at], text="▼", showarrow=False, yshift=26, font=dict(color=CURRENT, size=16))
    fig.update_xaxes(visible=False, range=[-0.7, max(xs) + 0.7], fixedrange=True)
    fig.update_yaxes(tickvals=list(range(n_rows)), ticktext=[row_names[r] for r in range(n_rows)], fixedrange=True,
                     showgrid=False, zeroline=False, range=[n_rows - 0.1, -0.75], tickfont=dict(size=13))
    fig.update_layout(height=100 + 58 * n_rows, margin=dict(l=110 if folds else 80, r=10, t=10, b=30), font=FONT,
                      clickmode="event+select", dragmode=False, plot_bgcolor="white")
    return fig


# --- a text to click a position on ----------------------------------------------------------------------------------

def text_strip(labels: list[str], selected: int, per_row: int = 64, shade: list[float] | None = None) -> go.Figure:
    """The text as a grid of cells, one per token, so a click picks a position: a square per character, or for
    tokens of several characters a bar as wide as the token, which shows where the tokenizer cut the text.

    shade (0..1 per cell) colours the cells; the selected cell is boxed in red.
    """
    if wide(labels):
        return _token_strip(labels, selected, shade)
    T = len(labels)
    y, x = map(list, zip(*word_wrapped(labels, per_row, gap=0)))
    colours = ["#f0f2f6"] * T if shade is None else [f"rgba(31, 119, 180, {min(max(s, 0), 1):.3f})" for s in shade]
    fig = go.Figure(go.Scatter(
        x=x, y=y, mode="markers+text", text=labels, textfont=MONO, customdata=list(range(T)),
        marker=dict(symbol="square", size=19, color=colours,
                    line=dict(color=[CURRENT if i == selected else "#ccc" for i in range(T)],
                              width=[3 if i == selected else 1 for i in range(T)])),
        selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)),
        hovertemplate=t("trace.fig.strip_hover") + "<extra></extra>", showlegend=False))
    rows = max(y) + 1
    fig.update_xaxes(visible=False, range=[-0.8, per_row - 0.2], fixedrange=True)
    fig.update_yaxes(visible=False, range=[rows - 0.5, -0.6], fixedrange=True)
    fig.update_layout(height=30 + 26 * rows, margin=dict(l=5, r=5, t=5, b=5), clickmode="event+select",
                      dragmode=False, plot_bgcolor="white")
    return fig


BREAKS = ("␣", "⏎", "⇥")  # how a space, a newline and a tab are shown: a row of the strip may end after one


def words(labels: list[str]) -> list[list[int]]:
    """The labels' indices grouped into words: a word ends after a space, newline or tab, and a token of several
    characters that starts with a space (a BPE's "␣cat") starts a new one."""
    groups: list[list[int]] = []
    for i, label in enumerate(labels):
        starts = i == 0 or labels[i - 1].endswith(BREAKS) or (len(label) > 1 and label.startswith(BREAKS))
        if starts:
            groups.append([])
        groups[-1].append(i)
    return groups


def word_wrapped(labels: list[str], per_row: int, gap: int) -> list[tuple[int, int]]:
    """(row, first column) of each label laid end to end, `gap` columns between, `per_row` columns a row. Rows break
    between words as a book does, inside a word only when it is longer than a row, and after every newline."""
    places, row, column = [], 0, 0
    for word in words(labels):
        if column and column + sum(len(labels[i]) + gap for i in word) - gap > per_row:
            row, column = row + 1, 0
        for i in word:
            if column and column + len(labels[i]) > per_row:
                row, column = row + 1, 0
            places.append((row, column))
            column += len(labels[i]) + gap
        if labels[word[-1]].endswith("⏎"):
            row, column = row + 1, 0
    return places


def _token_strip(labels: list[str], selected: int, shade: list[float] | None, per_row: int = 56) -> go.Figure:
    """text_strip for tokens of several characters: one horizontal bar per token, as wide as its label."""
    T = len(labels)
    places = word_wrapped(labels, per_row, gap=1)
    colours = ["#f0f2f6"] * T if shade is None else [f"rgba(31, 119, 180, {min(max(s, 0), 1):.3f})" for s in shade]
    fig = go.Figure(go.Bar(
        orientation="h", base=[c - 0.4 for _, c in places], x=[len(label) + 0.8 for label in labels],
        y=[r for r, _ in places], text=labels, textposition="inside", insidetextanchor="middle", textangle=0,
        textfont=MONO, constraintext="none", customdata=list(range(T)), width=0.8,
        marker=dict(color=colours, line=dict(color=[CURRENT if i == selected else "#bbb" for i in range(T)],
                                             width=[3 if i == selected else 1 for i in range(T)])),
        selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)),
        hovertemplate=t("trace.fig.strip_hover") + "<extra></extra>", showlegend=False))
    rows = places[-1][0] + 1
    fig.update_xaxes(visible=False, range=[-1, per_row + 1], fixedrange=True)
    fig.update_yaxes(visible=False, range=[rows - 0.5, -0.6], fixedrange=True)
    fig.update_layout(height=30 + 28 * rows, margin=dict(l=5, r=5, t=5, b=5), clickmode="event+select",
                      dragmode=False, plot_bgcolor="white", bargap=0)
    return fig


# --- one figure per kind of stage -------------------------------------------------------------------------------

def vector_bars(values: torch.Tensor, title: str) -> go.Figure:
    v = values.float().numpy()
    fig = go.Figure(go.Bar(x=np.arange(len(v)), y=v, marker_color=np.where(v >= 0, "#4393c3", "#d6604d"),
                           hovertemplate=t("trace.fig.channel_hover") + "<extra></extra>"))
    fig.update_xaxes(title=t("trace.fig.channels", n=len(v)))
    fig.update_yaxes(title=t("trace.fig.value"), zeroline=True, zerolinecolor="#888")
    return _layout(fig, title, 300, bargap=0.05)


def rows_heatmap(rows: list[tuple[str, torch.Tensor]], title: str, x_title: str | None = None,
                 height: int | None = None) -> go.Figure:
    """A few named vectors as the rows of one heatmap on a shared colour scale centred on 0."""
    z = np.stack([r.float().numpy() for _, r in rows])
    bound = float(np.abs(z).max()) or 1.0
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(z.shape[1])), y=[name for name, _ in rows], colorscale=DIVERGING, zmid=0, zmin=-bound,
        zmax=bound, colorbar=dict(thickness=12), xgap=1, ygap=2,
        hovertemplate=t("trace.fig.row_hover") + "<extra></extra>"))
    fig.update_xaxes(title=x_title or t("trace.fig.channels", n=z.shape[1]), showgrid=False)
    fig.update_yaxes(autorange="reversed", showgrid=False, tickfont=MONO)
    return _layout(fig, title, height or 120 + 34 * len(rows))


def head_rows(values: torch.Tensor, layer: int) -> list[tuple[str, torch.Tensor]]:
    return [(f"L{layer}H{h}", values[h]) for h in range(values.shape[0])]


def kv_groups(stage: Stage) -> dict[int, list[int]]:
    """{key/value head: the query heads reading it} with grouped-query attention; {} when every head has its own."""
    if "kv_head" not in stage.parts:
        return {}
    groups: dict[int, list[int]] = {}
    for head, kv in enumerate(stage.parts["kv_head"].tolist()):
        groups.setdefault(kv, []).append(head)
    return groups


def query_name(stage: Stage, head: int) -> str:
    """H4, or H4 · kv1 when the head shares key/value head 1 with others."""
    if "kv_head" not in stage.parts:
        return f"H{head}"
    return t("trace.fig.query_head", head=head, kv=int(stage.parts["kv_head"][head]))


def shared_name(kv: int, heads: list[int]) -> str:
    return t("trace.fig.kv_head", kv=kv, first=heads[0], last=heads[-1])


def qkv_figure(stage: Stage) -> go.Figure:
    """q, k and v of every head as the rows of one heatmap (d_head channels across), on one colour scale; with
    grouped-query attention one k and one v row per key/value head, named with the query heads that share it."""
    if groups := kv_groups(stage):
        rows = [(f"q {query_name(stage, h)}", stage.value[h]) for h in range(len(stage.value))]
        rows += [(f"{name} {shared_name(kv, heads)}", stage.parts[name][heads[0]]) for name in ("k", "v")
                 for kv, heads in groups.items()]
    else:
        rows = [(f"{name} H{h}", value[h]) for name, value in (("q", stage.value), ("k", stage.parts["k"]),
                                                                ("v", stage.parts["v"])) for h in range(len(value))]
    return rows_heatmap(rows, t("trace.fig.qkv_title"), t("trace.fig.head_channel"), height=120 + 24 * len(rows))


def rope_figure(stage: Stage, position: int) -> go.Figure:
    """Each head's q and k before and after the rotation (each shared k once, with grouped-query attention)."""
    q, k, rq, rk = stage.parts["q"], stage.parts["k"], stage.value, stage.parts["rot_k"]
    rows = []
    if groups := kv_groups(stage):
        for h in range(q.shape[0]):
            rows += [(f"{query_name(stage, h)} q", q[h]), (f"{query_name(stage, h)} q′", rq[h])]
        for kv, heads in groups.items():
            rows += [(f"{shared_name(kv, heads)} k", k[heads[0]]), (f"{shared_name(kv, heads)} k′", rk[heads[0]])]
    else:
        for h in range(q.shape[0]):
            rows += [(f"H{h} q", q[h]), (f"H{h} q′", rq[h]), (f"H{h} k", k[h]), (f"H{h} k′", rk[h])]
    return rows_heatmap(rows, t("trace.fig.rope_title", position=position), t("trace.fig.head_channel"),
                        height=120 + 21 * len(rows))


def attention_figure(stage: Stage, labels: list[str], position: int, weights: bool) -> go.Figure:
    """Each head's scores (or weights) over the keys this query can see, one row per head, the nearest keys."""
    H, n = stage.value.shape
    shown = window(position, n, window_size(labels))
    z = stage.value[:, shown.start:shown.stop].float().numpy()
    names = position_names(labels, shown)
    custom = np.array([names] * H, dtype=object)
    if weights:
        trace = go.Heatmap(z=z, zmin=0, zmax=1, colorscale=WEIGHTS,
                           colorbar=dict(thickness=12, title=t("trace.fig.weight")))
    else:
        bound = float(np.abs(z).max()) or 1.0
        trace = go.Heatmap(z=z, zmid=0, zmin=-bound, zmax=bound, colorscale=DIVERGING,
                           colorbar=dict(thickness=12, title=t("trace.fig.score")))
    trace.update(y=[query_name(stage, h) for h in range(H)], x=list(shown), customdata=custom, xgap=1, ygap=2,
                 hovertemplate=t("trace.fig.key_hover") + "<extra></extra>")
    fig = go.Figure(trace)
    fig.update_xaxes(tickmode="array", tickvals=list(shown), ticktext=[labels[i] for i in shown],
                     tickangle=tick_angle(labels), tickfont=dict(family="monospace", size=12),
                     title=t("trace.fig.keys", first=shown.start, last=shown.stop - 1))
    fig.update_yaxes(autorange="reversed", tickfont=MONO)
    title = t("trace.fig.pattern_title") if weights else t("trace.fig.scores_title")
    return _layout(fig, title, 170 + 40 * H + (40 if wide(labels) else 0))


def weights_html(pieces: list[str], weights: torch.Tensor, position: int, heads: list[str]) -> str:
    """Every head's weights shaded on the text up to the query, one line per head (the query boxed)."""
    lines = []
    for h, name in enumerate(heads):
        row = weights[h]
        shade = (row / row.max()).tolist()
        spans = []
        for i, piece in enumerate(pieces[: position + 1]):
            box = f"; outline: 2px solid {CURRENT}" if i == position else ""
            tip = html.escape(t("trace.fig.weight_tip", position=i, weight=float(row[i])))
            shown = html.escape(piece).replace("\n", "⏎")
            spans.append(f'<span title="{tip}" style="background: rgba(31, 119, 180, {shade[i]:.3f}){box}">'
                         f"{shown}</span>")
        width = 4.5 if max(map(len, heads)) <= 4 else 7.5
        lines.append(f'<div><b style="display: inline-block; width: {width}em">{name}</b>{"".join(spans)}</div>')
    return ('<div style="font-family: monospace; white-space: pre-wrap; line-height: 1.8; font-size: 0.95rem">'
            + "".join(lines) + "</div>")


def result_figure(stage: Stage, layer: int) -> go.Figure:
    rows = head_rows(stage.value, layer) + [(t("trace.fig.sum_row"), stage.parts["total"])]
    return rows_heatmap(rows, t("trace.fig.result_title"))


def residual_figure(stage: Stage) -> go.Figure:
    before, added = stage.parts["before"], stage.parts["added"]
    rows = [(t("trace.fig.before"), before), (t("trace.fig.added"), added), (t("trace.fig.after"), stage.value)]
    return rows_heatmap(rows, t("trace.fig.residual_title", before=float(before.norm()), added=float(added.norm()),
                                after=float(stage.value.norm())))


def norm_figure(stage: Stage) -> go.Figure:
    x, gain = stage.parts["input"], stage.parts["gain"]
    mean, scale = float(stage.parts["mean"]), float(stage.parts["scale"])
    rows = [(t("trace.fig.norm_input"), x), (t("trace.fig.norm_scaled"), (x - mean) / scale),
            (t("trace.fig.norm_gain"), gain), (t("trace.fig.norm_output"), stage.value)]
    title = t("trace.fig.norm_title_layer", scale=scale, mean=mean) if "shift" in stage.parts else \
        t("trace.fig.norm_title_rms", scale=scale)
    return rows_heatmap(rows, title)


def activation_figure(stage: Stage, ffn: str) -> go.Figure:
    """Each hidden channel as a point: its input w1 x against its activation, on the activation's curve."""
    x, y = stage.parts["input"].numpy(), stage.value.numpy()
    grid = np.linspace(min(x.min(), -4), max(x.max(), 4), 200)
    name = t(f"trace.fig.act_{ffn}")
    fig = go.Figure([
        go.Scatter(x=grid, y=ACTIVATIONS[ffn](torch.from_numpy(grid)).numpy(), mode="lines",
                   line=dict(color="#bbb"), name=name, hoverinfo="skip"),
        go.Scatter(x=x, y=y, mode="markers", marker=dict(color=SECTION_COLOURS["ffn"], size=6),
                   customdata=np.arange(len(x)), name=t("trace.fig.hidden_channels"),
                   hovertemplate=t("trace.fig.act_hover") + "<extra></extra>")])
    fig.update_xaxes(title="w1 x", zeroline=True)
    fig.update_yaxes(title=f"{name}(w1 x)", zeroline=True)
    return _layout(fig, t("trace.fig.act_title", name=name, n=len(x)), 360,
                   legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"))


def product_figure(stage: Stage) -> go.Figure:
    rows = [("SiLU(w1 x)", stage.parts["act"]), ("w3 x", stage.parts["gate"]), ("⊙", stage.value)]
    return rows_heatmap(rows, t("trace.fig.product_title"), t("trace.fig.hidden_channels"))


def top_bars(values: torch.Tensor, labels: list[str], title: str, highlight: int | None, k: int = 20,
             probability: bool = True) -> go.Figure:
    """The k largest entries as bars, largest first; the highlighted id (the text's real next token) in red."""
    k = min(k, len(values))
    top = torch.topk(values.float(), k)
    ids, vals = top.indices.tolist(), top.values.tolist()
    if highlight is not None and highlight not in ids:
        ids, vals = ids[:-1] + [highlight], vals[:-1] + [float(values[highlight])]
    names = [labels[i] for i in ids]
    fig = go.Figure(go.Bar(
        x=list(range(len(ids))), y=vals, text=[f"{v:.1%}" if probability else f"{v:.2f}" for v in vals],
        textposition="outside", cliponaxis=False, customdata=[[names[j], ids[j]] for j in range(len(ids))],
        marker_color=[CURRENT if i == highlight else "#4c78a8" for i in ids],
        hovertemplate=t("trace.fig.token_hover") + "<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(ids))), ticktext=names, tickangle=tick_angle(names),
                     tickfont=dict(family="monospace", size=13 if wide(names) else 15), title=t("trace.fig.next_axis"))
    fig.update_yaxes(title=t("trace.fig.probability") if probability else "logit")
    return _layout(fig, title, 340)


def token_html(labels: list[str], position: int, token_id: int) -> str:
    """The text up to the traced position, with that token boxed, and its id; tokens of several characters are
    each underlined, so the cuts the tokenizer made show."""
    start = max(0, position - 60)
    cut = ' style="border-bottom: 2px solid #bbb; margin-right: 2px; display: inline-block"' if wide(labels) else ""
    shown = "".join(f"<span{cut}>{html.escape(c)}</span>" if cut else html.escape(c) for c in labels[start:position])
    mark = html.escape(labels[position])
    # (a run of characters, spaces shown as ␣: one long word to the browser, which may break it anywhere)
    return (f'<div style="font-family: monospace; font-size: 1.15rem; line-height: 1.8; overflow-wrap: anywhere">'
            f'{"…" if start else ""}'
            f'{shown}<span style="outline: 3px solid {CURRENT}; padding: 0 2px">{mark}</span></div>'
            f'<div style="font-size: 1.6rem; margin-top: 0.4rem">\'{mark}\' → id <b>{token_id}</b></div>')


def next_html(label: str, probability: float, actual: str | None) -> str:
    line = t("trace.fig.most_likely", char=html.escape(label), p=probability)
    if actual is not None:
        line += " · " + t("trace.fig.text_continues", char=html.escape(actual))
    return f'<div style="font-size: 1.5rem">{line}</div>'


def stage_view(stage: Stage, tr: Trace, labels: list[str], vocab: list[str], pieces: list[str],
               ffn: str) -> tuple[go.Figure | None, list[str]]:
    """What the Trace page shows for a stage: a figure (or None) and HTML blocks to go below it.

    labels: each position's token made visible (␣ for a space); pieces: the same as plain text; vocab: the label of
    every token id.
    """
    pos, real_next = tr.position, int(tr.ids[tr.position + 1]) if tr.position + 1 < len(tr.ids) else None
    heads = [query_name(stage, h) for h in range(stage.value.shape[0])] if stage.kind in ("scores", "pattern") else []
    match stage.kind:
        case "token":
            return None, [token_html(labels, pos, int(stage.value))]
        case "vector":
            return vector_bars(stage.value, t(f"trace.stages.{stage.step}")), []
        case "norm":
            return norm_figure(stage), []
        case "qkv":
            return qkv_figure(stage), []
        case "rope":
            return rope_figure(stage, pos), []
        case "scores":
            return attention_figure(stage, labels, pos, weights=False), []
        case "pattern":
            return attention_figure(stage, labels, pos, weights=True), [weights_html(pieces, stage.value, pos, heads)]
        case "heads":
            return rows_heatmap(head_rows(stage.value, stage.layer), t("trace.fig.z_title"),
                                t("trace.fig.head_channel")), []
        case "result":
            return result_figure(stage, stage.layer), []
        case "residual":
            return residual_figure(stage), []
        case "activation":
            return activation_figure(stage, ffn), []
        case "product":
            return product_figure(stage), []
        case "logits":
            return top_bars(stage.value, vocab, t("trace.fig.logits_title"), real_next, probability=False), []
        case "probs":
            return top_bars(stage.value, vocab, t("trace.fig.probs_title"), real_next), []
        case "next":
            best = int(stage.value)
            actual = None if real_next is None else vocab[real_next]
            return None, [next_html(vocab[best], float(stage.parts["probs"][best]), actual)]
    raise ValueError(f"no view for a stage of kind {stage.kind!r}")


# --- logit lens, attribution, ablation, patching ------------------------------------------------------------------

COLORBAR_BAND = 44  # px under the x axis's title for a colour bar lying there: the bar and its numbers


def bottom_colorbar(title: str) -> dict:
    """A colour bar lying under the plot, at the chart's foot, so that on a narrow screen the cells keep the whole
    width and a title broken into lines above the plot has the top to itself. Add COLORBAR_BAND to the bottom margin.
    (Its title stands beside the bar: Plotly draws a title on top of a bar placed this way into the bar.)"""
    return dict(title=dict(text=title, side="right"), orientation="h", thickness=10, lenmode="pixels", len=340, x=1,
                xanchor="right", yref="container", y=0, yanchor="bottom")  # (the length holds the title too)


def lens_figure(values: np.ndarray, rows: list[str], labels: list[str], top: list[list[str]],
                positions: list[int], position: int) -> go.Figure:
    """Logit lens over `positions` (a window around `position`): colour = probability of the true next token,
    text = the row's top guess. A click on a cell picks its position."""
    R = len(rows)
    names = position_names(labels, positions)
    fig = go.Figure(go.Heatmap(
        z=values, x=positions, y=list(range(R)), zmin=0, zmax=1, colorscale="Viridis",
        colorbar=bottom_colorbar(t("trace.fig.p_true")), text=[[short(g) for g in row] for row in top],
        texttemplate="%{text}", textfont=dict(family="monospace", size=12 if R <= 16 else 10),
        customdata=np.array([names] * R, dtype=object), xgap=1, ygap=1,
        hovertemplate=t("trace.fig.lens_hover") + "<extra></extra>"))
    xs, ys = np.meshgrid(positions, np.arange(R))
    fig.add_trace(go.Scatter(x=xs.ravel(), y=ys.ravel(), mode="markers", customdata=xs.ravel(), hoverinfo="skip",
                             marker=dict(size=16, symbol="square", opacity=0), showlegend=False,
                             selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0))))
    fig.update_xaxes(tickmode="array", tickvals=positions, ticktext=[labels[i] for i in positions],
                     tickangle=tick_angle(labels), tickfont=dict(family="monospace", size=12),
                     title=t("trace.fig.lens_positions"))
    fig.update_yaxes(tickmode="array", tickvals=list(range(R)), ticktext=rows, autorange="reversed", tickfont=MONO)
    fig.add_vrect(x0=position - 0.5, x1=position + 0.5, line=dict(color=CURRENT, width=3))
    fig.update_layout(clickmode="event+select", dragmode=False)
    _layout(fig, t("trace.fig.lens_title"), 190 + COLORBAR_BAND + row_height(R, 42) * R)
    return fig.update_layout(margin_b=80 + COLORBAR_BAND)  # (the x axis's numbers and title, then the colour bar)


def lens_column(probs: torch.Tensor, rows: list[str], vocab: list[str], k: int = 5) -> go.Figure:
    """For one position: each row's top-k guesses with their probabilities (on one line when the rows are many)."""
    top = probs.topk(k, dim=-1)
    many = len(rows) > 16
    text = [[short(vocab[i], 8) if many else vocab[i] for i in row] for row in top.indices.tolist()]
    fig = go.Figure(go.Heatmap(z=top.values.numpy(), x=[f"#{i + 1}" for i in range(k)], y=rows, zmin=0, zmax=1,
                               colorscale="Viridis", text=text,
                               texttemplate="'%{text}' %{z:.2f}" if many else "'%{text}'<br>%{z:.2f}",
                               textfont=dict(family="monospace", size=10 if many else 13),
                               colorbar=bottom_colorbar(t("trace.fig.probability")), xgap=2, ygap=2,
                               hovertemplate=t("trace.fig.guess_hover") + "<extra></extra>"))
    fig.update_yaxes(autorange="reversed", tickfont=MONO)
    _layout(fig, t("trace.fig.lens_column_title"), 170 + COLORBAR_BAND + row_height(len(rows), 44, 24) * len(rows))
    return fig.update_layout(margin_b=40 + COLORBAR_BAND)


def largest(frame, column: str, k: int = TOP):
    """The k rows of frame with the largest |column|, in their own order (all of them when there are few)."""
    if len(frame) <= MANY:
        return frame
    return frame.loc[frame[column].abs().nlargest(k).index.sort_values()]


def attribution_bars(parts, difference: float, target_label: str, foil_label: str, names: list[str]) -> go.Figure:
    """Each component's direct contribution to logit(target) − logit(foil), in the order they write into the
    stream; of many components the TOP largest (the title's sum is over all of them)."""
    total = float(parts["logit"].sum())
    shown = largest(parts.assign(name=names), "logit")
    values = shown["logit"].to_numpy()
    fig = go.Figure(go.Bar(x=shown["name"], y=values, marker_color=np.where(values >= 0, "#4393c3", "#d6604d"),
                           hovertemplate="%{x}: %{y:+.3f}<extra></extra>"))
    fig.add_hline(y=0, line_color="#888")
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=12), type="category")
    fig.update_yaxes(title=t("trace.fig.contribution"))
    title = "trace.fig.attribution_title" if len(shown) == len(parts) else "trace.fig.attribution_top_title"
    _layout(fig, t(title, char=target_label, foil=foil_label, total=total, logit=difference, k=len(shown)), 400)
    return fig.update_layout(margin_l=90)  # room for the first slanted name


def component_grid(frame, column: str, n_layer: int, n_head: int, title: str, colour_title: str,
                   ffn_name: str) -> go.Figure:
    """A layers × (heads, FFN) heatmap of one column of a per-component table (rows named L0H0 … L0 FFN …)."""
    values = np.full((n_layer, n_head + 1), np.nan)
    for _, row in frame.iterrows():
        if row["head"] is None or row["head"] != row["head"]:  # (pandas keeps a missing head as None or NaN)
            values[int(row["layer"]), n_head] = row[column]
        else:
            values[int(row["layer"]), int(row["head"])] = row[column]
    return head_grid(values, title, colour_title, columns=[f"H{h}" for h in range(n_head)] + [ffn_name])


def effect_bars(frame, title: str) -> go.Figure:
    """Per component, its direct effect (through the readout alone) beside its total effect (ablation); of many
    components the TOP with the largest total effect."""
    frame = largest(frame, "total")
    fig = go.Figure([
        go.Bar(name=t("trace.fig.direct"), x=frame["component"], y=frame["direct"], marker_color="#9ecae1",
               hovertemplate="%{x}: " + t("trace.fig.direct") + " %{y:+.3f}<extra></extra>"),
        go.Bar(name=t("trace.fig.total"), x=frame["component"], y=frame["total"], marker_color="#08519c",
               hovertemplate="%{x}: " + t("trace.fig.total") + " %{y:+.3f}<extra></extra>")])
    fig.add_hline(y=0, line_color="#888")
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=12), type="category")
    fig.update_yaxes(title=t("trace.fig.effect"))
    _layout(fig, title, 420, barmode="group", legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1,
                                                          xanchor="right"))
    return fig.update_layout(margin_l=90)


def source_bars(shares: np.ndarray, weights: np.ndarray, labels: list[str], position: int, title: str) -> go.Figure:
    """A head's direct effect split by source position, over the WINDOW positions up to `position`; the hover
    gives the head's attention weight on each."""
    shown = window(position, position + 1, window_size(labels))
    cols = list(shown)
    values = shares[shown.start:shown.stop]
    fig = go.Figure(go.Bar(
        x=cols, y=values, marker_color=np.where(values >= 0, "#4393c3", "#d6604d"),
        customdata=np.stack([position_names(labels, shown), weights[shown.start:shown.stop]], -1),
        hovertemplate=t("trace.fig.source_hover") + "<extra></extra>"))
    fig.add_hline(y=0, line_color="#888")
    fig.update_xaxes(tickmode="array", tickvals=cols, ticktext=[labels[i] for i in cols], tickangle=tick_angle(labels),
                     tickfont=dict(family="monospace", size=12), title=t("trace.fig.source_positions"))
    fig.update_yaxes(title=t("trace.fig.contribution"))
    return _layout(fig, title, 340)


def side_grid(values: np.ndarray, rows: list[str], columns: list[str], title: str) -> go.Figure:
    """Senders × the receiver's sides (query, key, value): the share each restores, numbers written in."""
    bound = max(1.0, float(np.nanmax(np.abs(values))))
    fig = go.Figure(go.Heatmap(z=values, x=columns, y=rows, colorscale=DIVERGING, zmid=0, zmin=-bound, zmax=bound,
                               texttemplate="%{z:.2f}", textfont=dict(size=13), xgap=2, ygap=2,
                               colorbar=dict(title=t("trace.fig.restored"), thickness=12),
                               hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category", tickfont=MONO)
    return _layout(fig, title, 140 + 30 * len(rows))


def head_grid(values: np.ndarray, title: str, colour_title: str, columns: list[str] | None = None) -> go.Figure:
    """A layer × head table of numbers as a heatmap centred on 0, with the numbers written in; 30 layers get rows
    of a tight height and smaller numbers, so all of them fit about one screen."""
    L, H = values.shape
    bound = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    columns = columns or [f"H{h}" for h in range(H)]
    many = L > 8
    fig = go.Figure(go.Heatmap(z=values, x=columns, y=[f"L{i}" for i in range(L)], colorscale=DIVERGING, zmid=0,
                               zmin=-bound, zmax=bound, texttemplate="%{z:.2f}", textfont=dict(size=11 if many else 15),
                               colorbar=dict(title=colour_title, thickness=12), xgap=2, ygap=1 if many else 2,
                               hovertemplate="%{y}%{x}: %{z:.4f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", side="top" if many else "bottom")  # (the column names stay in sight)
    _layout(fig, title, 150 + (24 if many else 55) * L)
    return fig.update_layout(margin_t=90) if many else fig


def position_grid(values: np.ndarray, rows: list[str], labels: list[str], title: str) -> go.Figure:
    """rows × positions of restored shares as a heatmap, the text's tokens along the bottom."""
    R, T = values.shape
    bound = max(1.0, float(np.nanmax(np.abs(values))))
    step = max(1, T // (64 if not wide(labels) else 32))
    fig = go.Figure(go.Heatmap(
        z=values, x=list(range(T)), y=list(range(R)), zmid=0, zmin=-bound, zmax=bound, colorscale=DIVERGING,
        colorbar=dict(title=t("trace.fig.restored"), thickness=12), xgap=1, ygap=1,
        customdata=np.array([[f"{rows[r]} · {n}" for n in position_names(labels, range(T))] for r in range(R)],
                            dtype=object),
        hovertemplate=t("trace.fig.patch_hover") + "<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=list(range(0, T, step)), ticktext=labels[::step],
                     tickangle=tick_angle(labels), tickfont=dict(family="monospace", size=11 if T <= 64 else 9),
                     title=t("trace.fig.patched_at"))
    fig.update_yaxes(tickmode="array", tickvals=list(range(R)), ticktext=rows, autorange="reversed", tickfont=MONO)
    return _layout(fig, title, 140 + (60 if wide(labels) else 0) + max(20, 300 // R) * R)


def sweep_bars(frame, title: str) -> go.Figure:
    """The loss increase of each switched-off component, largest first: all of them, or the TOP largest of many."""
    frame = frame if len(frame) <= MANY else frame.head(TOP)
    fig = go.Figure(go.Bar(x=frame["component"], y=frame["loss increase"], customdata=frame["loss"],
                           marker_color=np.where(frame["loss increase"] >= 0, "#d6604d", "#4393c3"),
                           hovertemplate=t("trace.fig.sweep_hover") + "<extra></extra>"))
    fig.update_xaxes(type="category", tickangle=0 if len(frame) <= 16 else -45)
    fig.update_yaxes(title=t("trace.fig.loss_increase"))
    return _layout(fig, title, 340)
