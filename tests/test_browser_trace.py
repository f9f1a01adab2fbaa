"""The Trace page in Chromium at 1440×900: a click on a character picks the position and the step buttons move
through the pass; in both languages, every tab draws and the patching tab's key pair names its path. Screenshots
go to artifacts/trace-*.png."""
import re

import pytest
from browser_support import ARTIFACTS, after_rerun, full_page_screenshot, open_tab, wait_until_drawn

WIDTH, HEIGHT = 1440, 900
LANGUAGES = {
    "en": {"next": "Next ▶", "tabs": ["Logit lens", "Attribution", "Ablation", "Activation patching"],
           "sweep": "Rank every head: switch each off on its own", "pair": "Prompt pair",
           "key_pair": "a name with a broken key"},
    "zh": {"next": "下一步 ▶", "tabs": ["logit 透镜", "归因", "消融", "激活修补"],
           "sweep": "给所有头排名：每次只关掉一个", "pair": "提示对", "key_pair": "键被破坏的名字"},
}


def open_trace(open_page, app_url: str, lang: str):
    page = open_page(WIDTH, HEIGHT)
    page.goto(f"{app_url}/trace?lang={lang}", timeout=120_000)
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=120_000)  # the text strip and the pass diagram
    wait_until_drawn(page)
    assert_no_exception(page)
    return page


def assert_no_exception(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0


def stage_heading(page) -> str:
    return page.locator("h3").filter(has_text=re.compile(r"^\d+/\d+ · ")).first.inner_text()


def test_a_click_picks_the_position_and_the_step_buttons_walk_the_pass(app_url, open_page):
    """In English: the clicks and buttons do the same in both languages (the Chinese page's stages are read in
    test_page_trace, and its tabs drawn below)."""
    from playwright.sync_api import expect

    lang = "en"
    page = open_trace(open_page, app_url, lang)
    assert stage_heading(page).startswith("1/")

    # a click on a character of the strip traces the prediction made there
    point = page.locator(".js-plotly-plot").first.locator("path.point").nth(12).bounding_box()
    page.mouse.click(point["x"] + point["width"] / 2, point["y"] + point["height"] / 2)
    position = page.get_by_test_id("stSliderThumbValue").nth(1)  # (after temperature)
    expect(position).to_have_text(re.compile(r"^12 "), timeout=60_000)
    wait_until_drawn(page)

    for stage in range(2, 8):  # to layer 0's attention weights
        after_rerun(page, page.get_by_role("button", name=LANGUAGES[lang]["next"]).click)
        expect(page.locator("h3").filter(has_text=re.compile(rf"^{stage}/\d+ · "))).to_have_count(1)
    assert_no_exception(page)
    full_page_screenshot(page, f"trace-{lang}-pattern", WIDTH, HEIGHT)


@pytest.fixture(scope="module")
def trace_tab(open_module_page, app_url):
    """trace_tab(lang): one Trace tab a language, kept from the tab walk to the key pair."""
    pages = {}

    def tab(lang: str):
        if lang not in pages:
            pages[lang] = open_trace(open_module_page, app_url, lang)
        return pages[lang]

    return tab


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_tab_draws(trace_tab, lang):
    words, page = LANGUAGES[lang], trace_tab(lang)
    for tab, name in zip(words["tabs"], ("lens", "attribution", "ablation", "patching")):
        open_tab(page, tab)
        if name == "ablation":
            after_rerun(page, page.get_by_role("button", name=words["sweep"]).click)
        # the strip at the top and the tab's figures (the tabs are lazy: only the open one draws); attribution
        # has its bars, direct beside total and one head by source; patching its head grid and the side grid
        figures = {"attribution": 4, "patching": 3}.get(name, 2)
        page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot').length >= {figures}",
                               timeout=60_000)
        assert_no_exception(page)
        full_page_screenshot(page, f"trace-{lang}-{name}", WIDTH, HEIGHT)
    assert (ARTIFACTS / f"trace-{lang}-patching.png").stat().st_size > 20_000


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_key_pair_names_its_path(trace_tab, lang):
    """On the patching tab the test before leaves open: the pair whose answer comes back through the induction
    head's keys alone."""
    from playwright.sync_api import expect  # (after the fixtures' require_chromium: playwright may be absent)

    words, page = LANGUAGES[lang], trace_tab(lang)
    open_tab(page, words["tabs"][3])  # (open already after the test before, unless this one runs alone)
    pair = page.get_by_role("combobox", name=words["pair"], exact=True)
    pair.click()
    page.keyboard.type(words["key_pair"])
    after_rerun(page, lambda: page.keyboard.press("Enter"))
    expect(pair).to_have_value(words["key_pair"])
    # the side grid's caption names the path: the previous-token head into the induction head's keys
    expect(page.get_by_text(re.compile("L2H0 → L3H2")).first).to_be_visible(timeout=60_000)
    assert_no_exception(page)
    full_page_screenshot(page, f"trace-{lang}-patching-key", WIDTH, HEIGHT)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_link_opens_the_logit_lens_readable_on_a_projector(app_url, open_page, lang):
    """A teacher's link (?text=…&pos=…&tab=lens) at 1024×768: the lens opens on that position, each of its columns
    at least 18 px wide, so the guess in each cell can be read."""
    from urllib.parse import quote

    page = open_page(1024, 768)
    said_twice = "The little dog ran home. The little dog ran home."
    page.goto(f"{app_url}/trace?lang={lang}&text={quote(said_twice)}&pos=30&tab=lens", timeout=120_000)
    lens = page.locator(".st-key-trace-lens .js-plotly-plot")
    lens.wait_for(timeout=120_000)
    wait_until_drawn(page)
    assert_no_exception(page)
    expect_position = page.get_by_test_id("stSliderThumbValue").nth(1)  # (after temperature)
    assert expect_position.inner_text().startswith("30 ")
    width = lens.locator(".nsewdrag").first.bounding_box()["width"]
    columns = lens.evaluate("plot => plot.data[0].x.length")  # (the heatmap's positions)
    assert columns == 16 and width / columns >= 18, (width, columns)
    full_page_screenshot(page, f"trace-{lang}-lens-1024", 1024, 768)
