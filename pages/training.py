"""Train: the tutorial's GPT learns to write stories in a background job that outlives this page."""
from dataclasses import replace
from pathlib import Path

import streamlit as st

from explorer import training
from explorer.jobs import JobRefused
from explorer.ui import job_registry, show_failure
from gptcore import checkpoint as ckpt
from gptcore import runs
from gptcore.config import CHOICES, GPTConfig, swiglu_hidden
from gptcore.data import DOWNLOAD_CACHE, CorpusError
from gptcore.describe import count_params, describe_model, format_duration
from gptcore.errors import UserError
from gptcore.recipes import RECIPES
from gptcore.sources import CorpusSource, tinystories_cached
from gptcore.train import TrainConfig, check_fits_in_memory

ss = st.session_state
registry = job_registry()
SOURCE_KINDS = {"builtin": "Built-in stories", "upload": "Upload a text file", "file": "A file on the server",
                "tinystories": "TinyStories validation split (download)"}

# (key, label, min, max, step, help); ints and floats must not be mixed within one widget
MODEL_NUMBERS = [
    ("d_model", "Width d_model", 1, 4096, 8, "Size of every token vector in the residual stream."),
    ("n_layer", "Layers", 1, 64, 1, None),
    ("n_head", "Heads", 1, 64, 1, "d_model is split into this many heads of d_model / n_head."),
    ("d_ff", "FFN width d_ff", 1, 16384, 8, None),
    ("context", "Context (characters)", 2, 8192, 8, "How many previous characters the model can see."),
    ("rope_theta", "RoPE θ", 2.0, 1e9, 1000.0, "Base of the rotation frequencies θ_i = θ^(−2i/d_head)."),
]
MODEL_CHOICES = {
    "norm": ("Norm", {"rms": "RMSNorm", "layer": "LayerNorm"}),
    "norm_placement": ("Norm placement", {"pre": "pre-norm", "post": "post-norm"}),
    "position": ("Positions", {"rope": "RoPE", "learned": "learned (GPT-2)", "none": "none"}),
    "ffn": ("Feed-forward", {"swiglu": "SwiGLU", "relu": "ReLU", "gelu": "GELU"}),
}
CHOICE_HELP = {"norm_placement": "pre-norm: x + f(norm(x)), the residual stream itself is never normed; "
                                  "post-norm: norm(x + f(x)), as in the original Transformer."}
TRAIN_NUMBERS = [
    ("steps", "Last step", 1, 1_000_000, 100,
     "Steps 0…N run, so 1500 means 1,501 updates, like the tutorial's range(1501)."),
    ("batch_size", "Batch size", 1, 4096, 1, None),
    ("lr", "Learning rate", 1e-6, 10.0, 1e-3, "AdamW's peak learning rate (with Muon: for embeddings, head "
     "and norm gains)."),
    ("muon_lr", "Muon lr", 1e-6, 10.0, 0.005,
     "Peak learning rate of the blocks' weight matrices under Muon; the schedule scales it like AdamW's."),
    ("warmup", "Warmup steps", 0, 1_000_000, 10, "Linear ramp at the start of the cosine schedule."),
    ("min_lr_ratio", "Final lr ratio", 0.0, 1.0, 0.05, "Cosine decays to this fraction of the peak."),
    ("weight_decay", "Weight decay", 0.0, 10.0, 0.01,
     "Decoupled decay, p ← p·(1 − lr·wd), torch's AdamW default 0.01. Under Muon it also shrinks the blocks' "
     "matrices, at Muon's larger lr."),
    ("grad_clip", "Gradient clip", 0.0, 1e6, 0.5, "Clip the global gradient norm to this; 0 = off."),
    ("eval_every", "Evaluate every", 1, 1_000_000, 50,
     "Each evaluation draws validation batches from the training random stream, so changing "
     "this changes the run itself."),
    ("sample_every", "Sample every", 0, 1_000_000, 50, "0 = only at the end. Samples never change the run."),
    ("checkpoint_every", "Checkpoint every", 0, 1_000_000, 50,
     "0 = only at stop/end. Checkpoints never change the run."),
    ("snapshot_every", "Snapshot every", 0, 1_000_000, 50,
     "Keep intermediate weights for the inspector's training slider; 0 = none."),
    ("seed", "Seed", 0, 2**31 - 1, 1, None),
    ("threads", "CPU threads", 0, 256, 1,
     "0 = every core. Each thread computes the gradients of its own slice of each batch."),
]
LIVE_REFRESH_S = 2  # how often the live panel reruns while a run trains; each rerun costs the run CPU time
TUTORIAL = GPTConfig()
DEFAULT_RECIPE = "tutorial" if "tutorial" in RECIPES else next(iter(RECIPES))


