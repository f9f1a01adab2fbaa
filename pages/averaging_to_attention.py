import time

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from explorer.demo_plots import weights_heatmap
from explorer.jobs import JobRefused
from explorer.ui import job_progress, job_registry, quiz, show_source
from gptcore.demos import averaging as avg
from gptcore.model import Attention

LEAK_JOB = "causal vs no mask"
text_attention = st.cache_data(avg.text_attention)

st.title("From averaging to attention")
st.markdown(
    """
To predict the next character, position *t* needs information from the characters before it. The crudest way
to get it: replace each position's vector by the **average of positions 0..t**. Only the past is allowed, because
during training *every* position predicts the token right after it — a position that could see *t + 1* would
read the answer instead of learning to predict it.
"""
)

# --- the causal average, three ways ----------------------------------------------------------------------
st.header("1 · The same average, three ways")
st.markdown(
    """
* **A loop** over positions: slow, but obviously right.
* **One matrix product**: a lower-triangular matrix of ones, each row divided by its sum, times *x*.
* **A mask and a softmax**: scores that are all 0, the future set to −∞, then softmax. Since exp(−∞) = 0 the
  future gets no weight and the rest share it equally.

Below is the tutorial's example (seed 0, *B, T, C = 1, 4, 2*), computed by gptcore; the printout matches the
tutorial's to the last digit.
"""
)
example = avg.averaging_example()
st.code(avg.tutorial_printout(example), language="text")


def rows(tensor) -> list[str]:
    return ["[" + ", ".join(f"{v:.4f}" for v in row) + "]" for row in tensor.tolist()]


table = pd.DataFrame({"position t": range(4), "loop": rows(example.loop[0]), "matmul": rows(example.matmul[0]),
                      "mask + softmax": rows(example.softmax[0])})
st.dataframe(table, hide_index=True, key="three-ways-table")

T = st.slider("Sequence length T for the weight matrices", 2, 12, 4, key="avg-T")
bigger = avg.averaging_example(T=T)
left, right = st.columns(2)
left.plotly_chart(weights_heatmap(bigger.matmul_weights, title="tril(ones) / row sums"), key="avg-matmul")
right.plotly_chart(weights_heatmap(bigger.softmax_weights, title="softmax(0 with −∞ above the diagonal)"),
                   key="avg-softmax")
gap = max((bigger.loop - bigger.matmul).abs().max().item(), (bigger.loop - bigger.softmax).abs().max().item())
st.metric("Largest difference between the three results", f"{gap:.1e}")
show_source(avg.averaging_example, avg.average_by_loop, avg.average_weights, avg.masked_softmax)

# --- data-dependent scores -------------------------------------------------------------------------------
st.header("2 · Let the data choose the weights: attention")
st.markdown(
    """
In the third recipe the weights are softmax(scores), and the scores happen to be all zero — hence a plain
average. Make the scores depend on the content and every position decides for itself where to look.
Each position *i* projects its vector into a **query** *qᵢ = xᵢW_Q* (what it is looking for) and a **key**
*kᵢ = xᵢW_K* (what it offers); the score of *i* looking at *j* is *qᵢ · kⱼ / √d*. Mask, softmax, and the
weights mix the **values** *vⱼ = xⱼW_V*.

Here each character gets a random vector and the weights come from gptcore's own `Attention` module
(one head). With **W_K = W_Q** the score of *i* against *j* is the dot product of *xᵢW* and *xⱼW*, so a query
*tends to* score highest against keys that look like itself: each character leans toward earlier copies of
itself — the kind of pattern trained models do learn. Only tends to: a dot product also grows with the key's
length, so a longer key of a different character can still win. Sharpness 0 brings back the plain average.
"""
)
c1, c2, c3 = st.columns([2, 1, 1])
text = c1.text_input("Sequence (up to 24 characters)", "Lucy saw a cat. Lucy", max_chars=24, key="att-text")
mode = c2.radio("Projections", ["W_K = W_Q (find copies)", "random W_Q, W_K"], key="att-mode")
seed = c3.number_input("Seed", 0, 10_000, 0, key="att-seed")
sharpness = st.slider("Sharpness (multiplies every score)", 0.0, 4.0, 1.0, 0.25, key="att-sharpness")
tied = mode.startswith("W_K = W_Q")

if not text:
    st.warning("Type at least one character to see its attention pattern.")
