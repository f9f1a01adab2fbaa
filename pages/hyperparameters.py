import streamlit as st
from plotly.subplots import make_subplots

from explorer.ui import quiz, show_source
from gptcore.demos import hyperparams as hp
from gptcore.demos.anatomy import ModelShape

PATCH_COLORS = {"no patch": "#7f7f7f", "QK-norm": "#1f77b4", "soft-cap": "#d62728"}
SHAPE_FIELDS = ["vocab_size", "d_model", "n_layer", "n_head", "d_ff", "context"]

stability_curves = st.cache_data(hp.stability_curves)
MEMORY_PARTS = ["weights", "gradients", "AdamW m + v", "master weights"]  # stacked in the bar chart


st.title("Choosing hyperparameters")
st.markdown(
    """
A Transformer's shape comes down to a handful of numbers: *d_model*, *n_layer*, *n_head*, *d_ff*, the vocabulary
size and the context length. Read through the configs of public models and the choices turn out to be
remarkably alike.
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
N = {flops['N (matmul parameters)']:,} (embedding lookups are free; the head counts). Attention adds
2 · n_layer · context · d_model = {flops['inference: attention']:,} for the scores and the weighted sum.
Training ≈ 3 × forward (backward costs twice the forward): **6N** + {flops['training: attention']:,}.
"""
    )
    st.dataframe(memory.style.format(dict.fromkeys(MEMORY_PARTS + ["training total"], hp.format_gb)),
                 hide_index=True, width="stretch", key="hp-memory")
    st.caption("GB (10⁹ bytes). *bf16 mixed* keeps bf16 weights and gradients for the matmuls plus an fp32 master "
               "copy of the weights and fp32 AdamW moments (two per weight). Inference needs the weights alone; "
               "activations and the KV cache come on top.")
    fig = make_subplots(rows=1, cols=2, subplot_titles=["Training memory (GB)", "Training FLOPs per token vs context"],
                        horizontal_spacing=0.12)
    for part, color in zip(MEMORY_PARTS, ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]):
        fig.add_bar(x=memory["precision"], y=memory[part], name=part, marker_color=color, row=1, col=1)
    contexts = [2 ** k for k in range(7, 18)]
    curve = hp.flops_vs_context(shape, contexts)
    for column, color in (("6N", "#1f77b4"), ("attention", "#d62728"), ("training total", "#000000")):
        fig.add_scatter(x=curve["context"], y=curve[column], name=column, mode="lines", line_color=color, row=1, col=2)
    fig.add_vline(x=shape.context, line_dash="dot", line_color="grey", row=1, col=2)
    fig.update_layout(barmode="stack", height=380, margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(type="log", title_text="context (tokens)", row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=2)
    st.plotly_chart(fig, key="hp-costs")
    st.caption("The attention term grows with the context; the dotted line marks this config's context.")
show_source(hp.compute_parameters, hp.flops_per_token, hp.memory_table)

# --- stability -------------------------------------------------------------------------------------------
st.header("3 · Keeping softmax in range")
st.markdown(
    """
At scale, training can blow up, and the usual patches all aim at a softmax: softmax is very sensitive to the scale
of its inputs, and over a long run the logits' scale tends to drift upward. **QK-norm** normalizes q and k
before their dot product, so the attention logits cannot grow with the weights. **Logit soft-capping** passes
logits through *cap · tanh(z / cap)*, so none can exceed the cap. **z-loss** adds 10⁻⁴ · (log Z)² to the loss,
where log Z = log Σ exp(zᵢ): softmax ignores a constant added to every logit, so nothing else stops them from
drifting up together; this penalty does, pulling log Z back toward 0.

Below, one query against 16 keys, with the weights drifting so the logits grow by a factor you choose:
"""
)
c1, c2 = st.columns(2)
scale = c1.select_slider("Drift: logits × s", [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], value=8.0,
                         key="hp-drift")
cap = c2.slider("Soft-cap value", 1.0, 50.0, 5.0, step=1.0, key="hp-cap")
table = hp.stability_table(scale, cap)
st.dataframe(table.style.format(precision=4), hide_index=True, key="hp-stability")
curves = stability_curves(tuple(2 ** (k / 2) for k in range(-4, 13)), cap)
fig = make_subplots(rows=1, cols=3, subplot_titles=["Entropy (nats)", "Max probability", f"Weights at s = {scale:g}"],
                    horizontal_spacing=0.07)
probs = hp.patched_probabilities(scale, cap)
for name in ["no patch", "QK-norm", f"soft-cap {cap:g}"]:
    color = PATCH_COLORS[name.split(" ")[0] if name.startswith("soft") else name]
    rows = curves[curves["patch"] == name]
    fig.add_scatter(x=rows["scale"], y=rows["entropy (nats)"], name=name, legendgroup=name, line_color=color,
                    row=1, col=1)
    fig.add_scatter(x=rows["scale"], y=rows["max prob"], name=name, legendgroup=name, line_color=color,
                    showlegend=False, row=1, col=2)
    fig.add_bar(x=list(range(len(probs))), y=probs[name], name=name, legendgroup=name, marker_color=color,
                showlegend=False, row=1, col=3)
for col in (1, 2):
    fig.add_vline(x=scale, line_dash="dot", line_color="grey", row=1, col=col)
    fig.update_xaxes(type="log", title_text="drift s", row=1, col=col)
fig.update_xaxes(title_text="key", row=1, col=3)
fig.update_layout(height=360, margin=dict(l=10, r=10, t=40, b=10), barmode="group")
st.plotly_chart(fig, key="hp-drift-fig")
z = table.set_index("patch").loc["z-loss"]
st.markdown(
    f"""
Without a patch the attention collapses onto one key as *s* grows — the saturated softmax from the √d page.
QK-norm is flat: the drift never reaches the logits (in a real model a learned gain can still grow, but slowly).
Soft-capping bounds the logits, so the weights stay spread over the keys whose logits hit the cap. z-loss changes
nothing in the forward pass — its row equals the unpatched one — it acts through training: here it would add
{z['z-loss']:.2e} to the loss (log Z = {z['log Z']:.2f}) and its gradient, 2·10⁻⁴ · log Z · softmax(z), pushes every
logit down.
"""
)
show_source(hp.patched_logits, hp.stability_table)

quiz("hp-4096", "A team is designing a model with d_model = 4096. Which of these choices are mainstream?",
     ["32 heads of 128 dimensions each", "SwiGLU with d_ff ≈ 11008",
      "64 heads of 128 dimensions each, doubling the attention parameters for more capacity",
      "Dropout 0.3 in pretraining to prevent overfitting"],
     {0, 1},
     "32 × 128 = 4096 = d_model, and 128 is the usual head size (LLaMA-2-7B uses exactly this). 11008 is 8/3 × 4096 "
     "rounded up to a multiple of 256, LLaMA-2-7B's SwiGLU width. 64 × 128 = 8192 breaks n_head × d_head = d_model: "
     "heads are meant to slice d_model, not to widen attention. And pretraining sees most data about once, so it "
     "hardly overfits — dropout is normally off.")
