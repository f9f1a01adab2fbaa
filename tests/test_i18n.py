"""Both languages: the catalogs agree, every library message is translated, and every page reads in 中文.

Each page is rendered through app.py (so the navigation, the sidebar and the page itself) with ?lang=zh and
?lang=en, once for the session (page_helpers.app_page, which the pages' own tests read too); in English it shows
the tutorial's numbers, in Chinese the same numbers and no run of four English words outside code, identifiers,
math and the reviewed allow-list of tests/i18n_check.py.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from i18n_check import english_left
from page_helpers import app_page
from streamlit.testing.v1 import AppTest

import gptcore
from explorer import i18n
from explorer.navigation import PAGE_STEMS
from gptcore.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")

# The tutorial's printed numbers each page shows, in either language.
TUTORIAL_NUMBERS = {
    "home": ["810,624"],
    "averaging_to_attention": ["-0.5741", "-0.3745"],
    "sqrt_d_scaling": ["15.8", "63.5", "261.3"],
    "multihead_order": ["65,536"],
    "rope": ["-10.1427"],
    "ffn_swiglu": ["344"],
    "residual_norm": [],
    "assembled_gpt": ["810,624", "9,472", "197,888"],
    "hyperparameters": ["12,288", "11,008"],
    "faster_training": ["1,501"],
    "recap": [],
    "training": ["810,624"],
    "inspector": [],
    "trace": [],
}
assert sorted(TUTORIAL_NUMBERS) == sorted(PAGE_STEMS)


# ---------------------------------------------------------------- catalogs

def test_both_catalogs_have_the_same_keys():
    en = set(i18n.catalog("en"))
    zh = {key for key in i18n.catalog("zh") if not key.startswith("messages.")}
    assert sorted(en - zh) == [] and sorted(zh - en) == []


def fields(text: str) -> list[str] | str:
    try:
        return sorted(i18n.placeholders(text))
    except ValueError as e:  # an unbalanced brace
        return f"not a template ({e})"


def test_each_entry_has_the_same_placeholders_in_both_languages():
    en, zh = i18n.catalog("en"), i18n.catalog("zh")
    differing = [f"{key}: en {fields(en[key])}, zh {fields(zh[key])}"
                 for key in sorted(en) if key in zh and fields(en[key]) != fields(zh[key])]
    assert differing == [], "entries whose placeholders differ:\n" + "\n".join(differing)


def test_every_chinese_entry_is_written_in_chinese():
    en, zh = i18n.catalog("en"), i18n.catalog("zh")
    untranslated = [key for key, text in zh.items()
                    if key in en and text == en[key] and re.search(r"[A-Za-z]{4,}(\s+[A-Za-z]+){2,}", text)]
    assert untranslated == []


def test_prose_files_exist_in_both_languages():
    en = {p.name for p in (ROOT / "locales" / "en").glob("*.md")}
    zh = {p.name for p in (ROOT / "locales" / "zh").glob("*.md")}
    assert en == zh


# ---------------------------------------------------------------- library messages

def user_error_names() -> set[str]:
    """Names of UserError and all its subclasses, once every module that defines one is imported."""
    import importlib
    import pkgutil

    import explorer
    for package in (gptcore, explorer):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
    names, todo = set(), [UserError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def message_calls():
    """(file, line, key, template) of every Message or UserError built in gptcore, explorer and pages.

    A call whose key or template is not a literal string is reported with key None, so it fails below.
    """
    callees = user_error_names() | {"message", "Message", "cls"}
    for path in [*ROOT.glob("gptcore/**/*.py"), *ROOT.glob("explorer/*.py"), *ROOT.glob("app_pages/*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name not in callees or name == "of" or (name == "cls" and not node.args):
                continue
            if name == "Message" and path.name == "errors.py":
                continue  # its own definition and rebuilding
            literal = len(node.args) >= 2 and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                                  for a in node.args[:2])
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if name == "cls" and not literal:
                continue  # cls(...) outside a UserError: not a message
            yield (where, node.args[0].value, node.args[1].value) if literal else (where, None, None)


def test_every_user_error_has_a_literal_key_and_english_template():
    bad = [where for where, key, _ in message_calls() if key is None]
    assert bad == []


def test_every_library_message_is_in_the_chinese_catalog_with_the_same_placeholders():
    zh = i18n.catalog("zh")
    seen: dict[str, str] = {}
    problems = []
    for where, key, template in message_calls():
        if key is None:
            continue
        if key in seen and i18n.placeholders(seen[key]) != i18n.placeholders(template):
            problems.append(f"{where}: {key} used with other placeholders elsewhere")
        seen[key] = template
        entry = zh.get(f"messages.{key}")
        if entry is None:
            problems.append(f"{where}: messages.{key} missing from locales/zh/messages.toml")
        elif i18n.placeholders(entry) != i18n.placeholders(template):
            problems.append(f"{where}: messages.{key} has {sorted(i18n.placeholders(entry))}, "
                            f"the code {sorted(i18n.placeholders(template))}")
    unused = sorted(k for k in zh if k.startswith("messages.") and k.removeprefix("messages.") not in seen)
    assert problems == [] and unused == []


# ---------------------------------------------------------------- the language of a tab

def _language_of(query: dict, locale: str | None = None) -> str:
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


def test_a_library_message_is_translated_with_its_values():
    def script():
        import streamlit as st

        from explorer.i18n import say
        from gptcore.config import GPTConfig

        try:
            GPTConfig(d_model=130, n_head=4)
        except ValueError as e:
            st.write(say(e))

    at = AppTest.from_function(script)
    at.query_params["lang"] = "zh"
    assert at.run().markdown[0].value == "d_model（130）必须能被 n_head（4）整除"
    at = AppTest.from_function(script).run()
    assert at.markdown[0].value == "d_model (130) must be divisible by n_head (4)"


def test_a_stored_message_the_catalog_cannot_say_is_shown_in_its_own_english():
    def script():
        import streamlit as st

        from explorer.i18n import say
        from gptcore.errors import stored_message

        def stored(key, template, **params):
            return stored_message({"key": key, "template": template, "params": params})
        for shown in (stored("data.file_corpus", "file {name}", name="a.txt"),  # known: in Chinese
                      stored("data.from_a_later_version", "file {name}", name="a.txt"),  # a key not in the catalog
                      stored("data.file_corpus", "file {path}", path="a.txt"),  # its values are others
                      stored("data.first_chars", "{corpus}, first {n} chars", n="many",  # a spec it never had
                             corpus={"key": "nope", "template": "x", "params": {}})):
            st.write(say(shown))

    at = AppTest.from_function(script)
    at.query_params["lang"] = "zh"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [m.value for m in at.markdown] == [i18n.catalog("zh")["messages.data.file_corpus"].format(name="a.txt"),
                                              "file a.txt", "file a.txt", "x, first many chars"]


def test_a_message_the_code_builds_with_a_key_missing_from_the_catalog_is_a_bug():
    def script():
        from explorer.i18n import say
        from gptcore.errors import message

        say(message("data.no_such_key", "x"))

    at = AppTest.from_function(script)
    at.query_params["lang"] = "zh"
    assert "messages.data.no_such_key" in at.run().exception[0].value


def test_two_tabs_keep_their_own_language():
    zh = AppTest.from_file(APP, default_timeout=60)
    zh.query_params["lang"] = "zh"
    en = AppTest.from_file(APP, default_timeout=60)
    zh.run(), en.run()
    zh.run()
    assert zh.title[0].value != en.title[0].value
    assert re.search(r"[\u4e00-\u9fff]", zh.title[0].value) and not re.search(r"[\u4e00-\u9fff]", en.title[0].value)


# ---------------------------------------------------------------- every page in both languages

def shown_text(at: AppTest) -> str:
    from i18n_check import rendered_texts

    codes = [str(c.value) for c in at.code]
    frames = [d.value.to_string() for d in at.dataframe]
    return "\n".join(rendered_texts(at) + codes + frames)


@pytest.mark.parametrize("stem", sorted(TUTORIAL_NUMBERS))
def test_every_page_renders_in_english_with_the_tutorials_numbers(stem):
    text = shown_text(app_page(stem, "en"))
    assert [n for n in TUTORIAL_NUMBERS[stem] if n not in text] == []


@pytest.mark.parametrize("stem", sorted(TUTORIAL_NUMBERS))
def test_every_page_reads_in_chinese_with_the_same_numbers(stem):
    at = app_page(stem, "zh")
    text = shown_text(at)
    assert [n for n in TUTORIAL_NUMBERS[stem] if n not in text] == []
    assert english_left(at) == []
