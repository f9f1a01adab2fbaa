import streamlit as st

import explorer.ui  # noqa: F401  (routes a deep link on a fresh server through app.py)
from explorer.i18n import t
from explorer.navigation import SECTIONS
from gptcore.config import GPTConfig

PATH = [stem for stem, _ in SECTIONS["concepts"]]
LAB = [stem for stem, _ in SECTIONS["lab"]]

st.title(t("home.title"))
st.markdown(t("home.intro"))

left, right = st.columns([3, 2], gap="large")
with left:
    st.subheader(t("home.path_heading"))
    for stem in PATH:
        st.page_link(f"app_pages/{stem}.py", label=t(f"home.path.{stem}.label"))
        st.caption(t(f"home.path.{stem}.blurb"))
with right:
    st.subheader(t("home.lab_heading"))
    for stem in LAB:
        st.page_link(f"app_pages/{stem}.py", label=t(f"home.lab.{stem}.label"))
        st.caption(t(f"home.lab.{stem}.blurb"))
    cfg = GPTConfig()
    st.subheader(t("home.model_heading"))
    st.markdown(t("home.model", n_layer=cfg.n_layer, d_model=cfg.d_model, n_head=cfg.n_head, d_head=cfg.d_head,
                  theta=cfg.rope_theta, d_ff=cfg.d_ff, context=cfg.context, vocab=cfg.vocab_size,
                  params=cfg.n_params))
