"""Train: the tutorial's GPT learns to write stories in a background job that outlives this page."""
import streamlit as st

from explorer import forms, training
from explorer.forms import KEEP, ss
from explorer.i18n import say, t
from explorer.ui import job_registry, show_failure
from gptcore import checkpoint as ckpt
from gptcore import runs
from gptcore.config import GPTConfig, TrainConfig, swiglu_hidden
from gptcore.describe import count_params, describe_model, format_duration, format_step
from gptcore.device import described
from gptcore.errors import UserError
from gptcore.recipes import RECIPES
from gptcore.train import check_fits_in_memory

registry = job_registry()
LIVE_REFRESH_S = 2  # how often the live panel reruns while a run trains; each rerun costs the run CPU time
RUNS_REFRESH_S = 5  # the runs table and overlay, which read every run's meta.json


# ---------------------------------------------------------------- live view

def live_view() -> None:
    with st.container(key="tr_live"):
        live_panel()


def live_panel() -> None:
    job = registry.latest(training.JOB_KIND)
    if job is None:
        st.info("Nothing has trained in this server session yet. Pick a preset under **New run** and press Start.")
        return
    s = job.snapshot()
    if training.run_gone(s):
        st.info(f"The last run of this session, **{s.name}**, was renamed or deleted since it ended: "
                "see **Runs and checkpoints**.")
        return
    was_active, ss.tr_live_active = ss.get("tr_live_active", False), s.active
    if was_active and not s.active:
        st.rerun()  # refresh the whole page (Start, the runs table) and stop the periodic updates
    d = s.data
    if "total_steps" not in d:  # the job thread has not published its set-up yet
        st.caption(f"Run **{s.name}** is starting…")
        return
    head, pause, stop = st.columns([6, 1, 1], vertical_alignment="bottom")
    head.markdown(f"#### {s.name} · {s.status}")
    if s.status == "paused":
        pause.button("Resume", key="tr_resume", on_click=job.resume, width="stretch")
    else:
        pause.button("Pause", key="tr_pause", on_click=job.pause, disabled=s.status != "running", width="stretch")
    stop.button("Stop", key="tr_stop", on_click=job.stop, disabled=s.status not in ("running", "paused"),
                width="stretch")
    step, total = d.get("step", -1), d["total_steps"]
    st.progress(min(1.0, (step + 1) / (total + 1)), text=say(format_step(step, total)))
    evals = d.get("evals", [])
    m = st.columns(6)
    m[0].metric("Train loss", f"{d['loss']:.3f}" if "loss" in d else "–")
    m[1].metric("Val loss (estimate)", f"{evals[-1]['val']:.3f}" if evals else "–",
                help="Mean of a few random validation batches, as in the tutorial.")
    m[2].metric("Tokens / s", f"{d.get('tokens_per_s', 0):,.0f}")
    m[3].metric("Elapsed", say(format_duration(d.get("elapsed_s"))))
    m[4].metric("ETA", say(format_duration(d.get("eta_s"))) if s.active else "–")
    m[5].metric("Parameters", f"{d['params']:,}")
    if message := training.status_message(s):
        getattr(st, message[0])(say(message[1]))
    elif s.status == "failed":
        show_failure(s)
    if warning := training.diverging_warning(s):
        st.warning(say(warning))
    chart, samples = st.columns([3, 2])
    chart.plotly_chart(training.loss_figure(d), key="tr_live_chart")
    with chart:
        st.caption(f"**Model** {say(d['model_summary'])}  \n**Training** {say(d['train_summary'])}  \n"
                   f"**Corpus** {say(d['corpus'])}  \n{t('device.trains_on', device=d['device'])}")
        if d.get("unknown"):
            st.warning(say(d["unknown"]))
    with samples:
        st.markdown("**Samples** (newest first)")
        with st.container(height=420, key="tr_samples"):
            if not d.get("samples"):
                st.caption("The first sample appears after the first sampling step.")
            for sample in reversed(d.get("samples", [])):
                st.caption(f"step {sample['step']:,}")
                st.code(sample["text"], language=None, wrap_lines=True)


# ---------------------------------------------------------------- new run

