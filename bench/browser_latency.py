"""Click-to-screen latency of the Inspect and Trace pages' controls, and how long every page takes to open (Playwright).

    python -m bench.browser_latency                   own server: a cold start, every page, Inspect's and Trace's
                                                      controls
    python -m bench.browser_latency --train           the Inspect clicks again while a run trains in the background
    python -m bench.browser_latency --url URL         a server that is already running (no cold start)
    python -m bench.browser_latency --skip-pages      only the Inspect and Trace controls and tabs
    python -m bench.browser_latency --hog 2           the Inspect and Trace timings again beside 2 busy loops
    python -m bench.browser_latency --skip-pages --skip-controls --hog 2    only the tab switches, quiet and loaded
    python -m bench.browser_latency --skip-pages --skip-controls --baseline URL    the tab switches against another
                                                      version's server (say, `git archive HEAD`'s), in turn

Latency is measured in the browser: a capture-phase listener notes performance.now() when the pointer or key
goes down, and a check that runs on every animation frame notes when the change is on screen (the enlarged
head's title names the new head, the query caption names the new position, the bars of the distribution
change, Trace's stage heading names the new stage, its text strip boxes the new position). A tab switch counts
from the click on the tab to the end of the script run it starts with every element drawn (none stale, no
skeleton) and every chart in the viewport drawn by Plotly; its first opening, which computes what the tab needs,
is reported apart from the openings after it. Payload is the bytes
of the websocket frames the server sends for that rerun (until its script_finished message); "fragment" counts
the reruns that ran only a fragment of the page, read from the frames themselves (ForwardMsg metadata). Pages
are opened from the sidebar, as a reader does; "first screenful" is the new page's title on screen with the
script run finished and every chart in the viewport drawn.
Prints median / p95 / max per control and per page. Chromium at 1440 × 900 (/usr/bin/chromium).
"""
from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field

from explorer.i18n import catalog
from explorer.navigation import DEFAULT_PAGE

