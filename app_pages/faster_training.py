from pathlib import Path

import pandas as pd
import streamlit as st

from explorer.i18n import choice, say, t
from explorer.jobs import JobRefused
from explorer.links import linked
from explorer.races import race_header, race_title, run_states, start_race
from explorer.speedrun_plots import AXES, ladder_figure, race_figure
from explorer.tables import pinned, shown_table
from explorer.ui import job_registry, show_chart, show_source
from gptcore.config import GPTConfig, TrainConfig, settings
from gptcore.demos import speedrun
from gptcore.ladder import LADDER, LADDER_CURVES, RUNGS, predecessor
from gptcore.step import lr_at

RACE_KIND = "ladder race"
registry = job_registry()


@st.cache_data(show_spinner=False)
def load_ladder(path: str, stamp: float) -> speedrun.LadderRuns:
    """The shipped measurements, read again whenever the file changes (stamp: its modification time)."""
    return speedrun.load_ladder(Path(path))


def rung_name(key: str) -> str:
    return t(f"faster_training.rung.{key}.name")


SETTINGS = {**settings(GPTConfig), **settings(TrainConfig)}


def setting_value(name: str, value):
    """A rung's value of a setting as the Train page's form names it: a choice in the reader's language."""
    return choice(SETTINGS[name], value) if value in (SETTINGS[name].choices or {}) else value


st.title(t("faster_training.title"))
st.markdown(t("faster_training.intro"))
try:
    runs = load_ladder(str(LADDER_CURVES), LADDER_CURVES.stat().st_mtime if LADDER_CURVES.exists() else 0.0)
except speedrun.LadderDataError as e:
    st.error(say(e))
    st.stop()
names = {r.key: rung_name(r.key) for r in LADDER}

# --- 1 · the ladder, measured -----------------------------------------------------------------------------
st.header(t("faster_training.ladder.header"))
st.markdown(t("faster_training.ladder.text", target=runs.target))
measured = speedrun.ladder_table(runs)
# The numbers beside the rung's name, what it builds on (the number of a kept rung) last: the table fits a wide
# screen, and on a projector the numbers scroll under the rung's name, which stays put.
formats = {"× tutorial": "{:.2f}", "seconds to target": "{:.0f}", "final val loss": "{:.4f}",
           "characters to target": "{:,.0f}"}
kept_number = {None: "—", **{r.key: str(i) for i, r in enumerate(r for r in LADDER if r.adopted)}}
table = measured[["rung", *formats, "adopted", "builds on"]]
table = table.assign(rung=table["rung"].map(names), adopted=table["adopted"].map(
    lambda kept: t(f"faster_training.adopted.{kept}")), **{"builds on": table["builds on"].map(kept_number)},
    **{column: table[column].map(lambda v, f=f: "—" if pd.isna(v) else f.format(v)) for column, f in formats.items()})
st.dataframe(shown_table(table, "faster_training"), hide_index=True, key="ladder-table",
             column_config=pinned("faster_training", "rung"),
             height=35 * (len(table) + 1) + 3)  # every rung in view (35 px a row), no inner scrolling
ratios = measured.set_index("rung")["× tutorial"]
st.markdown(t("faster_training.ladder.result", fast=ratios["muon"], speedrun=ratios[LADDER[-1].key]))
x = linked(st.radio, t("faster_training.fig.x"), AXES, horizontal=True, key="ladder-x",
           format_func=lambda a: t(f"faster_training.fig.axis.{a}"))
show_chart(ladder_figure(speedrun.curve_frame(runs, [r.key for r in LADDER]), runs.target, names, x,
                         t("faster_training.fig.ladder_title")), key="ladder-curves")
st.caption(t("faster_training.ladder.source", cpu=runs.cpu, cores=runs.cores, command=runs.command))
st.markdown(t("faster_training.ladder.reading"))

# --- 2 · one rung at a time ---------------------------------------------------------------------------------
st.header(t("faster_training.rung_header"))
rung = linked(st.selectbox, t("faster_training.pick_rung"), [r.key for r in LADDER[1:]], format_func=rung_name,
              key="ladder-rung")
before = predecessor(rung)
st.markdown(t(f"faster_training.rung.{rung}.why"))
changes = speedrun.changes(RUNGS[rung])
for side in ("before", "after"):
    changes[side] = [setting_value(name, value) for name, value in zip(changes["setting"], changes[side])]
changes["setting"] = changes["setting"].map(lambda name: t(f"settings.{name}.label"))
st.dataframe(shown_table(changes, "faster_training"), hide_index=True, key="ladder-changes")
show_chart(ladder_figure(speedrun.curve_frame(runs, [before.key, rung]), runs.target, names, x,
                         t("faster_training.fig.pair_title", rung=names[rung], before=names[before.key])),
           key="ladder-pair")


# --- the live rerun ---------------------------------------------------------------------------------------
def race_view(live: bool) -> None:
    job = registry.latest(RACE_KIND)
    snap = job.snapshot()
    pair = snap.data.get("pair")
    title = t("faster_training.live.name", rung=names[pair[1]], before=names[pair[0]]) if pair else race_title(snap)
    race_header(job, snap, title, "ladder-stop")
    st.caption(run_states(snap.data, names))
    frames = speedrun.race_frames(snap.data)
    # steps by default: the two runs take turns, so their seconds are measured under different loads
    axis = st.radio(t("faster_training.fig.x"), ["step", "seconds"], horizontal=True, key="race-x",
                    format_func=lambda a: t(f"faster_training.fig.axis.{a}"))
    show_chart(race_figure(frames["loss"], frames["val"], names, axis), key="race-curves")
    if live and not snap.active:
        st.rerun()  # stop polling: a full rerun redraws this without run_every


st.subheader(t("faster_training.live.header"))
share = linked(st.select_slider, t("faster_training.live.share"), [0.02, 0.05, 0.1, 0.25, 0.5], value=0.25,
               format_func=lambda s: f"{s:.0%}", key="race-share")
race = speedrun.RungRace(rung, share=share)
shorter = race.runs()
st.markdown(t("faster_training.live.text", share=race.share, chars=race.corpus_chars,  # (steps 0–N: N + 1 steps)
              before=names[before.key], rung=names[rung],
              before_steps=shorter[0][2].steps + 1, rung_steps=shorter[1][2].steps + 1))
if share < 0.1:
    st.warning(t("faster_training.live.short_share", share=share))
busy = registry.active()  # (one job at a time on this server: the button is off while any runs, a reload included)
racing = busy is not None and busy.kind == RACE_KIND
if st.button(t("faster_training.live.running") if racing else t("faster_training.live.start", rung=names[rung]),
             key="ladder-start", type="primary", disabled=busy is not None):
    if start_race(RACE_KIND, lambda job, race=race: speedrun.run_rung_race(job, race)):
        st.rerun()  # the button drawn again, off while the race runs
if busy is not None and not racing:
    st.caption(say(JobRefused.blocked_by(busy)))
if registry.latest(RACE_KIND) is None:
    st.info(t("faster_training.live.press"))
else:
    live = registry.latest(RACE_KIND).snapshot().active
    st.fragment(race_view, run_every=1 if live else None)(live)
show_source(speedrun.RungRace, speedrun.run_rung_race, lr_at)
