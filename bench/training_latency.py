"""Click-to-update latency of the Train page while a model trains in the background.

    python -m bench.training_latency                 # own server + a "Quick demo" run on every core
    python -m bench.training_latency --preset fast   # the same during a "Fast recipe" run (Muon)
    python -m bench.training_latency --url http://127.0.0.1:8501   # a server that is already training

Each sample clicks the + or − of the "Layers" field (alternately) and times until the parameter
count under it shows the new model: one full rerun of the page, while the training thread keeps
the CPU busy and the live panel redraws every second. Prints median and p95 in milliseconds.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from playwright.sync_api import sync_playwright

from gptcore.recipes import RECIPES

from .common import ROOT

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
PARAMS_TEXT = """() => {
    const el = [...document.querySelectorAll('[data-testid="stMarkdownContainer"]')]
        .find(e => e.innerText.includes('parameters with this corpus'));
    return el ? el.innerText : '';
}"""


def start_server(checkpoints: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port), "--server.address", "127.0.0.1"], cwd=ROOT,
                            env={**os.environ, "GPTCORE_CHECKPOINTS": checkpoints},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("streamlit did not start")


def wait_idle(page) -> None:
    """Until Streamlit's "running" indicator is gone (the first run builds the 1M-character corpus)."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=300_000)


def start_preset(page, preset: str) -> None:
    page.get_by_label("Preset").click()
    page.get_by_role("option", name=RECIPES[preset].name).click()
    page.get_by_text(RECIPES[preset].description).wait_for(timeout=300_000)
    wait_idle(page)
    page.get_by_role("button", name="Start training").click()
    page.get_by_text(" · running").first.wait_for(timeout=300_000)


def measure(page, clicks: int) -> list[float]:
    field = page.locator('[data-testid="stNumberInput"]').filter(has_text="Layers")
    times = []
    for i in range(clicks):
        before = page.evaluate(PARAMS_TEXT)
        button = field.locator('[data-testid="stNumberInputStepUp"]' if i % 2 == 0 else
                               '[data-testid="stNumberInputStepDown"]')
        t0 = time.perf_counter()
        button.click()
        page.wait_for_function(f"prev => ({PARAMS_TEXT})() !== prev && ({PARAMS_TEXT})() !== ''", arg=before,
                               timeout=60_000, polling="raf")
        times.append(1000 * (time.perf_counter() - t0))
        time.sleep(0.3)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training_latency", description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="base URL of a server that is already training")
    parser.add_argument("--clicks", type=int, default=30)
    parser.add_argument("--preset", choices=sorted(RECIPES), default="quick", help="the run to start (own server)")
    args = parser.parse_args(argv)
    proc, tmp = None, None
    if args.url is None:
        tmp = tempfile.TemporaryDirectory()
        proc, url = start_server(tmp.name)
    else:
        url = args.url
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            page.goto(url)  # the app's root first, so st.navigation (not a bare page script) serves the page
            page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Train", exact=True).click()
            page.get_by_role("button", name="Start training").wait_for(timeout=300_000)
            wait_idle(page)
            if args.url is None:
                start_preset(page, args.preset)
            page.get_by_text(" · running").first.wait_for(timeout=60_000)
            times = measure(page, args.clicks)
            still_training = page.get_by_text(" · running").count() > 0
            rate = page.locator('[data-testid="stMetric"]').filter(has_text="Tokens / s").inner_text().split()[-1]
            if args.url is None:
                page.get_by_role("button", name="Stop").click()
            browser.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
            tmp.cleanup()
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    print(f"{len(times)} clicks while training{'' if still_training else ' (the run ended during the test!)'}: "
          f"median {statistics.median(times):.0f} ms, p95 {p95:.0f} ms, max {times[-1]:.0f} ms; "
          f"the run's average so far, with this page open: {rate} tokens/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
