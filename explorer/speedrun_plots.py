"""Figures of the Faster training page: the ladder's shipped curves and a live rerun of one rung."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from gptcore.ladder import LADDER

from .demo_plots import TOP_MARGIN
from .i18n import t

COLORS = dict(zip((r.key for r in LADDER), qualitative.D3 + qualitative.Set2))
AXES = ("seconds", "characters", "step")


def ladder_figure(frame: pd.DataFrame, target: float, names: dict, x: str, title: str) -> go.Figure:
    """Whole-val loss of each rung against `x` (seconds, characters or step); rungs left out dashed."""
    adopted = {r.key: r.adopted for r in LADDER}
    fig = go.Figure()
    for key, rows in frame.groupby("rung", sort=False):
        fig.add_scatter(x=rows[x], y=rows["val"], mode="lines+markers", name=names[key],
                        line=dict(color=COLORS[key], dash="solid" if adopted[key] else "dot"), marker=dict(size=4),
                        customdata=rows[["step", "seconds"]],
                        hovertemplate=t("faster_training.fig.hover"))
    fig.add_hline(y=target, line_dash="dash", line_color="#444",
                  annotation_text=t("faster_training.fig.target", target=target), annotation_position="top right")
    low = min(frame["val"].min(), target) - 0.02
    # (the many-row legend shrinks the plot, and its offset with it: far enough down to clear the axis title at 1024)
    fig.update_layout(title=title, height=480, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10),
                      xaxis_title=t(f"faster_training.fig.axis.{x}"), yaxis=dict(title=t("faster_training.fig.val"),
                                                                                  range=[low, target + 0.3]),
                      legend=dict(orientation="h", y=-0.32, yanchor="top"), template="plotly_white")
    return fig


def race_figure(loss: pd.DataFrame, val: pd.DataFrame, names: dict, x: str) -> go.Figure:
    """The live rerun: each run's training loss (faint per step, bold averaged) and its val estimates (markers)
    against its own training time or its steps."""
    fig = go.Figure()
    for key, rows in loss.groupby("run", sort=False):
        fig.add_scatter(x=rows[x], y=rows["loss"], mode="lines", line=dict(color=COLORS[key], width=1), opacity=0.25,
                        showlegend=False, hoverinfo="skip")
        fig.add_scatter(x=rows[x], y=rows["smoothed"], mode="lines", line_color=COLORS[key],
                        name=t("faster_training.fig.train_of", name=names[key]),
                        hovertemplate=t("faster_training.fig.loss_hover"))
    for key, rows in val.groupby("run", sort=False):
        fig.add_scatter(x=rows[x], y=rows["val"], mode="markers", marker=dict(color=COLORS[key], size=9,
                                                                              symbol="diamond"),
                        name=t("faster_training.fig.val_of", name=names[key]),
                        hovertemplate=t("faster_training.fig.loss_hover"))
    fig.update_layout(title=t("faster_training.fig.race_title"), height=420,
                      margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), xaxis_title=t(f"faster_training.fig.axis.{x}"),
                      yaxis_title=t("faster_training.fig.loss"), legend=dict(orientation="h", y=-0.2, yanchor="top"),
                      template="plotly_white")
    return fig
