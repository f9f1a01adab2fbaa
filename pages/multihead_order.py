import streamlit as st

from explorer.demo_plots import head_grid, heatmap_row
from explorer.shipped import shipped_checkpoint
from explorer.ui import ACTIVE_CHECKPOINT, show_source
from gptcore import inspector as ins
from gptcore.checkpoint import CheckpointError
from gptcore.demos import multihead as mh
from gptcore.errors import UserError
from gptcore.model import Attention

T, D = 5, 8  # the tutorial's sequence length and width
TRAINED_TEXT = "Lily saw a red ball. Lily took the red ball home."
INSPECT_TEXT = "inspect-text"  # the Inspect page's text widget

attention_costs = st.cache_data(mh.attention_costs)

st.title("Multi-head attention, and attention's blindness to order")

# --- heads -----------------------------------------------------------------------------------------------
st.header("1 · Many heads for the price of one")
st.markdown(
    """
A single attention gives each position one way to choose what to read, yet a position often wants several
things at once: the last noun, whoever is speaking, the character just before it. So the layer runs *h*
attentions in parallel. Every head reads the whole vector *x* and projects it with its own query, key and value
matrices, but only into *d_head = d_model / h* dimensions; the heads' outputs are laid side by side, back to
*d_model* wide, and mixed by the output matrix W_O. What gets divided among the heads is the projected q/k/v
space, not *x*: stack the *h* query projections and you have one *d_model × d_model* matrix, and likewise for
keys and values.

So the weights are four *d_model × d_model* matrices whatever *h* is — and the compute hardly moves either. The
projections are the same matrix products, and each head scores its keys with *d_head* multiply-adds where a
single head would use *d_model*, so *h* heads together do the work of one. Only the softmax grows: it now runs
over *h* score matrices instead of one, a small elementwise cost. The table counts the parameters of gptcore's
own `Attention` at the tutorial's *d_model* = 128 and counts its matrix-multiply FLOPs on a 128-character
forward pass with PyTorch's FLOP counter (scores computed in full, then masked).
"""
)
flop_columns = ["parameters", "4·d_model²", "projection FLOPs", "score + mixing FLOPs"]
st.dataframe(attention_costs().style.format(dict.fromkeys(flop_columns, "{:,}")), hide_index=True,
             key="param-counts")
show_source(mh.attention_costs)
st.markdown(
    f"""
Same input (the tutorial's *x*, {T} positions × {D} channels), same weights, different head counts. Each head
compares its own *d_head* slice of the projected q and k, so each settles on a pattern of its own (causal
mask on).
"""
)
n_head = st.segmented_control("Number of heads", [1, 2, 4], default=2, key="mh-heads", required=True)
patterns = mh.head_patterns(n_head)
titles = [f"head {h} (q/k channels {h * D // n_head}–{(h + 1) * D // n_head - 1})" for h in range(n_head)]
fig = heatmap_row(dict(zip(titles, patterns)), 0, 1, "Blues", ".2f", "key", "query",
                  "query %{y}, key %{x}: %{z:.3f}<extra></extra>", 330)
st.plotly_chart(fig, key="mh-patterns")
show_source(mh.head_patterns, mh.model_attention, Attention)

# --- trained heads ---------------------------------------------------------------------------------------
st.header("2 · What trained heads do")
try:
    shipped = shipped_checkpoint()
except CheckpointError as e:
    st.error(f"The shipped model cannot be loaded: {e}")
    shipped = None
if shipped is None:
    st.info("This section reads the model shipped in `checkpoints/`, which is missing here.")
