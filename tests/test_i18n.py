"""The catalogs: both languages hold the same keys with the same placeholders, and a tab's language is its own."""
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer import i18n

ROOT = Path(__file__).resolve().parent.parent


def test_both_catalogs_have_the_same_keys():
    en, zh = i18n.catalog("en"), i18n.catalog("zh")
    assert sorted(set(en) - set(zh)) == [] and sorted(set(zh) - set(en)) == []


@pytest.mark.parametrize("key", sorted(i18n.catalog("en")))
def test_each_entry_has_the_same_placeholders_in_both_languages(key):
    assert i18n.placeholders(i18n.catalog("en")[key]) == i18n.placeholders(i18n.catalog("zh")[key])


def test_every_chinese_entry_is_written_in_chinese():
    untranslated = [key for key, text in i18n.catalog("zh").items()
                    if text.strip() and not re.search(r"[\u4e00-\u9fff]", text) and re.search(r"[A-Za-z]{4}", text)
                    and text == i18n.catalog("en")[key]]
    assert untranslated == []


def test_prose_files_exist_in_both_languages():
    en = {p.relative_to(ROOT / "locales" / "en") for p in (ROOT / "locales" / "en").rglob("*.md")}
    zh = {p.relative_to(ROOT / "locales" / "zh") for p in (ROOT / "locales" / "zh").rglob("*.md")}
    assert en == zh


def _language_of(query: dict) -> str:
    def script():
        import streamlit as st

        from explorer.i18n import language

        st.write(language())

    at = AppTest.from_function(script)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    return at.markdown[0].value


def test_the_url_chooses_the_language_and_english_is_the_default():
    assert _language_of({"lang": "zh"}) == "zh"
    assert _language_of({"lang": "en"}) == "en"
    assert _language_of({}) == "en"
    assert _language_of({"lang": "xx"}) == "en"  # an unknown code falls back, it does not fail


def test_a_missing_key_is_a_bug_not_a_silent_fallback():
    def script():
        from explorer.i18n import t

        t("no.such.key")

    at = AppTest.from_function(script).run()
    assert at.exception and "no.such.key" in at.exception[0].value
