import os
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The tutorial's exact numbers are float32 on the CPU: `--device auto` must not pick a GPU in the tests, in this
# process (the fixture below) or in the command lines they start (no CUDA device visible).
os.environ["CUDA_VISIBLE_DEVICES"] = ""

TINYSTORIES = ROOT.parent / "shared" / "data" / "tinystories-1M.txt"


@pytest.fixture
def tinystories_text():
    if not TINYSTORIES.is_file():
        print(f"skipping: {TINYSTORIES} is absent")
        pytest.skip(f"{TINYSTORIES} is absent (benchmark/acceptance data only)")
    return TINYSTORIES.read_text(encoding="utf-8")[:1_000_000]


@pytest.fixture
def runs_in_threads(monkeypatch):
    """The runs the app starts train in threads of this process (tests/run_helpers.py), not processes of their own."""
    from run_helpers import launch_in_thread

    from explorer import jobs

    monkeypatch.setattr(jobs, "launch", launch_in_thread)


@pytest.fixture
def training_root(tmp_path, monkeypatch, runs_in_threads):
    """A private checkpoints folder (also the data folder server paths may be read from) and an empty job registry
    for a test of the Train page; the runs it starts train in threads and are stopped after it."""
    from explorer.ui import job_registry
    from gptcore import folders

    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    monkeypatch.setenv("GPTCORE_DATA", str(tmp_path))
    job_registry.clear()
    yield tmp_path
    registry = job_registry()
    registry.waiting.clear()  # (else a stop below would start the next waiting run)
    for name in registry.live():
        job = registry.get(name)
        job.stop()
        job.join(60)
    job_registry.clear()


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    from gptcore import device

    monkeypatch.setattr(device, "accelerators", lambda: [])


# The longest files first (`--durations` of a whole run), a browser file and a computing one in turn: the browser
# tests mostly wait on a server and Chromium, so each worker's waits overlap the others' computing, and they
# finish together on the short library tests. pytest.ini keeps this order (--no-loadscope-reorder: pytest-xdist
# would otherwise start with the files of the most tests).
LONGEST_FIRST = ["test_browser_training.py", "test_page_training.py", "test_browser_classroom.py",
                 "test_run_processes.py", "test_browser_every_page_en.py", "test_page_faster_training.py",
                 "test_browser_every_page_zh.py", "test_ddp.py", "test_browser_trace.py", "test_import.py",
                 "test_browser_inspector.py", "test_i18n.py", "test_browser_language.py", "test_training_faults.py",
                 "test_browser_layout.py", "test_page_trace.py", "test_bench.py"]


@pytest.hookimpl(optionalhook=True)  # (pytest-xdist's hook: a run with -p no:xdist has none)
def pytest_xdist_auto_num_workers(config):
    """A worker more than the cores (pytest.ini caps it at 4): the browser tests' waits leave a core idle a third
    of the time with one worker a core."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):  # (pytest-xdist's own setting, honoured as it would)
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return len(os.sched_getaffinity(0)) + 1  # (the cores this process may use, not all the host has)


def pytest_collection_modifyitems(items):
    """The longest files first (LONGEST_FIRST). A browser test gets one more try (pytest-rerunfailures): on two
    busy cores a click now and then lands while Chromium is still laying the page out and is lost; a real fault
    fails both tries. A test of a fresh server gets none: its second try would run on a server no longer fresh."""
    for item in items:
        if item.nodeid.startswith("tests/test_browser_") and "fresh_server" not in item.name:
            item.add_marker(pytest.mark.flaky(reruns=1))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# ---------------------------------------------------------------- browser tests: servers, Chromium and tabs

@pytest.fixture(scope="module")
def server_env() -> dict:
    """Environment variables of the module's app server; a module overrides this (a private checkpoints folder)."""
    return {}


@pytest.fixture(scope="session")
def shared_app_url():
    """One `streamlit run app.py` in the default environment for every module that keeps server_env empty (one per
    pytest-xdist worker): its caches warm once, not once a module."""
    from browser_support import app_server, require_chromium

    require_chromium()
    with app_server(timeout=180) as url:
        yield url


@pytest.fixture(scope="module")
def app_url(request, server_env):
    """The URL of the app server of the module's browser tests: the shared one, or a server of the module's own
    when it overrides server_env."""
    if not server_env:
        yield request.getfixturevalue("shared_app_url")
        return
    from browser_support import app_server, require_chromium

    require_chromium()
    with app_server(env=server_env, timeout=180) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """One Chromium shared by the browser tests of a module."""
    from browser_support import chromium, require_chromium

    require_chromium()
    with chromium() as launched:
        yield launched


@contextmanager
def page_opener(browser):
    """Yield open_page(width, height): a tab in a context of its own (no cookies or storage from another) that
    counts the script runs it sees (browser_support.after_rerun waits on that count); close them afterwards."""
    from browser_support import COUNT_RUNS

    contexts = []

    def open_page(width: int = 1400, height: int = 1000, **options):
        context = browser.new_context(viewport={"width": width, "height": height}, **options)
        context.add_init_script(COUNT_RUNS)
        contexts.append(context)
        return context.new_page()

    try:
        yield open_page
    finally:
        for context in contexts:
            context.close()


@pytest.fixture
def open_page(browser):
    """Tabs of one test (page_opener)."""
    with page_opener(browser) as opener:
        yield opener


@pytest.fixture(scope="module")
def open_module_page(browser):
    """Tabs kept over a module's tests (page_opener): a user whose cookies and runs outlast one test."""
    with page_opener(browser) as opener:
        yield opener