def model_inputs(tokenizer) -> str | None:
    """Model widgets and what they add up to; why the model cannot be trained here, or None."""
    invalid = forms.field_inputs(GPTConfig, st.columns(2))
    if "Width d_model" not in invalid:
        d = ss.tr_m_d_model
        st.caption(f"SwiGLU keeps 8·d² parameters with d_ff = 8/3·d → {swiglu_hidden(d)}; "
                   f"a ReLU/GELU MLP uses 4·d = {4 * d}.")
    if invalid or tokenizer is None:
        return "fix the fields marked in red" if invalid else None
    try:
        bpe = ss.get("tr_t_tokenizer") == "bpe"
        cfg = forms.model_config(forms.vocab_size(tokenizer))
        unit = "BPE tokens (at most)" if bpe else "characters"
        st.markdown(f"**{count_params(cfg):,} parameters** with this corpus's {cfg.vocab_size:,} {unit}",
                    help=say(describe_model(cfg)))
        st.caption("  \n".join(forms.params_note(cfg, bpe)))
        check_fits_in_memory(cfg, ss.tr_t_batch_size)
    except UserError as e:
        st.error(say(e))
        return "the model cannot be trained here (see Model)"
    return None


def new_run_tab() -> None:
    st.selectbox("Preset", list(RECIPES), format_func=lambda k: RECIPES[k].name, key="tr_recipe",
                 on_change=forms.apply_recipe, **KEEP)
    st.caption(RECIPES[ss.tr_recipe].description)
    corpus_col, model_col, train_col = st.columns(3, gap="large")
    with corpus_col:
        st.markdown("##### Corpus")
        tokenizer = forms.corpus_inputs()
    with model_col:
        st.markdown("##### Model")
        model_problem = model_inputs(tokenizer)
    with train_col:
        st.markdown("##### Training")
        train_invalid = forms.field_inputs(TrainConfig, st.columns(2))
        st.caption(t("device.trains_on", device=described(ss.tr_t_device)))
    name, start = st.columns([3, 1], vertical_alignment="bottom")
    name.text_input("Run name (its checkpoint folder)", key="tr_name", max_chars=64, **KEEP)
    reasons = forms.start_blockers(tokenizer, model_problem, train_invalid)
    start.button("Start training", key="tr_start", type="primary", on_click=forms.start_new_run, width="stretch",
                 disabled=bool(reasons))
    if reasons:
        st.warning("**Start is off.** " + "  \n".join(say(r) for r in reasons), icon=None)
    try:
        if (folder := ckpt.safe_name(ss.tr_name)) != ss.tr_name:
            st.caption(f"Saved as **{folder}** (letters, digits, '.', '_' and '-' only).")
    except ckpt.CheckpointError:
        pass  # said among the reasons above
    message, context, refused = ss.get("tr_feedback") or (None, None, False)
    # gone once it no longer applies: an error about another corpus, a refusal by a job that has ended
    if message and context == forms.corpus_context() and not (refused and registry.active() is None):
        st.error(say(message))
    st.caption(f"Checkpoints are written to `{ckpt.CHECKPOINT_ROOT}/<run name>/`.")


# ---------------------------------------------------------------- runs

