import streamlit as st

import explorer.ui  # noqa: F401  (routes a deep link on a fresh server through app.py)
from gptcore.config import GPTConfig
from gptcore.model import GPT

st.title("GPT Explorer")
st.markdown(
    """
A language model sees text as a sequence of integers and, at every position, outputs a probability for each
possible next one. A model that only looks at the current character already gets somewhere — after *q* comes
*u* — but it can never work out that the *he* on this line is the *Tom* from the opening sentence. For that,
each position needs a way to pull in information from any earlier position, and to decide from what it finds
there what is worth pulling.

This app builds that mechanism up into a LLaMA-style GPT, one part per page, with every part open to poking; then
it trains the whole model on your CPU until it writes children's stories.
"""
)

PATH = [
    ("pages/averaging_to_attention.py", "1 · From averaging to attention",
     "A causal average is a masked matrix product; let the data choose the weights and it becomes attention."),
    ("pages/sqrt_d_scaling.py", "2 · Why divide by √d_k",
     "Dot products grow with dimension; unscaled, softmax turns one-hot and gradients vanish."),
    ("pages/multihead_order.py", "3 · Multi-head attention and order-blindness",
     "Several heads for the parameters and compute of one — and attention alone cannot tell 'dog bites man' from "
     "'man bites dog'."),
    ("pages/rope.py", "4 · RoPE",
     "Rotate q and k by their positions, and the score depends on their content and the signed offset m − n."),
    ("pages/ffn_swiglu.py", "5 · FFN and SwiGLU",
     "A gated feed-forward layer, and why its hidden size is 8/3·d instead of 4·d."),
    ("pages/residual_norm.py", "6 · Residual stream and normalization",
     "Pre-norm vs post-norm, and RMSNorm vs LayerNorm, each trained side by side."),
    ("pages/assembled_gpt.py", "7 · The assembled GPT",
     "Every parameter of the 810,624 accounted for, every tensor shape, and what the first loss should be."),
    ("pages/hyperparameters.py", "8 · Hyperparameters",
     "The consensus shapes of GPT-3 and LLaMA-2, a cost calculator, and the patches that keep softmax stable."),
    ("pages/recap.py", "9 · Recap and what comes next",
     "Three things to remember, the road from this model to GPT-2, and what modern models add."),
]
LAB = [
    ("pages/training.py", "Train", "Train the full model on your CPU in the background; watch loss and samples."),
    ("pages/inspector.py", "Inspect", "Open a checkpoint: attention heatmaps, head finder, predictions."),
]

left, right = st.columns([3, 2], gap="large")
with left:
    st.subheader("The learning path")
    for page, label, blurb in PATH:
        st.page_link(page, label=label)
        st.caption(blurb)
with right:
    st.subheader("The model lab")
    for page, label, blurb in LAB:
        st.page_link(page, label=label)
        st.caption(blurb)
    cfg = GPTConfig()
    st.subheader("The model you will build")
    st.markdown(
        f"- {cfg.n_layer} pre-norm blocks, d_model {cfg.d_model}, {cfg.n_head} heads of {cfg.d_head}\n"
        f"- causal attention with RoPE (θ = {cfg.rope_theta:,.0f}), SwiGLU with d_ff {cfg.d_ff}, RMSNorm, no biases\n"
        f"- context {cfg.context} characters, vocabulary {cfg.vocab_size} (the characters of the tutorial's "
        f"TinyStories text; your corpus decides yours)\n"
        f"- **{GPT(cfg).num_params():,} parameters**, trained in minutes on two CPU cores")