from .common import ROOT, load_summary

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1440, "height": 900}
MARK_INPUT = """() => {
    for (const kind of ['pointerdown', 'keydown'])
        document.addEventListener(kind, () => { window.__inputAt = performance.now(); }, true);
}"""
# The check on every frame: returns performance.now() once signature() differs from `before`.
CHANGED = """([signature, before]) => {
    const now = eval(signature)();
    return now && now !== before ? performance.now() : false;
}"""
# Every chart visible in the viewport has been drawn by Plotly.
CHARTS_DRAWN = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
    .filter(c => { const r = c.getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0 && r.height > 0; })
    .every(c => c.querySelector('.main-svg'))"""
HEAD_TITLE = """() => { const t = document.querySelector('.st-key-inspect-head-figure .gtitle');
                       return t ? t.textContent : ''; }"""
QUERY_CAPTION = """() => { const e = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
                             .find(e => e.innerText.includes('the boxed character is the query'));
                           return e ? e.innerText : ''; }"""
BARS = """() => { const c = document.querySelector('.st-key-inspect-predictions .js-plotly-plot');
                 if (!c) return '';
                 const paths = [...c.querySelectorAll('.bars .point path')].map(p => p.getAttribute('d'));
                 return c.querySelectorAll('.bars .point').length + ':' + paths.join('|'); }"""
STAGE_HEADING = """() => { const h = [...document.querySelectorAll("h3")]
                           .find(h => /^\\d+\\/\\d+ · /.test(h.innerText));
                         return h ? h.innerText : ''; }"""
# the Trace page's position, as the text strip boxes it (drawn by the server, not by the slider's own thumb), once
# the whole page's rerun has redrawn every element (none stale)
TRACE_POSITION = """() => { if (document.querySelector('[data-stale="true"]')) return '';
                           const cells = [...document.querySelectorAll('.st-key-trace-strip path.point')];
                           const i = cells.findIndex(c => c.style.strokeWidth === '3px');
                           return i < 0 ? '' : String(i); }"""
# the run a click started has ended and its page is whole: no element of the run before, no skeleton, every chart in
# the viewport drawn; then the time it was seen
SETTLED = """() => document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state')
        === 'notRunning'
    && !document.querySelector('[data-testid=stMain] [data-testid=stSkeleton], [data-stale=true]')
    && (""" + CHARTS_DRAWN + """)() && performance.now()"""
HEADING = "() => { const h = document.querySelector('[data-testid=\"stMain\"] h1'); return h ? h.innerText : ''; }"


@dataclass
class Samples:
    ms: list[float] = field(default_factory=list)
    payload: list[int] = field(default_factory=list)  # bytes the server sent for each rerun
    fragment_runs: int = 0
    script_ms: list[float] = field(default_factory=list)  # until the run's last message arrived (the rest: drawing)

    def line(self, name: str) -> str:
        if not self.ms:
            return f"  {name:<34} no samples"
        ms = sorted(self.ms)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        kb = f"{statistics.median(self.payload) / 1e3:7.1f} kB" if self.payload else "      —"
        script = f"  script ended at {statistics.median(self.script_ms):5.0f} ms" if self.script_ms else ""
        return (f"  {name:<34} n={len(ms):3d}  median {statistics.median(ms):6.0f} ms  p95 {p95:6.0f} ms  "
                f"max {ms[-1]:6.0f} ms  payload {kb}/rerun  fragment-only {self.fragment_runs}/{len(ms)}{script}")


class Frames:
    """The server's websocket frames since mark(): their bytes, whether a script run ended, and its scope."""

    def __init__(self, page):
        self.mark()
        page.on("websocket", lambda ws: ws.on("framereceived", self.received))

    def received(self, payload) -> None:
        data = payload if isinstance(payload, bytes) else payload.encode()
        self.bytes += len(data)
        kind, fragment = message_kind(data)
        if kind == "new_session":
            self.fragment |= fragment
            self.full |= not fragment
        elif kind == "script_finished":
            self.finished = True

    def mark(self) -> None:
        self.bytes, self.fragment, self.full, self.finished = 0, False, False, False

    def wait_finished(self, page, timeout_s: float = 120) -> None:
        """Until a script run (or fragment run) started after mark() has ended."""
        deadline = time.perf_counter() + timeout_s
        while not self.finished:
            if time.perf_counter() > deadline:
                raise TimeoutError("no script run finished")
            page.wait_for_timeout(10)

    def take(self) -> tuple[int, bool]:
        """(bytes since mark, whether the rerun ran fragments only)."""
        return self.bytes, self.fragment and not self.full


def message_kind(data: bytes) -> tuple[str | None, bool]:
    """The ForwardMsg's type, and for a run's start whether it runs fragments only."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = ForwardMsg()
    try:
        msg.ParseFromString(data)
    except Exception:  # noqa: BLE001 (not a ForwardMsg: nothing to learn from it)
        return None, False
    kind = msg.WhichOneof("type")
    return kind, kind == "new_session" and bool(msg.metadata.run.fragment_ids)


def timed(page, frames: Frames, act, signature: str, samples: Samples, timeout_ms: int = 60_000) -> None:
    """Do act() and record the time from its input event to the frame where signature() changed."""
    before = page.evaluate(signature)
    page.evaluate("() => { window.__inputAt = null; }")
    frames.mark()
    act()
    done = page.wait_for_function(CHANGED, arg=[signature, before], polling="raf", timeout=timeout_ms).json_value()
    started = page.evaluate("() => window.__inputAt")
    frames.wait_finished(page)
    page.wait_for_timeout(100)  # the last frames of the rerun
    payload, fragment_only = frames.take()
    samples.ms.append(done - started)
    samples.payload.append(payload)
    samples.fragment_runs += fragment_only
    page.wait_for_timeout(250)  # a reader's pause between clicks


def run_to_end(page, frames: Frames, act) -> None:
    """act(), then wait until the script run it caused has finished."""
    frames.mark()
    act()
    frames.wait_finished(page)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server():
    """`streamlit run app.py` on a free port; yields (url, the time it was spawned at)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.perf_counter() - t0 > 120:
                    raise SystemExit("streamlit did not start") from None
                time.sleep(0.05)
        yield url, t0
    finally:
        proc.terminate()
        proc.wait(20)


