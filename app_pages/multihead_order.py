import streamlit as st

from explorer.demo_plots import head_grid, heatmap_row
from explorer.i18n import say, scoped
from explorer.links import linked
from explorer.real_model import models_table, real_model_panel
from explorer.shipped import shipped_or_notice
from explorer.tables import pinned, shown_table
from explorer.ui import ACTIVE_CHECKPOINT, show_chart, show_source
from gptcore import inspector as ins
from gptcore.config import GPTConfig
from gptcore.demos import multihead as mh
from gptcore.demos import real_models as rm
from gptcore.errors import UserError
from gptcore.model import Attention
from gptcore.published import SMOLLM2_135M

T, D = 5, 8  # the tutorial's sequence length and width
COST_WIDTH = COST_T = 128  # the tutorial's d_model, and a 128-character forward pass for the FLOP count
TRAINED_TEXT = "My cat likes warm milk. My cat likes warm milk."
INSPECT_TEXT = "inspect-text"  # the Inspect page's text widget
PAGE = "multihead_order"

attention_costs = st.cache_data(mh.attention_costs, show_spinner=False)
tr = scoped(PAGE)

st.title(tr("title"))

# --- heads -----------------------------------------------------------------------------------------------
st.header(tr("heads.heading"))
st.markdown(tr("heads.body", d=COST_WIDTH, params=4 * COST_WIDTH ** 2, T=COST_T))
counts = ["parameters", "4·d_model²", "projection FLOPs", "score + mixing FLOPs"]
st.dataframe(shown_table(attention_costs(COST_WIDTH, COST_T), PAGE, formats=dict.fromkeys(counts, "{:,}")),
             hide_index=True, key="param-counts")
show_source(mh.attention_costs)
with real_model_panel("mh-real"):
    smol, ours = rm.kv_sharing(SMOLLM2_135M.config), rm.kv_sharing(GPTConfig())
    st.markdown(tr("real.body", name=SMOLLM2_135M.name, H=smol["query heads"], G=smol["key/value heads"],
                   group=smol["group"], d_head=smol["d_head"], L=smol["n_layer"], cache=smol["KV cache / token"],
                   unshared=smol["without sharing"], factor=smol["smaller by"],
                   mb=smol["KV cache at full context (MB)"], mb_unshared=smol["unshared at full context (MB)"],
                   context=SMOLLM2_135M.config.context, weights=smol["k/v weights / block"],
                   weights_unshared=smol["unshared k/v weights / block"], saved=smol["weights saved"],
                   share=smol["share of parameters saved"], params=smol["parameters"], ours_H=ours["query heads"],
                   ours_G=ours["key/value heads"]))
    models_table(rm.kv_table(), {"KV cache / token": "{:,}", "without sharing": "{:,}", "smaller by": "{:g}×"})
    show_source(rm.kv_sharing)
