"""What the pages that race training runs side by side share: starting one as a job, its title, the line of run
states and the row of numbers above its charts. The runs themselves report through gptcore.demos.races."""
from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st

from gptcore.describe import format_duration

from .i18n import say, t
from .jobs import JobRefused
from .ui import job_progress, job_registry


def start_race(kind: str, fn: Callable, threads: int = 0) -> bool:
    """Start fn(job) as a job of this kind (True), or say why it cannot start now (False)."""
    try:
        job_registry().start(f"{kind} {time.strftime('%H:%M:%S')}", kind, fn, threads=threads)
        return True
    except JobRefused as e:
        st.error(say(e))
        return False


def race_title(snap) -> str:
    """The race's name in this tab's language: its kind and the time it started."""
    return t("ui.race.name", kind=t(f"ui.job_kind.{snap.kind}"),
             time=time.strftime("%H:%M:%S", time.localtime(snap.started)))


def run_states(data: dict, names: dict) -> str:
    """One line: every run of the race and where it stands (why, if it diverged)."""
    def state(label, status):
        text = t(f"ui.race.run.{status}")
        return t("ui.race.diverged_why", state=text, why=data["diverged"][label]) \
            if label in data.get("diverged", {}) else text
    return " · ".join(t("ui.race.run_line", name=names[label], state=state(label, status))
                      for label, status in data.get("runs", {}).items())


def race_header(job, snap, title: str, stop_key: str) -> None:
    """Progress bar and Stop button, then steps, speed, ETA and status."""
    status = t(f"ui.status.{snap.status}")
    data = snap.data
    job_progress(job, snap, t("ui.race.progress", name=title, status=status), stop_key)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(t("ui.race.steps"), f"{data.get('steps_done', 0)} / {data.get('steps_total', 0)}")
    m2.metric(t("ui.race.speed"), f"{data.get('tokens_per_s', 0):,.0f}")
    m3.metric(t("ui.race.eta"), say(format_duration(data.get("eta_s"))) if snap.active else
              t("ui.race.done") if snap.status == "finished" else "—")
    m4.metric(t("ui.race.status"), status)
