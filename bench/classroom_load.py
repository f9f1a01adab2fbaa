"""A classroom against one server: N learners, no browser, each clicking every few seconds (websocket clients).

    python -m bench.classroom_load --learners 1 5 10 20              N learners in turn, each N for --seconds
    python -m bench.classroom_load --learners 20 --training          the same while a run trains
    python -m bench.classroom_load --learners 20 --training-in-app   ... a run a learner started on the Train page
    python -m bench.classroom_load --url URL --pid PID ...           a server that is already running

It starts one `streamlit run app.py` (headless, on a private copy of the shipped checkpoint) and, for each N,
connects N learners that speak Streamlit's own protocol: a `BackMsg` with `rerun_script` (the page's hash, the
changed widget states, the fragment the widget lives in) goes up the websocket, `ForwardMsg`s come back until
that run's `script_finished`. That is what a browser sends for a page opened from the sidebar or a control
changed; the widgets' ids, options and fragments are read from the elements the server sends, as the browser
reads them. Each learner walks a lesson (Inspect's attention and prediction controls, Trace's position and
stages, the √d_k concept page's slider), starting at a random point of it, and pauses 2-4 s after each answer.

Answer time: the message sent -> that rerun's script_finished, so the server's part only (no drawing).
CPU per interaction: the server process's user + system time over the window (/proc/PID/stat, every thread),
divided by the answers in it. With --training a CLI run trains in a process of its own at nice 10, so the server's
CPU is its own. With --training-in-app a learner starts the run on the Train page (the form as a URL gives it: the
tutorial's model on 300,000 characters of built-in stories), so it trains however the app under test trains: a
thread of the server at nice 10 before each run became a process of its own, a process at nice 10 since (the
server's CPU then counts the run's when it is a thread). Memory: the server's resident set with the N sessions
connected.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from .common import ROOT, load_summary
from .common import app_server as common_app_server

FINISHED = {0: "ok", 3: "fragment"}  # ForwardMsg.ScriptFinishedStatus: a run (or a fragment's run) ran to its end
CACHE_RUNS = 2  # a large message is kept for this many runs after it was last used (global.maxCachedMessageAge)
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Widget:
    id: str
    kind: str  # the element's type: slider, button_group, number_input, button, tabs, ...
    fragment: str  # the fragment it lives in ("" for the whole page): a change reruns only that
    options: list[str] = field(default_factory=list)  # as the browser shows and sends them
    value: object = None  # what this client last sent (None: the server's default)


def user_key(widget_id: str) -> str:
    """'$$ID-<hash>-inspect-layer' -> 'inspect-layer' (the key the page gave the widget)."""
    return widget_id.split("-", 2)[2] if widget_id.count("-") >= 2 else widget_id


class Learner:
    """One browser tab's share of the protocol: a session, its pages, its widgets and its timings."""

    def __init__(self, url: str):
        self.url = url.replace("http", "ws", 1) + "/_stcore/stream"
        self.query = ""  # the URL's query string the pages see
        self.pages: dict[str, str] = {}  # url path ("inspector") -> page_script_hash
        self.page_hash = ""
        self.widgets: dict[str, Widget] = {}  # by the page's key
        self.states: dict[str, object] = {}  # widget id -> WidgetState the page's widgets hold
        self.cache: dict[str, tuple[bytes, int]] = {}  # hash -> (a large message, the run it was last used in)
        self.runs = 0
        self.bytes = 0  # received in the last run
        self.finished: str | None = None  # how the last run ended (FINISHED's names), None while it runs

    async def connect(self, page: str = "") -> float:
        import websockets

        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None)
        return await self.rerun(page_name=page)

    async def close(self) -> None:
        await self.ws.close()

    async def rerun(self, page_hash: str | None = None, page_name: str = "", changed=(), fragment: str = "") -> float:
        """Send one rerun_script and read the answer to its end; seconds from send to script_finished."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.page_script_hash = self.page_hash if page_hash is None else page_hash
        state.page_name = page_name
        state.fragment_id = fragment
        state.cached_message_hashes.extend(self.cache)  # the server sends these as references, as to a browser
        for widget_state in changed:
            self.states[widget_state.id] = widget_state
        state.widget_states.widgets.extend(self.states.values())
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        for widget_state in changed:  # a trigger (a button press) is sent once
            if widget_state.WhichOneof("value") == "trigger_value":
                del self.states[widget_state.id]
        await self.read_run()
        return time.perf_counter() - t0

    async def read_run(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.bytes, self.finished = 0, None
        self.runs += 1
        while True:
            data = await asyncio.wait_for(self.ws.recv(), timeout=120)
            self.bytes += len(data)
            msg = ForwardMsg()
            msg.ParseFromString(data)
            if msg.metadata.cacheable:
                self.cache[msg.hash] = (data, self.runs)
            if msg.WhichOneof("type") == "ref_hash":  # a large message this client holds: read it from there
                data = self.cache[msg.ref_hash][0]
                self.cache[msg.ref_hash] = (data, self.runs)
                msg = ForwardMsg()
                msg.ParseFromString(data)
            kind = msg.WhichOneof("type")
            if kind in ("new_session", "navigation"):  # (the pages' list comes in the one or the other)
                self.new_page(getattr(msg, kind))
            elif kind == "delta":
                self.delta(msg.delta)
            elif kind == "script_finished" and msg.script_finished in FINISHED:
                self.cache = {h: (m, run) for h, (m, run) in self.cache.items() if self.runs - run < CACHE_RUNS}
                self.finished = FINISHED[msg.script_finished]
                return

    def new_page(self, session) -> None:
        self.pages.update({p.url_pathname: p.page_script_hash for p in session.app_pages})
        if session.page_script_hash and session.page_script_hash != self.page_hash:  # another page: new widgets
            self.page_hash = session.page_script_hash
            self.widgets.clear()
            self.states.clear()

    def delta(self, delta) -> None:
        which = delta.WhichOneof("type")
        if which == "new_element":
            kind = delta.new_element.WhichOneof("type")
            element = getattr(delta.new_element, kind)
        elif which == "add_block" and delta.add_block.WhichOneof("type") == "tab_container":
            kind, element = "tabs", delta.add_block.tab_container
            self.tab_labels: list[str] = []
        elif which == "add_block" and delta.add_block.WhichOneof("type") == "tab":
            self.tab_labels.append(delta.add_block.tab.label)
            return
        else:
            return
        widget_id = getattr(element, "id", "")
        if not widget_id.startswith("$$ID-"):
            return
        key = user_key(widget_id)
        options = list(getattr(element, "options", []))
        options = [o.content for o in options] if kind == "button_group" else options
        known = self.widgets.get(key)
        if known is None or known.id != widget_id:
            self.widgets[key] = Widget(widget_id, kind, delta.fragment_id, options)
            if kind == "tabs":
                self.widgets[key].options = self.tab_labels  # (filled by the tab blocks that follow)
        else:
            known.options = options or known.options

    def widget(self, key_start: str) -> Widget:
        """The page's widget whose key starts with key_start (a query slider's key ends in the text's length)."""
        matches = [w for k, w in self.widgets.items() if k.startswith(key_start)]
        if not matches:
            raise LookupError(f"no widget '{key_start}…' on the page (have: {', '.join(sorted(self.widgets))})")
        return matches[0]

    async def change(self, key_start: str, pick) -> float:
        """Set a widget to pick(widget) (an option's index, a number, a tab's label) and rerun as the browser does."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        widget = self.widget(key_start)
        widget.value = value = pick(widget)
        state = WidgetState(id=widget.id)
        if widget.kind == "button":
            state.trigger_value = True
        elif widget.kind == "tabs":
            state.string_value = value
        elif widget.kind in ("button_group",) or widget.options:  # segmented controls and select sliders
            state.string_array_value.data[:] = [widget.options[value]]
        elif widget.kind == "slider":
            state.double_array_value.data[:] = [value]
        elif widget.kind == "number_input":
            state.int_value = int(value)
        else:
            raise ValueError(f"no rule to change a {widget.kind}")
        return await self.rerun(changed=[state], fragment=widget.fragment)

    async def open(self, page: str) -> float:
        """Open a page from the sidebar."""
        return await self.rerun(page_hash=self.pages[page])


def next_option(widget: Widget, step: int = 1) -> int:
    """An option index other than the one shown last (the first pick starts from the server's default)."""
    current = widget.value if isinstance(widget.value, int) else 0
    return (current + step) % len(widget.options)


def around(widget: Widget) -> int:
    """A select slider's next position: right, and back to the start at the end (a reader's ArrowRight)."""
    current = widget.value if isinstance(widget.value, int) else len(widget.options) // 2
    return (current + 7) % len(widget.options)


def three_on(widget: Widget) -> int:
    """The stage slider three stages on, back to the first past the last."""
    moved = (widget.value or 0) + 3
    return moved if moved < len(widget.options) else 0


def toggle(low, high):
    return lambda w: high if w.value == low else low


# The lesson: (what is timed as, action). Each learner starts at a random step and goes round.
LESSON = [
    ("page open", lambda s: s.open("inspector")),
    ("Inspect control", lambda s: s.change("inspect-layer", next_option)),
    ("Inspect control", lambda s: s.change("inspect-head", next_option)),
    ("Inspect control", lambda s: s.change("inspect-query", around)),
    ("Inspect control", lambda s: s.change("inspect-head", next_option)),
    ("Inspect control", lambda s: s.change("inspect-tab", lambda w: w.options[1])),  # Predictions
    ("Inspect control", lambda s: s.change("inspect-temperature", toggle(0.8, 1.2))),
    ("Inspect control", lambda s: s.change("inspect-gen-topk", toggle(0, 5))),
    ("Inspect control", lambda s: s.change("inspect-tab", lambda w: w.options[0])),  # back to Attention
    ("page open", lambda s: s.open("trace")),
    ("Trace control", lambda s: s.change("trace-position", around)),
    ("Trace control", lambda s: s.change("trace-forward", lambda w: True)),
    ("Trace control", lambda s: s.change("trace-forward", lambda w: True)),
    ("Trace control", lambda s: s.change("trace-stage", three_on)),
    ("Trace control", lambda s: s.change("trace-position", around)),
    ("page open", lambda s: s.open("sqrt_d_scaling")),
    ("concept control", lambda s: s.change("scaling-d", next_option)),
    ("concept control", lambda s: s.change("scaling-d", next_option)),
]
KINDS = ("Inspect control", "Trace control", "page open", "concept control")


@dataclass
class Tally:
    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    done_at: list[float] = field(default_factory=list)  # perf_counter() of every answer
    errors: list[str] = field(default_factory=list)

    def add(self, kind: str, seconds: float) -> None:
        self.seconds[kind].append(seconds)
        self.done_at.append(time.perf_counter())

    def count(self) -> int:
        return len(self.done_at)

    def between(self, start: float, end: float) -> int:
        return sum(start <= t < end for t in self.done_at)


async def learner_walk(url: str, rng: random.Random, until: float, tally: Tally, pause: tuple[float, float],
                       connected: list) -> None:
    """One learner: a session on the start page, then the lesson from a random step until `until`."""
    learner = Learner(url)
    await asyncio.sleep(rng.uniform(0, pause[1]))  # learners arrive over a few seconds
    await learner.connect()
    connected.append(learner)
    step = rng.randrange(len(LESSON))
    if not LESSON[step][0] == "page open":  # a control needs its page: open the page it is on first
        while LESSON[step][0] != "page open":
            step -= 1
    while time.perf_counter() < until:
        kind, act = LESSON[step % len(LESSON)]
        try:
            seconds = await act(learner)
        except (LookupError, TimeoutError) as e:  # recorded, and the learner opens the next page
            tally.errors.append(f"{kind}: {type(e).__name__}: {e}")
            step = next(i for i in range(step + 1, step + len(LESSON) + 1) if LESSON[i % len(LESSON)][0] == "page open")
            await asyncio.sleep(rng.uniform(*pause))
            continue
        if time.perf_counter() < until:
            tally.add(kind, seconds)
        step += 1
        await asyncio.sleep(rng.uniform(*pause))


# --- the server and its measurements ----------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


@contextmanager
def private_checkpoints():
    """A checkpoints folder of its own holding a copy of the shipped model (what the tests do)."""
    with tempfile.TemporaryDirectory(prefix="classroom-") as tmp:
        folder = Path(tmp) / "checkpoints"
        folder.mkdir()
        shutil.copytree(ROOT / "checkpoints" / "starter", folder / "starter")
        yield folder


def app_server(checkpoints: Path, app: Path = ROOT, flags: tuple[str, ...] = ()):
    """The app of the checkout `app` (more `flags` for streamlit) on the checkpoints folder; yields (url, pid)."""
    return common_app_server(app, {"GPTCORE_CHECKPOINTS": str(checkpoints)}, flags)


@contextmanager
def training_run(checkpoints: Path):
    """A CLI run on the built-in stories into the private folder, at nice 10 (as the app's jobs run); yields its
    process. It trains for as long as the block lasts."""
    proc = subprocess.Popen(["nice", "-n", "10", sys.executable, "-m", "gptcore", "train", "--data", "builtin",
                             "--builtin-chars", "300000", "--steps", "100000", "--out", str(checkpoints / "lesson")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(10)  # past the corpus and start-up: training from here on
        if proc.poll() is not None:
            raise RuntimeError(f"the training run ended: {proc.stderr.read().decode()[-2000:]}")
        yield proc
    finally:
        proc.terminate()
        proc.wait(60)


@contextmanager
def run_started_in_app(url: str, checkpoints: Path):
    """A run started from the Train page, as a learner clicks Start; it trains for as long as the block lasts (the
    server's end ends it)."""
    async def start() -> None:
        learner = Learner(url)
        learner.query = urlencode({"tr_builtin_chars": 300_000, "tr_t_steps": 100_000, "tr_name": "lesson"})
        await learner.connect()
        await learner.open("training")
        await learner.change("tr_start", lambda widget: True)
        await learner.close()

    asyncio.run(start())
    time.sleep(10)  # past the corpus and start-up: training from here on
    if not (checkpoints / "lesson").is_dir():
        raise RuntimeError("the run started on the Train page is not training")
    yield None


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


@dataclass
class Round:
    learners: int
    tally: Tally
    answers_per_s: float
    cpu_per_answer: float  # server CPU seconds per answer
    server_cores: float  # server CPU seconds per second
    rss_before: float
    rss_after: float
    load: str

    def lines(self) -> list[str]:
        out = [f"N = {self.learners}: {self.tally.count()} answers ({self.answers_per_s:.1f}/s), server CPU "
               f"{1000 * self.cpu_per_answer:.0f} ms per answer ({self.server_cores:.2f} cores), RSS "
               f"{self.rss_before:.0f} -> {self.rss_after:.0f} MB with {self.learners} sessions; {self.load}"]
        for kind in KINDS:
            xs = self.tally.seconds.get(kind, [])
            if xs:
                out.append(f"  {kind:<16} n={len(xs):4d}  median {1000 * statistics.median(xs):6.0f} ms  "
                           f"p95 {1000 * quantile(xs, 0.95):6.0f} ms  max {1000 * max(xs):6.0f} ms")
        if self.tally.errors:
            out.append(f"  {len(self.tally.errors)} failed: {self.tally.errors[0]}")
        return out


async def one_round(url: str, pid: int, learners: int, seconds: float, seed: int, pause) -> Round:
    rng = random.Random(seed)
    tally, connected = Tally(), []
    rss_before = rss_mb(pid)
    start = time.perf_counter()
    until = start + pause[1] + seconds
    walks = [learner_walk(url, random.Random(rng.random()), until, tally, pause, connected) for _ in range(learners)]
    # the window starts once every learner has arrived
    measure = asyncio.create_task(measured_window(pid, start + pause[1] + 3, until))
    await asyncio.gather(*walks)
    cpu, t0, t1 = await measure
    rss_after = rss_mb(pid)
    for learner in connected:
        await learner.close()
    answers = tally.between(t0, t1)
    return Round(learners, tally, answers / (t1 - t0), cpu / max(1, answers), cpu / (t1 - t0), rss_before,
                 rss_after, load_summary())


async def measured_window(pid: int, start: float, until: float) -> tuple[float, float, float]:
    """The server's CPU seconds from start to until, and the window's ends."""
    await asyncio.sleep(max(0.0, start - time.perf_counter()))
    t0, c0 = time.perf_counter(), cpu_seconds(pid)
    await asyncio.sleep(max(0.0, until - time.perf_counter()))
    return cpu_seconds(pid) - c0, t0, time.perf_counter()


async def warm_up(url: str) -> None:
    """One learner walks the whole lesson once: the shared caches (the model, the shipped text's passes) are
    filled, as the teacher's own first look fills them before the class."""
    learner = Learner(url)
    await learner.connect()
    for _, act in LESSON * 2:
        await act(learner)
    await learner.close()


def check_against_browser(url: str) -> bool:
    """Open Inspect in Chromium and with a Learner, and compare what the server sent each: the same widgets (keys,
    kinds, fragments) and a run that ended with script_finished. The browser's frames are read by a Learner too."""
    from playwright.sync_api import sync_playwright
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from .browser_latency import CHROMIUM, CHROMIUM_ARGS

    browser_side, endings = Learner(url), []

    def frame(payload) -> None:
        msg = ForwardMsg()
        msg.ParseFromString(payload if isinstance(payload, bytes) else payload.encode())
        kind = msg.WhichOneof("type")
        if kind in ("new_session", "navigation"):
            browser_side.new_page(getattr(msg, kind))
        elif kind == "delta":
            browser_side.delta(msg.delta)
        elif kind == "script_finished":
            endings.append(FINISHED.get(msg.script_finished, "early"))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.on("websocket", lambda ws: ws.on("framereceived", frame))
        page.goto(f"{url}/inspector")
        page.locator(".st-key-inspect-head-figure .gtitle").wait_for(timeout=120_000)
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
        browser.close()

    async def client_side() -> Learner:
        learner = Learner(url)
        await learner.connect()
        await learner.open("inspector")
        await learner.close()
        return learner

    client = asyncio.run(client_side())
    described = [{k: (w.kind, w.fragment) for k, w in side.widgets.items()} for side in (browser_side, client)]
    same = described[0] == described[1] and endings[-1] == client.finished == "ok"
    print(f"Inspect in Chromium: {len(described[0])} widgets, runs ended {endings}; the client: "
          f"{len(described[1])} widgets, its run ended {client.finished!r}: "
          + ("the same" if same else f"DIFFERENT: {described}"))
    return same


def host() -> str:
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip() + f", {os.cpu_count()} CPUs"
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.classroom_load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, nargs="+", default=[1, 5, 10, 20])
    parser.add_argument("--seconds", type=float, default=40, help="measured time per N")
    parser.add_argument("--training", action="store_true", help="a CLI run trains the whole time")
    parser.add_argument("--training-in-app", action="store_true",
                        help="a run started on the Train page trains the whole time, as the app trains it")
    parser.add_argument("--pause", type=float, nargs=2, default=(2.0, 4.0), help="a learner's pause after an answer")
    parser.add_argument("--url", help="a server that is already running (with --pid)")
    parser.add_argument("--pid", type=int, help="the running server's process id")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--app", type=Path, default=ROOT,
                        help="serve the app of another checkout (a worktree of an earlier commit: before and after)")
    parser.add_argument("--check-browser", action="store_true",
                        help="only compare the client with Chromium opening Inspect (Playwright)")
    args = parser.parse_args(argv)
    print(f"host: {host()}; {load_summary()}")
    if args.check_browser:
        with private_checkpoints() as folder, app_server(folder, args.app) as (url, _):
            return 0 if check_against_browser(url) else 1
    with private_checkpoints() as folder:
        server = app_server(folder, args.app) if args.url is None else running(args.url, args.pid)
        with server as (url, pid):
            asyncio.run(warm_up(url))
            print(f"server RSS after one learner's lesson: {rss_mb(pid):.0f} MB")
            training = training_run(folder) if args.training else \
                run_started_in_app(url, folder) if args.training_in_app else running(None)
            with training as trainer:
                rounds = []
                for n in args.learners:
                    rounds.append(asyncio.run(one_round(url, pid, n, args.seconds, args.seed + n, args.pause)))
                    for line in rounds[-1].lines():
                        print(line, flush=True)
                if trainer is not None:
                    print(f"the training run used {cpu_seconds(trainer.pid):.0f} s of CPU in all")
            if len(rounds) > 1:
                first, last = rounds[0], rounds[-1]
                per = (last.rss_after - first.rss_after) / (last.learners - first.learners)
                print(f"memory: {per:.1f} MB per added session (RSS with {last.learners} sessions against "
                      f"{first.learners})")
    return 0


@contextmanager
def running(*what):
    """A server (url, pid) that is already running, or (None) no training run."""
    yield what if len(what) > 1 else what[0]


if __name__ == "__main__":
    sys.exit(main())
