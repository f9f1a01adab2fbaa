"""Train: the tutorial's GPT learns to write stories in a background job that outlives this page."""
import streamlit as st

from explorer import classroom, forms, run_actions, training, ui
from explorer.forms import KEEP, KEEP_CHOICE, ss
from explorer.i18n import say, t
from explorer.ui import job_registry, show_chart, show_failure, show_source, story_break_note, with_story_breaks
from gptcore import folders, runs
from gptcore.config import GPTConfig, TrainConfig, swiglu_hidden
from gptcore.describe import describe_model, format_duration, format_step
from gptcore.device import described
from gptcore.errors import UserError
from gptcore.recipes import RECIPES
from gptcore.step import lr_at, train_step
from gptcore.train import check_fits_in_memory

registry = job_registry()
SECTION_WIDTH = 17  # rem: the New-run form's Corpus, Model and Training, each with two fields a row
LIVE_REFRESH_S = 2  # how often the live panel reruns while a run trains; each rerun costs the run CPU time
RUNS_REFRESH_S = 5  # the runs table and overlay, which read every run's meta.json
# the runs table's columns as shown: the corpus, the widest, last
RUNS_COLUMNS = ("run", "owner", "status", "progress", "best_val", "final_val", "wall_time", "params", "saved", "corpus")
# After Start or Continue, the button that was clicked is at the bottom of the page and the live panel above the tabs:
# Streamlit has no scroll call, so a script brings the panel into view (retrying while the page is still drawing).
SHOW_LIVE = """<script>
(function show(tries) {
  const live = document.querySelector(".st-key-tr_live");
  if (live) live.scrollIntoView({behavior: "smooth", block: "start"});
  else if (tries > 0) setTimeout(() => show(tries - 1), 100);
})(30);
</script>"""


# ---------------------------------------------------------------- live view

def live_view() -> None:
    """The live panel and the queue under it, redrawn together: a run that starts or ends, joins or leaves the
    queue redraws the whole page, whose note under Start, runs table and Start button change with it."""
    state, before = training.queue_state(registry), ss.get("tr_queue_state")
    ss.tr_queue_state = state
    if before is not None and before != state:
        st.rerun()
    with st.container(key="tr_live"):
        live_panel()
    with st.container(key="tr_queue"):
        classroom.queue_panel(registry)  # ("starts in about …" counts down with each redraw)


def live_panel() -> None:
    job = training.shown_job(registry, who.owner)
    if job is None:
        st.info(t("training.live.nothing_yet"))
        return
    s = job.snapshot()
    if training.run_gone(s):
        st.info(t("training.live.gone", name=s.name))
        return
    was_active, ss.tr_live_active = ss.get("tr_live_active", False), s.active
    if was_active and not s.active:
        st.rerun()  # refresh the whole page (Start, the runs table) and stop the periodic updates
    d = s.data
    if "total_steps" not in d:  # its process has not published its set-up yet, or ended before it could
        if s.active:
            st.caption(t("training.live.starting", name=s.name))
        elif s.status == "failed":
            show_failure(s)
        else:
            st.warning(say(s.message))
        return
    # the buttons as wide as their words, beside the heading where there is room for them, else under it
    row = st.container(horizontal=True, vertical_alignment="bottom")
    status = training.shown_status(s)
    row.markdown(t("training.live.heading", name=s.name, status=status), width="stretch")
    theirs = classroom.refusal(d.get("owner"), who)  # (anyone may watch; its owner and the teacher may change it)
    if s.status == "paused":
        row.button(t("training.live.resume"), key="tr_resume", on_click=run_actions.control, args=(job, "resume"),
                   disabled=bool(theirs))
    else:
        row.button(t("training.live.pause"), key="tr_pause", on_click=run_actions.control, args=(job, "pause"),
                   disabled=s.status != "running" or bool(theirs))
    row.button(t("training.live.stop"), key="tr_stop", on_click=run_actions.control, args=(job, "stop"),
               disabled=s.status not in ("running", "paused") or bool(theirs))
    if theirs and s.active:
        st.caption(say(theirs))
    if (said := ss.get("tr_live_feedback")) and said[1] == s.name:
        st.warning(say(said[0]))
    step, total = d.get("step", -1), d["total_steps"]
    st.progress(min(1.0, (step + 1) / (total + 1)), text=say(format_step(step, total)))
    evals = d.get("evals", [])
    numbers = ui.grid(7, key="tr_live_numbers")  # six in a row on a wide screen, two rows on a projector
    numbers.metric(t("training.live.train_loss"), f"{d['loss']:.3f}" if "loss" in d else "–")
    numbers.metric(t("training.live.val_loss"), f"{evals[-1]['val']:.3f}" if evals else "–",
                   help=t("training.live.val_help"))
    numbers.metric(t("training.live.tokens_per_s"), f"{d.get('tokens_per_s', 0):,.0f}")
    numbers.metric(t("training.live.elapsed"), say(format_duration(d.get("elapsed_s"))))
    numbers.metric(t("training.live.eta"), status if training.phase(s) in training.FINISHING else
                   say(format_duration(d.get("eta_s"))) if s.status in ("running", "paused") else "–")
    numbers.metric(t("training.live.params"), f"{d['params']:,}")
    if message := training.status_message(s):
        getattr(st, message[0])(say(message[1]))
    elif s.status == "failed":
        show_failure(s)
    if warning := training.diverging_warning(s):
        st.warning(say(warning))
    chart, samples = ui.wrapping_columns([3, 2], 16, key="tr_live_chart_samples")
    show_chart(training.loss_figure(d), where=chart, key="tr_live_chart")
    with chart:
        st.caption(t("training.live.summary", model=d["model_summary"], training=d["train_summary"],
                     corpus=d["corpus"], device=t("device.trains_on", device=d["device"])))
        if d.get("unknown"):
            st.warning(say(d["unknown"]))
    with samples:
        st.markdown(t("training.live.samples"))
        with st.container(height=420, key="tr_samples"):
            if not d.get("samples"):
                st.caption(t("training.live.first_sample"))
            for sample in reversed(d.get("samples", [])):
                st.caption(t("training.live.sample_step", step=sample["step"]))
                st.code(with_story_breaks(sample["text"]), language=None, wrap_lines=True)
        story_break_note()


