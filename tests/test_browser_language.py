"""The language switch in Chromium: the page redraws in place, in the other language, with the same choices."""
from browser_support import screenshot, wait_for_app


def test_switching_language_keeps_a_chosen_option_and_the_page(app_url, open_page):
    page = open_page(1440, 900)
    page.goto(f"{app_url}/assembled_gpt?lang=en")
    page.get_by_text("The assembled GPT").first.wait_for(timeout=180_000)
    wait_for_app(page, 120_000)
    ffn = page.locator('[data-testid="stSelectbox"]').filter(has_text="FFN").first
    ffn.click()
    page.get_by_role("option", name="GELU").click()
    wait_for_app(page, 120_000)
    page.locator('[data-testid="stSidebar"]').get_by_text("中文", exact=True).click()
    page.get_by_text("组装好的 GPT").first.wait_for(timeout=120_000)
    wait_for_app(page, 120_000)
    assert "lang=zh" in page.url and page.url.split("?")[0].endswith("/assembled_gpt")
    ffn = page.locator('[data-testid="stSelectbox"]').filter(has_text="前馈网络").first
    # the choice made in English, now shown under its Chinese name
    assert "GELU" in ffn.locator("input").input_value()
    screenshot(page, "language-switch-zh")


def test_switching_language_keeps_a_radio_choice(app_url, open_page):
    page = open_page(1440, 900)
    page.goto(f"{app_url}/averaging_to_attention?lang=en")
    page.get_by_text("random W_Q, W_K").first.wait_for(timeout=180_000)
    wait_for_app(page, 120_000)
    page.get_by_text("random W_Q, W_K").first.click()
    wait_for_app(page, 120_000)
    page.locator('[data-testid="stSidebar"]').get_by_text("中文", exact=True).click()
    page.get_by_text("从平均到注意力").first.wait_for(timeout=120_000)
    wait_for_app(page, 120_000)
    checked = page.locator('[data-testid="stRadio"] input:checked').evaluate_all(
        "els => els.map(e => e.closest('label').innerText)")
    assert any("W_Q" in c and "W_K" in c and "=" not in c for c in checked), checked
