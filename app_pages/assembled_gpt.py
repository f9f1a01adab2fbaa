import math
from dataclasses import replace

import pandas as pd
import streamlit as st

from explorer.demo_plots import diagram_figure, merge_layout_figure, shares_figure
from explorer.i18n import say, t
from explorer.links import linked
from explorer.real_model import PERCENT, check_mark, converted_counts, models_table, real_model_panel
from explorer.tables import column_name, pinned, shown_table
from explorer.ui import quiz, show_chart, show_source
from gptcore.config import CHOICES, ConfigError, GPTConfig
from gptcore.demos import anatomy
from gptcore.demos import real_models as rm
from gptcore.errors import UserError
from gptcore.model import GPT, Attention, Block
from gptcore.published import SMOLLM2_135M
from gptcore.sources import CorpusSource, tinystories_cached

TUTORIAL = GPTConfig()
OUR_VOCAB = st.cache_data(anatomy.builtin_vocab, show_spinner=False)()  # the Train page's default corpus
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


BY_VALUE = {GPTConfig: lambda c: str(c.to_dict())}
breakdown = st.cache_data(anatomy.breakdown, show_spinner=False, hash_funcs=BY_VALUE)
forward_shapes = st.cache_data(anatomy.forward_shapes, show_spinner=False, hash_funcs=BY_VALUE)


def choice_name(value: str) -> str:
    return t(f"assembled_gpt.choice.{value}")


st.title(t("assembled_gpt.title"))
st.markdown(t("assembled_gpt.intro", vocab=TUTORIAL.vocab_size, ours=OUR_VOCAB))

# --- config ----------------------------------------------------------------------------------------------
st.header(t("assembled_gpt.pick.header"))
top, bottom = st.columns(5), st.columns(5)
vocab = linked(top[0].number_input, t("assembled_gpt.pick.vocab"), 1, 100_000, TUTORIAL.vocab_size, key="gpt-vocab")
d_model = linked(top[1].number_input, "d_model", 1, 4096, TUTORIAL.d_model, step=8, key="gpt-d")
n_layer = linked(top[2].slider, "n_layer", 1, 32, TUTORIAL.n_layer, key="gpt-layers")
n_head = linked(top[3].number_input, "n_head", 1, 64, TUTORIAL.n_head, key="gpt-heads")
norm = linked(bottom[0].selectbox, t("assembled_gpt.pick.norm"), CHOICES["norm"], format_func=choice_name,
              key="gpt-norm")
placement = linked(bottom[1].selectbox, t("assembled_gpt.pick.placement"), CHOICES["norm_placement"],
                   format_func=choice_name, key="gpt-placement")
position = linked(bottom[2].selectbox, t("assembled_gpt.pick.positions"), CHOICES["position"],
                  format_func=choice_name, key="gpt-position")
ffn_kind = linked(bottom[3].selectbox, t("assembled_gpt.pick.ffn"), CHOICES["ffn"], format_func=choice_name,
                  key="gpt-ffn")
context = linked(bottom[4].number_input, t("assembled_gpt.pick.context"), 1, 8192, TUTORIAL.context, key="gpt-context")
# d_ff comes last although it sits in the top row: its automatic width depends on the FFN picked below it
auto_ff = linked(top[4].toggle, "d_ff = 8/3·d (×8)" if ffn_kind == "swiglu" else "d_ff = 4·d", value=True,
                 key="gpt-auto-ff")
if auto_ff:  # so the greyed-out field shows the width in use
    st.session_state["gpt-ff"] = anatomy.default_d_ff(int(d_model), ffn_kind)
d_ff = linked(top[4].number_input, "d_ff", 1, 16384, key="gpt-ff", disabled=auto_ff)
try:
    cfg = GPTConfig(vocab_size=int(vocab), d_model=int(d_model), n_layer=n_layer, n_head=int(n_head),
                    d_ff=int(d_ff), context=int(context), norm=norm, norm_placement=placement, position=position,
                    ffn=ffn_kind)