# ---------------------------------------------------------------- form state

def apply_recipe() -> None:
    recipe = RECIPES[ss.tr_recipe]
    tc = runs.watch_defaults(recipe.train)
    for key, *_ in MODEL_NUMBERS:
        ss[f"tr_m_{key}"] = getattr(recipe.model, key)
    for key in MODEL_CHOICES:
        ss[f"tr_m_{key}"] = getattr(recipe.model, key)
    ss.tr_m_scale_attention = recipe.model.scale_attention
    for key, *_ in TRAIN_NUMBERS:
        ss[f"tr_t_{key}"] = getattr(tc, key)
    ss.tr_t_schedule = tc.schedule
    ss.tr_t_optimizer = tc.optimizer
    ss.tr_name = runs.suggest_name(ss.tr_recipe, taken=registry.live())


def init_form() -> None:
    if "tr_recipe" not in ss:
        ss.tr_recipe = DEFAULT_RECIPE
        apply_recipe()
    for key, value in {"tr_source": "builtin", "tr_builtin_chars": 1_000_000, "tr_builtin_seed": 0,
                       "tr_path": "", "tr_max_chars": 1_000_000}.items():
        ss.setdefault(key, value)


def model_config(vocab_size: int) -> GPTConfig:
    values = {key: ss[f"tr_m_{key}"] for key in [k for k, *_ in MODEL_NUMBERS] + list(MODEL_CHOICES)}
    return GPTConfig.from_dict({**RECIPES[ss.tr_recipe].model.to_dict(), **values,
                                "scale_attention": ss.tr_m_scale_attention, "vocab_size": vocab_size})


def train_config() -> TrainConfig:
    values = {key: ss[f"tr_t_{key}"] for key, *_ in TRAIN_NUMBERS}
    return TrainConfig.from_dict({**RECIPES[ss.tr_recipe].train.to_dict(), **values, "schedule": ss.tr_t_schedule,
                                  "optimizer": ss.tr_t_optimizer})


def current_source() -> CorpusSource:
    kind, max_chars = ss.tr_source, ss.tr_max_chars or None
    upload = ss.get("tr_upload")
    return CorpusSource(kind, chars=ss.tr_builtin_chars, seed=ss.tr_builtin_seed, path=ss.tr_path.strip(),
                        name=upload.name if upload else "", max_chars=None if kind == "builtin" else max_chars)


def file_stamp(source: CorpusSource):
    """Changes when the file changes, so the corpus cache never serves stale text."""
    path = Path(source.path)
    return (path.stat().st_mtime, path.stat().st_size) if source.kind == "file" and path.is_file() else None


@st.cache_data(max_entries=4, show_spinner="Preparing the corpus…")
def cached_corpus(source: CorpusSource, upload: bytes | None, stamp):
    corpus = source.load(upload)
    return corpus, len(set(corpus.text))


def corpus_for(source: CorpusSource, upload_key: str = "tr_upload"):
    if source.kind == "tinystories" and not tinystories_cached():
        raise CorpusError("download the TinyStories validation split first (button above)")
    upload = ss.get(upload_key)
    return cached_corpus(source, upload.getvalue() if upload and source.kind == "upload" else None,
                         file_stamp(source))


# ---------------------------------------------------------------- actions (widget callbacks)

def corpus_context() -> str:
    """Identifies the corpus choice, so an error about one corpus is not shown under another."""
    upload = ss.get("tr_upload")
    return repr((current_source(), upload.file_id if upload else None))


def start_new_run() -> None:
    ss.tr_feedback = None
    try:
        training.refuse_if_busy(registry)
        out_dir = runs.new_run_dir(ss.tr_name)
        source = current_source()
        corpus, vocab = corpus_for(source)
        trainer = runs.RunTrainer(model_config(vocab), train_config(), corpus, source, out_dir)
        training.start_run(registry, trainer)
        ss.tr_name = runs.suggest_name(ss.tr_recipe, taken=registry.live())
    except UserError as e:
        ss.tr_feedback = (str(e), corpus_context(), isinstance(e, JobRefused))


