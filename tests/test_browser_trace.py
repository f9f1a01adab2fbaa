"""The Trace page in Chromium at 1440×900, in both languages: a click on a character picks the position, the step
buttons move through the pass, every tab draws; screenshots go to artifacts/trace-*.png."""
import re

import pytest
from browser_support import ARTIFACTS, app_server, browser_page, require_chromium, wait_for_app

WIDTH, HEIGHT = 1440, 900


def settle(page) -> None:
    page.wait_for_timeout(600)
    wait_for_app(page, 120_000)
    page.wait_for_timeout(600)
    assert page.locator("[data-testid='stException']").count() == 0


def shot(page, name: str) -> None:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to fit it, then go back."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": WIDTH, "height": min(height + 50, 8_000)})
    page.wait_for_timeout(1200)  # Plotly redraws at the new size
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.wait_for_timeout(600)


def stage_heading(page) -> str:
    return page.locator("h3").filter(has_text=re.compile(r"^\d+/\d+ · ")).first.inner_text()


@pytest.fixture(scope="module")
def server_url():
    require_chromium()
    with app_server(timeout=120) as url:
        yield url


@pytest.mark.parametrize("lang, next_label, tabs, sweep, pair_label, key_pair", [
    ("en", "Next ▶", ["Logit lens", "Attribution", "Ablation", "Activation patching"],
     "Rank every head: switch each off on its own", "Prompt pair", "a name with a broken key"),
    ("zh", "下一步 ▶", ["logit 透镜", "归因", "消融", "激活修补"], "给所有头排名：每次只关掉一个", "提示对",
     "键被破坏的名字"),
])
def test_trace_page_in_chromium(server_url, lang, next_label, tabs, sweep, pair_label, key_pair):
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{server_url}/trace?lang={lang}", timeout=120_000)
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=120_000)  # the text strip and the pass diagram
        settle(page)
        assert stage_heading(page).startswith("1/")

        # a click on a character of the strip traces the prediction made there
        strip = page.locator(".js-plotly-plot").first
        point = strip.locator("path.point").nth(12).bounding_box()
        page.mouse.click(point["x"] + point["width"] / 2, point["y"] + point["height"] / 2)
        settle(page)
        assert page.get_by_test_id("stSliderThumbValue").nth(1).inner_text().startswith("12 ")  # (after temperature)

        for _ in range(6):  # to layer 0's attention weights
            page.get_by_role("button", name=next_label).click()
            settle(page)
        assert stage_heading(page).startswith("7/")
        shot(page, f"trace-{lang}-pattern")
        for tab, name in zip(tabs, ("lens", "attribution", "ablation", "patching")):
            page.get_by_role("tab", name=tab).click()
            settle(page)
            if name == "ablation":
                page.get_by_role("button", name=sweep).click()
                settle(page)
            # the strip at the top and the tab's figures (the tabs are lazy: only the open one draws); attribution
            # has its bars, direct beside total and one head by source; patching its head grid and the side grid
            figures = {"attribution": 4, "patching": 3}.get(name, 2)
            page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot').length >= {figures}",
                                   timeout=120_000)
            shot(page, f"trace-{lang}-{name}")
        from playwright.sync_api import expect  # (after require_chromium: playwright may be absent)

        pair = page.get_by_role("combobox", name=pair_label, exact=True)
        pair.click()
        page.keyboard.type(key_pair)  # the pair whose answer comes back through the induction head's keys alone
        page.keyboard.press("Enter")
        settle(page)
        expect(pair).to_have_value(key_pair)
        # the side grid's caption names the path: the previous-token head into the induction head's keys
        expect(page.get_by_text(re.compile("L1H1 → L3H3")).first).to_be_visible(timeout=60_000)
        shot(page, f"trace-{lang}-patching-key")
    assert (ARTIFACTS / f"trace-{lang}-patching.png").stat().st_size > 20_000
