import streamlit as st

from explorer.demo_plots import heatmap_row
from explorer.ui import show_source
from gptcore.demos import multihead as mh
from gptcore.errors import UserError
from gptcore.model import Attention

T, D = 5, 8  # the tutorial's sequence length and width

st.title("Multi-head attention, and attention's blindness to order")

# --- heads -----------------------------------------------------------------------------------------------
st.header("1 · Many heads for the price of one")
st.markdown(
    """
One set of Q/K/V projections expresses one way of looking around. A position may need several at once: the last
noun, the subject of the sentence, the opening quote mark. Multi-head attention cuts the *d_model* channels into
*h* slices of *d_head = d_model / h*, runs attention in each slice independently, concatenates the results and
mixes them with the output matrix W_O. The projections are still four *d_model × d_model* matrices, so the
parameter count does not depend on *h* — the table counts the parameters of gptcore's own `Attention` at the
tutorial's *d_model* = 128.
"""
)
st.dataframe(st.cache_data(mh.attention_param_counts)().style.format({"parameters": "{:,}", "4·d_model²": "{:,}"}),
             hide_index=True, key="param-counts")
st.markdown(
    f"""
Same input (the tutorial's *x*, {T} positions × {D} channels), same weights, different head counts: each head
scores with its own *d_head* channels of q and k, so each finds its own pattern (causal mask on).
"""
)
n_head = st.segmented_control("Number of heads", [1, 2, 4], default=2, key="mh-heads", required=True)
patterns = mh.head_patterns(n_head)
titles = [f"head {h} (channels {h * D // n_head}–{(h + 1) * D // n_head - 1})" for h in range(n_head)]
fig = heatmap_row(dict(zip(titles, patterns)), 0, 1, "Blues", ".2f", "key", "query",
                  "query %{y}, key %{x}: %{z:.3f}<extra></extra>", 330)
st.plotly_chart(fig, key="mh-patterns")
show_source(mh.attention_param_counts, mh.head_patterns, mh.model_attention, Attention)

# --- permutations ----------------------------------------------------------------------------------------
st.header("2 · Attention does not know the order")
st.markdown(
    """
Shuffle the input positions and plain attention just shuffles its output the same way: each position's result
is unchanged. To attention a sequence is a **set** — *dog bites man* and *man bites dog* look the same. The check
below is the tutorial's (*T* = 5, *d* = 8, seed 0; *x*, then W_Q, W_K, W_V), run through the model's `Attention`
with those weights: is `attn(x)[perm]` equal to `attn(x[perm])`?
"""
)
perm_text = st.text_input(f"New order of the positions 0–{T - 1}", "4, 2, 0, 1, 3", key="mh-perm")
try:
    perm = mh.parse_permutation(perm_text, T)
except UserError as e:
    st.error(f"Cannot use that order: {e}.")
    perm = None

if perm is not None:
    results = mh.permutation_table(perm)
    results["allclose"] = results["allclose"].map(str)  # printed as the tutorial prints it
    st.dataframe(results.style.format({"max |difference|": "{:.2e}"}), hide_index=True, key="perm-table")
    st.caption("One head, as in the tutorial. Splitting into heads changes nothing here: every head is "
               "blind to order in the same way.")
    st.markdown(
        """
The causal mask lets a little order in: after the shuffle a token sees a different set of earlier tokens, so its
result changes — but which tokens it sees is all it learns, not where they are. RoPE puts real positions in:
each q and k is rotated by the position it now occupies. That is why a model has to inject positions
explicitly; this one does it with RoPE (next page).
"""
    )
    variant = st.radio("Show the outputs for", list(mh.VARIANTS), key="mh-variant", horizontal=True)
    check = mh.permutation_check(perm, 1, *mh.VARIANTS[variant])
    panels = {"attn(x)[perm]": check["attn(x)[perm]"], "attn(x[perm])": check["attn(x[perm])"],
              "difference": check["attn(x)[perm]"] - check["attn(x[perm])"]}
    limit = check["attn(x)[perm]"].abs().max().item()  # one colour scale for the three panels
    fig = heatmap_row(panels, -limit, limit, "RdBu", ".1f", "channel", "row",
                      "row %{y}, channel %{x}: %{z:.4f}<extra></extra>", 300)
    st.plotly_chart(fig, key="perm-outputs")
show_source(mh.parse_permutation, mh.permutation_check, mh.tutorial_inputs)
