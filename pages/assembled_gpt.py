import math
from dataclasses import replace

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from explorer.demo_plots import diagram_figure, merge_layout_figure
from explorer.ui import quiz, show_source
from gptcore.config import CHOICES, ConfigError, GPTConfig
from gptcore.demos import anatomy
from gptcore.errors import UserError
from gptcore.model import GPT, Attention, Block
from gptcore.sources import CorpusSource, tinystories_cached

TUTORIAL = GPTConfig()
OUR_VOCAB = st.cache_data(anatomy.builtin_vocab)()  # the Train page's default corpus
LABELS = {"rms": "RMSNorm", "layer": "LayerNorm", "pre": "pre-norm", "post": "post-norm", "rope": "RoPE",
          "learned": "learned positions (GPT-2)", "none": "no positions", "swiglu": "SwiGLU", "relu": "ReLU MLP",
          "gelu": "GELU MLP"}


TUTORIAL_LOG = """vocab 74, params 810,624
step    0  train 4.495  val 3.523
step  500  train 1.005  val 1.105
step 1000  train 0.953  val 1.038
step 1500  train 0.818  val 1.007"""


@st.cache_data(show_spinner=False)
def first_step(kind: str) -> dict:
    source = CorpusSource(kind, max_chars=None if kind == "builtin" else 1_000_000)
    log = anatomy.first_log_line(source.load().text)
    return {**log, "params": GPT(replace(TUTORIAL, vocab_size=log["vocab"])).num_params()}


breakdown = st.cache_data(anatomy.breakdown, hash_funcs={GPTConfig: lambda c: str(c.to_dict())})
forward_shapes = st.cache_data(anatomy.forward_shapes, hash_funcs={GPTConfig: lambda c: str(c.to_dict())})


st.title("The assembled GPT")
st.markdown(
    f"""
Time to bolt the parts together, in the order LLaMA uses. Characters become vectors in the token embedding; *N*
identical pre-norm blocks each update the residual stream twice — RMSNorm, causal multi-head attention with RoPE,
add; RMSNorm, SwiGLU, add —; one last RMSNorm, and a linear head scores every character of the vocabulary at every
position. That is gptcore's `GPT`, and its defaults are the tutorial's model: *d_model* = 128, 4 layers, 4 heads,
*d_ff* = 344, and a vocabulary of {TUTORIAL.vocab_size} — the number of distinct characters in the tutorial's copy
of TinyStories. The vocabulary always comes from the text: the built-in stories have {OUR_VOCAB} characters, and
so do the first million characters of our own TinyStories file; the Train page sizes the model to its corpus.
"""
)

# --- config ----------------------------------------------------------------------------------------------
st.header("1 · Pick a model")
top, bottom = st.columns(5), st.columns(5)
vocab = top[0].number_input("vocab size", 1, 100_000, TUTORIAL.vocab_size, key="gpt-vocab")
d_model = top[1].number_input("d_model", 1, 4096, TUTORIAL.d_model, step=8, key="gpt-d")
n_layer = top[2].slider("n_layer", 1, 32, TUTORIAL.n_layer, key="gpt-layers")
n_head = top[3].number_input("n_head", 1, 64, TUTORIAL.n_head, key="gpt-heads")
norm = bottom[0].selectbox("norm", CHOICES["norm"], format_func=LABELS.get, key="gpt-norm")
placement = bottom[1].selectbox("placement", CHOICES["norm_placement"], format_func=LABELS.get, key="gpt-placement")
position = bottom[2].selectbox("positions", CHOICES["position"], format_func=LABELS.get, key="gpt-position")
ffn_kind = bottom[3].selectbox("FFN", CHOICES["ffn"], format_func=LABELS.get, key="gpt-ffn")
context = bottom[4].number_input("context", 1, 8192, TUTORIAL.context, key="gpt-context")
# d_ff comes last although it sits in the top row: its automatic width depends on the FFN picked below it
auto_ff = top[4].toggle("d_ff = 8/3·d (×8)" if ffn_kind == "swiglu" else "d_ff = 4·d", value=True, key="gpt-auto-ff")
if auto_ff:  # so the greyed-out field shows the width in use
    st.session_state["gpt-ff"] = anatomy.default_d_ff(int(d_model), ffn_kind)
d_ff = top[4].number_input("d_ff", 1, 16384, key="gpt-ff", disabled=auto_ff)
try:
    cfg = GPTConfig(vocab_size=int(vocab), d_model=int(d_model), n_layer=n_layer, n_head=int(n_head),
                    d_ff=int(d_ff), context=int(context), norm=norm, norm_placement=placement, position=position,
                    ffn=ffn_kind)