@contextmanager
def background_training():
    """A CLI run on the built-in stories at nice 10 (as the app's jobs run), for as long as the block lasts."""
    with tempfile.TemporaryDirectory(prefix="latency-train-") as tmp:
        proc = subprocess.Popen(["nice", "-n", "10", sys.executable, "-m", "gptcore", "train", "--data", "builtin",
                                 "--builtin-chars", "300000", "--steps", "100000", "--out", f"{tmp}/run"],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(8)  # past corpus generation and start-up: training from here on
        try:
            yield
        finally:
            proc.terminate()
            proc.wait(30)


@contextmanager
def cpu_hogs(n: int):
    """n processes that each keep a core busy at normal priority (`python -c "while True: pass"`), for as long as the
    block lasts: a server on a machine shared with other work."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    time.sleep(3)  # (the load average starts to show them)
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def open_from_sidebar(page, title: str) -> None:
    page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=title, exact=True).click()


def page_opens(page, frames: Frames, rounds: int) -> dict[str, Samples]:
    """Open every page from the sidebar, `rounds` times round the whole list after a first round that warms them.

    Timed from just before the click (Python's clock, so Playwright's own few milliseconds count against us) to
    the new page's title on screen, its script run finished and every chart in the viewport drawn.
    """
    nav = page.get_by_test_id("stSidebarNavItems")
    # app.py's navigation (a fresh server's first answer can list the app_pages/ files by name before it)
    nav.get_by_role("link", name="Inspect", exact=True).wait_for(timeout=120_000)
    titles = [t.split("\n")[-1].strip() for t in nav.get_by_role("link").all_inner_texts()]  # (after the icon)
    start = catalog("en")[f"app.pages.{DEFAULT_PAGE}"]  # open already: a click on it changes nothing, so last
    titles = [title for title in titles if title != start] + [start]
    results = {title: Samples() for title in titles}
    for r in range(rounds + 1):
        for title in titles:
            before = page.evaluate(HEADING)
            frames.mark()
            t0 = time.perf_counter()
            open_from_sidebar(page, title)
            page.wait_for_function(f"prev => ({HEADING})() && ({HEADING})() !== prev", arg=before, polling="raf",
                                   timeout=120_000)
            frames.wait_finished(page)
            page.wait_for_function(CHARTS_DRAWN, polling="raf", timeout=120_000)
            if r > 0:
                results[title].ms.append(1000 * (time.perf_counter() - t0))
                results[title].payload.append(frames.take()[0])
            page.wait_for_timeout(300)
    return results


def cold_start(browser) -> tuple[float, float]:
    """Seconds from spawning `streamlit run` to the home page's title on screen, and to its first screenful."""
    page = browser.new_page(viewport=VIEWPORT)
    frames = Frames(page)
    with server() as (url, spawned):
        page.goto(url)
        page.wait_for_function(f"() => ({HEADING})() !== ''", polling="raf", timeout=120_000)
        titled = time.perf_counter() - spawned
        frames.wait_finished(page)
        page.wait_for_function(CHARTS_DRAWN, polling="raf", timeout=120_000)
        finished = time.perf_counter() - spawned
    page.close()
    return titled, finished


CONTROLS = ("head", "layer", "query (slider, keyboard)", "query (click a character)", "top-k (number input)",
            "temperature (slider, keyboard)", "bars shown (slider, keyboard)")


def open_tab(page, frames: Frames, name: str) -> None:
    """Open a tab of the page (the tabs are lazy: opening one runs the script); nothing to do if it is open."""
    tab = page.get_by_role("tab", name=name, exact=True)
    if tab.get_attribute("aria-selected") != "true":
        run_to_end(page, frames, tab.click)


def next_button(page, key: str):
    """The button after the selected one of a segmented control (wrapping round), so every click changes it."""
    buttons = page.locator(f".st-key-{key} button")
    selected = next(i for i in range(buttons.count()) if buttons.nth(i).get_attribute("aria-checked") == "true")
    return buttons.nth((selected + 1) % buttons.count())


def inspect_controls(page, frames: Frames, clicks: int) -> dict[str, Samples]:
    """Heads, layers, query positions (keyboard, and a click on a query character of the enlarged head), top-k,
    temperature and the number of bars shown: each changed `clicks` times, each timed to its change on screen."""
    results = {name: Samples() for name in CONTROLS}
    open_tab(page, frames, "Attention")
    page.locator(".st-key-inspect-head-figure .gtitle").wait_for(timeout=60_000)
    for control, name in (("inspect-head", "head"), ("inspect-layer", "layer")):
        for _ in range(clicks):
            timed(page, frames, next_button(page, control).click, HEAD_TITLE, results[name])
    slider = page.locator("[class*='st-key-inspect-query'] input[type=range]")
    for i in range(clicks):
        slider.focus()
        timed(page, frames, lambda i=i: slider.press("ArrowLeft" if i % 2 else "ArrowRight"), QUERY_CAPTION,
              results["query (slider, keyboard)"])
    # the query characters down the left of the enlarged head are scatter points: a click on one picks it
    points = page.locator(".st-key-inspect-head-figure .scatterlayer .point")
    for i in range(clicks):
        point = points.nth(5 + (i * 37) % max(1, points.count() - 10))  # rows spread over the pattern
        point.scroll_into_view_if_needed()
        box = point.bounding_box()
        timed(page, frames, lambda b=box: page.mouse.click(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2),
              QUERY_CAPTION, results["query (click a character)"])
    open_tab(page, frames, "Predictions")
    page.locator(".st-key-inspect-predictions .js-plotly-plot").wait_for(timeout=60_000)
    step_up = page.locator(".st-key-inspect-gen-topk [data-testid=stNumberInputStepUp]")
    step_down = page.locator(".st-key-inspect-gen-topk [data-testid=stNumberInputStepDown]")
    for i in range(clicks):  # 0 → 1 → 0 …: off, then only the most likely character
        timed(page, frames, (step_down if i % 2 else step_up).click, BARS, results["top-k (number input)"])
    if clicks % 2:  # top-k back to off, or the temperature below could not change a single bar
        run_to_end(page, frames, step_down.click)
    for name, key in (("temperature (slider, keyboard)", "inspect-temperature"),
                      ("bars shown (slider, keyboard)", "inspect-topk")):
        slider = page.locator(f".st-key-{key} input[type=range]")
        for i in range(clicks):
            slider.focus()
            timed(page, frames, lambda i=i, s=slider: s.press("ArrowLeft" if i % 2 else "ArrowRight"), BARS,
                  results[name])
    return results


INSPECT_TABS = ("Predictions", "Head finder", "Side by side", "Over training", "Attention")
TRACE_TABS = ("Logit lens", "Attribution", "Ablation", "Activation patching", "Step through")


def tab_switches(pages: dict[str, tuple[object, Frames]], tabs: tuple[str, ...],
                 rounds: int) -> dict[str, dict[str, Samples]]:
    """On each page (a server's, by its name), open each tab in turn, `rounds` times round, the pages' rounds taken
    in turn so that a burst of load elsewhere hits each alike. Each switch is timed from the click on the tab to the
    end of the run it starts, drawn (SETTLED); the first round is reported apart ("first opening"): it computes
    what each tab needs."""
    results = {server: {label: Samples() for name in tabs for label in (f"{name} (first opening)", f"{name} (again)")}
               for server in pages}
    for r in range(rounds + 1):
        for server, (page, frames) in pages.items():
            page.bring_to_front()
            for name in tabs:
                switch_tab(page, frames, name, results[server][f"{name} ({'first opening' if r == 0 else 'again'})"])
    return results


def switch_tab(page, frames: Frames, name: str, samples: Samples) -> None:
    tab = page.get_by_role("tab", name=name, exact=True)
    page.wait_for_function(SETTLED, polling="raf", timeout=120_000)
    page.evaluate("() => { window.__inputAt = null; }")
    frames.mark()
    tab.click()
    frames.wait_finished(page)
    script_end = page.evaluate("() => performance.now() - window.__inputAt")
    done = page.wait_for_function(SETTLED, polling="raf", timeout=120_000).json_value()
    samples.ms.append(done - page.evaluate("() => window.__inputAt"))
    samples.script_ms.append(script_end)
    payload, fragment_only = frames.take()
    samples.payload.append(payload)
    samples.fragment_runs += fragment_only
    page.wait_for_timeout(250)


def again(results: dict[str, Samples]) -> list[float]:
    """Every tab switch after the first round, in ms."""
    return [ms for name, samples in results.items() if name.endswith("(again)") for ms in samples.ms]


def print_tab_switches(results: dict[str, dict[str, Samples]]) -> None:
    for server, per_tab in results.items():
        if len(results) > 1:
            print(f"  {server}:")
        for name, samples in per_tab.items():
            print(samples.line(name))
        if times := again(per_tab):
            name = "every tab switch after the first"
            print(f"  {name:<34} n={len(times):3d}  median {statistics.median(times):6.0f} ms")
    if len(results) == 2:
        (_, baseline), (_, this) = results.items()
        ratio = statistics.median(again(this)) / statistics.median(again(baseline))
        print(f"  tab switches after the first, this server's median over the baseline's: {ratio:.2f}")


TRACE_CONTROLS = ("next stage (button)", "previous stage (button)", "stage (slider, keyboard)",
                  "position (slider, keyboard)", "position (click a character)")


def trace_controls(page, frames: Frames, clicks: int) -> dict[str, Samples]:
    """The Trace page's step controls (Next, Previous, the stage slider) and its position (slider, and a click on
    a character of the text strip), each changed `clicks` times and timed to the change on screen."""
    results = {name: Samples() for name in TRACE_CONTROLS}
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=120_000)  # the text strip and the pass diagram
    page.wait_for_function(STAGE_HEADING, polling="raf", timeout=120_000)
    stages = int(page.evaluate(STAGE_HEADING).split("/")[1].split(" ")[0])
    for name, label in (("next stage (button)", "Next ▶"), ("previous stage (button)", "◀ Previous")):
        button = page.get_by_role("button", name=label)
        for _ in range(min(clicks, stages - 1)):  # (Next stops at the last stage, Previous at the first)
            timed(page, frames, button.click, STAGE_HEADING, results[name])
    for name, key in (("stage (slider, keyboard)", "trace-stage"), ("position (slider, keyboard)", "trace-position")):
        slider = page.locator(f".st-key-{key} input[type=range]")
        signature = STAGE_HEADING if key == "trace-stage" else TRACE_POSITION
        for i in range(clicks):
            slider.focus()
            timed(page, frames, lambda i=i, s=slider: s.press("ArrowLeft" if i % 2 else "ArrowRight"), signature,
                  results[name])
    points = page.locator(".st-key-trace-strip path.point")
    for i in range(clicks):
        point = points.nth(5 + (i * 37) % max(1, points.count() - 10))
        box = point.bounding_box()
        timed(page, frames, lambda b=box: page.mouse.click(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2),
              TRACE_POSITION, results["position (click a character)"])
    return results


