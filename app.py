"""Entry point: `streamlit run app.py`. Navigation and the sidebar shared by every page."""
import gptcore  # noqa: F401  (sets OMP_WAIT_POLICY before torch is imported anywhere)
import streamlit as st

from gptcore.ui import sidebar

st.set_page_config(page_title="GPT Explorer", page_icon="🧩", layout="wide")

# Learning order. Each concept page adds its own line here.
PAGES = {
    "Start": [st.Page("pages/home.py", title="Learning path", icon="🧭", default=True)],
    "Concepts": [
    ],
    "Model lab": [
        st.Page("pages/inspector.py", title="Inspect", icon="🔬"),
    ],
}

nav = st.navigation({section: pages for section, pages in PAGES.items() if pages})
sidebar()
nav.run()
