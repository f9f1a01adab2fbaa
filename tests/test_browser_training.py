"""The Train page in Chromium: start a short run, see the loss chart grow and a sample appear, switch language
while it trains, stop it; Start goes off for each invalid field; the form survives a reload.

The tests share one server with a private checkpoints folder. A run's form comes from the URL, as a reload gives
it back (test_the_form_survives_a_reload proves that by typing it); the invalid fields are typed."""
import time
from urllib.parse import urlencode

import pytest
from browser_support import screenshot, wait_for_app

from explorer.forms import PREFIX
from explorer.i18n import catalog
from gptcore.config import GPTConfig, TrainConfig, settings

# A tiny model on 30,000 built-in characters: it trains in the background for a few seconds,
# long enough to watch the chart grow, and the Stop button ends it. Fields are found by their labels as the
# catalogs and the config's field tables write them.
EN, ZH = catalog("en"), catalog("zh")
SIZES = {"d_model": 32, "n_layer": 1, "n_head": 2, "d_ff": 88, "context": 32, "steps": 10_000, "batch_size": 8,
         "eval_every": 25, "sample_every": 20, "sample_chars": 20, "checkpoint_every": 0, "threads": 1}


# The first of two queued runs trains until a second tab stops it (no samples, few evaluations: the least work).
QUEUE_FIRST = {"tr_t_steps": 100_000, "tr_t_sample_every": 0, "tr_t_eval_every": 1_000, "tr_name": "q-first"}


def labels(lang: dict) -> dict[str, int]:
    return {lang["training.corpus.characters"]: 30_000,
            **{lang[f"settings.{name}.label"]: value for name, value in SIZES.items()}}


# What the reload test types: the corpus size and a field of each table (model, training), as a person would.
TYPED = {label: value for label, value in labels(EN).items()
         if label in (EN["training.corpus.characters"], EN["settings.d_model.label"], EN["settings.steps.label"])}


def form_query(**more: str) -> str:
    """The URL query of the form filled in with SIZES on 30,000 characters (the widgets' keys are bound to it)."""
    keys = {name: PREFIX[cls] + name for cls in (GPTConfig, TrainConfig) for name in settings(cls)}
    return urlencode({"tr_builtin_chars": 30_000, **{keys[name]: value for name, value in SIZES.items()}, **more})


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return tmp_path_factory.mktemp("browser-checkpoints")


@pytest.fixture(scope="module")
def server_env(checkpoints):
    return {"GPTCORE_CHECKPOINTS": str(checkpoints)}


CHART_POINTS = """() => {
    const plot = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
    return plot && plot.data ? plot.data[0].x.length : 0;
}"""


def set_number(page, label: str, value: int) -> None:
    field = page.get_by_label(label, exact=True)
    field.fill(str(value))
    field.press("Enter")
    wait_for_app(page)


def chart_points(page) -> int:
    return page.evaluate(CHART_POINTS)


# Each out-of-range value a browser's number field lets through: the field says what is allowed, Start goes off
# with the reason, and a valid value turns it back on.
INVALID = [(EN["settings.lr.label"], "1000000", "0.003"), (EN["settings.steps.label"], "-5", "20"),
           (EN["settings.batch_size.label"], "0", "4"), (EN["settings.context.label"], "200000", "16")]


def test_start_is_disabled_for_each_invalid_field(app_url, open_page):
    from playwright.sync_api import expect

    page = open_page(height=1400)
    page.goto(f"{app_url}/training")
    start = page.get_by_role("button", name="Start training")
    start.wait_for(timeout=60_000)
    wait_for_app(page)
    set_number(page, "Characters", 30_000)
    assert start.is_enabled()
    for label, bad, good in INVALID:
        field = page.get_by_label(label, exact=True)
        field.fill(bad)
        field.press("Enter")
        expect(start).to_be_disabled(timeout=30_000)
        expect(page.get_by_text("Start is off.")).to_have_count(1)
        expect(page.locator('[data-testid="stAlert"]').filter(has_text=f"got {bad}")).not_to_have_count(0)
        field.fill(good)
        field.press("Enter")
        expect(start).to_be_enabled(timeout=30_000)
    screenshot(page, "training-start-off")