st.markdown(tr("heads.random", T=T, D=D))
n_head = linked(st.segmented_control, tr("heads.count"), [1, 2, 4], default=2, key="mh-heads", required=True)
patterns = mh.head_patterns(n_head)
titles = [tr("heads.pattern_title", h=h, first=h * D // n_head, last=(h + 1) * D // n_head - 1) for h in range(n_head)]
fig = heatmap_row(dict(zip(titles, patterns)), 0, 1, "Blues", ".2f", tr("heads.x_title"), tr("heads.y_title"),
                  tr("heads.hover"), 330)
show_chart(fig, key="mh-patterns")
show_source(mh.head_patterns, mh.model_attention, Attention)

# --- trained heads ---------------------------------------------------------------------------------------
st.header(tr("trained.heading"))
shipped = shipped_or_notice()
if shipped is not None:
    model, tokenizer, cfg = shipped.model, shipped.tokenizer, shipped.model.cfg
    st.markdown(tr("trained.body", name=shipped.path.name, n_layer=cfg.n_layer, n_head=cfg.n_head, d_head=cfg.d_head,
                   step=shipped.meta.get("step", 0)))
    text = linked(st.text_input, tr("trained.text"), TRAINED_TEXT, max_chars=64, key="mh-trained-text")
    try:
        run = ins.inspect_text(model, tokenizer, text)
    except UserError as e:
        st.error(tr("trained.cannot_read", reason=e.message))
        run = None
    if run is not None:
        profiles = mh.head_profiles(run.patterns, run.ids, run.text)
        top = mh.clearest_head(profiles)
        if top is None:
            st.markdown(tr("trained.none_clear", clear=ins.CLEAR_SCORE))
        else:
            st.markdown(tr("trained.clearest", head=top["head"], layer=top["layer"], role=top["role"],
                           score=top[list(mh.ROLE_SCORES)].max()))
        layer = linked(st.segmented_control, tr("trained.layer"), list(range(cfg.n_layer)),
                       default=mh.varied_layer(profiles), help=tr("trained.layer_help"), key="mh-layer", required=True)
        rows = profiles[profiles["layer"] == layer]
        titles = [tr("trained.subplot", head=r["head"], role=r["role"]) for r in rows.to_dict("records")]
        show_chart(head_grid(run.patterns[layer], ins.token_labels(run.text), titles, tr("trained.x_title"),
                             tr("trained.y_title"), hover=tr("trained.hover")), key="mh-trained")
        scores = ["previous_token", "word_start", "first_token", "induction", "mean reach", "entropy"]
        # the role beside the head's name, the scores after it: on a projector the last columns scroll away
        table = shown_table(profiles[["head", "role"] + scores], PAGE,
                            formats=dict.fromkeys(scores, lambda v: "—" if v != v else f"{v:.2f}"))
        st.dataframe(table, hide_index=True, height=35 * (len(profiles) + 1) + 3, key="mh-trained-scores",
                     column_config=pinned(PAGE, "head"))
        st.caption(tr("trained.scores", clear=ins.CLEAR_SCORE))

        def open_in_inspect():
            st.session_state[ACTIVE_CHECKPOINT] = shipped.path.name
            st.session_state[INSPECT_TEXT] = text

        if st.button(tr("trained.open"), key="mh-to-inspect", icon=":material/biotech:", on_click=open_in_inspect):
            st.switch_page("app_pages/inspector.py")
        st.caption(tr("trained.open_caption"))
    show_source(mh.head_profiles, mh.head_role, ins.head_scores)

# --- permutations ----------------------------------------------------------------------------------------
st.header(tr("order.heading"))
st.markdown(tr("order.body"))
perm_text = linked(st.text_input, tr("order.perm", last=T - 1), "4, 2, 0, 1, 3", key="mh-perm")
try:
    perm = mh.parse_permutation(perm_text, T)
except UserError as e:
    st.error(tr("order.cannot_use", reason=e.message))
    perm = None

if perm is not None:
    results = mh.permutation_table(perm)
    results["allclose"] = results["allclose"].map(str)  # printed as the tutorial prints it
    st.dataframe(shown_table(results, PAGE, formats={"max |difference|": "{:.2e}"}), hide_index=True,
                 key="perm-table")
    st.caption(tr("order.one_head"))
    st.markdown(tr("order.mask"))
    variant = linked(st.radio, tr("order.variant"), list(mh.VARIANTS), format_func=lambda v: say(mh.VARIANT_NAMES[v]),
                     key="mh-variant", horizontal=True)
    check = mh.permutation_check(perm, 1, *mh.VARIANTS[variant])
    panels = {"attn(x)[perm]": check["attn(x)[perm]"], "attn(x[perm])": check["attn(x[perm])"],
              tr("order.difference"): check["attn(x)[perm]"] - check["attn(x[perm])"]}
    limit = check["attn(x)[perm]"].abs().max().item()  # one colour scale for the three panels
    # whole numbers: a cell is about 20 px wide on a projector, too narrow for "-5.2" at a readable size
    fig = heatmap_row(panels, -limit, limit, "RdBu", ".0f", tr("order.x_title"), tr("order.y_title"),
                      tr("order.hover"), 330)
    show_chart(fig, key="perm-outputs")
show_source(mh.parse_permutation, mh.permutation_check, mh.tutorial_inputs)
