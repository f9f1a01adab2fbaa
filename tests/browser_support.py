"""Start the app on a free loopback port and drive it with Playwright in Debian's Chromium."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def app_server(env: dict | None = None, timeout: float = 60.0):
    """Yield the base URL of `streamlit run app.py` on a free port; stop it afterwards."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start: {proc.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


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


@contextmanager
def browser_page(width: int = 1400, height: int = 1000):
    with chromium() as browser:
        yield browser.new_page(viewport={"width": width, "height": height})


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
