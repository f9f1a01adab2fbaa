import streamlit as st

from explorer.ui import show_source
from gptcore.config import GPTConfig
from gptcore.demos import recap

st.title("Recap, and where to go from here")

# --- three things ----------------------------------------------------------------------------------------
st.header("Three things to remember")
st.markdown(
    """
1. **Attention is reading by content.** Every position compares its query with the keys of the positions before
   it, scales the scores by 1/√d_head, hides the future, turns the scores into weights with a softmax and takes
   the weighted mix of their values. It treats its inputs as a set, so word order has to come from somewhere
   else — RoPE, in this model.
2. **A GPT is a residual stream with two kinds of writers.** Attention moves information between positions; the
   feed-forward layer (SwiGLU) works on each position by itself. Both read the stream through a norm and add
   their result back. Each LLaMA-era choice — pre-norm, RMSNorm, RoPE, SwiGLU, no biases — fixes one concrete
   weakness of the 2017 design and costs almost nothing.
3. **The numbers tell you whether it is right.** The parameter count follows from the shape (810,624 here), a
   training step costs about 6 FLOPs per parameter per token, an untrained model starts near ln V, and when a
   large run goes wrong the first suspect is a softmax whose inputs have grown. Public models agree on most
   shape choices, so start from theirs.
"""
)
left, right = st.columns(2)
left.page_link("pages/averaging_to_attention.py", label="Back to the start: from averaging to attention", icon="↩️")
right.page_link("pages/training.py", label="Train your own model", icon="▶️")

# --- from here to GPT-2 ----------------------------------------------------------------------------------
st.header("From this model to GPT-2")
st.markdown(
    """
Nothing in the recipe changes on the way to GPT-2. Swap the characters for **BPE tokens** — byte-pair encoding
merges frequent character sequences into one token, so a vocabulary of about 50,000 covers English at roughly
four characters per token and the same context window sees four times as much text — then make the model and
the data several orders of magnitude larger. The table counts the parameters of each shape with the same
formulas as the Hyperparameters page (GPT-2 with its learned positions, LayerNorm, biases and a head tied to the
embedding):
"""
)
st.dataframe(recap.scale_table(GPTConfig()).style.format({"parameters": "{:,}", "× this model": "{:,.0f}"}),
             hide_index=True, key="recap-scale")
st.markdown(
    """
At that size, training on one CPU stops being an option, and three things join the loop:

* **Mixed precision.** Matrix products run in bfloat16 — many times faster than fp32 on modern accelerators, at
  half the memory per activation — while an fp32 master copy of the weights and fp32 optimizer moments keep the
  updates accurate (the memory table on the Hyperparameters page counts the bytes).
* **Many GPUs.** Each one takes a slice of the batch (data parallelism); when the model or its optimizer state no
  longer fits on one device, the weights, gradients and moments are sharded across devices (ZeRO, FSDP), and
  single layers or groups of layers are split among them (tensor and pipeline parallelism).
* **Checkpoints.** Weeks of training on thousands of devices will see failures, so the full state — weights,
  optimizer moments, data position, random state — is saved regularly and a run resumes where it stopped. The
  Train page does the same on a small scale: atomic checkpoints with the optimizer state, resumable exactly.
"""
)
show_source(recap.scale_table)

# --- what comes next -------------------------------------------------------------------------------------
st.header("What modern models add")
st.markdown(
    """
* **GQA and MLA** — several query heads share one key/value head (grouped-query attention, LLaMA-2 70B), or
  keys and values are compressed into a small latent vector (multi-head latent attention, DeepSeek-V2): both
  shrink the KV cache that dominates memory when generating.
* **Sliding-window attention** — each token attends only to the last *W* positions (Mistral 7B, every other layer
  of Gemma 2), so the cost grows linearly with length while stacked layers still pass information further.
* **Sparse attention** — fixed patterns of local, strided or global positions instead of every pair (Sparse
  Transformer, Longformer, BigBird), for sequences too long for the full *T × T* map.
* **Mixture of experts** — many FFNs per layer and a router that sends each token to a few of them (Switch
  Transformer, Mixtral, DeepSeek-V3): more parameters for the same compute per token.
* **FlashAttention** — the same exact attention computed in tiles that fit in the GPU's on-chip memory, never
  writing the *T × T* score matrix out; long-sequence attention is limited by memory traffic, not by FLOPs.
"""
)
