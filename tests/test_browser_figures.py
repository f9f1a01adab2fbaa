"""Every chart of every page in Chromium at 1440×900, in both languages: with the pointer over a chart, Plotly's
toolbar (the modebar) covers none of its titles or legend."""
import pytest
from browser_support import app_server, browser_page, require_chromium

from explorer.navigation import DEFAULT_PAGE, PAGE_STEMS

WIDTH, HEIGHT = 1440, 900
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


SETTLED = """() => document.querySelector('[data-testid=stApp]').getAttribute('data-test-script-state') !== 'running'
  && !document.querySelector('[data-testid=stMain] [data-testid=stSkeleton], [data-stale=true]')"""


NEW_HEADING = "(before) => { const h = document.querySelector('h1'); return h && h.innerText !== before; }"


def settle(page) -> None:
    """Wait until the page's script has run to the end and every element is drawn: Streamlit marks the app's root
    while a script runs, shows a skeleton until a lazily loaded element (a chart) is ready, and marks a previous
    page's elements stale until they are gone."""
    page.wait_for_function(SETTLED, timeout=120_000)


def open_page(page, stem: str) -> None:
    """Follow the sidebar's link: one document for every page, so Plotly's code loads once per language."""
    heading = page.locator("h1").first.inner_text()
    page.locator(f"[data-testid='stSidebarNavLink'][href$='/{stem}']").click()
    page.wait_for_function(NEW_HEADING, arg=heading, timeout=120_000)
    settle(page)


def covered_texts(page, stem: str) -> list[str]:
    """Hover each chart of the page in turn; name every title or legend its toolbar covers."""
    problems = []
    charts = page.locator("[data-testid='stPlotlyChart']")
    for i in range(charts.count()):
        chart = charts.nth(i)
        if not chart.is_visible():  # (in a closed expander or another tab)
            continue
        chart.scroll_into_view_if_needed()
        plot = chart.locator(".js-plotly-plot")
        plot.wait_for(timeout=30_000)
        plot.hover()
        page.wait_for_timeout(150)  # the toolbar fades in
        found = plot.evaluate(BOXES)
        problems += [f"{stem} chart {i}: the toolbar covers {text['what']} {text['text']!r}"
                     for toolbar in found["toolbars"] for text in found["texts"] if overlap(toolbar, text["box"])]
    return problems


@pytest.fixture(scope="module")
def server_url():
    require_chromium()
    with app_server(timeout=120) as url:
        yield url


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_chart_toolbar_covers_a_title_or_legend(server_url, lang):
    problems, charts = [], 0
    with browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{server_url}/?lang={lang}", timeout=120_000)  # the start page
        page.locator("h1").first.wait_for(timeout=120_000)
        settle(page)
        for stem in [s for s in PAGE_STEMS if s != DEFAULT_PAGE]:
            open_page(page, stem)
            charts += page.locator("[data-testid='stPlotlyChart']").count()
            problems += covered_texts(page, stem)
    assert charts >= 30  # (the concept pages alone draw more: a page that drew none would pass unseen)
    assert not problems, "\n".join(problems)