# ---------------------------------------------------------------- new run

def model_inputs(tokenizer) -> str | None:
    """Model widgets and what they add up to; why the model cannot be trained here, or None."""
    invalid = forms.field_inputs(GPTConfig, key="tr_model_fields")
    if "d_model" not in invalid:
        d = ss.tr_m_d_model
        st.caption(t("training.params.swiglu", d_ff=swiglu_hidden(d), four_d=4 * d))
    if invalid or tokenizer is None:
        return t("training.blockers.fix_red") if invalid else None
    try:
        bpe = ss.get("tr_t_tokenizer") == "bpe"
        cfg = forms.model_config(forms.vocab_size(tokenizer))
        st.markdown(t("training.params.count_bpe" if bpe else "training.params.count", n=cfg.n_params,
                      vocab=cfg.vocab_size), help=say(describe_model(cfg)))
        st.caption("  \n".join(forms.params_note(cfg, bpe)))
        check_fits_in_memory(cfg, ss.tr_t_batch_size)
    except UserError as e:
        st.error(say(e))
        return t("training.blockers.cannot_train")
    return None


def new_run_tab() -> None:
    names = {key: t(f"training.recipes.{key}.name") for key in RECIPES}  # (looked up now, in this tab's language)
    st.selectbox(t("training.form.preset"), list(RECIPES), format_func=names.get, key="tr_recipe",
                 on_change=forms.apply_recipe, **KEEP_CHOICE)
    st.caption(t(f"training.recipes.{ss.tr_recipe}.description"))
    # side by side on a wide screen; on a projector Training, then Model too, moves under the others
    corpus_col, model_col, train_col = ui.wrapping_columns(3, SECTION_WIDTH, key="tr_sections", gap="medium")
    with corpus_col:
        st.markdown(t("training.form.corpus"))
        tokenizer = forms.corpus_inputs()
    with model_col:
        st.markdown(t("training.form.model"))
        model_problem = model_inputs(tokenizer)
    with train_col:
        st.markdown(t("training.form.training"))
        train_invalid = forms.field_inputs(TrainConfig, key="tr_train_fields")
        st.caption(t("device.trains_on", device=described(ss.tr_t_device)))
    name, start = st.columns([3, 1], vertical_alignment="bottom")
    name.text_input(t("training.form.run_name"), key="tr_name", max_chars=64, **KEEP)
    reasons = run_actions.start_blockers(tokenizer, model_problem, train_invalid)
    start.button(t("training.form.start"), key="tr_start", type="primary", on_click=run_actions.start_new_run,
                 width="stretch", disabled=bool(reasons))
    if reasons:
        st.warning(t("training.form.start_off", reasons="  \n".join(reasons)), icon=None)
    forms.keep_choices_in_url()
    say_saved_as(ss.tr_name)  # (an unusable name is said among the reasons above)
    classroom.waiting_note(registry)
    if message := run_actions.feedback():  # (gone once the corpus it was about is no longer chosen)
        st.error(say(message))
    st.caption(t("training.form.written_to", root=folders.CHECKPOINT_ROOT))


