"""A deep link on a fresh server gets the app's navigation. (Every page drawing from the app's own server alone, in
both languages, is test_browser_figures.)"""
from browser_support import app_server


def test_a_deep_link_on_a_fresh_server_gets_the_apps_navigation(open_page):
    with app_server(timeout=180) as fresh_url:  # (the shared server has run app.py for other tests)
        page = open_page()
        page.goto(f"{fresh_url}/rope")
        page.get_by_text("RoPE: position by rotation").wait_for(timeout=60_000)
        nav = page.locator('[data-testid="stSidebarNav"]')
        nav.get_by_text("Concepts").wait_for(timeout=30_000)
        assert "sqrt d scaling" not in nav.inner_text()  # not Streamlit's file-name list of pages/
