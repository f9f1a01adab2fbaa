import streamlit as st

from explorer.demo_plots import costs_figure, drift_figure, z_loss_figure
from explorer.shipped import shipped_checkpoint
from explorer.ui import quiz, show_source
from gptcore.checkpoint import CheckpointError
from gptcore.demos import hyperparams as hp
from gptcore.demos.anatomy import ModelShape
from gptcore.errors import UserError
from gptcore.inspector import token_labels

SHAPE_FIELDS = ["vocab_size", "d_model", "n_layer", "n_head", "d_ff", "context"]
MEMORY_PARTS = ["weights", "gradients", "AdamW m + v", "master weights"]
Z_TEXT = "Once upon a time, there was a little girl named Lily"

stability_curves = st.cache_data(hp.stability_curves)


st.title("Choosing hyperparameters")
st.markdown(
    """
Six numbers fix the shape of a Transformer: *d_model*, *n_layer*, *n_head*, *d_ff*, the vocabulary size and the
context length. Public models from GPT-3 to LLaMA settle most of them the same way, and each habit has a reason
that fits in a sentence.
"""
)

# --- consensus -------------------------------------------------------------------------------------------
st.header("1 · What everyone picks")
st.table(hp.consensus_table().set_index("hyperparameter"))
st.markdown("Two famous configs, with the ratios computed from their numbers:")
st.dataframe(hp.published_table().style.format({"d_head": "{:g}", "d_model / n_layer": "{:g}", "d_ff": "{}",
                                                "d_ff / d_model": "{:.2f}", "parameters": "{:,}"}),
             hide_index=True, key="hp-published")
st.markdown(
    """
GPT-3 175B: *d_model* = 12288 over 96 layers is **128**, and 96 heads of *d_head* = **128**. LLaMA-2-7B: 4096
over 32 layers is also **128**, 32 heads of 128, and *d_ff* = 11008 is **2.69** × *d_model* — 8/3 ≈ 2.67, rounded up
to a multiple of 256. (The GPT-3 count comes out at 174.6 B with biases, learned positions and a head tied to the
embedding; the paper rounds it to 175 B.) Our tiny character model breaks the width-to-depth rule — at 810 k
parameters nobody minds.
"""
)
show_source(hp.shape_ratios, hp.published_table)

# --- calculator ------------------------------------------------------------------------------------------
st.header("2 · What a config costs")


def load_preset():
    preset = hp.PUBLISHED[st.session_state["hp-preset"]]
    for name in SHAPE_FIELDS + ["ffn", "norm", "position", "bias", "tied_head"]:
        st.session_state[f"hp-{name}"] = getattr(preset, name)


if "hp-d_model" not in st.session_state:
    st.session_state["hp-preset"] = "LLaMA-2-7B"
    load_preset()
left, right = st.columns([4, 1], vertical_alignment="bottom")
left.selectbox("Start from", list(hp.PUBLISHED), key="hp-preset", on_change=load_preset)
right.button("Reset to preset", on_click=load_preset, key="hp-reset", width="stretch",
             help="Picking the selected preset again changes nothing; this restores its values.")
columns = st.columns(6)
values = {name: int(col.number_input(name, 1, 10_000_000, key=f"hp-{name}"))
          for name, col in zip(SHAPE_FIELDS, columns)}
c1, c2, c3, c4, c5 = st.columns(5)
shape = ModelShape(**values, ffn=c1.selectbox("FFN", ["swiglu", "gelu", "relu"], key="hp-ffn"),
                   norm=c2.selectbox("norm", ["rms", "layer"], key="hp-norm"),
                   position=c3.selectbox("positions", ["rope", "learned", "none"], key="hp-position"),
                   bias=c4.toggle("Linear biases", key="hp-bias"), tied_head=c5.toggle("head tied to embedding",
                                                                                      key="hp-tied_head"))
if shape.d_model % shape.n_head:
    st.error(f"d_model ({shape.d_model}) must be divisible by n_head ({shape.n_head}): heads split d_model.")
