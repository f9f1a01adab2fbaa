"""Plotly figures for the Trace and Look deeper pages, drawn from gptcore.interp's stages and tables.

Every figure here is sized to be read at 1440×900 beside the app's sidebar: bars or small heatmaps, one value per
cell in the hover, no figure taller than a screen.
"""
from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from gptcore.interp import Stage, Trace

DIVERGING = "RdBu_r"  # negative blue, positive red, zero white
WEIGHTS = "Blues"
FONT = dict(size=13)
MONO = dict(family="monospace", size=13)
GROUP_COLOURS = {"input": "#72b7b2", "attention": "#4c78a8", "FFN": "#f58518", "output": "#54a24b"}
CURRENT = "#e45756"

# Short labels for the diagram, by the part of a stage's key after the layer
DIAGRAM_LABELS = {
    "token": "token", "embed": "embed", "pos_embed": "+ pos", "ln1": "norm", "qkv": "q k v", "rope": "RoPE",
    "scores": "q·k/√d", "pattern": "softmax", "z": "Σ w·v", "result": "W_O", "resid_mid": "+ add",
    "ln2": "norm", "ffn_pre": "w1", "ffn_act": "act", "ffn_gate": "w3", "ffn_hidden": "⊙", "ffn_out": "w2",
    "resid_post": "+ add", "ln_f": "norm", "logits": "logits", "probs": "probs", "next": "next",
}


def _layout(fig: go.Figure, title: str, height: int, **kw) -> go.Figure:
    fig.update_layout(title=dict(text=title, font=dict(size=15)), height=height, font=FONT,
                      margin=dict(l=60, r=20, t=60, b=40), **kw)
    return fig


def _part(stage_key: str) -> str:
    return stage_key.split(".", 1)[-1]


def _colour(stage: Stage) -> str:
    for name in ("attention", "FFN"):
        if name in stage.group:
            return GROUP_COLOURS[name]
    return GROUP_COLOURS.get(stage.group, "#888")


# --- the diagram of the whole pass ---------------------------------------------------------------------------------

def diagram_positions(tr: Trace) -> list[tuple[float, float]]:
    """(x, y) of every stage: one row for the input, one per layer, one for the output; stages left to right."""
    rows: dict[str, int] = {}
    xy = []
    for stage in tr.stages:
        row = "input" if stage.group == "input" else "output" if stage.group == "output" else f"L{stage.layer}"
        column = rows.get(row, 0)
        rows[row] = column + 1
        y = {"input": 0}.get(row, None)
        if y is None:
            y = stage.layer + 1 if row != "output" else max(s.layer or 0 for s in tr.stages) + 2
        xy.append((column, y))
    return xy


def pass_diagram(tr: Trace, current: int) -> go.Figure:
    """Every stage of the pass as a box, in order, wired up; the current stage lit. Click a box to go there."""
    xy = diagram_positions(tr)
    xs, ys = [p[0] for p in xy], [p[1] for p in xy]
    labels = [DIAGRAM_LABELS.get(_part(s.key), s.key) for s in tr.stages]
    colours = [CURRENT if i == current else _colour(s) for i, s in enumerate(tr.stages)]
    sizes = [34 if i == current else 26 for i in range(len(tr.stages))]
    n_rows = max(ys) + 1
    row_names = ["input"] + [f"layer {i}" for i in range(n_rows - 2)] + ["output"]
    fig = go.Figure()
    # the path the vector takes: along each row, then down to the next row's start
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color="#bbb", width=2), hoverinfo="skip",
                             showlegend=False))
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers+text", text=labels, textposition="bottom center",
        textfont=dict(size=11), customdata=[[s.name, "×".join(map(str, s.shape)) or "scalar"] for s in tr.stages],
        marker=dict(symbol="square", size=sizes, color=colours, line=dict(color="white", width=1)),
        hovertemplate="%{customdata[0]}<br>shape (%{customdata[1]})<extra>click to show</extra>",
        showlegend=False))
    fig.add_annotation(x=xs[current], y=ys[current], text="▼", showarrow=False, yshift=24,
                       font=dict(color=CURRENT, size=16))
    fig.update_xaxes(visible=False, range=[-0.7, max(xs) + 0.7], fixedrange=True)
    fig.update_yaxes(tickvals=list(range(n_rows)), ticktext=row_names, autorange="reversed", fixedrange=True,
                     showgrid=False, zeroline=False, range=[n_rows - 0.4, -0.7])
    fig.update_layout(height=70 + 62 * n_rows, margin=dict(l=70, r=10, t=10, b=10), font=FONT,
                      clickmode="event+select", dragmode=False, plot_bgcolor="white")
    return fig