def fresh(run: runs.RunInfo) -> runs.RunInfo:
    """The run as it is now (a job may have started or ended since the page drew its buttons)."""
    return runs.read_run(run.path, live=registry.live(training.JOB_KIND))


def continue_run(run: runs.RunInfo) -> None:
    ss.tr_runs_feedback = None
    try:
        training.refuse_if_busy(registry)
        run = fresh(run)
        tc = runs.resume_config(run, ss[f"tr_until_{run.name}"])
        source = run.source
        if source is None or not source.reloadable:
            upload, max_chars = ss.get("tr_cont_upload"), ss.tr_cont_max_chars or None
            source = CorpusSource("upload", name=upload.name, max_chars=max_chars) if upload else \
                CorpusSource("file", path=ss.tr_cont_path.strip(), max_chars=max_chars)
        corpus, _ = corpus_for(source, upload_key="tr_cont_upload")
        training.start_run(registry, runs.RunTrainer(None, tc, corpus, source, run.path, resume_from=run.path))
    except UserError as e:
        ss.tr_runs_feedback = str(e)


def rename_run(run: runs.RunInfo) -> None:
    ss.tr_runs_feedback = None
    try:
        ss.tr_manage = training.rename_run(fresh(run), ss[f"tr_new_name_{run.name}"], registry).name
    except UserError as e:
        ss.tr_runs_feedback = str(e)


def delete_run(run: runs.RunInfo) -> None:
    ss.tr_runs_feedback = None
    try:
        runs.delete_run(fresh(run))
        ss.pop("tr_manage", None)
    except UserError as e:
        ss.tr_runs_feedback = str(e)
    ss.tr_delete_sure = False


# ---------------------------------------------------------------- live view

def status_message(s) -> None:
    d = s.data
    step = d.get("step", -1)
    if s.status == "paused":
        st.info(f"Paused at step {step:,}. Resume carries on exactly where it stopped.")
    elif s.status == "stopping":
        st.info("Stopping: scoring the whole validation split and saving a checkpoint…")
    elif s.status == "finished":
        st.success(f"Finished {step + 1:,} steps in {format_duration(d.get('elapsed_s'))}. "
                   f"Loss on the whole validation split: **{d.get('final_val', float('nan')):.4f}** "
                   f"(bigram {d['bigram']:.3f}, uniform guess {d['uniform']:.3f}).")
    elif s.status == "stopped":
        st.warning(f"Stopped at step {step:,}; the checkpoint is saved (whole-split val "
                   f"{d.get('final_val', float('nan')):.4f}). Continue it from the runs table below.")
    elif s.status == "failed":
        show_failure(s)


def live_view() -> None:
    with st.container(key="tr_live"):
        live_panel()


def live_panel() -> None:
    job = registry.latest(training.JOB_KIND)
    if job is None:
        st.info("Nothing has trained in this server session yet. Pick a preset under **New run** and press Start.")
        return
    s = job.snapshot()
    # a finished or stopped run has saved its folder, so a missing one was renamed or deleted
    if s.status in ("finished", "stopped") and not Path(s.data.get("out_dir", "")).exists():
        st.info(f"The last run of this session, **{s.name}**, was renamed or deleted since it ended: "
                "see **Runs and checkpoints**.")
        return
    was_active, ss.tr_live_active = ss.get("tr_live_active", False), s.active
    if was_active and not s.active:
        st.rerun()  # refresh the runs table and stop the once-a-second updates
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
    st.progress(min(1.0, (step + 1) / (total + 1)), text=f"step {max(step, 0):,} of {total:,}")
    evals = d.get("evals", [])
    m = st.columns(6)
    m[0].metric("Train loss", f"{d['loss']:.3f}" if "loss" in d else "–")
    m[1].metric("Val loss (estimate)", f"{evals[-1]['val']:.3f}" if evals else "–",
                help="Mean of a few random validation batches, as in the tutorial.")
    m[2].metric("Tokens / s", f"{d.get('tokens_per_s', 0):,.0f}")
    m[3].metric("Elapsed", format_duration(d.get("elapsed_s")))
    m[4].metric("ETA", format_duration(d.get("eta_s")) if s.active else "–")
    m[5].metric("Parameters", f"{d['params']:,}")
    status_message(s)
    chart, samples = st.columns([3, 2])
    chart.plotly_chart(training.loss_figure(d), key="tr_live_chart")
    with chart:
        st.caption(f"**Model** {d['model_summary']}  \n**Training** {d['train_summary']}  \n"
                   f"**Corpus** {d['corpus']}")
        if d.get("unknown"):
            st.warning(d["unknown"])
    with samples:
        st.markdown("**Samples** (newest first)")
        with st.container(height=420, key="tr_samples"):
            if not d.get("samples"):
                st.caption("The first sample appears after the first sampling step.")
            for sample in reversed(d.get("samples", [])):
                st.caption(f"step {sample['step']:,}")
                st.code(sample["text"], language=None, wrap_lines=True)


