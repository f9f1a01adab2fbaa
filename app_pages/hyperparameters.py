import pandas as pd
import streamlit as st

from explorer.demo_plots import costs_figure, drift_figure, z_loss_figure
from explorer.i18n import say, t
from explorer.links import from_url, linked
from explorer.real_model import PERCENT, check_mark, real_model_panel, side_by_side_table
from explorer.shipped import shipped_or_notice, shipped_version
from explorer.tables import column_name, pinned, shown_table
from explorer.ui import quiz, show_chart, show_source, wrapping_columns
from gptcore.demos import hyperparams as hp
from gptcore.demos import real_models as rm
from gptcore.demos.anatomy import ModelShape
from gptcore.errors import UserError
from gptcore.hub import DEFAULT_MAX_CONTEXT
from gptcore.inspector import token_labels
from gptcore.published import SMOLLM2_135M

START_PRESET = "LLaMA-2-7B"  # the calculator's model when the page opens
SHAPE_FIELDS = ["vocab_size", "d_model", "n_layer", "n_head", "d_ff", "context"]
MEMORY_PARTS = ["weights", "gradients", "AdamW m + v", "master weights"]
CONSENSUS = {"d_ff": "d_ff / d_model", "heads": "n_head × d_head", "aspect": "d_model / n_layer", "vocab": None,
             "regularization": None}  # row → its name when that is an identifier, else from the catalog
Z_TEXT = "Once upon a time, there was a little girl"  # a confident prediction ("l"), yet log Z ≈ 13

SHIFTS = [s / 2 for s in range(-60, 21)]  # the z-loss sweep's common shifts of the logits, -30 to 10

stability_curves = st.cache_data(hp.stability_curves, show_spinner=False)


@st.cache_data(max_entries=16, show_spinner=False)
def z_loss_inputs(version: tuple[str, float], text: str, _model, _tokenizer) -> tuple:
    """(target, logits, sweep) for text's last character: one forward pass and sweep per text and version of the
    shipped weights (explorer.shipped.shipped_version), so a retrained model is never answered from the cache."""
    prefix, target = hp.split_target(_tokenizer, text)
    logits = hp.next_char_logits(_model, _tokenizer, prefix)
    return target, logits, hp.z_loss_sweep(logits, target, SHIFTS)


def choice_name(value: str) -> str:
    return t(f"hyperparameters.choice.{value}")


def consensus_table() -> pd.DataFrame:
    rows = [{"hyperparameter": name or t(f"hyperparameters.consensus.{row}.name"),
             "usual choice": t(f"hyperparameters.consensus.{row}.choice"),
             "why": t(f"hyperparameters.consensus.{row}.why")} for row, name in CONSENSUS.items()]
    table = shown_table(pd.DataFrame(rows), "hyperparameters")
    return table.set_index(column_name("hyperparameters", "hyperparameter"))


st.title(t("hyperparameters.title"))
st.markdown(t("hyperparameters.intro"))

# --- consensus -------------------------------------------------------------------------------------------
st.header(t("hyperparameters.consensus.header"))
st.table(consensus_table())
st.markdown(t("hyperparameters.consensus.published"))
published = hp.published_table()
# the size and the FFN ratio the text compares beside the model's name: on a projector the last columns scroll away
published = published[["model", "parameters", "d_ff / d_model"]
                      + [c for c in published.columns if c not in ("model", "parameters", "d_ff / d_model")]]
st.dataframe(shown_table(published, "hyperparameters", {
    "d_head": "{:g}", "d_model / n_layer": "{:g}", "d_ff": "{}", "d_ff / d_model": "{:.2f}", "parameters": "{:,}"}),
    hide_index=True, key="hp-published", column_config=pinned("hyperparameters", "model"))
st.markdown(t("hyperparameters.consensus.reading"))
show_source(hp.shape_ratios, hp.published_table)
with real_model_panel("hp-real"):
    table = rm.side_by_side()
    published, tied = table.iloc[1:], table.iloc[1:].query("tied")
    st.markdown(t("hyperparameters.real.body", name=SMOLLM2_135M.name, params=SMOLLM2_135M.params,
                  cap=DEFAULT_MAX_CONTEXT, models=len(published), tied=len(tied),
                  low=tied["embedding share"].min()))
    side_by_side_table(table, {"d_ff / d_model": "{:.3f}", "vocab": "{:,}", "context": "{:,}", "θ": "{:,.0f}",
                               "tied": check_mark, "parameters": "{:,}", "embedding share": PERCENT})
    show_source(rm.side_by_side, rm.embedding_share)