except ConfigError as e:
    st.error(f"That model cannot be built: {e}")
    cfg = None

if cfg is not None:
    st.plotly_chart(diagram_figure(anatomy.block_diagram(cfg)), key="gpt-diagram", config={"staticPlot": True})
    show_source(GPT, anatomy.block_diagram, label="gptcore's GPT (and the diagram's node list)")

    # --- parameters --------------------------------------------------------------------------------------
    st.header("2 · Where the parameters are")
    parts = breakdown(cfg)
    total = int(parts["parameters"].iloc[-1])
    counted = int(parts["counted in GPT"].iloc[-1])  # the real model's num_params()
    m1, m2, m3 = st.columns(3)
    m1.metric("parameters (formula)", f"{total:,}")
    m2.metric("GPT(cfg).num_params()", f"{counted:,}")
    m3.metric("one block", f"{int(parts.loc[parts['part'] == 'one block', 'parameters'].iloc[0]):,}")
    if total == counted and (parts["parameters"] == parts["counted in GPT"]).all():
        st.caption("✓ Every row matches the same group of parameters counted on the real model.")
    else:
        st.error("The formula and the real model disagree.")
    st.dataframe(parts.style.format({"parameters": "{:,}", "counted in GPT": "{:,}"}), hide_index=True,
                 key="gpt-params")
    shares = anatomy.parameter_shares(parts, cfg.n_layer)
    bars = go.Figure(go.Bar(x=shares["parameters"], y=shares["part"], orientation="h",
                            text=[f"{p:,} ({s:.1%})" for p, s in zip(shares["parameters"], shares["share"])],
                            textposition="auto", marker_color="#1f77b4"))
    bars.update_layout(height=300, margin=dict(l=10, r=10, t=30, b=10), xaxis_title="parameters",
                       yaxis_autorange="reversed", title=f"{total:,} parameters")
    st.plotly_chart(bars, key="gpt-shares")
    if cfg == TUTORIAL:
        st.markdown(
            """
This is the tutorial's count: embedding and head 74 × 128 = 9,472 each; per block, attention 4 · 128² = 65,536,
SwiGLU 3 · 128 · 344 = 132,096 and two norms 256, together 197,888; four blocks, the final norm's 128, and the
total is **810,624**. The FFNs hold about two thirds of it; norms are a rounding error.
"""
        )
        st.caption(f"At the built-in stories' {OUR_VOCAB} characters the embedding and the head each gain "
                   f"{OUR_VOCAB - TUTORIAL.vocab_size} rows of {TUTORIAL.d_model}: "
                   f"{GPT(replace(TUTORIAL, vocab_size=OUR_VOCAB)).num_params():,} parameters.")
    show_source(anatomy.parameter_parts, anatomy.counted_parts)

    # --- shapes ------------------------------------------------------------------------------------------
    st.header("3 · Shapes along the forward pass")
    d, d_ff = cfg.d_model, cfg.d_ff
    st.markdown(
        f"""
Every module of the real model gets a forward hook, and one forward pass runs on PyTorch's *meta* device: each
operation works out its output shape, but no memory is allocated and nothing is computed — so even a
4096-wide model answers instantly. Watch the width go {d} → {3 * d} (q, k, v in one matmul) → {d}, and
{d} → {d_ff} → {d} in the FFN; the attention pattern is (batch, heads, T, T).
"""
    )
    c1, c2, c3 = st.columns(3)
    batch = c1.number_input("batch B", 1, 64, 2, key="gpt-batch")
    T = c2.number_input("sequence length T", 1, 8192, min(16, cfg.context), key="gpt-T")
    every_block = c3.toggle("show every block", value=False, key="gpt-every-block")
    try:
        st.dataframe(forward_shapes(cfg, int(batch), int(T), every_block), hide_index=True, key="gpt-shapes",
                     column_config={"own parameters": st.column_config.NumberColumn(format="localized")})
    except UserError as e:
        st.error(str(e))
    show_source(anatomy.forward_shapes, Block)

