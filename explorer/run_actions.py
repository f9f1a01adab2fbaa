"""What the Train page's buttons do: start or continue a run (it waits its turn in the queue when every training
slot is taken), cancel a waiting run, pause, stop, rename, delete, export or import one; each only for whoever may
(explorer.classroom). A refusal is kept in session state as a sentence the page shows beside the button."""
from __future__ import annotations

import json

import streamlit as st

from gptcore import archive, export, folders, runs
from gptcore import checkpoint as ckpt
from gptcore.config import GPTConfig, TrainConfig, settings
from gptcore.errors import Message, UserError, message
from gptcore.queue import QueuedRun, QueueError
from gptcore.sources import CorpusSource
from gptcore.train import check_fits_in_memory

from . import classroom, forms, training
from .i18n import label, say, t
from .jobs import Job, JobRegistry
from .ui import job_registry

ss = st.session_state


def taken_names(registry: JobRegistry) -> list[str]:
    """Names a new run cannot take though no folder has them yet: the live jobs' and the waiting runs'."""
    return [*registry.live(), *(run.name for run in training.waiting_runs(registry))]


def name_problem(name: str) -> Message | None:
    """Why a new run cannot be saved under `name`; None when it can."""
    try:
        folder = folders.checkpoint_dir(name)
    except ckpt.CheckpointError as e:
        return e.message
    if folder.name in taken_names(job_registry()) or (folder / "model.safetensors").exists():
        return message("forms.name_taken", "a run named '{name}' already exists: choose another name",
                       name=folder.name)
    return None


def run_name_problem(name: str) -> Message | None:
    """name_problem, as a sentence about the run name."""
    problem = name_problem(name)
    return None if problem is None else message("forms.name_problem", "Run name: {problem}.", problem=problem)


def start_blockers(tokenizer, model_problem: str | None, train_invalid: dict[str, Message]) -> list[str]:
    """Every reason Start is off now, in words (a run training is none: Start then puts the run in the queue)."""
    reasons = []
    who = classroom.visitor()
    try:
        if not who.teacher and len(waiting := classroom.mine(job_registry(), who)) >= classroom.per_learner():
            reasons.append(t("training.blockers.waiting", names=", ".join(run.name for _, run in waiting)))
    except QueueError as e:  # (the server's setting of runs per learner is not a number)
        reasons.append(say(e.message))
    if tokenizer is None:
        reasons.append(t("training.blockers.no_corpus"))
    if model_problem:
        reasons.append(t("training.blockers.model", problem=model_problem))
    if train_invalid:
        fields = ", ".join(f"**{label(settings(TrainConfig)[name])}**" for name in train_invalid)
        reasons.append(t("training.blockers.training", fields=fields))
    if problem := run_name_problem(ss.tr_name):
        reasons.append(say(problem))
    return reasons


def queue(registry: JobRegistry, run: QueuedRun, upload) -> None:
    """Start the run, or put it in the queue; the page then shows the live panel, or the run's place."""
    ss.tr_show_live = registry.enqueue(run, classroom.per_learner(), upload.getvalue() if upload else None) is None


# ---------------------------------------------------------------- new run

def start_new_run() -> None:
    registry, who = job_registry(), classroom.visitor()
    ss.tr_feedback = None
    forms.repair_choices()
    try:
        name = runs.new_run_dir(ss.tr_name).name
        if problem := run_name_problem(name):  # (a page drawn before another run took the name)
            raise QueueError.of(problem)
        source = forms.current_source()
        _, tokenizer = forms.corpus_for(source)
        cfg, tc = forms.model_config(forms.vocab_size(tokenizer)), forms.train_config()
        check_fits_in_memory(cfg, tc.batch_size)
        run = QueuedRun(name=name, action="new", model=cfg.to_dict(), train=tc.to_dict(), source=source.to_dict(),
                        work=training.work(cfg.n_params, tc, cfg.context, tc.steps + 1), owner=who.owner,
                        queued_by=who.owner)
        queue(registry, run, ss.get("tr_upload") if source.kind == "upload" else None)
        ss.tr_name = runs.suggest_name(ss.tr_recipe, taken=taken_names(registry))
    except UserError as e:
        ss.tr_feedback = (e.message, forms.corpus_context())