except ConfigError as e:
    st.error(t("assembled_gpt.pick.cannot_build", error=e.message))
    cfg = None

if cfg is not None:
    show_chart(diagram_figure(anatomy.block_diagram(cfg)), key="gpt-diagram", config={"staticPlot": True})
    show_source(GPT, anatomy.block_diagram, label=t("assembled_gpt.pick.source"))

    # --- parameters --------------------------------------------------------------------------------------
    st.header(t("assembled_gpt.params.header"))
    parts = breakdown(cfg)
    total = int(parts["parameters"].iloc[-1])
    counted = int(parts["counted in GPT"].iloc[-1])  # the real model's num_params()
    m1, m2, m3 = st.columns(3)
    m1.metric(t("assembled_gpt.params.formula"), f"{total:,}")
    m2.metric("GPT(cfg).num_params()", f"{counted:,}")
    m3.metric(t("assembled_gpt.params.one_block"),
              f"{int(parts.loc[parts['part'] == 'one block', 'parameters'].iloc[0]):,}")
    if total == counted and (parts["parameters"] == parts["counted in GPT"]).all():
        st.caption(t("assembled_gpt.params.matches"))
    else:
        st.error(t("assembled_gpt.params.disagrees"))
    # the numbers beside the part's name, the formula last: on a projector the formulas scroll under the pinned name
    numbers_first = parts[["part", "parameters", "counted in GPT", "per block", "formula"]]
    st.dataframe(shown_table(numbers_first, "assembled_gpt", {"parameters": "{:,}", "counted in GPT": "{:,}"}),
                 hide_index=True, key="gpt-params", column_config=pinned("assembled_gpt", "part"))
    show_chart(shares_figure(anatomy.parameter_shares(parts, cfg.n_layer), total), key="gpt-shares")
    if cfg == TUTORIAL:
        st.markdown(t("assembled_gpt.params.tutorial"))
        st.caption(t("assembled_gpt.params.our_vocab", ours=OUR_VOCAB, extra=OUR_VOCAB - TUTORIAL.vocab_size,
                     d=TUTORIAL.d_model, n=GPT(replace(TUTORIAL, vocab_size=OUR_VOCAB)).num_params()))
    show_source(anatomy.parameter_parts, anatomy.counted_parts)
    with real_model_panel("gpt-real"):
        smol, ours = rm.embedding_share(SMOLLM2_135M.config), rm.embedding_share(cfg)
        st.markdown(t("assembled_gpt.real.body", name=SMOLLM2_135M.name, vocab=smol["vocab"], d=smol["d_model"],
                      table=smol["embedding"], share=smol["embedding share"], params=smol["parameters"],
                      untied=smol["untied parameters"], untied_share=smol["untied share"], ours_vocab=ours["vocab"],
                      ours_d=ours["d_model"], ours_table=ours["embedding"], ours_both=ours["embedding + head"],
                      ours_share=ours["embedding share"], ours_params=ours["parameters"]))
        models_table(rm.embedding_table(cfg), {"vocab": "{:,}", "embedding": "{:,}", "tied": check_mark,
                                               "parameters": "{:,}", "embedding share": PERCENT})
        if (copy := converted_counts()) is not None:
            st.caption(t("real_model.converted", folder=copy[0], embedding=copy[1]["embedding"],
                         params=copy[1]["parameters"]))
        show_source(rm.embedding_share)

    # --- shapes ------------------------------------------------------------------------------------------
    st.header(t("assembled_gpt.shapes.header"))
    d, d_ff = cfg.d_model, cfg.d_ff
    st.markdown(t("assembled_gpt.shapes.text", d=d, qkv=3 * d, d_ff=d_ff))
    c1, c2, c3 = st.columns(3)
    batch = linked(c1.number_input, t("assembled_gpt.shapes.batch"), 1, 64, 2, key="gpt-batch")
    T = linked(c2.number_input, t("assembled_gpt.shapes.length"), 1, 8192, min(16, cfg.context), key="gpt-T")
    every_block = linked(c3.toggle, t("assembled_gpt.shapes.every_block"), value=False, key="gpt-every-block")
    try:
        shapes = forward_shapes(cfg, int(batch), int(T), every_block)
    except UserError as e:
        st.error(say(e))
    else:
        st.dataframe(shown_table(shapes, "assembled_gpt"), hide_index=True, key="gpt-shapes", column_config={
            column_name("assembled_gpt", "own parameters"): st.column_config.NumberColumn(format="localized")})
    show_source(anatomy.forward_shapes, Block)

