"""The Train page in Chromium: start a short run, see the loss chart grow and a sample appear, stop it."""
import time

from browser_support import app_server, browser_page, require_chromium, screenshot, wait_for_app

# A tiny model on 30,000 built-in characters: it trains in the background for a few seconds,
# long enough to watch the chart grow, and the Stop button ends it.
SETTINGS = {"Characters": 30_000, "Width d_model": 32, "Layers": 1, "Heads": 2, "FFN width d_ff": 88,
            "Context (characters)": 32, "Last step": 10_000, "Batch size": 8, "Evaluate every": 25,
            "Sample every": 20, "Checkpoint every": 0, "CPU threads": 1}
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


def test_a_short_run_grows_the_chart_and_writes_samples(tmp_path):
    require_chromium()
    with app_server(env={"GPTCORE_CHECKPOINTS": str(tmp_path)}) as url, browser_page(height=1400) as page:
        page.goto(url)
        wait_for_app(page)
        page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Train", exact=True).click()
        page.get_by_role("button", name="Start training").wait_for(timeout=60_000)
        wait_for_app(page)
        for label, value in SETTINGS.items():
            set_number(page, label, value)
        page.get_by_label("Run name (its checkpoint folder)").fill("browser-run")
        page.get_by_label("Run name (its checkpoint folder)").press("Enter")
        wait_for_app(page)
        page.get_by_role("button", name="Start training").click()

        page.get_by_text("browser-run · running").wait_for(timeout=60_000)
        page.wait_for_function(f"() => ({CHART_POINTS})() >= 5", timeout=60_000)
        first = chart_points(page)
        page.wait_for_function(f"() => ({CHART_POINTS})() > {first} + 20", timeout=60_000)
        page.get_by_text("step 20", exact=True).wait_for(timeout=60_000)  # the sample taken at step 20
        samples = page.locator('.st-key-tr_samples [data-testid="stCode"]')
        assert samples.count() >= 2  # steps 0 and 20 at least, newest first
        assert page.locator('[data-testid="stException"]').count() == 0
        time.sleep(1)
        screenshot(page, "training")

        page.get_by_role("button", name="Stop").click()
        page.get_by_text("browser-run · stopped").wait_for(timeout=60_000)
        page.get_by_text("Stopped at step").wait_for()
    assert (tmp_path / "browser-run" / "model.safetensors").is_file()


# Each out-of-range value a browser's number field lets through: the field says what is allowed, Start goes off
# with the reason, and a valid value turns it back on.
INVALID = [("Learning rate", "1000000", "0.003"), ("Last step", "-5", "20"), ("Batch size", "0", "4"),
           ("Context (characters)", "100000", "16")]


def test_start_is_disabled_for_each_invalid_field(tmp_path):
    require_chromium()
    from playwright.sync_api import expect
    with app_server(env={"GPTCORE_CHECKPOINTS": str(tmp_path)}) as url, browser_page(height=1400) as page:
        page.goto(f"{url}/training")
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
