"""The Faster training page: the shipped ladder in both languages, one rung at a time, and a rung rerun live
in the background like the other races."""
import time
from dataclasses import replace

import pytest
from page_helpers import app_page, chart, figure, frame, metrics, run_page

from explorer.ui import job_registry
from gptcore.demos import speedrun
from gptcore.ladder import LADDER

KIND = "ladder race"


@pytest.mark.parametrize("lang, rung, kept", [("en", "rung", "kept"), ("zh", "级", "采用")])
def test_the_page_shows_every_rung_of_the_shipped_ladder_in_both_languages(lang, rung, kept):
    at = app_page("faster_training", lang)
    table = next(d.value for d in at.dataframe if rung in d.value.columns)
    assert len(table) == len(LADDER) and (table.iloc[:, 5] == kept).sum() == sum(r.adopted for r in LADDER)
    assert table.columns[0] == rung and table.iloc[:, -1].tolist() == ["—", "0", "1", "2", "2", "3", "4", "5", "5",
                                                                       "5", "5"]  # the kept rung each builds on
    curves = chart(at, "ladder-curves")
    assert len(curves) == len(LADDER)
    assert [c["line"]["dash"] for c in curves].count("dot") == 4  # the rungs left out
    runs = speedrun.load_ladder()
    assert figure(at, "ladder-curves")["layout"]["shapes"][0]["y0"] == pytest.approx(runs.target)
    assert any(runs.cpu in c.value and f"`{runs.command}`" in c.value for c in at.caption)


def test_a_rung_shows_why_what_changed_and_its_curves_against_the_rung_it_builds_on():
    at = run_page("faster_training.py")
    at.selectbox(key="ladder-rung").set_value("qk_norm").run()
    assert any("QK-norm divides each head's q and k" in m.value for m in at.markdown)
    changed = frame(at, "setting")
    assert set(changed["setting"]) == {"QK-norm", "Learning rate", "Muon lr"}
    assert [c["name"] for c in chart(at, "ladder-pair")] == ["2 · Muon, batch 16, 800 steps (the fast recipe)",
                                                              "3 · QK-norm, learning rates ×2"]
    at.radio(key="ladder-x").set_value("characters").run()
    assert chart(at, "ladder-pair")[0]["x"][-1] == 801 * 16 * 128


class SmallRace(speedrun.RungRace):
    """The page's race: the rungs' recipes and steps on a small model, with two validation estimates (the race's
    own training is test_speedrun's; here it is what the page draws of it)."""

    def runs(self):
        small = dict(d_model=32, n_layer=1, n_head=2, d_ff=88, context=32)
        return [(label, replace(model, **small), replace(tc, eval_every=tc.steps // 2))
                for label, model, tc in super().runs()]


def test_the_rerun_button_races_the_rung_against_its_predecessor_and_the_page_draws_it(monkeypatch):
    monkeypatch.setattr(speedrun, "RungRace", SmallRace)
    monkeypatch.setattr(speedrun, "MIN_STEPS", 10)  # (2% of the rung's steps and of its predecessor's)
    at = run_page("faster_training.py")
    at.selectbox(key="ladder-rung").set_value("zero_init").run()
    at.select_slider(key="race-share").set_value(0.02).run()
    assert [w.value for w in at.warning if w.value.startswith("At 2% each run is only a few dozen steps")]
    at.button(key="ladder-start").click().run()
    assert not at.exception and not at.error
    job = job_registry().latest(KIND)
    job.join(120)
    assert job.snapshot().status == "finished", job.snapshot().message
    at.run()
    steps = sum(tc.steps + 1 for _, _, tc in SmallRace("zero_init", share=0.02).runs())
    assert steps == 34 and metrics(at)["Steps"] == "34 / 34" and metrics(at)["Status"] == "finished"
    assert any("(17 steps), then" in m.value for m in at.markdown)  # steps 0–16 of each: the counter's 34 in all
    assert chart(at, "race-curves")[0]["x"][:3] == [0, 1, 2]  # against steps: the runs took turns on the cores
    names = {c.get("name") for c in chart(at, "race-curves")}
    assert {"4 · embedding at lr 0.1: training loss (averaged)", "5 · output matrices start at zero: validation "
            "estimate"} <= names


def test_the_rerun_streams_while_it_trains_and_stops_when_asked():
    at = run_page("faster_training.py")
    at.select_slider(key="race-share").set_value(0.5).run()
    at.button(key="ladder-start").click().run()
    job = job_registry().latest(KIND)
    deadline = time.monotonic() + 60
    while len(job.snapshot().data.get("loss", [])) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    at.run()  # what the page's fragment draws on its next tick
    assert job.snapshot().active and metrics(at)["Status"] == "running"
    button = at.button(key="ladder-start")  # (a second race would be refused: the button says so by being off)
    assert button.disabled and button.label == "Rerunning…"
    assert len(chart(at, "race-curves")[0]["x"]) >= 3
    at.button(key="ladder-stop").click().run()
    job.join(60)
    assert job.snapshot().status == "stopped"
    assert job.snapshot().data["steps_done"] < job.snapshot().data["steps_total"]


def test_unreadable_measurements_are_a_message_not_a_crash(monkeypatch, tmp_path):
    broken = tmp_path / "ladder_curves.json"
    broken.write_text("[]")
    monkeypatch.setattr("gptcore.ladder.LADDER_CURVES", broken)
    at = run_page("faster_training.py")
    assert "cannot be read" in at.error[0].value
