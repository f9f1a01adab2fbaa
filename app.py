"""Entry point: `streamlit run app.py`. Navigation and the sidebar shared by every page."""
import sys
from pathlib import Path

import streamlit as st

import gptcore  # noqa: F401  (sets OMP_WAIT_POLICY before torch is imported anywhere)
from explorer.i18n import t
from explorer.navigation import DEFAULT_PAGE, SECTIONS
from explorer.ui import load_torch_in_background, sidebar

# A local image, served by this server: a ':material/…' page icon makes every browser fetch it from Google's font CDN.
ICON = Path(__file__).resolve().parent / "static" / "icon.png"
st.set_page_config(page_title=t("app.title"), page_icon=str(ICON), layout="wide")

PAGES = {t(f"app.sections.{section}"): [st.Page(f"app_pages/{stem}.py", title=t(f"app.pages.{stem}"),
                                                 icon=f":material/{icon}:", default=stem == DEFAULT_PAGE)
                                         for stem, icon in pages]
         for section, pages in SECTIONS.items()}

nav = st.navigation(PAGES, expanded=True)  # every page listed: no "View more" toggle
sidebar()
if "torch" in sys.modules:  # (perhaps still loading in the background: this import then waits for it)
    from gptcore.threads import use_threads

    # Each rerun gets a fresh thread, which starts with the thread count set last anywhere (say a one-thread demo
    # job's): the page's own torch work (inspector, generation, demos) should use every core. Before torch has
    # loaded, nobody has set a count, and a thread starts with every core anyway.
    use_threads(0)
try:
    nav.run()
finally:  # (also when the page stops, reruns or switches)
    load_torch_in_background()