def field_value(page, label: str) -> str:
    return page.get_by_label(label, exact=True).input_value()


def shown_choice(page, label: str) -> str:
    """The option a selectbox shows."""
    return page.get_by_role("combobox", name=label, exact=True).input_value()


def pick(page, label: str, option: str) -> None:
    from playwright.sync_api import expect

    box = page.get_by_role("combobox", name=label, exact=True)
    box.click()
    page.get_by_role("option", name=option, exact=True).click()
    expect(box).to_have_value(option)
    wait_for_app(page)


def top_screenshot(page, name: str) -> None:
    """The whole page from its top (the app scrolls inside its main block, which a full-page shot does not)."""
    page.locator('[data-testid="stMain"]').evaluate("main => main.scrollTo(0, 0)")
    time.sleep(1)
    screenshot(page, name)


def progress_step(page, pattern: str) -> int:
    """The step the live panel's progress line shows (pattern: a regex with one group of digits and commas)."""
    import re

    text = page.locator('[data-testid="stProgress"]').first.inner_text()
    return int(re.search(pattern, text).group(1).replace(",", ""))


def test_the_form_survives_a_reload(app_url, open_page):
    """A reload keeps the form as it was typed (it lives in the URL), not as the preset."""
    from playwright.sync_api import expect

    page = open_page(height=2600)
    page.goto(f"{app_url}/training")
    start = page.get_by_role("button", name=EN["training.form.start"])
    start.wait_for(timeout=180_000)  # (a busy machine builds the 1M corpus slowly)
    wait_for_app(page)
    top_screenshot(page, "training-idle-en")
    for label, value in TYPED.items():
        set_number(page, label, value)
    pick(page, EN["settings.schedule.label"], EN["settings.schedule.choices.cosine"])
    page.get_by_label(EN["training.form.run_name"]).fill("lang-run")
    page.get_by_label(EN["training.form.run_name"]).press("Enter")
    wait_for_app(page)
    # what the reload below gives back; a choice is in the URL by its identifier
    page.wait_for_url(lambda url: "tr_t_schedule=cosine" in url and "tr_name=lang-run" in url)

    page.reload()
    start.wait_for(timeout=180_000)
    wait_for_app(page)
    for label, value in TYPED.items():
        expect(page.get_by_label(label, exact=True)).to_have_value(str(value))
    expect(page.get_by_label(EN["training.form.run_name"], exact=True)).to_have_value("lang-run")
    assert shown_choice(page, EN["settings.schedule.label"]) == "cosine"


@pytest.fixture(scope="module")
def run_page(open_module_page):
    """The learner's tab of the run: the same over the run's two tests."""
    return open_module_page(height=2600)


def test_a_run_starts_and_writes_samples_while_start_waits_its_turn(app_url, run_page):
    """A short run: it starts, takes its step-20 sample, and a second Start would queue behind it (the test after
    watches its chart grow)."""
    from playwright.sync_api import expect

    page = run_page
    page.goto(f"{app_url}/training?{form_query(tr_t_schedule='cosine', tr_name='lang-run')}")
    start = page.get_by_role("button", name=EN["training.form.start"])
    start.wait_for(timeout=180_000)  # (the server's first Train page of a busy machine is slow)
    wait_for_app(page)
    start.click()
    page.get_by_text("lang-run · running").wait_for(timeout=60_000)
    page.get_by_text("step 20", exact=True).wait_for(timeout=60_000)  # the sample taken at step 20
    assert page.locator('.st-key-tr_samples [data-testid="stCode"]').count() >= 2  # steps 0 and 20, newest first
    expect(start).to_be_enabled()  # a Start now waits its turn in the queue, and the page says so
    expect(page.get_by_text("is training now: a run you start waits its turn, at place 1")).to_have_count(1)
    top_screenshot(page, "training-running-en")