else:
    params = hp.total_parameters(shape)
    flops = hp.flops_per_token(shape)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("parameters", hp.human_count(params), help=f"{params:,}")
    m2.metric("training FLOPs / token", hp.human_count(flops["training total"]),
              help=f"{flops['training total']:,}")
    m3.metric("inference FLOPs / token", hp.human_count(flops["inference total"]),
              help=f"{flops['inference total']:,}")
    memory = hp.memory_table(params)
    m4.metric("fp32 AdamW training memory", hp.human_bytes(memory.loc[0, "training total"] * 1e9))
    left, right = st.columns([2, 3])
    left.markdown("**Against the rules of thumb**")
    left.dataframe(hp.consensus_check(shape), hide_index=True, key="hp-check")
    right.markdown(
        f"""
**FLOPs per token.** A forward pass does one multiply-add (2 FLOPs) per matmul weight: **2N** with
N = {flops['N (matmul parameters)']:,} (embedding lookups are free; the head counts). Attention adds the q·k
scores and the weighted sum of the values, 2 · context · d_model FLOPs each per layer for a query that sees the
whole context. A causal query sees on average half of it, so the count used here is halved:
2 · n_layer · context · d_model = {flops['inference: attention']:,}. (A plain masked matmul still computes the
masked half; kernels that skip it, such as FlashAttention's, reach the halved count.)
Training ≈ 3 × forward (backward costs twice the forward): **6N** + {flops['training: attention']:,}.
"""
    )
    st.dataframe(memory.style.format(dict.fromkeys(MEMORY_PARTS + ["training total"], hp.format_gb)),
                 hide_index=True, width="stretch", key="hp-memory")
    st.caption("GB (10⁹ bytes). *bf16 mixed* keeps bf16 weights and gradients for the matmuls plus an fp32 master "
               "copy of the weights and fp32 AdamW moments (two per weight). Inference needs the weights alone; "
               "activations and the KV cache come on top.")
    st.plotly_chart(costs_figure(memory, hp.flops_vs_context(shape, [2 ** k for k in range(7, 18)]), shape.context),
                    key="hp-costs")
    st.caption("The causal attention term grows with the context; the dotted line marks this config's context.")
show_source(hp.compute_parameters, hp.flops_per_token, hp.memory_table)

# --- stability -------------------------------------------------------------------------------------------
st.header("3 · Keeping softmax in range")
st.markdown(
    """
Large runs sometimes blow up late in training, and the usual suspect is a softmax whose inputs have grown too
big. Softmax only looks at the differences between its inputs, and nothing in the cross-entropy keeps logits
small, so over a long run their scale creeps upward. Each common patch guards one softmax:

* on the **attention logits**, **QK-norm** normalizes q and k before they are multiplied, and **soft-capping**
  squeezes every logit through *cap · tanh(z / cap)* (Gemma 2 caps its output logits the same way);
* on the **output layer**, **z-loss** (PaLM) adds 10⁻⁴ · (log Z)² per token to the loss, where
  log Z = log Σᵢ exp(zᵢ) is the log-sum-exp of the logits over the vocabulary. ST-MoE puts the same penalty on
  the router of a mixture of experts.
"""
)
st.subheader("Attention logits: QK-norm and soft-capping")
st.markdown("One query against 16 random keys, with the weights drifting so that every logit is *s* times its "
            "starting size:")
c1, c2 = st.columns(2)
scale = c1.select_slider("Drift: logits × s", [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], value=8.0,
                         key="hp-drift")
cap = c2.slider("Soft-cap value", 1.0, 50.0, 5.0, step=1.0, key="hp-cap")
st.dataframe(hp.stability_table(scale, cap).style.format(precision=4), hide_index=True, key="hp-stability")
curves = stability_curves(tuple(2 ** (k / 2) for k in range(-4, 13)), cap)
st.plotly_chart(drift_figure(curves, hp.patched_probabilities(scale, cap), scale, cap), key="hp-drift-fig")
st.markdown(
    """
Unpatched, the row piles onto a single key as *s* grows: the same saturation as on the √d page, with gradients
to match. With QK-norm the curves are flat, because the drift is divided away before the product (a real model
still has a learned gain after the norm, but it moves slowly). Soft-capping lets no logit past the cap, so the
weight spreads over every key that reaches it instead of landing on one.
"""
)
show_source(hp.patched_logits, hp.stability_table)

