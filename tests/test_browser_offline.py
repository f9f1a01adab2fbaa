"""Every page loads from the app's own server alone: no icon, font or script from a CDN.

Chromium records every request it makes (documents, scripts, fonts, the favicon, images) while each page of the
navigation loads and settles; anything addressed to another host fails the test with its URL.
"""
import re
from pathlib import Path
from urllib.parse import urlsplit

from browser_support import ROOT, app_server, browser_page, require_chromium, wait_for_app

LOCAL_SCHEMES = {"data", "blob", "about", "chrome-extension"}


def page_paths() -> list[str]:
    """URL path of every page routed by app.py: the file name without .py, and '' for the default page."""
    app = (ROOT / "app.py").read_text()
    files = re.findall(r'st\.Page\("(pages/[a-z_]+\.py)"', app)
    default = re.search(r'st\.Page\("(pages/[a-z_]+\.py)"[^)]*default=True', app).group(1)
    assert len(files) >= 10, files
    return ["" if f == default else Path(f).stem for f in files]


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
