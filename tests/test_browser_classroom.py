"""A class on one server, in Chromium: two learners (two browser contexts, so two cookies); one trains, the
other's Start waits in the queue and shows its place, and still does after a reload (the Chinese notice is checked
through AppTest in test_classroom_page.py).

The server runs with GPTCORE_CLASSROOM=1, so that each browser on this machine is a learner, as on a LAN, with a
teacher password and a private checkpoints folder. Its first page is a deep link, which a fresh server must still
serve with the app's navigation. A screenshot of the queue notice goes to artifacts/."""
from urllib.parse import urlencode

import pytest
from browser_support import after_rerun, screenshot, wait_for_app, wait_until_drawn

from explorer.classroom import CLASSROOM_VARIABLE, PASSWORD_VARIABLE, TEACHER_COOKIE
from explorer.forms import PREFIX
from explorer.i18n import catalog
from gptcore.config import GPTConfig, TrainConfig, settings

# A tiny model on 30,000 built-in characters that trains until it is stopped.
SIZES = {"d_model": 32, "n_layer": 1, "n_head": 2, "d_ff": 88, "context": 32, "steps": 100_000, "batch_size": 8,
         "eval_every": 50, "sample_every": 0, "checkpoint_every": 0, "threads": 1}
PASSWORD = "chalk and cheese"
PLACE = "is waiting to train: place 1 of 1 in the queue"


@pytest.fixture(scope="module")
def server_env(tmp_path_factory):
    return {"GPTCORE_CHECKPOINTS": str(tmp_path_factory.mktemp("classroom-checkpoints")), CLASSROOM_VARIABLE: "1",
            PASSWORD_VARIABLE: PASSWORD}


def form_url(app_url: str, lang: str, name: str) -> str:
    keys = {name: PREFIX[cls] + name for cls in (GPTConfig, TrainConfig) for name in settings(cls)}
    query = {"lang": lang, "tr_builtin_chars": 30_000, "tr_name": name, **{keys[k]: v for k, v in SIZES.items()}}
    return f"{app_url}/training?{urlencode(query)}"


def open_form(page, url: str, words: dict):
    page.goto(url)
    start = page.get_by_role("button", name=words["training.form.start"])
    start.wait_for(timeout=180_000)  # (the server's first Train page of a busy machine is slow)
    wait_for_app(page)
    return start


def test_a_deep_link_on_the_modules_fresh_server_gets_the_apps_navigation(app_url, open_page):
    """The first test of the module, on the server the module starts (app.py has not run there yet): a link
    straight to a page still gets the app's navigation: the pages' folder is not named pages/, so Streamlit does not
    treat the app as a legacy multipage app that lists its files."""
    page = open_page()
    page.goto(f"{app_url}/rope")
    page.get_by_text("RoPE: position by rotation").wait_for(timeout=60_000)
    nav = page.locator('[data-testid="stSidebarNav"]')
    nav.get_by_text("Concepts").wait_for(timeout=30_000)
    assert "sqrt d scaling" not in nav.inner_text()


@pytest.fixture(scope="module")
def learners(open_module_page):
    """Two learners of the class (two browser contexts, so two cookies), the same over the queue's two tests."""
    return {"trains": open_module_page(height=1200), "waits": open_module_page(height=1600)}


def test_a_learner_pauses_a_run_and_it_keeps_the_classs_one_training_slot(app_url, learners):
    words, trains = catalog("en"), learners["trains"]
    open_form(trains, form_url(app_url, "en", "first"), words).click()
    trains.get_by_text(f"first · {words['ui.status.running']}").wait_for(timeout=60_000)
    # paused, it still holds the one training slot (the next test queues behind it) and leaves the cores alone
    trains.get_by_role("button", name=words["training.live.pause"], exact=True).click()
    trains.get_by_text(f"first · {words['ui.status.paused']}").wait_for(timeout=60_000)


def test_a_second_learners_start_waits_in_the_queue_and_keeps_its_place_over_a_reload(app_url, learners):
    words, trains, waits = catalog("en"), learners["trains"], learners["waits"]
    assert trains.get_by_text(f"first · {words['ui.status.paused']}").count() == 1, \
        "the test before leaves the first learner's run paused"
    open_form(waits, form_url(app_url, "en", "second"), words).click()
    notice = waits.get_by_text(PLACE)
    notice.wait_for(timeout=30_000)
    cancel = waits.get_by_role("button", name=words["training.queue.cancel"], exact=True)
    assert cancel.count() == 1 and trains.get_by_role("button", name=words["training.queue.cancel"]).count() == 0
    assert waits.locator('[data-testid="stException"]').count() == 0
    notice.scroll_into_view_if_needed()
    screenshot(waits, "queue-en-notice")

    waits.reload()  # the same learner after a reload: its run is still its own to cancel
    waits.get_by_text(PLACE).wait_for(timeout=60_000)
    wait_for_app(waits)

    waits.get_by_role("button", name=words["training.queue.cancel"], exact=True).click()
    waits.get_by_text(PLACE).wait_for(state="detached", timeout=30_000)
    trains.get_by_role("button", name=words["training.live.stop"], exact=True).click()
    trains.get_by_text(f"first · {words['ui.status.stopped']}").wait_for(timeout=60_000)


def open_expander(page, heading: str) -> None:
    """Open an expander by its heading; a click that lands while a busy page is still laying out is given again."""
    from playwright.sync_api import expect

    details = page.locator("details").filter(has=page.get_by_text(heading, exact=True))
    wait_until_drawn(page)
    for _ in range(5):
        if details.get_attribute("open") is None:
            page.get_by_text(heading, exact=True).click()
        try:
            expect(details).to_have_attribute("open", "", timeout=5_000)
            return
        except AssertionError:
            continue
    raise AssertionError(f"the expander {heading!r} did not open")


def test_the_teacher_stays_signed_in_over_a_reload(app_url, open_page):
    words = catalog("en")
    page = open_page()
    open_form(page, f"{app_url}/training", words)
    open_expander(page, words["training.teacher.heading"])
    password = page.get_by_label(words["training.teacher.password"])
    password.fill(PASSWORD)
    after_rerun(page, lambda: password.press("Enter"))  # (the value reaches the server before the click)
    page.get_by_role("button", name=words["training.teacher.sign_in"]).click()
    signed_in = page.get_by_text(words["training.teacher.signed_in"])
    signed_in.wait_for(timeout=30_000)
    # the page's script writes the teacher cookie as the run's last element: a reload before it would lose it
    page.wait_for_function(f"() => document.cookie.includes('{TEACHER_COOKIE}=')", timeout=30_000)
    page.reload()  # (the browser sends the cookies the page wrote: the same learner, still the teacher)
    page.get_by_role("button", name=words["training.form.start"]).wait_for(timeout=60_000)
    wait_for_app(page)
    open_expander(page, words["training.teacher.heading"])
    signed_in.wait_for(timeout=30_000)
    page.get_by_role("button", name=words["training.teacher.sign_out"]).click()
    page.get_by_label(words["training.teacher.password"]).wait_for(timeout=30_000)
