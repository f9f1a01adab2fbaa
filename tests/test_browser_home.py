from browser_support import app_server, browser_page, require_chromium, screenshot, wait_for_app


def test_home_page_renders_without_exception_in_chromium():
    require_chromium()
    with app_server() as url, browser_page() as page:
        page.goto(url)
        wait_for_app(page)
        page.get_by_text("GPT Explorer").first.wait_for()
        assert page.locator('[data-testid="stException"]').count() == 0
        shot = screenshot(page, "home")
    assert shot.stat().st_size > 10_000


def test_a_deep_link_on_a_fresh_server_gets_the_apps_navigation():
    require_chromium()
    with app_server() as url, browser_page() as page:
        page.goto(f"{url}/rope")
        page.get_by_text("RoPE: position by rotation").wait_for(timeout=60_000)
        nav = page.locator('[data-testid="stSidebarNav"]')
        nav.get_by_text("Concepts").wait_for(timeout=30_000)
        assert "sqrt d scaling" not in nav.inner_text()  # not Streamlit's file-name list of pages/
