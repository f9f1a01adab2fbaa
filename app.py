"""Entry point: `streamlit run app.py`. Navigation and the sidebar shared by every page."""
from pathlib import Path

import streamlit as st

import gptcore  # noqa: F401  (sets OMP_WAIT_POLICY before torch is imported anywhere)
from explorer.ui import sidebar

# A local image, served by this server: a ':material/…' page icon makes every browser fetch it from Google's font CDN.
ICON = Path(__file__).resolve().parent / "static" / "icon.png"
st.set_page_config(page_title="GPT Explorer", page_icon=str(ICON), layout="wide")

# Learning order. Each concept page adds its own line here.
PAGES = {
    "Start": [st.Page("pages/home.py", title="Learning path", icon=":material/route:", default=True)],
    "Concepts": [
        st.Page("pages/averaging_to_attention.py", title="From averaging to attention", icon=":material/functions:"),
        st.Page("pages/sqrt_d_scaling.py", title="Why divide by √d_k", icon=":material/straighten:"),
        st.Page("pages/multihead_order.py", title="Multi-head attention & order", icon=":material/shuffle:"),
        st.Page("pages/rope.py", title="RoPE", icon=":material/rotate_right:"),
        st.Page("pages/ffn_swiglu.py", title="FFN and SwiGLU", icon=":material/call_split:"),
        st.Page("pages/residual_norm.py", title="Residual stream & norms", icon=":material/stacked_line_chart:"),
        st.Page("pages/assembled_gpt.py", title="The assembled GPT", icon=":material/account_tree:"),
        st.Page("pages/hyperparameters.py", title="Hyperparameters", icon=":material/tune:"),
        st.Page("pages/recap.py", title="Recap and what comes next", icon=":material/flag:"),
    ],
    "Model lab": [
        st.Page("pages/training.py", title="Train", icon=":material/model_training:"),
        st.Page("pages/inspector.py", title="Inspect", icon=":material/biotech:"),
    ],
}

nav = st.navigation({section: pages for section, pages in PAGES.items() if pages})
sidebar()
# Imported only now, with the navigation on screen: it loads torch (about a second on a fresh server).
from gptcore.threads import use_threads  # noqa: E402

# Each rerun gets a fresh thread, which starts with the thread count set last anywhere (say a one-thread demo
# job's): the page's own torch work (inspector, generation, demos) should use every core.
use_threads(0)
nav.run()