def test_a_language_switch_while_it_trains_keeps_the_run_and_the_form_and_stop_saves_it(run_page, checkpoints):
    """Switching to 中文 while the test before's run trains re-renders the page in place: the run goes on, the
    live panel and the form keep their values, and Stop ends it with a checkpoint."""
    from playwright.sync_api import expect

    page = run_page
    assert page.get_by_text("lang-run · running").count() == 1, "the test before leaves its run training"
    before = progress_step(page, r"step ([\d,]+) of 10,000")
    next_name = field_value(page, EN["training.form.run_name"])  # (the name moved on as the run started)

    page.get_by_text("中文", exact=True).click()
    page.get_by_text("lang-run · 运行中").wait_for(timeout=60_000)
    wait_for_app(page)
    assert "lang=zh" in page.url
    expect(page.get_by_role("button", name=ZH["training.form.start"])).to_be_enabled()
    expect(page.get_by_text("正在训练：你现在开始的运行要排队等候，排在队列第 1 位")).to_have_count(1)
    assert {label: field_value(page, label) for label in labels(ZH)} == \
        {label: str(value) for label, value in labels(ZH).items()}
    assert shown_choice(page, ZH["settings.schedule.label"]) == "余弦"
    assert shown_choice(page, ZH["training.form.preset"]) == ZH["training.recipes.tutorial.name"] == "教程配置"
    assert field_value(page, ZH["training.form.run_name"]) == next_name != "lang-run"
    points = chart_points(page)
    page.wait_for_function(f"() => ({CHART_POINTS})() > {points} + 2", timeout=60_000)  # it kept training
    assert progress_step(page, r"第 ([\d,]+) 步，共 10,000 步") > before
    assert shown_choice(page, ZH["settings.schedule.label"]) == "余弦"  # (still, after the live panel reran)
    errors = page.locator('[data-testid="stException"]')
    assert errors.count() == 0, errors.all_inner_texts()
    top_screenshot(page, "training-running-zh")

    page.get_by_role("button", name=ZH["training.live.stop"]).click()
    page.get_by_text("lang-run · 已停止").wait_for(timeout=60_000)
    page.get_by_text(ZH["messages.training.stopped"].split("{")[0]).wait_for(timeout=60_000)  # the stop message
    assert (checkpoints / "lang-run" / "model.safetensors").is_file()


QUEUE_ROW = """() => [...document.querySelectorAll('.st-key-tr_queue p')]
    .map(p => p.innerText).find(text => text.includes('starts in about'))"""


def test_the_queue_counts_down_and_goes_with_the_live_header_when_the_next_run_starts(app_url, open_page):
    """A run queued behind another: its "starts in about …" counts down as the first trains, and when it starts
    (a second tab of the same learner stops the first), the queue and the note under Start go in the same redraw as
    the live header changes, with no reload of the tab that watches."""
    from playwright.sync_api import expect

    page = open_page(height=2600)
    page.goto(f"{app_url}/training?{form_query(**QUEUE_FIRST)}")
    start = page.get_by_role("button", name=EN["training.form.start"])
    start.wait_for(timeout=180_000)
    wait_for_app(page)
    start.click()
    page.get_by_text("q-first · running").wait_for(timeout=60_000)
    page.get_by_label(EN["training.form.run_name"]).fill("q-second")
    page.get_by_label(EN["training.form.run_name"]).press("Enter")
    wait_for_app(page)
    start.click()
    waiting = page.get_by_text("Waiting to train (1)")
    note = page.get_by_text("q-second is waiting to train: place 1 of 1")
    waiting.wait_for(timeout=60_000)
    expect(note).to_have_count(1)
    page.wait_for_function(f"() => ({QUEUE_ROW})() !== undefined", timeout=60_000)
    before = page.evaluate(QUEUE_ROW)
    page.wait_for_function(f"before => [before, undefined].indexOf(({QUEUE_ROW})()) < 0", arg=before,
                           timeout=10_000)  # (a live redraw is every 2 s)
    top_screenshot(page, "training-queued-en")

    other = page.context.new_page()
    other.goto(f"{app_url}/training?{form_query()}")
    other.get_by_text("q-first · running").wait_for(timeout=120_000)
    wait_for_app(other)
    other.get_by_role("button", name=EN["training.live.stop"]).click()
    page.get_by_text("q-second · running").wait_for(timeout=120_000)
    expect(waiting).to_have_count(0, timeout=6_000)  # (a live redraw is every 2 s)
    expect(note).to_have_count(0, timeout=6_000)
    page.get_by_role("button", name=EN["training.live.stop"]).click()
    page.get_by_text("q-second · stopped").wait_for(timeout=60_000)
