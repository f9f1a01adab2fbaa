"""Two checks on a 1024×768 projector that every page's own walk (tests/every_page.py) does not make: the projector
check itself, on a form squeezed as it used to be, and a concept page's control kept in the address. One tab a
language, kept over the module, follows the sidebar from page to page."""
import re

import pytest
from browser_support import after_rerun, wait_until_drawn
from every_page import PROBLEMS

from explorer.navigation import DEFAULT_PAGE

WIDTH, HEIGHT = 1024, 768

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
    squeeze.evaluate("style => style.remove()")  # (the form as it is: every_page.check_pages)
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