st.subheader("Output logits: z-loss")
st.markdown(
    """
The output layer gives every character a logit *zᵢ*, and the cross-entropy of the right one is
*log Z − z_target*. Add the same number to every logit and the probabilities do not move, so neither does the
loss — but log Z moves by exactly that number. The cross-entropy's gradient, softmax(z) − onehot(target), sums
to zero over the vocabulary: it never pushes the logits up or down together, and their common level is free to
wander (in bfloat16 a large log Z also costs precision). The z-loss gradient is 2 · 10⁻⁴ · log Z · softmax(z):
every entry has the sign of log Z. When **log Z > 0** a descent step lowers every logit; when **log Z < 0** it
raises them all; at log Z = 0 it vanishes, and then the logits *are* the log-probabilities.
"""
)
try:
    shipped = shipped_checkpoint()
except CheckpointError as e:
    st.error(f"The shipped model cannot be loaded: {e}")
    shipped = None
if shipped is None:
    st.info("This demo reads the output layer of the model shipped in `checkpoints/`, which is missing here.")
else:
    model, tokenizer = shipped.model, shipped.tokenizer
    text = st.text_input("Text (the model predicts its last character from the ones before it)", Z_TEXT,
                         key="hp-z-text")
    try:
        if len(text) < 2 or text[-1] not in tokenizer.stoi:
            raise UserError("give at least two characters and end with one the model knows")
        logits = hp.next_char_logits(model, tokenizer, text[:-1])
    except UserError as e:
        st.error(f"Cannot read the output layer for that text: {e}.")
    else:
        target = tokenizer.stoi[text[-1]]
        base = hp.z_loss_terms(logits, target)
        shift = st.slider("Shift added to every output logit", -30.0, 10.0, 0.0, step=0.5, key="hp-z-shift",
                          help=f"At {-base['log Z']:.1f} the logits become log-probabilities (log Z = 0).")
        terms = hp.z_loss_terms(logits, target, shift)
        m1, m2, m3, m4 = st.columns(4)
        m1.metric("log Z", f"{terms['log Z']:.2f}")
        m2.metric("cross-entropy", f"{terms['cross-entropy']:.4f}")
        m3.metric(f"p('{token_labels(text[-1])[0]}')", f"{terms['p(target)']:.3f}")
        m4.metric("z-loss", f"{terms['z-loss']:.2e}")
        sweep = hp.z_loss_sweep(logits, target, [s / 2 for s in range(-60, 21)])
        st.plotly_chart(z_loss_figure(sweep, terms, shift, token_labels(tokenizer.chars)), key="hp-z-fig")
        direction = "lowers" if terms["log Z"] > 0 else "raises" if terms["log Z"] < 0 else "leaves"
        st.markdown(
            f"""
These are the logits of `{shipped.path.name}` (step {shipped.meta.get('step', 0):,}) for the character after
*…{text[-12:-1]}*. Trained without a z-loss, it sits at log Z = {base['log Z']:.1f}, far from 0. At the shift
you picked, log Z = {terms['log Z']:.2f}, and a descent step on the z-loss {direction} every logit; the
cross-entropy's gradients, meanwhile, add up to {terms['cross-entropy gradient'].sum().item():.0e} — they only
move logits *relative* to each other.
"""
        )
        st.dataframe(sweep[sweep["shift"].isin([-20.0, -10.0, 0.0, 10.0, shift])].style.format(
            {"shift": "{:+.1f}", "log Z": "{:.3f}", "cross-entropy": "{:.4f}", "p(target)": "{:.4f}",
             "z-loss": "{:.2e}", "Σ ∂cross-entropy/∂zᵢ": "{:.0e}", "Σ ∂z-loss/∂zᵢ": "{:+.2e}"}),
            hide_index=True, key="hp-z-table")
        show_source(hp.z_loss_terms, hp.next_char_logits)

quiz("hp-4096", "A team is designing a model with d_model = 4096. Which of these choices are mainstream?",
     ["32 heads of 128 dimensions each", "SwiGLU with d_ff ≈ 11008",
      "64 heads of 128 dimensions each, doubling the attention parameters for more capacity",
      "Dropout 0.3 in pretraining to prevent overfitting"],
     {0, 1},
     "32 × 128 = 4096 = d_model, and 128 is the usual head size (LLaMA-2-7B uses exactly this). 11008 is 8/3 × 4096 "
     "rounded up to a multiple of 256, LLaMA-2-7B's SwiGLU width. 64 × 128 = 8192 breaks n_head × d_head = d_model: "
     "heads are meant to slice d_model, not to widen attention. And pretraining sees most data about once, so it "
     "hardly overfits — dropout is normally off.")