def feedback() -> Message | None:
    """The last Start's error, while the corpus it was about is still the one chosen."""
    said, context = ss.get("tr_feedback") or (None, None)
    return said if said is not None and context == forms.corpus_context() else None


# ---------------------------------------------------------------- saved runs

def fresh(run: runs.RunInfo) -> runs.RunInfo:
    """The run as it is now (a job may have started or ended since the page drew its buttons)."""
    return runs.read_run(run.path, live=job_registry().live(training.JOB_KIND))


def run_action(action):
    """A runs-tab callback whose user error is kept with the run it is about (see run_feedback)."""
    def callback(run: runs.RunInfo) -> None:
        ss.tr_runs_feedback = None
        try:
            action(run)
        except UserError as e:
            ss.tr_runs_feedback = (e.message, run.name)
    return callback


def run_feedback(run: runs.RunInfo) -> Message | None:
    """The last action's error, only while the run it was about is the one shown."""
    said, name = ss.get("tr_runs_feedback") or (None, None)
    return said if name == run.name else None


@run_action
def continue_run(run: runs.RunInfo) -> None:
    registry, who = job_registry(), classroom.visitor()
    run = fresh(run)
    run.refuse("continue", who.owner, classroom.is_waiting(run, registry))
    tc = runs.resume_config(run, ss[f"tr_until_{run.name}"])
    source, upload = run.source, None
    if source is None or not source.reloadable:
        upload, max_chars = ss.get("tr_cont_upload"), ss.tr_cont_max_chars or None
        source = CorpusSource("upload", name=upload.name, max_chars=max_chars) if upload else \
            CorpusSource("file", path=ss.tr_cont_path.strip(), max_chars=max_chars)
    forms.corpus_for(source, upload_key="tr_cont_upload")  # (readable now; read again when its turn comes)
    cfg = GPTConfig.from_dict(json.loads(ckpt.weights_metadata(run.path / "model.safetensors")["config"]))
    queue(registry, QueuedRun(name=run.name, action="continue", train=tc.to_dict(), source=source.to_dict(),
                              work=training.work(cfg.n_params, tc, cfg.context, tc.steps - run.step),
                              owner=run.owner, queued_by=who.owner), upload)


@run_action
def rename_run(run: runs.RunInfo) -> None:
    registry, run = job_registry(), fresh(run)
    run.refuse("rename", classroom.visitor().owner, classroom.is_waiting(run, registry))
    ss.tr_manage = training.rename_run(run, ss[f"tr_new_name_{run.name}"], registry).name


@run_action
def delete_run(run: runs.RunInfo) -> None:
    ss.tr_delete_sure = False
    run = fresh(run)
    run.refuse("delete", classroom.visitor().owner, classroom.is_waiting(run, job_registry()))
    runs.delete_run(run)
    ss.pop("tr_manage", None)


def hf_download(run: runs.RunInfo) -> None:
    """The run as a Hugging Face model folder in a zip, made when the button is clicked (the button spins
    meanwhile); in its place, the sentence saying which setting no Hugging Face model has."""
    if run.has_weights and (problem := export.run_problem(run.path)) is not None:
        st.caption(t("training.runs.export_refused", reason=say(problem)))
        return
    st.download_button(t("training.runs.export"), data=lambda: export.export_zip(run.path, f"{run.name}-hf"),
                       file_name=f"{run.name}-hf.zip", mime="application/zip", key="tr_export_hf",
                       help=t("training.runs.export_help"), on_click="ignore", disabled=not run.has_weights)


# ---------------------------------------------------------------- the live run and the waiting ones

def control(job: Job, action: str) -> None:
    """Pause, resume or stop a training job, if this visitor may change its run (a page drawn before the run
    changed hands may still show the button)."""
    ss.tr_live_feedback = None
    if reason := classroom.refusal(job.snapshot().data.get("owner"), classroom.visitor()):
        ss.tr_live_feedback = (reason, job.state.name)
        return
    getattr(job, action)()