# --- a text to click a position on ----------------------------------------------------------------------------------

def text_strip(labels: list[str], selected: int, per_row: int = 64, shade: list[float] | None = None,
               title: str | None = None) -> go.Figure:
    """The text as a grid of character cells (one point per cell, so a click selects a position).

    shade (0..1 per cell) colours the cells, e.g. by attention weight; the selected cell is boxed in red.
    """
    T = len(labels)
    x = [i % per_row for i in range(T)]
    y = [i // per_row for i in range(T)]
    colours = ["#f0f2f6"] * T if shade is None else [f"rgba(31, 119, 180, {min(max(s, 0), 1):.3f})" for s in shade]
    fig = go.Figure(go.Scatter(
        x=x, y=y, mode="markers+text", text=labels, textfont=MONO,
        customdata=list(range(T)),
        marker=dict(symbol="square", size=19, color=colours,
                    line=dict(color=[CURRENT if i == selected else "#ccc" for i in range(T)],
                              width=[3 if i == selected else 1 for i in range(T)])),
        hovertemplate="position %{customdata}: '%{text}'<extra>click to trace</extra>", showlegend=False))
    rows = max(y) + 1
    fig.update_xaxes(visible=False, range=[-0.8, per_row - 0.2], fixedrange=True)
    fig.update_yaxes(visible=False, autorange="reversed", range=[rows - 0.5, -0.6], fixedrange=True)
    fig.update_layout(height=40 + 26 * rows + (30 if title else 0), margin=dict(l=5, r=5, t=30 if title else 5, b=5),
                      title=title, clickmode="event+select", dragmode=False, plot_bgcolor="white")
    return fig


# --- one figure per kind of stage -------------------------------------------------------------------------------

def vector_bars(values: torch.Tensor, title: str, name: str = "channel") -> go.Figure:
    v = values.float().numpy()
    fig = go.Figure(go.Bar(x=np.arange(len(v)), y=v, marker_color=np.where(v >= 0, "#d6604d", "#4393c3"),
                           hovertemplate=f"{name} %{{x}}: %{{y:.4f}}<extra></extra>"))
    fig.update_xaxes(title=f"{name} (0…{len(v) - 1})")
    fig.update_yaxes(title="value", zeroline=True, zerolinecolor="#888")
    return _layout(fig, title, 300, bargap=0.05)


def rows_heatmap(rows: list[tuple[str, torch.Tensor]], title: str, x_title: str = "channel",
                 x_labels: list[str] | None = None, scale: str = DIVERGING, zero_centred: bool = True,
                 text: bool = False, height: int | None = None) -> go.Figure:
    """A few named vectors as rows of one heatmap on a shared colour scale."""
    z = np.stack([r.float().numpy() for _, r in rows])
    finite = z[np.isfinite(z)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    colour = dict(zmid=0, zmin=-bound, zmax=bound) if zero_centred else dict(zmin=0, zmax=max(bound, 1e-9))
    x = x_labels if x_labels is not None else list(range(z.shape[1]))
    fig = go.Figure(go.Heatmap(
        z=np.where(np.isfinite(z), z, np.nan), x=list(range(z.shape[1])), y=[name for name, _ in rows],
        colorscale=scale, **colour, colorbar=dict(thickness=12),
        customdata=np.broadcast_to(np.array(x, dtype=object), z.shape),
        texttemplate="%{z:.2f}" if text else None, textfont=dict(size=10),
        hovertemplate="%{y} · " + x_title + " %{customdata}: %{z:.4f}<extra></extra>", xgap=1, ygap=2))
    if x_labels is not None:
        fig.update_xaxes(tickmode="array", tickvals=list(range(len(x))), ticktext=x, tickfont=MONO, tickangle=0)
    fig.update_xaxes(title=x_title, showgrid=False)
    fig.update_yaxes(autorange="reversed", showgrid=False, tickfont=MONO)
    return _layout(fig, title, height or 110 + 34 * len(rows))


def head_rows(values: torch.Tensor, prefix: str) -> list[tuple[str, torch.Tensor]]:
    return [(f"{prefix}H{h}", values[h]) for h in range(values.shape[0])]


def qkv_figure(stage: Stage) -> go.Figure:
    """q, k and v of every head side by side (heads down, d_head channels across)."""
    parts = [("q", stage.value), ("k", stage.parts["k"]), ("v", stage.parts["v"])]
    H, d = stage.value.shape
    fig = make_subplots(rows=1, cols=3, subplot_titles=[f"{n} ({H} heads × {d})" for n, _ in parts],
                        horizontal_spacing=0.05)
    bound = float(max(p.abs().max() for _, p in parts))
    for i, (name, value) in enumerate(parts):
        fig.add_trace(go.Heatmap(z=value.numpy(), y=[f"H{h}" for h in range(H)], coloraxis="coloraxis",
                                 hovertemplate=f"{name} · %{{y}} channel %{{x}}: %{{z:.4f}}<extra></extra>",
                                 ygap=2), 1, i + 1)
    fig.update_yaxes(autorange="reversed", tickfont=MONO)
    fig.update_layout(coloraxis=dict(colorscale=DIVERGING, cmid=0, cmin=-bound, cmax=bound,
                                     colorbar=dict(thickness=12)))
    return _layout(fig, "Query, key and value of this position", 120 + 40 * H)


def rope_figure(stage: Stage, position: int) -> go.Figure:
    """q and k of every head before and after the rotation, with the angle each channel pair turned by."""
    q, k, rq, rk = stage.parts["q"], stage.parts["k"], stage.value, stage.parts["rot_k"]
    H, d = q.shape
    rows = []
    for h in range(H):
        rows += [(f"H{h} q", q[h]), (f"H{h} q rot", rq[h]), (f"H{h} k", k[h]), (f"H{h} k rot", rk[h])]
    fig = rows_heatmap(rows, f"RoPE at position {position}: each pair of channels (0,1), (2,3), … turned by "
                             f"position × its own speed", height=110 + 22 * len(rows))
    return fig


def attention_figure(stage: Stage, labels: list[str], weights: bool) -> go.Figure:
    """Each head's scores (or weights) over the positions this query can see, one row per head."""
    H, n = stage.value.shape
    shown_labels = [f"{labels[i]}" for i in range(n)]
    z = stage.value.float().numpy()
    custom = np.array([[f"{i} '{labels[i]}'" for i in range(n)]] * H, dtype=object)
    if weights:
        trace = go.Heatmap(z=z, zmin=0, zmax=1, colorscale=WEIGHTS, colorbar=dict(thickness=12, title="weight"))
    else:
        bound = float(np.abs(z).max())
        trace = go.Heatmap(z=z, zmid=0, zmin=-bound, zmax=bound, colorscale=DIVERGING,
                           colorbar=dict(thickness=12, title="score"))
    trace.update(y=[f"H{h}" for h in range(H)], x=list(range(n)), customdata=custom, xgap=1, ygap=2,
                 hovertemplate="%{y} → key %{customdata}: %{z:.4f}<extra></extra>")
    fig = go.Figure(trace)
    step = max(1, n // 64)
    fig.update_xaxes(tickmode="array", tickvals=list(range(0, n, step)), ticktext=shown_labels[::step],
                     tickfont=dict(family="monospace", size=11 if n <= 64 else 9), tickangle=0,
                     title="key position (the text up to this one; later positions are masked)")
    fig.update_yaxes(autorange="reversed", tickfont=MONO)
    what = "weights (each row sums to 1)" if weights else "scores q·k/√d_head before softmax"
    return _layout(fig, f"Attention {what}", 150 + 40 * H)


def result_figure(stage: Stage, layer: int) -> go.Figure:
    rows = head_rows(stage.value, f"L{layer}") + [("sum = output", stage.parts["total"])]
    return rows_heatmap(rows, "Each head's output after W_O, and their sum (d_model channels)")


def residual_figure(stage: Stage) -> go.Figure:
    before, added = stage.parts["before"], stage.parts["added"]
    rows = [("stream before", before), ("added", added), ("stream after", stage.value)]
    norms = ", ".join(f"|{n}| = {float(v.norm()):.2f}" for n, v in (("before", before), ("added", added),
                                                                    ("after", stage.value)))
    return rows_heatmap(rows, f"Residual add: {norms}")


def norm_figure(stage: Stage) -> go.Figure:
    x, gain, rms = stage.parts["input"], stage.parts["gain"], float(stage.parts["rms"])
    rows = [("input x", x), ("x / rms", x / rms), ("gain γ", gain), ("output", stage.value)]
    return rows_heatmap(rows, f"Norm: rms(x) = {rms:.3f}, so every channel is divided by it, then scaled by γ")


def activation_figure(stage: Stage, act_name: str, curve) -> go.Figure:
    """Each hidden channel as a point: its input w1 x against its activation, on the activation's curve."""
    x, y = stage.parts["input"].numpy(), stage.value.numpy()
    grid = np.linspace(min(x.min(), -4), max(x.max(), 4), 200)
    fig = go.Figure([
        go.Scatter(x=grid, y=curve(torch.from_numpy(grid)).numpy(), mode="lines", line=dict(color="#bbb"),
                   name=act_name, hoverinfo="skip"),
        go.Scatter(x=x, y=y, mode="markers", marker=dict(color=GROUP_COLOURS["FFN"], size=6),
                   customdata=np.arange(len(x)), name="hidden channels",
                   hovertemplate="channel %{customdata}: w1 x = %{x:.3f} → %{y:.3f}<extra></extra>")])
    fig.update_xaxes(title="w1 x", zeroline=True)
    fig.update_yaxes(title=act_name + "(w1 x)", zeroline=True)
    return _layout(fig, f"{act_name} on each of the {len(x)} hidden channels", 360,
                   legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"))


def product_figure(stage: Stage) -> go.Figure:
    rows = [("SiLU(w1 x)", stage.parts["act"]), ("gate w3 x", stage.parts["gate"]), ("product", stage.value)]
    return rows_heatmap(rows, "SwiGLU: the gate scales each activated channel (negative gates flip it)",
                        x_title="hidden channel")


def top_bars(values: torch.Tensor, labels: list[str], title: str, highlight: int | None, k: int = 20,
             y_title: str = "probability", percent: bool = True) -> go.Figure:
    """The k largest entries as bars, largest first; the highlighted id (the text's real next token) in red."""
    k = min(k, len(values))
    top = torch.topk(values.float(), k)
    ids = top.indices.tolist()
    if highlight is not None and highlight not in ids:
        ids, vals = ids[:-1] + [highlight], top.values.tolist()[:-1] + [float(values[highlight])]
    else:
        vals = top.values.tolist()
    names = [f"{labels[i]}" for i in ids]
    text = [f"{v:.1%}" if percent else f"{v:.2f}" for v in vals]
    fig = go.Figure(go.Bar(
        x=list(range(len(ids))), y=vals, text=text, textposition="outside", cliponaxis=False,
        customdata=[[names[j], ids[j]] for j in range(len(ids))],
        marker_color=[CURRENT if i == highlight else "#4c78a8" for i in ids],
        hovertemplate="'%{customdata[0]}' (id %{customdata[1]}): %{y:.4f}<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(ids))), ticktext=names, tickfont=dict(family="monospace",
                     size=15), tickangle=0, title="next token (red: what the text really has next)")
    fig.update_yaxes(title=y_title)
    return _layout(fig, title, 340)


def token_html(labels: list[str], position: int, token_id: int) -> str:
    """The text up to the traced position, with that token boxed, and its id."""
    start = max(0, position - 60)
    shown = "".join(html.escape(c) for c in labels[start:position])
    mark = html.escape(labels[position])
    return (f'<div style="font-family: monospace; font-size: 1.15rem; line-height: 1.8">{"…" if start else ""}'
            f'{shown}<span style="outline: 3px solid {CURRENT}; padding: 0 2px">{mark}</span></div>'
            f'<div style="font-size: 1.6rem; margin-top: 0.4rem">\'{mark}\' → id <b>{token_id}</b></div>')


def next_html(label: str, probability: float, actual: str | None) -> str:
    then = "" if actual is None else f" · the text continues with <b>'{html.escape(actual)}'</b>"
    return (f'<div style="font-size: 1.6rem">most likely next: <span style="font-family: monospace; outline: 3px '
            f'solid {CURRENT}; padding: 0 4px">{html.escape(label)}</span> ({probability:.1%}){then}</div>')


# --- Look deeper ----------------------------------------------------------------------------------------------------

def lens_figure(values: np.ndarray, rows: list[str], labels: list[str], top: list[list[str]], title: str,
                selected: int | None = None) -> go.Figure:
    """Logit lens: one cell per (layer row, position); colour = probability of the true next token, text = the
    row's top guess. A transparent point over each cell makes it clickable."""
    R, T = values.shape
    x_names = [f"{i} '{labels[i]}'" for i in range(T)]
    fig = go.Figure(go.Heatmap(
        z=values, x=list(range(T)), y=rows, zmin=0, zmax=1, colorscale="Viridis",
        colorbar=dict(title="p(true next)", thickness=12), text=top, texttemplate="%{text}",
        textfont=dict(family="monospace", size=11 if T <= 48 else 9),
        customdata=np.array([x_names] * R, dtype=object),
        hovertemplate="%{y} at %{customdata}: top guess '%{text}', p(true next) %{z:.3f}<extra></extra>", xgap=1,
        ygap=1))
    xs, ys = np.meshgrid(np.arange(T), np.arange(R))
    fig.add_trace(go.Scatter(x=xs.ravel(), y=[rows[r] for r in ys.ravel()], mode="markers", hoverinfo="skip",
                             marker=dict(size=14, symbol="square", opacity=0), showlegend=False))
    step = max(1, T // 64)
    fig.update_xaxes(tickmode="array", tickvals=list(range(0, T, step)), ticktext=labels[::step], tickangle=0,
                     tickfont=dict(family="monospace", size=11 if T <= 64 else 9), title="position (its token)")
    fig.update_yaxes(autorange="reversed", tickfont=MONO)
    if selected is not None:
        fig.add_vrect(x0=selected - 0.5, x1=selected + 0.5, line=dict(color=CURRENT, width=2))
    fig.update_layout(clickmode="event+select", dragmode=False)
    return _layout(fig, title, 120 + 40 * R)


def lens_column(probs: torch.Tensor, rows: list[str], labels: list[str], k: int, highlight: int | None) -> go.Figure:
    """For one position: each row's top-k guesses with their probabilities."""
    top = probs.topk(k, dim=-1)
    text = [[labels[i] for i in row] for row in top.indices.tolist()]
    z = top.values.numpy()
    fig = go.Figure(go.Heatmap(z=z, x=[f"#{i + 1}" for i in range(k)], y=rows, zmin=0, zmax=1, colorscale="Viridis",
                               text=text, texttemplate="'%{text}'<br>%{z:.2f}", textfont=MONO,
                               colorbar=dict(thickness=12, title="probability"),
                               hovertemplate="%{y}, guess %{x}: '%{text}' %{z:.4f}<extra></extra>", xgap=2, ygap=2))
    fig.update_yaxes(autorange="reversed", tickfont=MONO)
    return _layout(fig, "Top guesses at this position, layer by layer", 120 + 44 * len(rows))


def attribution_bars(parts, logit: float, target_label: str) -> go.Figure:
    """Each component's direct contribution to the chosen logit, in the order they write into the stream."""
    values = parts["logit"].to_numpy()
    colours = np.where(values >= 0, "#d6604d", "#4393c3")
    fig = go.Figure(go.Bar(x=parts["component"], y=values, marker_color=colours,
                           hovertemplate="%{x}: %{y:+.3f}<extra></extra>"))
    fig.add_hline(y=0, line_color="#888")
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=11), type="category")
    fig.update_yaxes(title="contribution to the logit")
    return _layout(fig, f"Direct contributions to the logit of '{target_label}' (sum {values.sum():.3f} = logit "
                        f"{logit:.3f})", 380)


def head_grid(values: np.ndarray, title: str, colour_title: str, scale: str = DIVERGING, centred: bool = True,
              fmt: str = ".2f") -> go.Figure:
    """A layer × head table of numbers as a heatmap with the numbers written in."""
    L, H = values.shape
    bound = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    colour = dict(zmid=0, zmin=-bound, zmax=bound) if centred else {}
    fig = go.Figure(go.Heatmap(z=values, x=[f"H{h}" for h in range(H)], y=[f"L{i}" for i in range(L)],
                               colorscale=scale, texttemplate=f"%{{z:{fmt}}}", textfont=dict(size=14),
                               colorbar=dict(title=colour_title, thickness=12), xgap=2, ygap=2,
                               hovertemplate="%{y}%{x}: %{z:.4f}<extra></extra>", **colour))
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, 140 + 55 * L, width=None)


def position_grid(values: np.ndarray, rows: list[str], labels: list[str], title: str) -> go.Figure:
    """rows × position shares as a heatmap, the text's tokens along the bottom."""
    R, T = values.shape
    bound = max(1.0, float(np.nanmax(np.abs(values))))
    fig = go.Figure(go.Heatmap(
        z=values, x=list(range(T)), y=rows, zmid=0, zmin=-bound, zmax=bound, colorscale=DIVERGING,
        colorbar=dict(title="restored", thickness=12), xgap=1, ygap=1,
        customdata=np.array([[f"{i} '{labels[i]}'" for i in range(T)]] * R, dtype=object),
        hovertemplate="%{y} at %{customdata}: %{z:.3f}<extra></extra>"))
    step = max(1, T // 64)
    fig.update_xaxes(tickmode="array", tickvals=list(range(0, T, step)), ticktext=labels[::step], tickangle=0,
                     tickfont=dict(family="monospace", size=11 if T <= 64 else 9), title="position patched")
    fig.update_yaxes(autorange="reversed", tickfont=MONO)
    return _layout(fig, title, 120 + max(22, 320 // R) * R)


def sweep_bars(frame, title: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=frame["component"], y=frame["loss increase"],
                           marker_color=np.where(frame["loss increase"] >= 0, "#d6604d", "#4393c3"),
                           hovertemplate="%{x}: loss %{customdata:.4f} (%{y:+.4f})<extra></extra>",
                           customdata=frame["loss"]))
    fig.update_xaxes(type="category", tickangle=0)
    fig.update_yaxes(title="loss increase (nats per token)")
    return _layout(fig, title, 340)