# --- view vs reshape -------------------------------------------------------------------------------------
st.header(t("assembled_gpt.view.header"))
st.markdown(t("assembled_gpt.view.text"))
c1, c2, c3 = st.columns(3)
heads = linked(c1.slider, t("assembled_gpt.view.heads"), 2, 8, 4, key="gpt-vr-heads")
steps = linked(c2.slider, t("assembled_gpt.view.positions"), 2, 6, 3, key="gpt-vr-T")
width = linked(c3.slider, "d_head", 1, 4, 2, key="gpt-vr-dhead")
demo = anatomy.view_vs_reshape(1, heads, steps, width)
st.markdown(t("assembled_gpt.view.strides", shape=demo["shape before"], before=demo["strides before"],
              after=demo["strides after transpose"], contiguous=demo["contiguous after transpose"]))
st.code(f"RuntimeError: {demo['view error']}", language="text", wrap_lines=True)
st.markdown(t("assembled_gpt.view.reshape", copied=demo["reshape copied"],
              equal=demo["reshape equals contiguous().view"]))
show_chart(merge_layout_figure(demo["correct"], t("assembled_gpt.view.right")), key="gpt-vr-right")
show_chart(merge_layout_figure(demo["wrong"], t("assembled_gpt.view.wrong")), key="gpt-vr-wrong")
show_source(anatomy.view_vs_reshape, Attention.forward)

quiz("gpt-view", t("assembled_gpt.quiz.question"), [t(f"assembled_gpt.quiz.option{i}") for i in range(4)], {1},
     t("assembled_gpt.quiz.explanation"))

# --- the training log ------------------------------------------------------------------------------------
st.header(t("assembled_gpt.log.header"))
st.markdown(t("assembled_gpt.log.before"))
st.code(TUTORIAL_LOG, language="text")
st.markdown(t("assembled_gpt.log.reading", vocab=TUTORIAL.vocab_size, ln_v=math.log(TUTORIAL.vocab_size)))
corpora = ["builtin", "tinystories"] if tinystories_cached() else ["builtin"]
picked = linked(st.selectbox, t("assembled_gpt.log.measure_on"), corpora,
                format_func=lambda k: t(f"assembled_gpt.log.{k}"), key="gpt-log-corpus")
with st.spinner(t("assembled_gpt.log.training")):
    log = first_step(picked)
st.code(f"vocab {log['vocab']}, params {log['params']:,}\n"
        f"step    0  train {log['train loss, step 0']:.3f}  val {log['val, step 0 (after one update)']:.3f}",
        language="text")
# the three losses the text compares first, the formula last: on a projector the last columns scroll out of view
LOG_COLUMNS = ["train loss, step 0", "val before the update", "val, step 0 (after one update)", "ln V",
               "logit std at init", "ln V + σ²/2"]
st.dataframe(shown_table(pd.DataFrame([log])[LOG_COLUMNS], "assembled_gpt", precision=3), hide_index=True,
             key="gpt-log")
st.markdown(t("assembled_gpt.log.measured", vocab=log["vocab"], ln_v=log["ln V"], train=log["train loss, step 0"],
              before=log["val before the update"], after=log["val, step 0 (after one update)"]))
show_source(anatomy.first_log_line)