# ---------------------------------------------------------------- import

def checkpoint_upload() -> None:
    """Upload a checkpoint zip (a teacher's trained model, say) to keep it as a run."""
    st.markdown(t("training.upload.heading"))
    st.caption(t("training.upload.intro"))
    zip_col, name_col = st.columns([3, 2], vertical_alignment="bottom")
    zip_col.file_uploader(t("training.upload.file"), type=["zip"], key="tr_import_zip")
    name_col.text_input(t("training.upload.name"), key="tr_import_name")
    # (the server's cap, which the uploader states in Streamlit's own English; the zip's own check allows more)
    st.caption(t("training.upload.limit", mb=st.get_option("server.maxUploadSize"),
                 unpacked=archive.IMPORT_LIMIT // 2**20))
    st.button(t("training.upload.add"), key="tr_import", on_click=import_checkpoint,
              disabled=ss.get("tr_import_zip") is None)
    kind, said = ss.get("tr_import_feedback") or (None, None)
    if kind == "error":
        st.error(say(said))
    elif kind == "success":
        st.success(t("training.upload.added", name=said))


# Why an upload was refused, by what fixes it: another name, or room on the server; anything else is the zip's.
NAME_PROBLEMS = {"checkpoint.name_taken", "checkpoint.bad_name", "checkpoint.long_name"}
SERVER_PROBLEMS = {"checkpoint.disk_full", "checkpoint.write_refused", "checkpoint.file_in_the_way",
                   "checkpoint.no_folder_here", "checkpoint.not_own_folder", "checkpoint.outside_root"}
SAYS_WHAT_TO_DO = {"checkpoint.zip_packing", "checkpoint.zip_folders", "checkpoint.zip_missing"}


def upload_refusal(problem: Message) -> Message:
    """An upload's refusal as a sentence that ends with what to do about it."""
    if problem.key == "checkpoint.zip_no_name":
        return message("upload.no_name", "This zip has no folder to take a name from: type one under **Save it as** "
                       "and click **Add the checkpoint** again.")
    if problem.key in NAME_PROBLEMS:
        return message("upload.rename", "The checkpoint was not added: {problem}. Choose another name under **Save "
                       "it as** and click **Add the checkpoint** again.", problem=problem)
    if problem.key in SERVER_PROBLEMS:
        return message("upload.server", "The checkpoint could not be written on this server: {problem}. Nothing was "
                       "kept; once there is room (ask whoever runs the server), click **Add the checkpoint** again.",
                       problem=problem)
    if problem.key in SAYS_WHAT_TO_DO:
        return message("upload.refused", "This zip cannot be added: {problem}.", problem=problem)
    return message("upload.bad_zip", "This zip cannot be added: {problem}. Nothing was kept: upload a zip made by "
                   "**Download checkpoint (.zip)** under **Manage a run**, on this page of any machine.",
                   problem=problem)


def import_checkpoint() -> None:
    """Keep an uploaded checkpoint zip as a run of whoever uploaded it (gptcore.archive.import_checkpoint_zip checks
    it first; the owner its meta.json names, if any, was someone's on the server it came from)."""
    upload = ss.get("tr_import_zip")
    ss.tr_import_feedback = None
    if upload is None:
        return
    if (wanted := ss.get("tr_import_name", "").strip()) in taken_names(job_registry()):
        ss.tr_import_feedback = ("error", message(
            "upload.name_in_use", "A run named '{name}' is training or waiting to train: choose another name under "
            "**Save it as** and click **Add the checkpoint** again.", name=wanted))
        return
    try:
        folder = archive.import_checkpoint_zip(upload.getvalue(), ss.get("tr_import_name", ""))
    except ckpt.CheckpointError as e:
        ss.tr_import_feedback = ("error", upload_refusal(e.message))
        return
    ckpt.update_meta(folder, owner=classroom.visitor().owner)  # (None: the teacher's)
    name = folders.shown_name(folder)
    ss.tr_manage, ss.tr_import_feedback = name, ("success", name)