else:
    labels = [f"{i}:{c if c != ' ' else '␣'}" for i, c in enumerate(text)]
    weights = text_attention(text, sharpness, tied, causal=True, seed=int(seed))
    st.plotly_chart(weights_heatmap(weights, labels, labels, title="Attention weights (each row sums to 1)",
                                    fmt=".1f", height=520), key="att-weights")
    show_source(avg.text_attention, avg.attention_module, avg.run_attention, Attention)

    # --- mask after softmax ------------------------------------------------------------------------------
    st.header("3 · Mask before the softmax, not after")
    st.markdown(
        """
The −∞ must go in **before** the softmax. Softmax first and then zeroing the future removes the share of
weight the future had taken, and the rows no longer sum to 1: a position's output shrinks by however much it
"wanted" to look ahead, which also depends on how long the sequence is.
"""
    )
    leaky = avg.zero_future(text_attention(text, sharpness, tied, causal=False, seed=int(seed)))
    sums = pd.DataFrame({"query": labels, "mask, then softmax": weights.sum(-1).numpy(),
                         "softmax, then mask": leaky.sum(-1).numpy()})
    left, right = st.columns(2)
    left.plotly_chart(weights_heatmap(leaky, labels, labels, title="Softmax first, then the future zeroed",
                                      height=520, annotate=len(text) <= 10), key="att-after")
    bars = go.Figure()
    for column in ("mask, then softmax", "softmax, then mask"):
        bars.add_bar(y=sums["query"], x=sums[column], name=column, orientation="h")
    bars.update_layout(height=520, margin=dict(l=10, r=10, t=40, b=10), title="Row sums",
                       yaxis=dict(autorange="reversed", type="category"), xaxis_range=[0, 1.05],
                       legend=dict(orientation="h", y=-0.12))
    right.plotly_chart(bars, key="row-sums-chart")
    st.dataframe(sums.set_index("query").T.style.format(precision=3), key="row-sums")
    show_source(avg.zero_future)

# --- what leaks ------------------------------------------------------------------------------------------
st.header("4 · What leaks without the mask")
setup = avg.LEAK_SETUP
st.markdown(
    f"""
Train the same small model twice on the same data — {setup.corpus_chars:,} characters of the built-in stories,
{setup.train.steps + 1} steps of batch {setup.train.batch_size} × context {setup.model.context}, same seed — once
with the causal mask (`GPTConfig(causal=True)`) and once without (`causal=False`). Without the mask position *t*
can read character *t + 1*, which is its own target: the loss collapses far below anything honest prediction can
reach, yet the model has learned to copy, not to predict — at generation time there is no future to copy from,
and its text falls apart. Takes well under a minute on two idle cores.
"""
)
registry = job_registry()
if st.button("Train both models", key="leak-start", type="primary"):
    try:
        registry.start(LEAK_JOB, "concept demo", avg.leak_job, threads=1)
    except JobRefused as e:
        st.error(str(e))

job = registry.get(LEAK_JOB)


def loss_figure(data: dict) -> go.Figure:
    fig = go.Figure()
    for (variant, _), color in zip(avg.LEAK_VARIANTS, ("#1f77b4", "#d62728")):
        fig.add_scatter(x=data.get(f"{variant}/step", []), y=data.get(f"{variant}/loss", []), name=variant,
                        mode="lines", line_color=color)
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=30, b=10), xaxis_title="step",
                      yaxis_title="training loss (nats)", title="Training loss")
    return fig


if job is None:
    st.info("Press **Train both models** to start; the loss curves stream in here.")
else:
    live = job.snapshot().active

    @st.fragment(run_every=1 if live else None)
    def leak_progress():
        snap = job.snapshot()
        job_progress(job, snap, f"{snap.message or snap.status} · {time.time() - snap.started:.0f} s", "leak-stop")
        if not snap.active and snap.status != "failed":
            st.caption(f"{snap.status.capitalize()} after {snap.ended - snap.started:.0f} s.")
        st.plotly_chart(loss_figure(snap.data), key="leak-curves")
        columns = st.columns(len(avg.LEAK_VARIANTS))
        for column, (variant, _) in zip(columns, avg.LEAK_VARIANTS):
            val = snap.data.get(f"{variant}/val")
            column.metric(f"Validation loss, {variant}", "—" if val is None else f"{val:.3f}")
            if f"{variant}/sample" in snap.data:
                column.caption(f"Sample from the {variant} model")
                column.code(snap.data[f"{variant}/sample"], language="text", wrap_lines=True)
        if live and not snap.active:
            st.rerun()  # stop polling: a full rerun redraws this without run_every

    leak_progress()
show_source(avg.leak_experiment, avg.leak_job)

quiz(
    "causal-mask",
    "When training a language model, why can't self-attention do without the causal mask?",
    ["Without it the softmax overflows numerically.",
     "Each position is trained to predict the next token; without the mask it can simply look at that token.",
     "The mask halves the cost of attention, so it is a speed-up.",
     "At inference there is only one token, and training has to use the same shape."],
    {1},
    "The targets are the inputs shifted by one, so without the mask the answer for position t sits at "
    "position t + 1 in plain view. The model learns to copy it (the near-zero loss above) and has nothing to "
    "copy once it generates. The mask is there for correctness: softmax is stable with or without it, and "
    "the same model runs on prompts of any length, so matching shapes has nothing to do with it.",
)