# ---------------------------------------------------------------- new run

def corpus_inputs() -> int | None:
    """Corpus widgets; returns the corpus's vocabulary size, or None when it cannot be used."""
    st.radio("Source", list(SOURCE_KINDS), format_func=SOURCE_KINDS.get, key="tr_source",
             persist_state="session")
    kind = ss.tr_source
    if kind == "builtin":
        a, b = st.columns([3, 2])
        a.number_input("Characters", 1_000, 20_000_000, step=100_000, key="tr_builtin_chars",
                       persist_state="session")
        b.number_input("Story seed", 0, 2**31 - 1, key="tr_builtin_seed", persist_state="session")
    elif kind == "upload":
        st.file_uploader("UTF-8 text file", type=["txt", "md", "text"], key="tr_upload")
    elif kind == "file":
        st.text_input("Path on the server", key="tr_path", placeholder="/path/to/stories.txt",
                      persist_state="session")
    else:
        download_tinystories()
    if kind != "builtin":
        st.number_input("Use the first N characters (0 = all)", 0, 100_000_000, step=100_000, key="tr_max_chars",
                        help="The tutorial trains on the first 1,000,000 characters.", persist_state="session")
    if kind == "upload" and ss.get("tr_upload") is None:
        st.info("Choose a UTF-8 text file to train on.")  # nothing went wrong yet
        return None
    try:
        corpus, vocab = corpus_for(current_source())
    except CorpusError as e:
        st.error(str(e))
        return None
    st.caption(f"{len(corpus.text):,} characters · {vocab} distinct · 90% train / 10% validation")
    return vocab


def download_tinystories() -> None:
    if tinystories_cached():
        st.caption("TinyStories' validation split is downloaded.")
        return
    st.caption(f"Fetched once from Hugging Face (needs internet access) into `{DOWNLOAD_CACHE}`.")
    if st.button("Download", key="tr_download"):
        bar = st.progress(0.0, text="connecting…")

        def progress(done: int, total: int | None):
            bar.progress(min(1.0, done / total) if total else 0.0, text=f"{done / 1e6:.1f} MB")

        try:
            CorpusSource("tinystories").load(progress=progress)
            bar.progress(1.0, text="done")
        except CorpusError as e:
            st.error(str(e))


def model_inputs(vocab: int | None) -> bool:
    """Model widgets; True when the model can be built and trained here."""
    a, b = st.columns(2)
    for i, (key, label, lo, hi, step, help_) in enumerate(MODEL_NUMBERS):
        (a, b)[i % 2].number_input(label, lo, hi, step=step, key=f"tr_m_{key}", help=help_,
                                   persist_state="session", format="%g" if isinstance(lo, float) else None)
    for i, (key, (label, names)) in enumerate(MODEL_CHOICES.items()):
        (a, b)[i % 2].selectbox(label, CHOICES[key], format_func=lambda v, names=names: names.get(v, v),
                                key=f"tr_m_{key}", persist_state="session", help=CHOICE_HELP.get(key))
    st.toggle("Divide q·k by √d_head", key="tr_m_scale_attention", persist_state="session")
    d = ss.tr_m_d_model
    st.caption(f"SwiGLU keeps 8·d² parameters with d_ff = 8/3·d → {swiglu_hidden(d)}; "
               f"a ReLU/GELU MLP uses 4·d = {4 * d}.")
    if vocab is None:
        return False
    try:
        cfg = model_config(vocab)
        st.markdown(f"**{count_params(cfg):,} parameters** with this corpus's {vocab} characters",
                    help=describe_model(cfg))
        if vocab != TUTORIAL.vocab_size and replace(cfg, vocab_size=TUTORIAL.vocab_size) == TUTORIAL:
            st.caption(f"The tutorial's {count_params(TUTORIAL):,} are at TinyStories' {TUTORIAL.vocab_size} "
                       f"characters: the embedding and the output head hold d_model = {cfg.d_model} numbers per "
                       f"character each, {2 * cfg.d_model} per character in all.")
        check_fits_in_memory(cfg, ss.tr_t_batch_size)
        return True
    except UserError as e:
        st.error(str(e))
        return False