# --- view vs reshape -------------------------------------------------------------------------------------
st.header("4 · `view` against `reshape` after `transpose`")
st.markdown(
    """
Inside attention, each head's output has shape (B, H, T, d_head). To hand it to the output projection the heads
must be put side by side again: (B, T, H·d_head). That takes a `transpose(1, 2)` to bring T before H, then a
reshape. The transpose only swaps strides — no data moves — so the tensor is no longer laid out row by row in
memory, and `.view`, which never copies, refuses. `.reshape` copies when it has to.
"""
)
c1, c2, c3 = st.columns(3)
heads = c1.slider("heads H", 2, 8, 4, key="gpt-vr-heads")
steps = c2.slider("positions T", 2, 6, 3, key="gpt-vr-T")
width = c3.slider("d_head", 1, 4, 2, key="gpt-vr-dhead")
demo = anatomy.view_vs_reshape(1, heads, steps, width)
st.markdown(
    f"""
Shape {demo['shape before']} with strides {demo['strides before']}; after `transpose(1, 2)` the strides are
{demo['strides after transpose']} and `is_contiguous()` is **{demo['contiguous after transpose']}**. PyTorch says:
"""
)
st.code(f"RuntimeError: {demo['view error']}", language="text", wrap_lines=True)
st.markdown(
    f"""
`.reshape` made a copy ({demo['reshape copied']}) equal to `.contiguous().view(...)`
({demo['reshape equals contiguous().view']}).
The tensor is filled with *100·head + position*, so every number records where it came from; each cell below
prints its number as **h**‹head› **t**‹position› (205 → *h2 t5*) and is coloured by its head. With the transpose
each row is one position holding all heads side by side. Reshaping *without* the transpose raises no error at
all — the memory is contiguous — but silently mixes positions into rows.
"""
)


st.plotly_chart(merge_layout_figure(demo["correct"], ".transpose(1, 2).reshape(B, T, C) ✓ — one row per position"),
                key="gpt-vr-right")
st.plotly_chart(merge_layout_figure(demo["wrong"], ".reshape(B, T, C) without the transpose ✗ — positions mixed"),
                key="gpt-vr-wrong")
show_source(anatomy.view_vs_reshape, Attention.forward)

quiz("gpt-view", "In Attention.forward, what happens if (att @ v).transpose(1, 2).reshape(B, T, C) is changed "
     "to .view(B, T, C)?",
     ["Same result; view is just faster.",
      "It raises an error: after the transpose the tensor is not contiguous in memory, and view cannot change "
      "the shape without copying.",
      "No error, but the heads' outputs are wrongly interleaved.",
      "No error, but gradients cannot flow back."],
     {1},
     "transpose only rearranges strides, so the (B, T, H, d_head) tensor is not contiguous and view — which never "
     "copies — raises the RuntimeError shown above; reshape copies and works. The silent interleaving happens "
     "only if you skip the transpose, and view, when it works, is as differentiable as reshape.")

# --- the training log ------------------------------------------------------------------------------------
st.header("5 · Reading the first line of the training log")
st.markdown(
    """
The tutorial trains this model on a million characters of TinyStories, and its log opens like this:
"""
)
st.code(TUTORIAL_LOG, language="text")
st.markdown(
    f"""
Two numbers in the first line deserve a look before anything else.

**The starting loss.** Before training, the model has no reason to prefer any character, and the loss of a guess
that gives each of *V* characters probability 1/*V* is ln *V*: ln {TUTORIAL.vocab_size} =
{math.log(TUTORIAL.vocab_size):.2f} for the tutorial. Freshly initialised logits are not perfectly flat — they
scatter a little around their mean, with a standard deviation σ — and that costs about σ²/2 on top, which is why
the log says 4.495 rather than 4.30. A first loss far above ln *V* points to a broken initialisation or a bug in the
loss; one far below it, to the answer leaking into the input.

**The validation loss below the training loss.** 3.523 does not mean the model generalises before it has learned
anything. The loop updates first and evaluates afterwards, so the step-0 validation loss is measured after one
AdamW step, while the step-0 training loss was computed on the untouched model. One step is enough to tilt the
output layer toward the common characters (spaces, *e*, *t*), and that alone is worth almost a nat.
"""
)
sources = {"the built-in stories (the Train page's default, 1,000,000 characters)": "builtin"}
if tinystories_cached():
    sources["TinyStories' validation split (downloaded), first 1,000,000 characters"] = "tinystories"
picked = st.selectbox("Measure it on", list(sources), key="gpt-log-corpus")
with st.spinner("Training one step…"):
    log = first_step(sources[picked])
st.code(f"vocab {log['vocab']}, params {log['params']:,}\n"
        f"step    0  train {log['train loss, step 0']:.3f}  val {log['val, step 0 (after one update)']:.3f}",
        language="text")
st.dataframe(pd.DataFrame([{k: v for k, v in log.items() if k not in ("vocab", "params")}]).style.format(precision=3),
             hide_index=True, key="gpt-log")
st.caption(
    f"Measured with gptcore's Trainer (the tutorial's recipe, seed 0) on this corpus's {log['vocab']} characters, "
    f"ln {log['vocab']} = {log['ln V']:.2f}. 'val before the update' scores the untrained model on other "
    "validation batches drawn from a private generator, so the run itself is untouched. Your own runs on the "
    "Train page should open near ln V of their corpus too.")
show_source(anatomy.first_log_line)
