"""Every page on a 1024×768 projector, in both languages: nothing is wider than its column or cut short, no word is
broken across two lines, no label is squeezed to a letter or two a line, every number input keeps its ± buttons and
no chart's title runs off its edge. One tab a language, kept over the module, follows the sidebar from page to page
(and opens the Train page's second tab): the pages in two groups, so that no test runs long."""
import re

import pytest
from browser_support import after_rerun, wait_until_drawn

from explorer.i18n import catalog
from explorer.navigation import DEFAULT_PAGE, PAGE_STEMS

WIDTH, HEIGHT = 1024, 768
# Train last: the check of the check below finds the English tab there.
GROUPS = {"first": PAGE_STEMS[:7], "second": sorted(PAGE_STEMS[7:], key=lambda stem: stem == "training")}
SECOND_TABS = {"training": ("training.tab_runs", "training.tab_new")}  # (its tabs are drawn at once, shown on a click)

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


NEW_HEADING = "(before) => { const h = document.querySelector('h1'); return h && h.innerText !== before; }"


def visit(page, stem: str) -> None:
    """Follow the sidebar's link to `stem`, unless the tab shows it: one document for every page (its scripts load
    once), drawn to the end."""
    link = page.locator(f"[data-testid=stSidebarNavLink][href$='/{'' if stem == DEFAULT_PAGE else stem}']")
    if link.get_attribute("aria-current") == "page":
        return
    heading = page.locator("h1").first.inner_text()
    link.click()
    page.wait_for_function(NEW_HEADING, arg=heading, timeout=120_000)
    wait_until_drawn(page)


def show_tab(page, name: str) -> None:
    """Show a tab that Streamlit drew with the page (no run to wait for), and let its charts take their width."""
    page.get_by_role("tab", name=name).click()
    page.wait_for_function("tab => tab.getAttribute('aria-selected') === 'true'",
                           arg=page.get_by_role("tab", name=name).element_handle(), timeout=10_000)
    page.wait_for_timeout(500)


def problems_of(page, name: str) -> list[str]:
    return [f"{name}: {problem}" for problem in page.evaluate(PROBLEMS)]


@pytest.fixture(scope="module")
def projector(open_module_page, app_url):
    """{language: its tab at 1024×768}, each opened on the start page the first time it is asked for."""
    tabs = {}

    def tab(lang: str):
        if lang not in tabs:
            tabs[lang] = open_module_page(WIDTH, HEIGHT)
            tabs[lang].goto(f"{app_url}/?lang={lang}", timeout=120_000)
            tabs[lang].locator("h1").first.wait_for(timeout=120_000)
            wait_until_drawn(tabs[lang])
        return tabs[lang]
    return tab


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_fits_a_projector(projector, lang, group):
    page, problems = projector(lang), []
    for stem in GROUPS[group]:
        visit(page, stem)
        problems += problems_of(page, stem)
        if stem in SECOND_TABS:
            other, first = (catalog(lang)[key] for key in SECOND_TABS[stem])
            show_tab(page, other)
            problems += problems_of(page, f"{stem} ({other})")
            show_tab(page, first)
    assert not problems, "\n".join(problems)


# The Train form's model fields as they were on a projector before the page reflowed: six to a row, each a sixth of
# the section, and labels that Streamlit breaks anywhere.
SQUEEZED = """.st-key-tr_model_fields {grid-template-columns: repeat(6, 1fr) !important}
.st-key-tr_model_fields p {overflow-wrap: break-word !important; word-break: break-word !important}"""


def test_the_check_sees_a_squeezed_form(projector):
    """The check itself, on the squeezed form: labels broken inside words, toggles a letter a line, select boxes
    that cut their value, number inputs without their ± buttons."""
    page = projector("en")
    visit(page, "training")
    squeeze = page.add_style_tag(content=SQUEEZED)
    page.wait_for_timeout(300)
    found = page.evaluate(PROBLEMS)
    squeeze.evaluate("style => style.remove()")  # (the form as it is: test_every_page_fits_a_projector)
    assert {"a number input without its ± buttons: Width d_model", '"Divide" broken over two lines: Divide q·k by '
            '√d_head'} <= set(found)
    assert any(re.fullmatch(r"squeezed to \d+ lines: Zero-init output matrices", p) for p in found)
    assert any(re.fullmatch(r"cut short \(\d+ px in \d+\): RMSNorm", p) for p in found)


def test_a_concept_pages_control_keeps_its_value_in_the_address(projector):
    """A teacher's link (explorer.links.linked): a slider moved puts its value in the URL, beside the language, and
    back at its default it leaves."""
    page = projector("zh")
    visit(page, "rope")
    thumb = page.locator(".st-key-rope-pair input")  # (the thumb: a range input)
    after_rerun(page, lambda: thumb.press("ArrowRight"))
    page.wait_for_function("() => location.search.includes('rope-pair=7')", timeout=15_000)
    assert "lang=zh" in page.url
    after_rerun(page, lambda: thumb.press("ArrowLeft"))
    page.wait_for_function("() => !location.search.includes('rope-pair')", timeout=15_000)