def train_inputs() -> None:
    a, b = st.columns(2)
    schedule = a.selectbox("Learning-rate schedule", ["constant", "cosine"], key="tr_t_schedule",
                           persist_state="session")
    optimizer = b.selectbox("Optimizer", ["adamw", "muon"], key="tr_t_optimizer", persist_state="session",
                            format_func={"adamw": "AdamW", "muon": "Muon"}.get,
                            help="Muon orthogonalizes the momentum of each weight matrix in the blocks "
                                 "(every direction moves at the same rate); embeddings, head and norm gains "
                                 "stay on AdamW at the learning rate below. The fast and quick presets use it.")
    hidden = {"constant": {"warmup", "min_lr_ratio"}, "cosine": set()}[schedule] | \
        ({"muon_lr"} if optimizer == "adamw" else set())
    for i, (key, label, lo, hi, step, help_) in enumerate(TRAIN_NUMBERS):
        if key in hidden:  # its slot stays empty, so no other field changes column
            continue
        (a, b)[i % 2].number_input(label, lo, hi, step=step, key=f"tr_t_{key}", help=help_,
                                   persist_state="session", format="%g" if isinstance(lo, float) else None)


def new_run_tab() -> None:
    names = list(RECIPES)
    st.selectbox("Preset", names, format_func=lambda k: RECIPES[k].name, key="tr_recipe", on_change=apply_recipe,
                 persist_state="session")
    st.caption(RECIPES[ss.tr_recipe].description)
    corpus_col, model_col, train_col = st.columns(3, gap="large")
    with corpus_col:
        st.markdown("##### Corpus")
        vocab = corpus_inputs()
    with model_col:
        st.markdown("##### Model")
        buildable = model_inputs(vocab)
    with train_col:
        st.markdown("##### Training")
        train_inputs()
    name, start = st.columns([3, 1], vertical_alignment="bottom")
    name.text_input("Run name (its checkpoint folder)", key="tr_name", max_chars=64, persist_state="session")
    start.button("Start training", key="tr_start", type="primary", on_click=start_new_run, width="stretch",
                 disabled=not buildable)
    try:
        if (folder := ckpt.safe_name(ss.tr_name)) != ss.tr_name:
            st.caption(f"Saved as **{folder}** (letters, digits, '.', '_' and '-' only).")
    except ckpt.CheckpointError as e:
        st.caption(str(e))
    message, context, refused = ss.get("tr_feedback") or (None, None, False)
    # gone once it no longer applies: an error about another corpus, a refusal by a job that has ended
    if message and context == corpus_context() and not (refused and registry.active() is None):
        st.error(message)
    st.caption(f"Checkpoints are written to `{ckpt.CHECKPOINT_ROOT}/<run name>/`.")


# ---------------------------------------------------------------- runs