def full_trace_text(page, frames: Frames) -> None:
    """The Trace page's text past the model's context, so every stage is traced at full size."""
    box = page.get_by_role("textbox", name="Text")
    box.fill((box.input_value() + " ") * 3)
    run_to_end(page, frames, lambda: box.press("Control+Enter"))
    page.get_by_text("are left out").first.wait_for(timeout=60_000)


def full_context_text(page, frames: Frames) -> None:
    """Fill the text box past the model's context, so every figure is at full size (128 × 128)."""
    # the page's first run has drawn the enlarged head and ended: a text typed earlier could be overwritten
    page.locator(".st-key-inspect-head-figure .gtitle").wait_for(timeout=120_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
    box = page.get_by_role("textbox", name="Text to inspect")
    text = box.input_value()
    box.fill((text + " ") * 3)
    run_to_end(page, frames, lambda: box.press("Control+Enter"))
    page.get_by_text("only the first").first.wait_for(timeout=60_000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.browser_latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a server that is already running (skips the cold start)")
    parser.add_argument("--clicks", type=int, default=20, help="samples per Inspect or Trace control")
    parser.add_argument("--tab-rounds", type=int, default=4, help="times round every tab after its first opening")
    parser.add_argument("--page-rounds", type=int, default=3, help="times every page is opened (after a warm-up)")
    parser.add_argument("--skip-pages", action="store_true", help="no cold start, no page openings")
    parser.add_argument("--skip-controls", action="store_true", help="time the tab switches only, not the controls")
    parser.add_argument("--skip-trace", action="store_true", help="leave out the Trace page")
    parser.add_argument("--train", action="store_true", help="also time the Inspect controls while a run trains")
    parser.add_argument("--hog", type=int, default=0, metavar="N",
                        help="also time Inspect and Trace beside N busy loops at normal priority")
    parser.add_argument("--baseline", metavar="URL",
                        help="another version's server: its tab switches timed too, round by round in turn")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    print(load_summary())
    loads = [("quiet", None)]
    loads += [("while a run trains", background_training)] if args.train else []
    loads += [(f"beside {args.hog} busy loops", lambda: cpu_hogs(args.hog))] if args.hog else []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        if args.url is None and not args.skip_pages:
            titled, finished = cold_start(browser)
            print(f"cold server: home page title on screen {titled:.2f} s after `streamlit run`, "
                  f"its first screenful (script run finished, charts drawn) at {finished:.2f} s")
        with (server() if args.url is None else nullserver(args.url)) as (url, _):
            page = browser.new_page(viewport=VIEWPORT)
            page.add_init_script(f"({MARK_INPUT})()")
            frames = Frames(page)
            run_to_end(page, frames, lambda: page.goto(url))
            if not args.skip_pages:
                print("\npages opened from the sidebar on a warm server (first screenful):")
                for title, samples in page_opens(page, frames, args.page_rounds).items():
                    print(samples.line(title))
            switched = {"this server": (page, frames)}
            if args.baseline:
                other = browser.new_page(viewport=VIEWPORT)
                other.add_init_script(f"({MARK_INPUT})()")
                switched = {"baseline": (other, Frames(other)), **switched}
                run_to_end(other, switched["baseline"][1], lambda: other.goto(args.baseline))
            measured = [("Inspect", full_context_text, inspect_controls, INSPECT_TABS,
                         "Inspect, shipped model, full context (128 characters)")]
            measured += [] if args.skip_trace else [("Trace a prediction", full_trace_text, trace_controls, TRACE_TABS,
                                                     "Trace a prediction, shipped model, full context")]
            for link, fill, controls, tabs, title in measured:
                for tab_page, tab_frames in switched.values():
                    tab_page.bring_to_front()
                    run_to_end(tab_page, tab_frames, lambda p=tab_page, link=link: open_from_sidebar(p, link))
                    fill(tab_page, tab_frames)
                for label, context in loads:
                    with context() if context else nullcontext():
                        print(f"\n{title}, {label} ({load_summary()}):")
                        if not args.skip_controls:
                            for name, samples in controls(page, frames, args.clicks).items():
                                print(samples.line(name))
                        print_tab_switches(tab_switches(switched, tabs, args.tab_rounds))
        browser.close()
    print(load_summary())
    return 0


@contextmanager
def nullcontext():
    yield


@contextmanager
def nullserver(url: str):
    yield url, None


if __name__ == "__main__":
    sys.exit(main())
