import streamlit as st

st.title("GPT Explorer")
st.markdown(
    """
A language model reads integers and predicts the next one. A **bigram** model looks only at the previous
character: it learns that *q* is followed by *u*, but never that the *she* in a story means the *Lucy* named
three sentences earlier. That needs every position to fetch information from any earlier position, chosen by
content. This app builds such a model — a LLaMA-style GPT — one part at a time, lets you poke every part, and
then trains the whole thing on your CPU to write children's stories.
"""
)
