import plotly.graph_objects as go
import streamlit as st
from plotly.colors import qualitative

from explorer.ui import quiz, show_source
from gptcore.config import CHOICES, ConfigError, GPTConfig
from gptcore.demos import anatomy
from gptcore.errors import UserError
from gptcore.model import GPT, Attention, Block

TUTORIAL = GPTConfig()
LABELS = {"rms": "RMSNorm", "layer": "LayerNorm", "pre": "pre-norm", "post": "post-norm", "rope": "RoPE",
          "learned": "learned positions (GPT-2)", "none": "no positions", "swiglu": "SwiGLU", "relu": "ReLU MLP",
          "gelu": "GELU MLP"}

NODE_COLORS = {"embedding": "#dbe9f6", "norm": "#eeeeee", "attention": "#fde0c5", "ffn": "#d9f0d3", "add": "#ffffff"}

breakdown = st.cache_data(anatomy.breakdown, hash_funcs={GPTConfig: lambda c: str(c.to_dict())})
forward_shapes = st.cache_data(anatomy.forward_shapes, hash_funcs={GPTConfig: lambda c: str(c.to_dict())})

def diagram_figure(diagram: dict) -> go.Figure:
    """The chain left to right: boxes, arrows between neighbours, dashed residual arcs over the top."""
    fig = go.Figure()
    first, last = diagram["block"]
    fig.add_shape(type="rect", x0=first - 0.5, x1=last + 0.5, y0=-0.7, y1=1.05, line=dict(dash="dash", color="#999"))
    fig.add_annotation(x=(first + last) / 2, y=1.05, text=diagram["block_label"], showarrow=False, yanchor="bottom",
                       font=dict(size=12, color="#222"))
    for i, node in enumerate(diagram["nodes"]):
        half = 0.16 if node["kind"] == "add" else 0.46
        if node["kind"] in NODE_COLORS:
            fig.add_shape(type="circle" if node["kind"] == "add" else "rect", x0=i - half, x1=i + half,
                          y0=-half if node["kind"] == "add" else -0.5, y1=half if node["kind"] == "add" else 0.5,
                          fillcolor=NODE_COLORS[node["kind"]], line=dict(color="#666", width=1), layer="below")
        fig.add_annotation(x=i, y=0, text=node["label"], showarrow=False, font=dict(size=11, color="#222"))
        if i:
            prev = 0.16 if diagram["nodes"][i - 1]["kind"] == "add" else 0.46
            fig.add_annotation(x=i - half, y=0, ax=i - 1 + prev, ay=0, xref="x", yref="y", axref="x", ayref="y",
                               text="", showarrow=True, arrowhead=2, arrowwidth=1.2)
    for a, b in diagram["residuals"]:
        fig.add_shape(type="path", path=f"M {a},0.5 C {a},0.95 {b},0.95 {b},0.55",
                      line=dict(dash="dot", color="#1f77b4"))
        fig.add_annotation(x=b, y=0.17, ax=b, ay=0.55, xref="x", yref="y", axref="x", ayref="y", text="",
                           showarrow=True, arrowhead=2, arrowcolor="#1f77b4")
        fig.add_annotation(x=(a + b) / 2, y=0.93, text="residual", showarrow=False, font=dict(size=10, color="#1f77b4"))
    fig.update_xaxes(visible=False, range=[-0.55, len(diagram["nodes"]) - 0.45])
    fig.update_yaxes(visible=False, range=[-0.8, 1.35])
    fig.update_layout(height=230, margin=dict(l=0, r=0, t=0, b=0), plot_bgcolor="white", showlegend=False)
    return fig


st.title("The assembled GPT")
st.markdown(
    """
Put the parts together the LLaMA way: token embedding → *N* pre-norm blocks (RMSNorm → causal multi-head
attention with RoPE → add back to the stream; RMSNorm → SwiGLU → add back) → a final RMSNorm → a linear layer
that turns every position's vector into logits over the vocabulary. This is exactly gptcore's `GPT`; its defaults
are the tutorial's model: 74 characters, *d_model* = 128, 4 layers, 4 heads, *d_ff* = 344.
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
Each number below is *100·head + position*, so every cell tells you where it came from. With the transpose each
row is one position holding all heads side by side. Reshaping *without* the transpose raises no error at all —
the memory is contiguous — but silently mixes positions into rows.
"""
)


def layout_figure(values, title: str) -> go.Figure:
    labels = [[f"h{int(v) // 100} t{int(v) % 100}" for v in row] for row in values.tolist()]
    head = (values // 100).numpy()
    colors = qualitative.Pastel1[:int(head.max()) + 1]  # one colour per head
    fig = go.Figure(go.Heatmap(z=head, text=labels, texttemplate="%{text}", colorscale=colors, zmin=0,
                               zmax=len(colors) - 1, showscale=False,
                               hovertemplate="row %{y}, slot %{x}: %{text}<extra></extra>"))
    fig.update_layout(title=title, height=80 + 45 * len(values), margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title="channel of the merged vector")
    fig.update_yaxes(title="row", autorange="reversed")
    return fig


left, right = st.columns(2)
left.plotly_chart(layout_figure(demo["correct"], ".transpose(1, 2).reshape(B, T, C) ✓"), key="gpt-vr-right")
right.plotly_chart(layout_figure(demo["wrong"], ".reshape(B, T, C) without transpose ✗"), key="gpt-vr-wrong")
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