def manage_run(run: runs.RunInfo) -> None:
    st.caption(f"**Status** {run.status} · **step** {run.step:,} of {run.total_steps:,} · "
               f"**wall time** {format_duration(run.wall_time)}  \n**Model** {runs.model_summary(run)}  \n"
               f"**Corpus** {run.corpus}")
    if run.meta.get("message"):
        st.warning(run.meta["message"])
    cont, rename, files = st.columns(3, gap="large")
    with cont:
        st.markdown("**Continue training**")
        default_until = run.total_steps if run.step < run.total_steps else run.step + max(100, run.total_steps // 2)
        st.number_input("Train until step", run.step + 1, 1_000_000, value=default_until, step=100,
                        key=f"tr_until_{run.name}")
        source = run.source
        if blocked := run.blocker("continue"):
            st.caption(blocked)
        elif source is None or not source.reloadable:
            st.caption("This run's corpus cannot be reloaded automatically: give it again.")
            st.text_input("Corpus path on the server", key="tr_cont_path")
            st.file_uploader("…or upload it", type=["txt", "md", "text"], key="tr_cont_upload")
            st.number_input("Use the first N characters (0 = all)", 0, 100_000_000, step=100_000,
                            value=(source.max_chars if source else None) or 1_000_000, key="tr_cont_max_chars")
        st.button("Continue", key="tr_continue", on_click=continue_run, args=(run,), disabled=bool(blocked))
    fixed = run.blocker("rename")
    with rename:
        st.markdown("**Rename**")
        st.text_input("New name", key=f"tr_new_name_{run.name}", value=run.name, disabled=bool(fixed))
        st.button("Rename", key="tr_rename", on_click=rename_run, args=(run,), disabled=bool(fixed))
        if fixed:
            st.caption(fixed)
    with files:
        st.markdown("**Download or delete**")
        st.download_button("Download checkpoint (.zip)", data=lambda: runs.zip_run(run.path),
                           file_name=f"{run.name}.zip", mime="application/zip", key="tr_download_zip",
                           on_click="ignore", disabled=not run.has_weights)
        sure = st.checkbox("I really want to delete it", key="tr_delete_sure", disabled=bool(fixed))
        st.button("Delete", key="tr_delete", on_click=delete_run, args=(run,), disabled=not sure)


def runs_tab() -> None:
    listed = runs.list_runs(live=registry.live(training.JOB_KIND))
    if ss.get("tr_runs_feedback"):
        st.error(ss.tr_runs_feedback)
    if not listed:
        st.info(f"No saved runs in `{ckpt.CHECKPOINT_ROOT}` yet.")
        return
    st.dataframe(training.runs_frame(listed), hide_index=True, key="tr_runs_table", column_config={
        "best val (estimate)": st.column_config.NumberColumn(format="%.4f"),
        "final val (whole split)": st.column_config.NumberColumn(format="%.4f"),
        "params": st.column_config.NumberColumn(format="localized"),
        "saved": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")})
    st.caption("“interrupted” means the server stopped while the run was training: its last checkpoint is "
               "intact and it can continue from there. “elsewhere” means another process, such as the command "
               "line, is training it right now.")
    names = [r.name for r in listed]
    appeared = [n for n in names if n not in ss.get("tr_runs_seen", names)]  # newest first, like the table
    ss.tr_runs_seen = names
    ss.tr_compare = [n for n in ss.get("tr_compare", names[:3]) if n in names]  # (deleted or renamed runs go)
    if appeared:  # a run that appeared since the last look is the one to compare and manage
        ss.tr_compare = (appeared + ss.tr_compare)[:3]
        ss.tr_manage = appeared[0]
    st.markdown("##### Compare runs")
    chosen = st.multiselect("Runs to overlay", names, key="tr_compare")
    frame = training.run_curves([r for r in listed if r.name in chosen])
    if len(frame):
        st.plotly_chart(training.overlay_figure(frame), key="tr_compare_chart")
    st.markdown("##### Manage a run")
    if ss.get("tr_manage") not in names:
        ss.pop("tr_manage", None)
    pick = st.selectbox("Run", names, key="tr_manage")
    manage_run(next(r for r in listed if r.name == pick))


# ---------------------------------------------------------------- page

st.title("Train")
st.markdown("Train the tutorial's GPT on your CPU and watch it go from random characters to stories. "
            "Training runs in the background: switch pages, reload or close the tab, and it keeps going.")
init_form()
# The live panel redraws every second; Streamlit would dim it while each redraw is on its way,
# so on a busy CPU the whole panel would flicker between faded and sharp.
st.html("<style>.st-key-tr_live [data-stale='true'] {opacity: 1 !important; transition: none !important;}</style>")
active = registry.active()
st.fragment(live_view, run_every=LIVE_REFRESH_S if active and active.state.kind == training.JOB_KIND else None)()
new_tab, runs_tab_ = st.tabs(["New run", "Runs and checkpoints"])
with new_tab:
    new_run_tab()
with runs_tab_:
    runs_tab()
