"""Every page in Chromium, from one server: a deep link on the fresh server gets the app's navigation, and every page
of the navigation loads without an exception from the app's own server alone (no icon, font or script from a CDN).

Chromium records every request it makes (documents, scripts, fonts, the favicon, images) while each page loads and
settles; anything addressed to another host fails the test with its URL.
"""
from urllib.parse import urlsplit

import pytest
from browser_support import screenshot, wait_for_app, wait_for_quiet_network

from explorer.navigation import DEFAULT_PAGE, PAGE_STEMS

LOCAL_SCHEMES = {"data", "blob", "about", "chrome-extension"}


def page_paths() -> list[str]:
    """URL path of every page routed by app.py: the file name without .py, and '' for the default page."""
    return ["" if stem == DEFAULT_PAGE else stem for stem in PAGE_STEMS]


# Two tests of every other page each, so that neither runs long.
PAGE_GROUPS = [page_paths()[0::2], page_paths()[1::2]]


# First in the module: the server has not run app.py for anyone yet.
def test_a_deep_link_on_a_fresh_server_gets_the_apps_navigation(app_url, open_page):
    page = open_page()
    page.goto(f"{app_url}/rope")
    page.get_by_text("RoPE: position by rotation").wait_for(timeout=60_000)
    nav = page.locator('[data-testid="stSidebarNav"]')
    nav.get_by_text("Concepts").wait_for(timeout=30_000)
    assert "sqrt d scaling" not in nav.inner_text()  # not Streamlit's file-name list of pages/


@pytest.mark.parametrize("paths", PAGE_GROUPS, ids=[f"from-{group[0] or 'home'}" for group in PAGE_GROUPS])
def test_every_page_renders_and_requests_nothing_but_the_apps_own_server(app_url, open_page, paths):
    page = open_page(1440, 900)
    host = urlsplit(app_url).netloc
    requests: list[tuple[str, str]] = []
    current = {"page": ""}
    page.on("request", lambda r: requests.append((current["page"], r.url)))
    for path in paths:
        current["page"] = path or "(home)"
        page.goto(f"{app_url}/{path}")
        wait_for_app(page)
        page.locator('[data-testid="stSidebarNav"]').wait_for(timeout=120_000)  # (a page's first run, on a busy host)
        wait_for_app(page)  # (the first wait may have come before the run began)
        wait_for_quiet_network(page)  # favicon, fonts and lazy chunks are asked for after the script finishes
        assert page.locator('[data-testid="stException"]').count() == 0, f"{path}: exception on the page"
        if not path:
            page.get_by_text("GPT Explorer").first.wait_for()
            assert screenshot(page, "home").stat().st_size > 10_000
    outside = sorted({(where, u) for where, u in requests
                      if urlsplit(u).scheme not in LOCAL_SCHEMES and urlsplit(u).netloc != host})
    assert not outside, "requests that leave the app's server:\n" + "\n".join(f"{w}: {u}" for w, u in outside)
    assert any(u.startswith(f"{app_url}/media/") for _, u in requests)  # the page icon, served locally
    assert len({w for w, _ in requests}) == len(paths)  # every page was really visited
