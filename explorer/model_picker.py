"""Opening a real model from the app: SmolLM2-135M fetched and converted in the background, or a folder, a .gguf
file or a Hugging Face name imported, each into an ordinary checkpoint folder that the picker then lists.

The conversion is gptcore.hub's; here it runs as a job of the server's registry (explorer/jobs.py: one CPU-heavy
job at a time), and a fragment polls its progress: the stage, its bytes or parts, and the time left.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import streamlit as st

from gptcore import folders, hub
from gptcore.errors import UserError
from gptcore.hub import SMOLLM2  # the source hub fetches by itself, and the name of its checkpoint

from .i18n import say, t
from .ui import job_registry, show_failure

JOB_KIND = "import"
STAGES = ("download", "verify", "extract", "read", "convert", "write")  # gptcore.hub's progress stages, in order
PENDING = "model-picker-pending"  # a checkpoint just imported, for the picker to choose on its next run
WATCHED = "model-picker-watched"  # the import job this session started or saw running
SEEN = "model-picker-seen"  # the import job whose end this session has already answered


def import_into(source: str, out: Path, progress) -> None:
    """Convert `source` (SMOLLM2, fetched first when it is not cached; a folder, a .gguf file or a Hugging Face
    name) into the checkpoint folder out, written whole or not at all."""
    hub.import_model(source, out, progress=progress)


def name_for(source: str) -> str:
    """The checkpoint name an import gets: smollm2, or the file's, folder's or model's own name made safe."""
    if source == SMOLLM2:
        return SMOLLM2
    stem = Path(source.rstrip("/")).name
    stem = re.sub(r"\.gguf$", "", stem, flags=re.IGNORECASE)
    return folders.safe_name(stem[:folders.MAX_NAME] or "imported")


def free_name(name: str) -> str:
    """name, or name-2, name-3…, the first that no checkpoint has."""
    taken = {p.name for p in folders.root_folder().iterdir()} if folders.root_folder().is_dir() else set()
    candidates = (name, *(f"{name[:folders.MAX_NAME - 4]}-{n}" for n in range(2, 1000)))
    return next(c for c in candidates if c not in taken)


def _job(source: str, out: Path):
    """The job function: the import, its progress mirrored into the job's state (stage, done, total, rate)."""
    def fn(job) -> None:
        started: dict[str, float] = {}

        def progress(done: int, total: int, stage: str) -> None:
            now = time.monotonic()
            begun = started.setdefault(stage, now)
            eta = (now - begun) * (total - done) / done if 0 < done <= total else None
            job.update(progress=done / total if total else 0.0,
                       data={"stage": stage, "done": done, "total": total, "eta_s": eta})

        job.update(data={"out_dir": str(out), "name": out.name, "source": source})
        import_into(source, out, progress)
    return fn


def start_import(source: str) -> None:
    """Start importing source in the background; a sentence when it cannot start."""
    source = source.strip()
    try:
        out = folders.checkpoint_dir(free_name(name_for(source)))
        job = job_registry().start(f"{JOB_KIND} {out.name}", JOB_KIND, _job(source, out))
    except UserError as e:  # another job runs, or a name that cannot be a checkpoint's
        st.session_state[f"{PENDING}-error"] = say(e)
        return
    st.session_state[WATCHED] = (job.state.name, job.state.started)


def amount(done: int, total: int, stage: str) -> str:
    """'12.3 of 92.9 MB' for bytes, '120 of 272' for parts."""
    if stage in ("download", "verify", "extract") or total > 100_000:
        return t("models.progress.bytes", done=done / 1e6, total=total / 1e6)
    return t("models.progress.parts", done=done, total=total)


def progress_line(data: dict) -> str:
    stage = data.get("stage")
    if stage is None:
        return t("models.progress.starting")
    step = STAGES.index(stage) + 1 if stage in STAGES else 0
    line = t("models.progress.stage", step=step, steps=len(STAGES), stage=t(f"models.stages.{stage}"),
             amount=amount(data["done"], data["total"], stage)) if step else stage
    if (data.get("eta_s") or 0) >= 1:
        line += t("models.progress.eta", seconds=data["eta_s"])
    return line


def import_status() -> None:
    """The latest import's progress while it runs; its end, to the session that started or watched it (the page
    then reruns once, so that the picker lists the new checkpoint and chooses it)."""
    job = job_registry().latest(JOB_KIND)
    if job is None:
        return
    snap = job.snapshot()
    if snap.active:
        st.progress(snap.progress, text=progress_line(snap.data))
        return
    ended = (snap.name, snap.started)
    if st.session_state.get(WATCHED) != ended:
        return
    if snap.status == "failed":
        show_failure(snap)
    elif snap.status == "finished":
        st.success(t("models.imported", name=snap.data.get("name", "")))
        if st.session_state.get(SEEN) != ended:
            st.session_state[SEEN], st.session_state[PENDING] = ended, snap.data.get("name")
            st.rerun(scope="app")


def real_model_panel(prefix: str) -> None:
    """An expander to open a real model: SmolLM2 at one click (unless it is here), or any supported source."""
    here = (folders.root_folder() / SMOLLM2 / "model.safetensors").is_file()
    running = job_registry().latest(JOB_KIND)
    active = running is not None and running.state.active
    with st.expander(t("models.heading"), expanded=active, icon=":material/download:"):
        if here:
            st.markdown(t("models.smollm2_here", name=SMOLLM2))
        else:
            st.markdown(t("models.smollm2_intro"))
            st.button(t("models.get_smollm2"), key=f"{prefix}-get-smollm2", disabled=active, type="primary",
                      on_click=start_import, args=(SMOLLM2,), icon=":material/download:")
        if error := st.session_state.pop(f"{PENDING}-error", None):
            st.error(error)
        if active:
            st.session_state[WATCHED] = (running.state.name, running.state.started)
        st.fragment(import_status, run_every=1 if active else None)()  # (right under the button that starts it)
        source = st.text_input(t("models.source"), key=f"{prefix}-import-source", placeholder=t("models.placeholder"),
                               help=t("models.source_help"))
        st.button(t("models.import"), key=f"{prefix}-import", disabled=active or not source.strip(),
                  on_click=start_import, args=(source,))