def say_saved_as(name: str) -> None:
    """The folder name a run gets, when it is not the name typed; nothing for a name that cannot be used."""
    try:
        if (folder := folders.safe_name(name)) != name:
            st.caption(t("training.form.saved_as", folder=folder))
    except folders.CheckpointError:
        pass


# ---------------------------------------------------------------- runs

def manage_run(run: runs.RunInfo) -> None:
    st.caption(t("training.runs.about", status=training.status_word(run.status, t),
                 where=format_step(run.step, run.total_steps), wall=format_duration(run.wall_time),
                 model=runs.model_summary(run), corpus=run.corpus))
    if run.damaged:
        st.warning(say(training.damaged_warning(run)))
    if note := run.note:
        st.warning(say(note))
    if (warning := run.diverging) and not run.note:
        st.warning(say(warning))
    if message := run_actions.run_feedback(run):
        st.error(say(message))
    cont, rename, files = ui.wrapping_columns(3, 13, key="tr_manage_columns", gap="medium")
    with cont:
        st.markdown(t("training.runs.continue_heading"))
        default_until = run.total_steps if run.step < run.total_steps else run.step + max(100, run.total_steps // 2)
        st.number_input(t("training.runs.until"), run.step + 1, 1_000_000, value=default_until, step=100,
                        key=f"tr_until_{run.name}")
        source = run.source
        if blocked := classroom.blocker(run, "continue", who, registry):
            st.caption(say(blocked))
        elif source is None or not source.reloadable:
            st.caption(t("training.runs.give_corpus"))
            st.text_input(t("training.runs.corpus_path"), key="tr_cont_path")
            st.caption(say(forms.server_folders_note()))
            st.file_uploader(t("training.runs.corpus_upload"), type=["txt", "md", "text"], key="tr_cont_upload")
            st.number_input(t("training.corpus.max_chars"), 0, 100_000_000, step=100_000,
                            value=(source.max_chars if source else None) or 1_000_000, key="tr_cont_max_chars")
        st.button(t("training.runs.continue"), key="tr_continue", on_click=run_actions.continue_run, args=(run,),
                  disabled=bool(blocked))
    fixed = classroom.blocker(run, "rename", who, registry)
    with rename:
        st.markdown(t("training.runs.rename_heading"))
        st.text_input(t("training.runs.new_name"), key=f"tr_new_name_{run.name}", value=run.name,
                      disabled=bool(fixed))
        say_saved_as(ss.get(f"tr_new_name_{run.name}", run.name))
        st.button(t("training.runs.rename"), key="tr_rename", on_click=run_actions.rename_run, args=(run,),
                  disabled=bool(fixed))
        if fixed:
            st.caption(say(fixed))
    with files:
        st.markdown(t("training.runs.files_heading"))
        st.download_button(t("training.runs.download"), data=lambda: runs.zip_run(run.path),
                           file_name=f"{run.name}.zip", mime="application/zip", key="tr_download_zip",
                           on_click="ignore", disabled=not run.has_weights)
        run_actions.hf_download(run)
        sure = st.checkbox(t("training.runs.sure"), key="tr_delete_sure", disabled=bool(fixed))
        st.button(t("training.runs.delete"), key="tr_delete", on_click=run_actions.delete_run, args=(run,),
                  disabled=not sure)


def runs_overview() -> None:
    """The runs table and the loss overlay; redrawn every few seconds while a run trains, to follow its step."""
    listed = training.listed_runs(registry)
    names = [r.name for r in listed]
    column = lambda key: training.column(key, t)  # noqa: E731
    # The two losses are headed short, their full names as help, so that the corpus, a sentence, fits beside them.
    st.dataframe(training.runs_frame(listed, say, t, lambda owner: classroom.whose(owner, who)), hide_index=True,
                 key="tr_runs_table",
                 column_order=[column(key) for key in RUNS_COLUMNS], column_config={
        column("best_val"): st.column_config.NumberColumn(t("training.runs.short.best_val"), format="%.4f",
                                                          help=column("best_val")),
        column("final_val"): st.column_config.NumberColumn(t("training.runs.short.final_val"), format="%.4f",
                                                           help=column("final_val")),
        column("params"): st.column_config.NumberColumn(format="localized"),
        column("run"): st.column_config.TextColumn(pinned=True),  # (what the other columns say, when they scroll)
        column("corpus"): st.column_config.TextColumn(width="large"),
        column("saved"): st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")})
    st.caption(t("training.runs.statuses"))
    appeared = [n for n in names if n not in ss.get("tr_compare_seen", names)]  # newest first, like the table
    ss.tr_compare_seen = names
    ss.tr_compare = [n for n in ss.get("tr_compare", names[:3]) if n in names]  # (deleted or renamed runs go)
    if appeared:  # a run that appeared since the last look joins the comparison
        ss.tr_compare = (appeared + ss.tr_compare)[:3]
    st.markdown(t("training.runs.compare"))
    chosen = st.multiselect(t("training.runs.overlay"), names, key="tr_compare")
    frame = training.run_curves([r for r in listed if r.name in chosen])
    if len(frame):
        # on a linear axis a long run squeezes a short one against its start: log steps where lengths differ tenfold
        # (set again whenever that changes: a short run joining the comparison; else the reader's choice stands)
        lengths = frame.groupby("run")["step"].max()
        if ss.get("tr_compare_log_for") != (apart := bool(lengths.max() >= 10 * max(1, lengths.min()))):
            ss.tr_compare_log = ss.tr_compare_log_for = apart
        log = st.toggle(t("training.runs.log_steps"), key="tr_compare_log", help=t("training.runs.log_steps_help"))
        figure = training.overlay_figure(frame)
        show_chart(figure.update_xaxes(type="log") if log else figure, key="tr_compare_chart")


def runs_tab() -> None:
    listed = training.listed_runs(registry)
    if not listed:
        st.info(t("training.runs.none_yet", root=folders.CHECKPOINT_ROOT))
        run_actions.checkpoint_upload()
        return
    st.fragment(runs_overview, run_every=RUNS_REFRESH_S if training_now else None)()
    names = [r.name for r in listed if r.status != "queued" or r.path.is_dir()]  # (a new run waiting has no files)
    if appeared := [n for n in names if n not in ss.get("tr_runs_seen", names)]:
        ss.tr_manage = appeared[0]  # a run that appeared since the last look is the one to manage
    ss.tr_runs_seen = names
    if ss.get("tr_manage") not in names:
        ss.pop("tr_manage", None)
    if names:
        st.markdown(t("training.runs.manage"))
        pick = st.selectbox(t("training.runs.run"), names, key="tr_manage",
                            on_change=lambda: ss.pop("tr_runs_feedback", None))
        manage_run(next(r for r in listed if r.name == pick))
    run_actions.checkpoint_upload()


# ---------------------------------------------------------------- page

st.title(t("training.title"))
st.markdown(t("training.intro"))
show_source(train_step, lr_at, label=t("training.step_source"))
forms.init_form()
who = classroom.visitor()
# The live panel and the queue redraw every few seconds; Streamlit would dim them while each redraw is on its way,
# so on a busy CPU they would flicker between faded and sharp. The live numbers are set a little smaller
# than Streamlit's, so that a duration in words ("7 分 38 秒") fits its column; its scroll margin keeps it clear of
# Streamlit's header when SHOW_LIVE brings it into view.
st.html("<style>:is(.st-key-tr_live, .st-key-tr_queue) [data-stale='true'] {opacity: 1 !important; "
        "transition: none !important;}"
        ".st-key-tr_live [data-testid='stMetricValue'] {font-size: 1.75rem;}"
        ".st-key-tr_live {scroll-margin-top: 4rem;}</style>")
active = registry.active()
training_now = active is not None and active.state.kind == training.JOB_KIND
# (ticking also while runs wait and none trains: between one run's end and the next one's start)
following = training_now or bool(training.waiting_runs(registry))
st.fragment(live_view, run_every=LIVE_REFRESH_S if following else None)()
classroom.teacher_box()
new_tab, runs_tab_ = st.tabs([t("training.tab_new"), t("training.tab_runs")])
with new_tab:
    new_run_tab()
with runs_tab_:
    runs_tab()
if ss.pop("tr_show_live", False):
    st.html(SHOW_LIVE, unsafe_allow_javascript=True)
classroom.keep_in_browser()
