"""Every page loads from the app's own server alone: no icon, font or script from a CDN.

Chromium records every request it makes (documents, scripts, fonts, the favicon, images) while each page of the
navigation loads and settles; anything addressed to another host fails the test with its URL.
"""
from urllib.parse import urlsplit

from browser_support import app_server, browser_page, require_chromium, wait_for_app

from explorer.navigation import DEFAULT_PAGE, PAGE_STEMS

LOCAL_SCHEMES = {"data", "blob", "about", "chrome-extension"}


def page_paths() -> list[str]:
    """URL path of every page routed by app.py: the file name without .py, and '' for the default page."""
    return ["" if stem == DEFAULT_PAGE else stem for stem in PAGE_STEMS]


def test_no_page_requests_anything_but_the_apps_own_server():
    require_chromium()
    with app_server() as url, browser_page(width=1440, height=900) as page:
        host = urlsplit(url).netloc
        requests: list[tuple[str, str]] = []
        current = {"page": ""}
        page.on("request", lambda r: requests.append((current["page"], r.url)))
        for path in page_paths():
            current["page"] = path or "(home)"
            page.goto(f"{url}/{path}")
            wait_for_app(page)
            page.locator('[data-testid="stSidebarNav"]').wait_for(timeout=30_000)
            page.wait_for_timeout(1_500)  # favicon, fonts and lazy chunks arrive after the script finishes
            assert page.locator('[data-testid="stException"]').count() == 0, f"{path}: exception on the page"
        outside = sorted({(where, u) for where, u in requests
                          if urlsplit(u).scheme not in LOCAL_SCHEMES and urlsplit(u).netloc != host})
        assert not outside, "requests that leave the app's server:\n" + "\n".join(f"{w}: {u}" for w, u in outside)
        assert any(u.startswith(f"{url}/media/") for _, u in requests)  # the page icon, served locally
        assert len({w for w, _ in requests}) == len(page_paths())  # every page was really visited
