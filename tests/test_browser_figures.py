"""Every page in Chromium at 1440×900, half of them in each language: it draws without an exception, asks nothing
of any host but the app's own server (no icon, font or script from a CDN), and with the pointer over a chart,
Plotly's toolbar (the modebar) covers none of its titles or legend."""
from urllib.parse import urlsplit

import pytest
from browser_support import screenshot, wait_for_quiet_network, wait_until_drawn

from explorer.navigation import DEFAULT_PAGE, PAGE_STEMS

WIDTH, HEIGHT = 1440, 900
CHART = "[data-testid='stPlotlyChart']"
TEXT_PAGES = {"home", "recap"}  # the pages that open on no chart: every other page that drew none would fail
# The boxes of one chart's visible toolbar and of its title, subplot titles and legend, in page pixels.
BOXES = """(chart) => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const toolbars = [...chart.querySelectorAll('.modebar')].filter(shown).map(box);
  const texts = [...chart.querySelectorAll('.gtitle, .legend, .annotation')].filter(shown)
    .map(e => ({what: e.getAttribute('class'), text: e.textContent.slice(0, 40), box: box(e)}));
  return {toolbars, texts};
}"""


def overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


NEW_HEADING = "(before) => { const h = document.querySelector('h1'); return h && h.innerText !== before; }"


def follow_link(page, stem: str) -> None:
    """Follow the sidebar's link: one document for every page, so Plotly's code loads once a test."""
    heading = page.locator("h1").first.inner_text()
    page.locator(f"[data-testid='stSidebarNavLink'][href$='/{stem}']").click()
    page.wait_for_function(NEW_HEADING, arg=heading, timeout=120_000)
    wait_until_drawn(page)


def covered_texts(page, stem: str) -> list[str]:
    """Hover each chart of the page in turn; name every title or legend its toolbar covers."""
    problems = []
    charts = page.locator(CHART)
    for i in range(charts.count()):
        chart = charts.nth(i)
        if not chart.is_visible():  # (in a closed expander or another tab)
            continue
        chart.scroll_into_view_if_needed()
        plot = chart.locator(".js-plotly-plot")
        plot.wait_for(timeout=30_000)
        plot.hover()  # (the toolbar fades in: its box is laid out already, so no wait for the fade)
        found = plot.evaluate(BOXES)
        problems += [f"{stem} chart {i}: the toolbar covers {text['what']} {text['text']!r}"
                     for toolbar in found["toolbars"] for text in found["texts"] if overlap(toolbar, text["box"])]
    return problems


LOCAL_SCHEMES = {"data", "blob", "about", "chrome-extension"}
# Every page once, in four groups of every fourth page, two in each language, so that no test runs long and each
# language's titles meet the toolbar on half the pages (every page renders in both languages in test_i18n); the
# start page opens the first.
GROUPS = {f"{lang}-{i // 2 + 1}": PAGE_STEMS[i::4] for i, lang in enumerate(["en", "zh", "en", "zh"])}
assert GROUPS["en-1"][0] == DEFAULT_PAGE


def drawn_page_problems(page, stem: str) -> list[str]:
    exception = [f"{stem}: an exception on the page"] if page.locator("[data-testid='stException']").count() else []
    return exception + covered_texts(page, stem)


@pytest.mark.parametrize("group", GROUPS)
def test_every_page_draws_from_the_apps_own_server_and_no_toolbar_covers_a_title(app_url, open_page, group):
    lang, (first, *others) = group.split("-")[0], GROUPS[group]
    page = open_page(WIDTH, HEIGHT)
    requests: list[tuple[str, str]] = []
    current = {"page": first}
    page.on("request", lambda r: requests.append((current["page"], r.url)))
    page.goto(f"{app_url}/{'' if first == DEFAULT_PAGE else first}?lang={lang}", timeout=120_000)
    page.locator("h1").first.wait_for(timeout=120_000)
    wait_until_drawn(page)
    if first == DEFAULT_PAGE:
        assert screenshot(page, f"home-{lang}").stat().st_size > 10_000
    charts, problems = {first: page.locator(CHART).count()}, drawn_page_problems(page, first)
    for stem in others:
        current["page"] = stem
        follow_link(page, stem)
        charts[stem] = page.locator(CHART).count()
        problems += drawn_page_problems(page, stem)
    wait_for_quiet_network(page)  # fonts and lazy chunks are asked for after the script finishes
    assert {stem for stem, count in charts.items() if not count} <= TEXT_PAGES, charts
    assert not problems, "\n".join(problems)
    host = urlsplit(app_url).netloc
    outside = sorted({(where, u) for where, u in requests
                      if urlsplit(u).scheme not in LOCAL_SCHEMES and urlsplit(u).netloc != host})
    assert not outside, "requests that leave the app's server:\n" + "\n".join(f"{w}: {u}" for w, u in outside)
    assert any(u.startswith(f"{app_url}/media/") for _, u in requests)  # the page icon, served locally