def manage_run(run: runs.RunInfo) -> None:
    st.caption(f"**Status** {run.status} · **{say(format_step(run.step, run.total_steps))}** · "
               f"**wall time** {say(format_duration(run.wall_time))}  \n**Model** {say(runs.model_summary(run))}  \n"
               f"**Corpus** {say(run.corpus)}")
    if run.damaged:
        st.warning(say(training.damaged_warning(run)))
    if note := run.note:
        st.warning(say(training.known(note)))
    if (warning := run.diverging) and not run.note:
        st.warning(say(warning))
    if message := forms.run_feedback(run):
        st.error(say(message))
    cont, rename, files = st.columns(3, gap="large")
    with cont:
        st.markdown("**Continue training**")
        default_until = run.total_steps if run.step < run.total_steps else run.step + max(100, run.total_steps // 2)
        st.number_input("Train until step", run.step + 1, 1_000_000, value=default_until, step=100,
                        key=f"tr_until_{run.name}")
        source = run.source
        if blocked := run.blocker("continue"):
            st.caption(say(blocked))
        elif source is None or not source.reloadable:
            st.caption("This run's corpus cannot be reloaded automatically: give it again.")
            st.text_input("Corpus path on the server", key="tr_cont_path")
            st.caption(say(forms.server_folders_note()))
            st.file_uploader("…or upload it", type=["txt", "md", "text"], key="tr_cont_upload")
            st.number_input("Use the first N characters (0 = all)", 0, 100_000_000, step=100_000,
                            value=(source.max_chars if source else None) or 1_000_000, key="tr_cont_max_chars")
        st.button("Continue", key="tr_continue", on_click=forms.continue_run, args=(run,), disabled=bool(blocked))
    fixed = run.blocker("rename")
    with rename:
        st.markdown("**Rename**")
        st.text_input("New name", key=f"tr_new_name_{run.name}", value=run.name, disabled=bool(fixed))
        st.button("Rename", key="tr_rename", on_click=forms.rename_run, args=(run,), disabled=bool(fixed))
        if fixed:
            st.caption(say(fixed))
    with files:
        st.markdown("**Download or delete**")
        st.download_button("Download checkpoint (.zip)", data=lambda: runs.zip_run(run.path),
                           file_name=f"{run.name}.zip", mime="application/zip", key="tr_download_zip",
                           on_click="ignore", disabled=not run.has_weights)
        sure = st.checkbox("I really want to delete it", key="tr_delete_sure", disabled=bool(fixed))
        st.button("Delete", key="tr_delete", on_click=forms.delete_run, args=(run,), disabled=not sure)


def runs_overview() -> None:
    """The runs table and the loss overlay; redrawn every few seconds while a run trains, to follow its step."""
    listed = training.listed_runs(registry)
    names = [r.name for r in listed]
    st.dataframe(training.runs_frame(listed, say), hide_index=True, key="tr_runs_table", column_config={
        "best val (estimate)": st.column_config.NumberColumn(format="%.4f"),
        "final val (whole split)": st.column_config.NumberColumn(format="%.4f"),
        "params": st.column_config.NumberColumn(format="localized"),
        "saved": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")})
    st.caption("“interrupted” means the server stopped while the run was training: its last checkpoint is "
               "intact and it can continue from there. “elsewhere” means another process, such as the command "
               "line, is training it right now.")
    appeared = [n for n in names if n not in ss.get("tr_compare_seen", names)]  # newest first, like the table
    ss.tr_compare_seen = names
    ss.tr_compare = [n for n in ss.get("tr_compare", names[:3]) if n in names]  # (deleted or renamed runs go)
    if appeared:  # a run that appeared since the last look joins the comparison
        ss.tr_compare = (appeared + ss.tr_compare)[:3]
    st.markdown("##### Compare runs")
    chosen = st.multiselect("Runs to overlay", names, key="tr_compare")
    frame = training.run_curves([r for r in listed if r.name in chosen])
    if len(frame):
        st.plotly_chart(training.overlay_figure(frame), key="tr_compare_chart")


def runs_tab() -> None:
    listed = training.listed_runs(registry)
    if not listed:
        st.info(f"No saved runs in `{ckpt.CHECKPOINT_ROOT}` yet.")
        return
    st.fragment(runs_overview, run_every=RUNS_REFRESH_S if training_now else None)()
    names = [r.name for r in listed]
    if appeared := [n for n in names if n not in ss.get("tr_runs_seen", names)]:
        ss.tr_manage = appeared[0]  # a run that appeared since the last look is the one to manage
    ss.tr_runs_seen = names
    st.markdown("##### Manage a run")
    if ss.get("tr_manage") not in names:
        ss.pop("tr_manage", None)
    pick = st.selectbox("Run", names, key="tr_manage", on_change=lambda: ss.pop("tr_runs_feedback", None))
    manage_run(next(r for r in listed if r.name == pick))


# ---------------------------------------------------------------- page

st.title("Train")
st.markdown("Train the tutorial's GPT on your CPU and watch it go from random characters to stories. "
            "Training runs in the background: switch pages, reload or close the tab, and it keeps going.")
forms.init_form()
# The live panel redraws every second; Streamlit would dim it while each redraw is on its way,
# so on a busy CPU the whole panel would flicker between faded and sharp.
st.html("<style>.st-key-tr_live [data-stale='true'] {opacity: 1 !important; transition: none !important;}</style>")
active = registry.active()
training_now = active is not None and active.state.kind == training.JOB_KIND
st.fragment(live_view, run_every=LIVE_REFRESH_S if training_now else None)()
new_tab, runs_tab_ = st.tabs(["New run", "Runs and checkpoints"])
with new_tab:
    new_run_tab()
with runs_tab_:
    runs_tab()