# --- calculator ------------------------------------------------------------------------------------------
st.header(t("hyperparameters.costs.header"))


def load_preset():
    preset = hp.PUBLISHED[st.session_state["hp-preset"]]
    for name in SHAPE_FIELDS + ["ffn", "norm", "position", "bias", "tied_head"]:
        st.session_state[f"hp-{name}"] = getattr(preset, name)


if "hp-d_model" not in st.session_state:  # a link's preset first: its fields keep only what differs from it
    st.session_state["hp-preset"] = from_url("hp-preset", hp.PUBLISHED) or START_PRESET
    load_preset()
left, right = st.columns([4, 1], vertical_alignment="bottom")
preset = hp.PUBLISHED[linked(left.selectbox, t("hyperparameters.costs.preset"), list(hp.PUBLISHED),
                             format_func=lambda k: say(hp.model_name(k)), key="hp-preset", on_change=load_preset,
                             start=START_PRESET)]
right.button(t("hyperparameters.costs.reset"), on_click=load_preset, key="hp-reset", width="stretch",
             help=t("hyperparameters.costs.reset_help"))
columns = st.columns(6)
values = {name: int(linked(col.number_input, t(f"hyperparameters.costs.fields.{name}"), 1, 10_000_000,
                           key=f"hp-{name}", start=getattr(preset, name)))
          for name, col in zip(SHAPE_FIELDS, columns)}
c1, c2, c3, c4, c5 = st.columns(5)
shape = ModelShape(**values,
                   ffn=linked(c1.selectbox, t("hyperparameters.costs.ffn"), ["swiglu", "gelu", "relu"],
                              format_func=choice_name, key="hp-ffn", start=preset.ffn),
                   norm=linked(c2.selectbox, t("hyperparameters.costs.norm"), ["rms", "layer"], format_func=choice_name,
                               key="hp-norm", start=preset.norm),
                   position=linked(c3.selectbox, t("hyperparameters.costs.positions"), ["rope", "learned", "none"],
                                   format_func=choice_name, key="hp-position", start=preset.position),
                   bias=linked(c4.toggle, t("hyperparameters.costs.bias"), key="hp-bias", start=preset.bias),
                   tied_head=linked(c5.toggle, t("hyperparameters.costs.tied"), key="hp-tied_head",
                                    start=preset.tied_head))
if shape.d_model % shape.n_head:
    st.error(t("hyperparameters.costs.indivisible", d_model=shape.d_model, n_head=shape.n_head))
else:
    params = hp.total_parameters(shape)
    flops = hp.flops_per_token(shape)
    m1, m2, m3, m4 = wrapping_columns(4, 12, key="hp-metrics")  # (two by two on a projector: no "107.8" over "GB")
    m1.metric(t("hyperparameters.costs.parameters"), hp.human_count(params), help=f"{params:,}")
    m2.metric(t("hyperparameters.costs.training_flops"), hp.human_count(flops["training total"]),
              help=f"{flops['training total']:,}")
    m3.metric(t("hyperparameters.costs.inference_flops"), hp.human_count(flops["inference total"]),
              help=f"{flops['inference total']:,}")
    memory = hp.memory_table(params)
    m4.metric(t("hyperparameters.costs.memory"), hp.human_bytes(memory.loc[0, "training total"] * 1e9))
    left, right = st.columns([2, 3])
    left.markdown(t("hyperparameters.costs.rules"))
    left.dataframe(shown_table(hp.consensus_check(shape), "hyperparameters"), hide_index=True, key="hp-check")
    right.markdown(t("hyperparameters.costs.flops", n=flops["N (matmul parameters)"],
                     attention=flops["inference: attention"], training=flops["training: attention"]))
    # bytes per parameter and the total beside the precision, the parts after them (they scroll on a projector)
    by_total = memory[["precision", "bytes / param", "training total"] + MEMORY_PARTS]
    gigabytes = dict.fromkeys(MEMORY_PARTS + ["training total"], hp.format_gb)
    st.dataframe(shown_table(by_total, "hyperparameters", gigabytes), hide_index=True, width="stretch",
                 key="hp-memory", column_config=pinned("hyperparameters", "precision"))
    st.caption(t("hyperparameters.costs.memory_caption"))
    show_chart(costs_figure(memory, hp.flops_vs_context(shape, [2 ** k for k in range(7, 18)]), shape.context),
               key="hp-costs")
    st.caption(t("hyperparameters.costs.costs_caption"))
