"""Every page of the app in one language, each opened once: at 1440×900 it draws without an exception, asks
nothing of any host but the app's own server (no icon, font or script from a CDN) and, with the pointer over a chart,
Plotly's toolbar (the modebar) covers none of its titles or legend (in one language a page, TOOLBAR_LANG); then on
the same page, narrowed to a 1024×768 projector (Streamlit lays it out again in the browser, no rerun), nothing is
wider than its column or cut short, no word is broken across two lines, no label is squeezed to a letter or two a
line, every number input keeps its ± buttons and no chart's title runs off its edge. The test files (one a language)
call check_pages on a group of pages each, so that no test runs long and pytest-xdist gives each file a worker."""
from urllib.parse import urlsplit

from browser_support import screenshot, wait_for_quiet_network, wait_until_drawn

from explorer.i18n import catalog
from explorer.navigation import DEFAULT_PAGE, PAGE_STEMS

WIDE = {"width": 1440, "height": 900}
PROJECTOR = {"width": 1024, "height": 768}
# Two groups, the start page opening the first; Train's second tab is shown on the projector too.
GROUPS = {"first": PAGE_STEMS[:7], "second": PAGE_STEMS[7:]}
assert GROUPS["first"][0] == DEFAULT_PAGE
SECOND_TABS = {"training": ("training.tab_runs", "training.tab_new")}  # (its tabs are drawn at once, shown on a click)
CHART = "[data-testid='stPlotlyChart']"
TEXT_PAGES = {"home", "recap"}  # the pages that open on no chart: every other page that drew none would fail
LOCAL_SCHEMES = {"data", "blob", "about", "chrome-extension"}
# The language whose titles meet the toolbar on each page: every other page, so that each language's titles meet it on
# half the pages (hovering every chart is slow, and every page renders in both languages in test_i18n).
TOOLBAR_LANG = {stem: "en" if i % 2 == 0 else "zh" for i, stem in enumerate(PAGE_STEMS)}

# ---------------------------------------------------------------- at 1440×900: Plotly's toolbar and the titles

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


def wide_problems(page, stem: str, lang: str) -> list[str]:
    exception = [f"{stem}: an exception on the page"] if page.locator("[data-testid='stException']").count() else []
    return exception + (covered_texts(page, stem) if TOOLBAR_LANG[stem] == lang else [])


# ---------------------------------------------------------------- at 1024×768: what a projector cuts or breaks

# What a reader of the page would call wrong, as sentences. Tables scroll sideways on purpose (their first column
# stays), and so do code blocks and text areas: what is inside them is not judged here.
PROBLEMS = r"""() => {
  const main = document.querySelector('[data-testid=stMain]');
  const problems = [];
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 2 && r.height > 2; };
  const said = e => (e.innerText || e.value || e.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60);
  const scrolls = 'pre, textarea, [data-testid=stCode], [data-testid=stDataFrame], .js-plotly-plot';
  if (main.scrollWidth > main.clientWidth + 1)
    problems.push(`the page scrolls sideways (${main.scrollWidth} px in ${main.clientWidth})`);
  for (const el of main.querySelectorAll('[data-testid=stElementContainer]')) {
    if (!shown(el) || el.querySelector('[data-testid=stDataFrame]')) continue;
    const box = el.getBoundingClientRect(), room = el.parentElement.getBoundingClientRect();
    if (box.right > room.right + 1 || box.left < room.left - 1 || el.scrollWidth > el.clientWidth + 1)
      problems.push(`wider than its column (${el.scrollWidth} px in ${Math.round(room.width)}): ${said(el)}`);
  }
  for (const el of main.querySelectorAll('*')) {  // text cut off by its box: an ellipsis, a hidden or scrolled end
    if (el.scrollWidth <= el.clientWidth + 1 || el.closest(scrolls) || !shown(el)) continue;
    const input = el.tagName === 'INPUT', style = getComputedStyle(el);
    if (input ? el.closest('[data-testid=stSelectbox], [data-testid=stNumberInput]') : style.overflowX !== 'visible')
      problems.push(`cut short (${el.scrollWidth} px in ${el.clientWidth}): ${said(el)}`);
  }
  for (const el of main.querySelectorAll('[data-testid=stNumberInput]'))
    if (shown(el) && !el.querySelector('[data-testid=stNumberInputStepUp]'))
      problems.push(`a number input without its ± buttons: ${said(el.querySelector('label'))}`);
  for (const plot of main.querySelectorAll('.js-plotly-plot')) {
    const box = plot.getBoundingClientRect();
    for (const text of plot.querySelectorAll('.gtitle, .xtitle, .ytitle, .legendtext, .annotation-text, .cbtitle')) {
      const r = text.getBoundingClientRect();
      if (r.width > 0 && (r.left < box.left - 1 || r.right > box.right + 1))
        problems.push(`cut at the edge of its chart: ${said(text)}`);
    }
  }
  const range = document.createRange();
  const lines = rects => new Set([...rects].filter(r => r.width > 0).map(r => Math.round(r.top / 4))).size;
  const textNodes = root => {
    const found = [], walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node; (node = walker.nextNode());) found.push(node);
    return found;
  };
  for (const node of textNodes(main)) {  // a word broken over two lines (Chinese breaks between any characters)
    const parent = node.parentElement, style = parent && getComputedStyle(parent);
    if (!parent || parent.closest(scrolls + ', svg, .katex') || !shown(parent) ||
        style.overflowWrap === 'anywhere' || style.wordBreak === 'break-all') continue;  // (a run of characters)
    for (const word of node.data.matchAll(/[\p{L}\p{N}_'’]{2,}/gu)) {
      if (/\p{Script=Han}/u.test(word[0])) continue;
      range.setStart(node, word.index);
      range.setEnd(node, word.index + word[0].length);
      if (lines(range.getClientRects()) > 1) problems.push(`"${word[0]}" broken over two lines: ${said(parent)}`);
    }
  }
  const labels = '[data-testid=stWidgetLabel], [data-testid=stMetricLabel], button, [role=tab], label';
  for (const label of main.querySelectorAll(labels)) {  // a label a letter or two a line ("衰减所有参数" down a column)
    if (!shown(label)) continue;
    const rects = textNodes(label).flatMap(node => {
      range.selectNodeContents(node);
      return [...range.getClientRects()];
    });
    const n = lines(rects), length = label.innerText.replace(/\s+/g, '').length;
    if (n > 2 && length / n < 5) problems.push(`squeezed to ${n} lines: ${said(label)}`);
  }
  return [...new Set(problems)];
}"""



