import streamlit as st

from explorer.i18n import t
from explorer.tables import pinned, shown_table
from explorer.ui import show_source
from gptcore.config import GPTConfig
from gptcore.demos import recap

st.title(t("recap.title"))

# --- three things ----------------------------------------------------------------------------------------
st.header(t("recap.three.header"))
st.markdown(t("recap.three.text"))
left, right = st.columns(2)
left.page_link("app_pages/averaging_to_attention.py", label=t("recap.three.back"), icon=":material/functions:")
right.page_link("app_pages/training.py", label=t("recap.three.train"), icon=":material/model_training:")

# --- from here to GPT-2 ----------------------------------------------------------------------------------
st.header(t("recap.bridge.header"))
st.markdown(t("recap.bridge.text"))
scale = recap.scale_table(GPTConfig())
# the counts the text reads beside the model's name, the shapes after: on a projector the last columns scroll away
counts_first = scale[["model", "parameters", "× this model"] + [c for c in scale.columns
                                                                  if c not in ("model", "parameters", "× this model")]]
st.dataframe(shown_table(counts_first, "recap", {"parameters": "{:,}", "× this model": "{:,.0f}",
                                                 **dict.fromkeys(["vocabulary", "d_model", "context"], "{:,}")}),
             hide_index=True, key="recap-scale", column_config=pinned("recap", "model"))
st.markdown(t("recap.bridge.at_scale"))
show_source(recap.scale_table)

# --- what comes next -------------------------------------------------------------------------------------
st.header(t("recap.next.header"))
st.markdown(t("recap.next.text"))
