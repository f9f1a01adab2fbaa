"""Start the app on a free loopback port and drive it with Playwright in Debian's Chromium."""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def require_chromium():
    if not CHROMIUM.exists():
        print(f"skipping browser test: {CHROMIUM} is absent (apt-get install chromium)")
        pytest.skip(f"{CHROMIUM} is absent")
    pytest.importorskip("playwright.sync_api", reason="python playwright is not installed")


@contextmanager
def app_server(env: dict | None = None, timeout: float = 60.0):
    """Yield the base URL of `streamlit run app.py` on a free port; stop it afterwards."""
    from bench.common import app_server as start

    with start(ROOT, env, timeout=timeout) as server:
        yield server.url


@contextmanager
def chromium():
    """Yield a Playwright Browser of Debian's Chromium; close it afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


# Counts the script runs the page has seen end: Streamlit marks its root with the state of the script run
# (running, rerunRequested, notRunning, ...), so each change to notRunning is one run finished, fragment runs too.
COUNT_RUNS = """new MutationObserver(changes => {
  for (const c of changes)
    if (c.target.getAttribute('data-test-script-state') === 'notRunning') window.scriptRunsFinished += 1;
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state']});
window.scriptRunsFinished = 0;"""

DRAWN = """() => document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state') === 'notRunning'
  && !document.querySelector('[data-testid=stMain] [data-testid=stSkeleton], [data-stale=true]')"""


def wait_until_drawn(page, timeout_ms: int = 120_000) -> None:
    """Wait until the script has run to the end and every element is drawn: Streamlit shows a skeleton until a
    lazily loaded element (a chart) is ready, and marks the elements of the run before as stale until replaced."""
    page.wait_for_function(DRAWN, timeout=timeout_ms)


def after_rerun(page, action, timeout_ms: int = 120_000, counted_ms: int = 15_000) -> None:
    """Do `action` (a click, a key press), then wait until the run it starts has finished and is drawn. The page
    must come from conftest's open_page, which counts the runs (COUNT_RUNS). A busy browser can take a short run's
    start and end in one render, so that the state it counts never changes: after counted_ms without a count, a
    page drawn is taken as the run's end (a test then checks what the action was to change)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    wait_until_drawn(page, timeout_ms)  # (a run still going would take the action's place in the count)
    before = page.evaluate("window.scriptRunsFinished")
    action()
    try:
        page.wait_for_function(f"() => window.scriptRunsFinished > {before}", timeout=counted_ms)
    except PlaywrightTimeout:
        pass
    wait_until_drawn(page, timeout_ms)


def open_tab(page, name: str, timeout_ms: int = 120_000) -> None:
    """Open a lazy tab, unless it is open, and wait until it is drawn. A click that lands while the page is still
    laying out can be lost (the tab stays unselected), so it is given again until the tab is selected; the run that
    draws the tab is waited for, though on a busy machine its end can come before the count is read, so a tab
    selected and a page drawn is enough after a few seconds."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    tab = page.get_by_role("tab", name=name)
    wait_until_drawn(page, timeout_ms)
    if tab.get_attribute("aria-selected") == "true":  # open already: no run to wait for
        return
    before = page.evaluate("window.scriptRunsFinished")
    for _ in range(5):
        tab.click()
        try:
            page.wait_for_function("t => t.getAttribute('aria-selected') === 'true'", arg=tab.element_handle(),
                                   timeout=5_000)
            break
        except PlaywrightTimeout:
            continue
    else:
        raise AssertionError(f"the tab {name!r} could not be selected")
    try:
        page.wait_for_function(f"() => window.scriptRunsFinished > {before}", timeout=10_000)
    except PlaywrightTimeout:
        pass
    wait_until_drawn(page, timeout_ms)


def full_page_screenshot(page, name: str, width: int, height: int) -> Path:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to fit it, then go back.
    Only the height changes, so the charts keep their width and are not redrawn."""
    tall = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": width, "height": min(tall + 50, 12_000)})
    path = screenshot(page, name)
    page.set_viewport_size({"width": width, "height": height})
    return path


def wait_for_app(page, timeout_ms: int = 60_000) -> None:
    """Wait until Streamlit has finished running the script (no 'Running...' status widget)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)


def wait_for_quiet_network(page, quiet_ms: int = 750, timeout_ms: int = 10_000) -> None:
    """Wait until the page has made no HTTP request for quiet_ms: what a page asks for once its script has run
    (the favicon, fonts, lazily loaded chunks) has been asked for by then."""
    last = [time.monotonic()]

    def record(_request) -> None:
        last[0] = time.monotonic()

    page.on("request", record)
    try:
        deadline = time.monotonic() + timeout_ms / 1000
        while time.monotonic() - last[0] < quiet_ms / 1000 and time.monotonic() < deadline:
            page.wait_for_timeout(100)
    finally:
        page.remove_listener("request", record)


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