else:
    model, tokenizer, cfg = shipped.model, shipped.tokenizer, shipped.model.cfg
    st.markdown(
        f"""
Random weights give random patterns. After training, the heads of one layer divide the work. Below is the model
shipped with the app (`{shipped.path.name}`: {cfg.n_layer} layers × {cfg.n_head} heads of {cfg.d_head}
channels, step {shipped.meta.get('step', 0):,}) reading a sentence; each row of a map is one character and shows
where that character's query looked. The table scores every head the way the Inspect page's head finder does.
"""
    )
    text = st.text_input("Sentence (up to 64 characters)", TRAINED_TEXT, max_chars=64, key="mh-trained-text")
    try:
        run = ins.inspect_text(model, tokenizer, text)
    except UserError as e:
        st.error(f"Cannot read that sentence: {e}.")
        run = None
    if run is not None:
        profiles = mh.head_profiles(run.patterns, run.ids, run.text)
        layer = st.segmented_control("Layer", list(range(cfg.n_layer)), default=mh.clearest_layer(profiles),
                                     key="mh-layer", required=True)
        rows = profiles[profiles["layer"] == layer]
        labels = ins.token_labels(run.text)
        titles = [f"{r['head']}: {r['role']}" for r in rows.to_dict("records")]
        st.plotly_chart(head_grid(run.patterns[layer], labels, titles), key="mh-trained")
        score_columns = ["previous_token", "word_start", "first_token", "induction", "mean reach", "entropy"]
        st.dataframe(profiles.drop(columns=["layer", "head_index"]).style.format(dict.fromkeys(score_columns, "{:.2f}"),
                                                                                na_rep="—"),
                     hide_index=True, key="mh-trained-scores",
                     column_config={"previous_token": "previous char", "word_start": "word start",
                                    "first_token": "first char", "mean reach": "mean reach (chars)"})
        st.caption(
            f"Scores are mean attention weights: on the character just before, on the space that opened the "
            f"current word, on the first character, and (induction) on the character that followed an earlier "
            f"copy of the current one. A head is named after a score of {mh.CLEAR_ROLE} or more; otherwise by "
            f"how far back it reads. Entropy 0 is one key, log T is uniform.")

        def open_in_inspect():
            st.session_state[ACTIVE_CHECKPOINT] = shipped.path.name
            st.session_state[INSPECT_TEXT] = text

        if st.button("Open this sentence in Inspect", key="mh-to-inspect", icon="🔬", on_click=open_in_inspect):
            st.switch_page("pages/inspector.py")
        st.caption("Inspect shows every layer at once, the model's predictions, and how these patterns formed "
                   "over training.")
    show_source(mh.head_profiles, mh.head_role, ins.head_scores)

# --- permutations ----------------------------------------------------------------------------------------
st.header("3 · Attention does not know the order")
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
The causal mask does let some order in. After a shuffle a token has a different set of earlier tokens in view,
so its output changes — the mask tells a token *which* tokens came before it. That is real information: a stack
of masked layers can, for instance, count how many tokens precede it, and decoders trained with no position
encoding at all do learn absolute positions that way. But it has to be learned, it gets blurrier the longer the
sequence, and it says nothing direct about how far apart two visible tokens are, which is what language mostly
needs. So models inject positions explicitly; this one does it with RoPE, turning each q and k by the position
it occupies (next page).
"""
    )
    variant = st.radio("Show the outputs for", list(mh.VARIANTS), key="mh-variant", horizontal=True)
    check = mh.permutation_check(perm, 1, *mh.VARIANTS[variant])
    panels = {"attn(x)[perm]": check["attn(x)[perm]"], "attn(x[perm])": check["attn(x[perm])"],
              "difference": check["attn(x)[perm]"] - check["attn(x[perm])"]}
    limit = check["attn(x)[perm]"].abs().max().item()  # one colour scale for the three panels
    fig = heatmap_row(panels, -limit, limit, "RdBu", ".1f", "channel", "row",
                      "row %{y}, channel %{x}: %{z:.4f}<extra></extra>", 330)
    st.plotly_chart(fig, key="perm-outputs")
show_source(mh.parse_permutation, mh.permutation_check, mh.tutorial_inputs)
