"""The Inspect page in a real browser: it renders its figures without an exception; screenshots go to artifacts/."""
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser_support import wait_for_app

from gptcore import checkpoint as ckpt
from gptcore import folders
from gptcore.runs import SHIPPED

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def wait_healthy(url: str, server: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"streamlit did not answer at {url} within {timeout}s")


@pytest.fixture(scope="module")
def server_url():
    if not Path(CHROMIUM).exists():
        print(f"skipping: {CHROMIUM} not found")
        pytest.skip(f"{CHROMIUM} not found")
    if not _has_module("playwright"):
        print("skipping: the playwright Python package is not installed")
        pytest.skip("playwright is not installed")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_healthy(url, server)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def screenshot(page, path: Path) -> None:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to fit it first."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": 1400, "height": min(height + 50, 12_000)})
    page.wait_for_timeout(1500)  # Plotly redraws at the new size
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_inspector_page_renders_in_chromium(server_url):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
            page.goto(server_url, timeout=60_000)
            # reach the page the way a reader does: through the sidebar navigation
            nav = page.get_by_test_id("stSidebarNavItems")
            nav.get_by_role("link", name="Inspect", exact=True).click(timeout=60_000)
            page.get_by_role("heading", name="Inspect a trained model").wait_for(timeout=60_000)
            # the grid and the enlarged head of the first tab are drawn by Plotly in the browser
            page.locator(".js-plotly-plot .heatmaplayer").nth(1).wait_for(timeout=60_000)
            assert page.get_by_role("combobox", name="Checkpoint").input_value() == SHIPPED
            assert page.locator("[data-testid='stException']").count() == 0
            screenshot(page, ARTIFACTS / "inspector-attention.png")
            # exports: Plotly's modebar PNG, our HTML copy, the attention tensor as NPY
            grid = page.locator(".js-plotly-plot").first
            grid.hover()
            with page.expect_download(timeout=60_000) as png:
                grid.locator('.modebar-btn[data-title="Download plot as a PNG"]').click()
            assert png.value.suggested_filename == f"attention-grid-{SHIPPED}.png"
            with page.expect_download(timeout=60_000) as html:
                page.get_by_role("button", name="Download as HTML").first.click()
            assert "plotly" in Path(html.value.path()).read_text()[:100_000].lower()
            with page.expect_download(timeout=60_000) as npy:
                page.get_by_role("button", name="Attention as NPY").click()
            assert Path(npy.value.path()).read_bytes()[:6] == b"\x93NUMPY"
            for tab, shot in (("Predictions", "inspector-predictions.png"), ("Head finder", "inspector-heads.png"),
                              ("Over training", "inspector-training.png")):
                page.get_by_role("tab", name=tab).click()
                page.wait_for_timeout(500)
                wait_for_app(page)  # the tabs are lazy: opening one runs its part of the page
                page.wait_for_timeout(1000)
                assert page.locator("[data-testid='stException']").count() == 0
                screenshot(page, ARTIFACTS / shot)
            # the slider's default is the final step: the grid and the score curves of "Over training" are drawn
            page.locator(".js-plotly-plot .heatmaplayer").first.wait_for(timeout=60_000)
            final_step = ckpt.load_checkpoint(folders.CHECKPOINT_ROOT / SHIPPED).meta["step"]
            assert page.get_by_text(f"Attention at step {final_step}").count() >= 1
            assert page.locator(".js-plotly-plot").count() == 2
        finally:
            browser.close()
    assert (ARTIFACTS / "inspector-attention.png").stat().st_size > 10_000


class Runs:
    """The script runs the server starts, read from its websocket frames: each ForwardMsg new_session names the
    fragments it reruns (none for a whole-page run); script_finished ends it. Bytes count everything sent."""

    def __init__(self, page):
        self.clear()
        page.on("websocket", lambda ws: ws.on("framereceived", self.received))

    def clear(self) -> None:
        self.fragment_ids, self.finished, self.bytes = [], 0, 0

    def received(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        data = payload if isinstance(payload, bytes) else payload.encode()
        self.bytes += len(data)
        msg = ForwardMsg()
        try:
            msg.ParseFromString(data)
        except Exception:  # noqa: BLE001 (not a ForwardMsg)
            return
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.fragment_ids.append(list(msg.metadata.run.fragment_ids))
        elif kind == "script_finished":
            self.finished += 1


def test_a_head_or_query_click_reruns_only_its_fragment(server_url):
    """#17: choosing a head, a layer or a query reruns the fragment of the enlarged head, not the page: the
    forward pass, the grid of every head and the rest of the page are neither recomputed nor sent again."""
    from playwright.sync_api import sync_playwright

    head_title = "() => document.querySelector('.st-key-inspect-head-figure .gtitle')?.textContent || ''"
    query_caption = """() => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
        .map(e => e.innerText).find(t => t.includes('the boxed character is the query')) || ''"""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            runs = Runs(page)
            page.goto(f"{server_url}/inspector", timeout=60_000)
            page.locator(".st-key-inspect-head-figure .gtitle").wait_for(timeout=60_000)
            wait_for_app(page)

            def rerun_after(act, signature: str) -> None:
                before = page.evaluate(signature)
                runs.clear()
                act()
                page.wait_for_function("([f, before]) => eval(f)() !== before", arg=[signature, before],
                                       timeout=30_000)
                deadline = time.monotonic() + 30
                while not runs.finished and time.monotonic() < deadline:
                    page.wait_for_timeout(50)
                assert runs.fragment_ids and all(runs.fragment_ids), runs.fragment_ids  # fragment runs only
                assert runs.bytes < 300_000, runs.bytes  # (the grid of all 16 heads alone is over 300 kB)

            for key in ("inspect-head", "inspect-layer"):
                buttons = page.locator(f".st-key-{key} button")
                chosen = [b.get_attribute("aria-checked") for b in buttons.all()].index("true")
                rerun_after(buttons.nth((chosen + 1) % buttons.count()).click, head_title)
            point = page.locator(".st-key-inspect-head-figure .scatterlayer .point").nth(20)
            point.scroll_into_view_if_needed()
            box = point.bounding_box()
            rerun_after(lambda: page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2),
                        query_caption)
            assert "position 20 '" in page.evaluate(query_caption)  # the clicked character is the query
            assert page.locator("[data-testid='stException']").count() == 0

            page.goto(f"{server_url}/inspector?lang=zh", timeout=60_000)
            page.locator(".st-key-inspect-head-figure .gtitle").wait_for(timeout=60_000)
            wait_for_app(page)
            page.wait_for_timeout(1000)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "inspector-attention-zh.png"))
            assert page.get_by_role("heading", name="检视一个训练好的模型").count() == 1
        finally:
            browser.close()