def projector_problems(page, name: str) -> list[str]:
    return [f"{name} at 1024: {problem}" for problem in page.evaluate(PROBLEMS)]


# The widths the layout has settled on: the main block's, and each chart's box beside the width Plotly drew it at
# (Streamlit hands a chart its new width, and Plotly lays it out again, a moment after the window narrows).
WIDTHS = """() => [document.querySelector('[data-testid=stMain]').clientWidth,
  ...[...document.querySelectorAll('.js-plotly-plot')]
    .map(p => [p.clientWidth, p.querySelector('.main-svg')?.getAttribute('width')])]"""


def wait_for_layout(page, timeout_ms: int = 20_000, still_ms: int = 300, step_ms: int = 100) -> None:
    """Wait until no width has changed for still_ms: the charts have been laid out again at the new size."""
    last, still, waited = None, 0, 0
    while still < still_ms:
        page.wait_for_timeout(step_ms)
        waited += step_ms
        widths = page.evaluate(WIDTHS)
        still = still + step_ms if widths == last else 0
        last = widths
        if waited > timeout_ms:
            raise AssertionError(f"the layout did not settle in {timeout_ms} ms: {widths}")
    wait_until_drawn(page)  # (a resize starts no run: a check that none was started by it)


def show_tab(page, name: str) -> None:
    """Show a tab that Streamlit drew with the page (no run to wait for), and let its charts take their width."""
    page.get_by_role("tab", name=name).click()
    page.wait_for_function("tab => tab.getAttribute('aria-selected') === 'true'",
                           arg=page.get_by_role("tab", name=name).element_handle(), timeout=10_000)
    wait_for_layout(page)


def on_projector(page, stem: str, lang: str) -> list[str]:
    """Narrow the page to the projector, judge it (and Train's second tab), and widen it back."""
    page.mouse.move(0, 0)  # (off the charts: no hover label or toolbar left over from the wide checks)
    page.set_viewport_size(PROJECTOR)
    wait_for_layout(page)
    problems = projector_problems(page, stem)
    if stem in SECOND_TABS:
        other, first = (catalog(lang)[key] for key in SECOND_TABS[stem])
        show_tab(page, other)
        problems += projector_problems(page, f"{stem} ({other})")
        show_tab(page, first)
    page.set_viewport_size(WIDE)  # (the next page draws at 1440 from its first run)
    return problems


# ---------------------------------------------------------------- the walk

NEW_HEADING = "(before) => { const h = document.querySelector('h1'); return h && h.innerText !== before; }"


def follow_link(page, stem: str) -> None:
    """Follow the sidebar's link: one document for every page, so Plotly's code loads once a test."""
    heading = page.locator("h1").first.inner_text()
    page.locator(f"[data-testid='stSidebarNavLink'][href$='/{stem}']").click()
    page.wait_for_function(NEW_HEADING, arg=heading, timeout=120_000)
    wait_until_drawn(page)


def check_pages(app_url: str, open_page, lang: str, stems: list[str]) -> None:
    """Open the first page by its address in a fresh tab, follow the sidebar to the others, check each page wide
    and then on the projector, and check every request the tab made."""
    first, *others = stems
    page = open_page(**WIDE)
    requests: list[tuple[str, str]] = []
    current = {"page": first}
    page.on("request", lambda r: requests.append((current["page"], r.url)))
    page.goto(f"{app_url}/{'' if first == DEFAULT_PAGE else first}?lang={lang}", timeout=120_000)
    page.locator("h1").first.wait_for(timeout=120_000)
    wait_until_drawn(page)
    if first == DEFAULT_PAGE:
        assert screenshot(page, f"home-{lang}").stat().st_size > 10_000
    charts, problems = {}, []
    for stem in stems:
        current["page"] = stem
        if stem != first:
            follow_link(page, stem)
        charts[stem] = page.locator(CHART).count()
        problems += wide_problems(page, stem, lang)
        problems += on_projector(page, stem, lang)
    wait_for_quiet_network(page)  # fonts and lazy chunks are asked for after the script finishes
    assert {stem for stem, count in charts.items() if not count} <= TEXT_PAGES, charts
    assert not problems, "\n".join(problems)
    host = urlsplit(app_url).netloc
    outside = sorted({(where, u) for where, u in requests
                      if urlsplit(u).scheme not in LOCAL_SCHEMES and urlsplit(u).netloc != host})
    assert not outside, "requests that leave the app's server:\n" + "\n".join(f"{w}: {u}" for w, u in outside)
    assert any(u.startswith(f"{app_url}/media/") for _, u in requests)  # the page icon, served locally