show_source(hp.compute_parameters, hp.flops_per_token, hp.memory_table)

# --- stability -------------------------------------------------------------------------------------------
st.header(t("hyperparameters.stability.header"))
st.markdown(t("hyperparameters.stability.text"))
st.subheader(t("hyperparameters.stability.attention_header"))
st.markdown(t("hyperparameters.stability.attention_text"))
c1, c2 = st.columns(2)
scale = linked(c1.select_slider, t("hyperparameters.stability.drift"),
               [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], value=8.0, key="hp-drift")
cap = linked(c2.slider, t("hyperparameters.stability.cap"), 1.0, 50.0, 5.0, step=1.0, key="hp-cap")
st.dataframe(shown_table(hp.stability_table(scale, cap), "hyperparameters", precision=4), hide_index=True,
             key="hp-stability")
curves = stability_curves(tuple(2 ** (k / 2) for k in range(-4, 13)), cap)
show_chart(drift_figure(curves, hp.patched_probabilities(scale, cap), scale), key="hp-drift-fig")
st.markdown(t("hyperparameters.stability.attention_reading"))
st.page_link("app_pages/faster_training.py", label=t("hyperparameters.stability.speedrun_link"),
             icon=":material/speed:")
show_source(hp.patched_logits, hp.stability_table)

st.subheader(t("hyperparameters.z.header"))
st.markdown(t("hyperparameters.z.text"))
shipped = shipped_or_notice()
if shipped is not None:
    tokenizer = shipped.tokenizer
    text = linked(st.text_input, t("hyperparameters.z.text_input"), Z_TEXT, key="hp-z-text")
    try:
        target, logits, sweep = z_loss_inputs(shipped_version(), text, shipped.model, tokenizer)
    except UserError as e:
        st.error(t("hyperparameters.z.bad_text", error=e.message))
    else:
        base = hp.z_loss_terms(logits, target)
        shift = linked(st.slider, t("hyperparameters.z.shift"), -30.0, 10.0, 0.0, step=0.5, key="hp-z-shift",
                       help=t("hyperparameters.z.shift_help", at=-base["log Z"]))
        terms = hp.z_loss_terms(logits, target, shift)
        m1, m2, m3, m4 = st.columns(4)
        m1.metric("log Z", f"{terms['log Z']:.2f}")
        m2.metric(t("hyperparameters.z.cross_entropy"), f"{terms['cross-entropy']:.4f}")
        m3.metric(f"p('{token_labels(text[-1])[0]}')", f"{terms['p(target)']:.3f}")
        m4.metric("z-loss", f"{terms['z-loss']:.2e}")
        show_chart(z_loss_figure(sweep, terms, shift, token_labels(tokenizer.chars)), key="hp-z-fig")
        direction = "lowers" if terms["log Z"] > 0 else "raises" if terms["log Z"] < 0 else "leaves"
        st.markdown(t("hyperparameters.z.reading", name=shipped.path.name, step=shipped.meta.get("step", 0),
                      before=text[-12:-1], base=base["log Z"], log_z=terms["log Z"],
                      direction=t(f"hyperparameters.z.{direction}"),
                      ce_sum=terms["cross-entropy gradient"].sum().item()))
        st.dataframe(shown_table(sweep[sweep["shift"].isin([-20.0, -10.0, 0.0, 10.0, shift])], "hyperparameters", {
            "shift": "{:+.1f}", "log Z": "{:.3f}", "cross-entropy": "{:.4f}", "p(target)": "{:.4f}", "z-loss": "{:.2e}",
            "Σ ∂cross-entropy/∂zᵢ": "{:.0e}", "Σ ∂z-loss/∂zᵢ": "{:+.2e}"}), hide_index=True, key="hp-z-table")
        show_source(hp.split_target, hp.z_loss_terms, hp.next_char_logits)

quiz("hp-4096", t("hyperparameters.quiz.question"), [t(f"hyperparameters.quiz.option{i}") for i in range(4)], {0, 1},
     t("hyperparameters.quiz.explanation"))
