"""gptcore.baselines and gptcore.runs: reference losses, the training job, runs on disk.

A run the app starts trains in a thread of the test process here (tests/run_helpers.py), through the queue, its
job folder and its events, as the app's runs do in processes of their own."""
import math
import os
import re
import sys
import threading
import time
import zipfile
from io import BytesIO

import pytest
import torch
from run_helpers import lock_held, wait_until

from explorer import training
from explorer.jobs import JobRefused, JobRegistry
from gptcore import checkpoint as ckpt
from gptcore import describe, folders, locks, runs
from gptcore.baselines import bigram_counts, bigram_val_loss, uniform_loss
from gptcore.config import GPTConfig
from gptcore.corpus import generate_stories
from gptcore.data import CorpusError
from gptcore.errors import InputError
from gptcore.queue import QueuedRun, RunQueue
from gptcore.sources import CorpusSource
from gptcore.train import TrainConfig
from gptcore.worker import NICENESS, set_up

pytestmark = pytest.mark.usefixtures("runs_in_threads")
TINY = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=48, context=16)
SOURCE = CorpusSource("builtin", chars=20_000, seed=0)


@pytest.fixture(scope="module")
def corpus():
    return SOURCE.load()


def tiny_tc(**changes) -> TrainConfig:
    return TrainConfig(**{"steps": 20, "batch_size": 4, "eval_every": 10, "threads": 1, "sample_chars": 20, **changes})


def start(out_dir, registry=None, **changes):
    """Start a tiny new run into out_dir as the app does, through the queue of out_dir's folder; its job."""
    registry = registry or JobRegistry(waiting=RunQueue(out_dir.parent))
    tc = tiny_tc(**changes)
    registry.enqueue(QueuedRun(name=out_dir.name, action="new", model=TINY.to_dict(), train=tc.to_dict(),
                               source=SOURCE.to_dict(), work=1.0), per_learner=1)
    return registry.get(out_dir.name)


def train(corpus, out_dir, **changes):
    """Run a tiny new run to completion in a job; returns the job's final state."""
    job = start(out_dir, **changes)
    job.join(60)
    return job.snapshot()


def train_here(corpus, out_dir, **changes) -> None:
    """Run a tiny new run to completion in this thread: only its folder is wanted."""
    runs.new_run(TINY, tiny_tc(**changes), corpus, SOURCE, out_dir).run()


# ---------------------------------------------------------------- baselines

def test_uniform_loss_is_ln_vocab_as_in_the_tutorial():
    assert uniform_loss(74) == pytest.approx(4.3041, abs=1e-4)  # the tutorial's "ln 74 = 4.30"
    with pytest.raises(ValueError):
        uniform_loss(0)


def test_bigram_val_loss_by_hand_with_add_one():
    train_ids, val_ids = torch.tensor([0, 1, 0, 1, 0]), torch.tensor([0, 1, 1])
    # counts: 0→1 twice, 1→0 twice. Add-one: P(1|0) = 3/4, P(1|1) = 1/4.
    expected = (math.log(4 / 3) + math.log(4)) / 2
    assert bigram_val_loss(train_ids, val_ids, 2) == pytest.approx(expected, rel=1e-12)
    assert bigram_counts(train_ids, 2).tolist() == [[0, 2], [2, 0]]


def test_bigram_val_loss_matches_a_direct_count():
    gen = torch.Generator().manual_seed(0)
    train_ids, val_ids = torch.randint(5, (300,), generator=gen), torch.randint(5, (50,), generator=gen)
    alpha = 0.1
    pairs = list(zip(train_ids.tolist(), train_ids[1:].tolist()))
    losses = []
    for a, b in zip(val_ids.tolist(), val_ids[1:].tolist()):
        row = sum(1 for p in pairs if p[0] == a)
        losses.append(-math.log((pairs.count((a, b)) + alpha) / (row + 5 * alpha)))
    assert bigram_val_loss(train_ids, val_ids, 5, alpha) == pytest.approx(sum(losses) / len(losses), rel=1e-9)
    with pytest.raises(ValueError):
        bigram_val_loss(train_ids, val_ids, 5, alpha=0)


def test_bigram_beats_uniform_on_stories(corpus):
    trainer = runs.new_run(TINY, tiny_tc(), corpus, SOURCE, None)
    losses = set_up(trainer)  # (what a run's live panel shows before its first step)
    assert losses["uniform"] == pytest.approx(math.log(trainer.tokenizer.vocab_size))
    assert 1.5 < losses["bigram"] < losses["uniform"] - 1


# ---------------------------------------------------------------- summaries


def test_describe_and_format_helpers():
    assert describe.describe_model(GPTConfig()).startswith("d_model 128 · 4 layers · 4 heads of 32 · SwiGLU d_ff 344")
    assert describe.describe_training(TrainConfig()).startswith("steps 0–1,500 · batch 32 · AdamW lr 0.003 (constant)")
    assert describe.describe_training(TrainConfig(optimizer="muon", schedule="cosine", warmup=50)).startswith(
        "steps 0–1,500 · batch 32 · Muon lr 0.02 + AdamW lr 0.003 (cosine to 0.1×, warmup 50)")
    assert describe.format_duration(348) == "5m 48s" and describe.format_duration(3700) == "1h 01m"
    assert describe.format_duration(None) == "–"
    assert training.smooth([2.0, 2.0, 2.0]) == pytest.approx([2.0, 2.0, 2.0])  # no pull toward 0
    xs, ys = training.thin(list(range(10_001)), list(range(10_001)), limit=2000)
    assert len(xs) <= 2001 and xs[-1] == 10_000 and xs == ys
    assert [runs.nice_interval(x) for x in (0.3, 7, 13.3, 100)] == [1, 5, 10, 100]


def test_watch_defaults_only_fill_in_samples_checkpoints_and_snapshots():
    tc = runs.watch_defaults(TrainConfig())
    assert (tc.sample_every, tc.checkpoint_every, tc.snapshot_every) == (100, 100, 300)  # 6 snapshots: 0…1500
    assert {**tc.to_dict(), "sample_every": 0, "checkpoint_every": 0, "snapshot_every": 0} == TrainConfig().to_dict()
    assert runs.watch_defaults(TrainConfig(sample_every=7)).sample_every == 7


def test_samples_and_checkpoints_do_not_change_the_run(corpus, tmp_path):
    watched = train(corpus, tmp_path / "watched", sample_every=3, checkpoint_every=4)
    plain = train(corpus, tmp_path / "plain")
    assert watched.data["curve_loss"] == plain.data["curve_loss"]
    assert watched.data["evals"] == plain.data["evals"]


# ---------------------------------------------------------------- corpora

@pytest.mark.parametrize("content, message", [
    (b"", "is empty"),
    (b"\x00\x01binary\x00", "looks binary"),
    ("caf\u00e9 stories".encode("latin-1"), "not UTF-8"),
    (b"   \n\t ", "only whitespace"),
])
def test_bad_files_are_refused_with_a_reason(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        CorpusSource("file", path=str(path), max_chars=None).load()
    with pytest.raises(CorpusError, match=message):
        CorpusSource("upload", name="bad.txt", max_chars=None).load(upload=content)


def test_too_large_and_missing_files_are_refused(tmp_path):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(65 * 1024 * 1024)  # sparse: no disk used, and never read
    with pytest.raises(CorpusError, match="over the limit"):
        CorpusSource("file", path=str(huge), max_chars=None).load()
    with pytest.raises(CorpusError, match="no such file"):
        CorpusSource("file", path=str(tmp_path / "nope.txt"), max_chars=None).load()
    with pytest.raises(CorpusError, match="enter the path"):
        CorpusSource("file", path=" ", max_chars=None).load()


def test_too_short_corpus_is_refused_by_the_trainer(tmp_path):
    short = CorpusSource("upload", name="s.txt", max_chars=None).load(upload=b"Once upon a time.")
    with pytest.raises(CorpusError, match="needs at least"):
        runs.new_run(TINY, tiny_tc(), short, None, tmp_path / "x")


def test_max_chars_truncates_and_says_so(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("abcdefghij" * 10)
    corpus = CorpusSource("upload", name="s.txt", max_chars=25).load(upload=path.read_bytes())
    assert corpus.text == ("abcdefghij" * 3)[:25] and corpus.description == "upload s.txt, first 25 chars"
    assert CorpusSource("file", path=str(path), max_chars=30).load().text == "abcdefghij" * 3
    assert CorpusSource("file").reloadable and not CorpusSource("upload").reloadable
    assert CorpusSource.from_dict(None) is None


def test_a_builtin_source_with_copy_drills_is_recorded_and_loaded_again():
    source = CorpusSource("builtin", chars=30_000, seed=2, drills=0.3)
    assert source.to_dict() == {"kind": "builtin", "chars": 30_000, "seed": 2, "drills": 0.3, "retellings": 0.0}
    again = CorpusSource.from_dict(source.to_dict())
    corpus = again.load()
    assert again == source and corpus.text == generate_stories(30_000, 2, drills=0.3)
    assert corpus.description == "built-in stories with 30% copy drills, 30,000 chars, seed 2"
    assert CorpusSource.from_dict({"kind": "builtin", "chars": 9, "seed": 0}).drills == 0.0  # (recorded before drills)
    with pytest.raises(InputError, match="share of copy drills"):
        CorpusSource("builtin", drills=2.0).load()


# ---------------------------------------------------------------- jobs and runs on disk

def test_a_run_writes_a_checkpoint_that_reloads(corpus, tmp_path):
    state = train(corpus, tmp_path / "a", sample_every=10)
    assert state.status == "finished" and state.progress == 1.0
    loaded = ckpt.load_checkpoint(tmp_path / "a")
    assert loaded.meta["step"] == 20 and loaded.meta["status"] == "finished"
    assert loaded.meta["corpus_source"] == SOURCE.to_dict() == {"kind": "builtin", "chars": 20_000, "seed": 0,
                                                                "drills": 0.0, "retellings": 0.0}
    assert [s["step"] for s in state.data["samples"]] == [0, 10, 20]
    assert state.data["final_val"] == pytest.approx(loaded.meta["final_val_loss"])


def test_absurd_hyperparameters_diverge_and_keep_the_last_good_checkpoint(corpus, tmp_path):
    # lr 10 with weight decay 1: AdamW multiplies every weight by 1 - lr·wd = -9 each step, so the
    # weights overflow within a few steps whatever the data. lr 10 alone does not reliably NaN,
    # because Adam's normalised update moves each weight by at most about lr per step.
    state = train(corpus, tmp_path / "boom", lr=10.0, weight_decay=1.0, checkpoint_every=1)
    assert state.status == "failed" and state.data["diverged"]
    assert state.message.startswith("Training diverged: ") and "NaN or infinite" in state.message
    kept = ckpt.load_checkpoint(tmp_path / "boom")
    assert f"last good checkpoint (step {kept.meta['step']})" in state.message
    assert kept.meta["step"] == state.data["step"] - 1  # the step whose update blew up was not saved
    assert all(torch.isfinite(p).all() for p in kept.model.parameters())
    # finite weights are not enough: they can be large enough for the forward pass to overflow
    window = torch.arange(TINY.context).unsqueeze(0) % kept.model.cfg.vocab_size
    assert torch.isfinite(kept.model(window)[0]).all()
    run = runs.read_run(tmp_path / "boom")
    assert run.status == "diverged" and run.blocker("continue") is None


def test_interrupted_run_is_listed_as_such_and_resumes(corpus, tmp_path):
    class Crash(Exception):
        pass

    def crash_at_step_13(trainer):
        if trainer.step + 1 == 13:
            raise Crash

    trainer = runs.new_run(TINY, tiny_tc(checkpoint_every=5), corpus, SOURCE, tmp_path / "cut")
    with pytest.raises(Crash):
        trainer.run(after_backward=crash_at_step_13)
    [run] = runs.list_runs(tmp_path)
    assert (run.status, run.step, run.blocker("continue") is None) == ("interrupted", 10, True)
    assert runs.list_runs(tmp_path, live={"cut": "running"})[0].status == "running"

    resumed = runs.continued_run(run.path, runs.resume_config(run, 20), corpus, SOURCE)
    assert resumed.start_step == 11
    assert resumed.run() == "finished"
    again = runs.read_run(run.path)
    assert (again.status, again.step) == ("finished", 20)
    assert again.history["step"] == list(range(21))
    with pytest.raises(ValueError, match="already at step 20"):
        runs.resume_config(again, 20)


def test_registry_refuses_a_second_job_and_names_the_first(corpus, tmp_path):
    registry = JobRegistry(waiting=RunQueue(tmp_path))
    job = start(tmp_path / "long", registry, steps=100_000)
    try:
        with pytest.raises(JobRefused, match="'long' \\(train\\) is already running"):
            registry.start("demo", "concept demo", lambda job: None)
        with pytest.raises(ckpt.CheckpointError, match="is training now"):
            runs.delete_run(runs.read_run(tmp_path / "long", registry.live()), tmp_path)
    finally:
        job.stop()
        job.join(60)
    assert job.state.status == "stopped"
    assert ckpt.read_meta(tmp_path / "long")["status"] == "stopped"


def test_pause_resume_stop_and_late_clicks(corpus, tmp_path):
    registry = JobRegistry(waiting=RunQueue(tmp_path))
    job = start(tmp_path / "p", registry, steps=100_000)
    wait_until(lambda: job.state.status == "running")
    job.pause()
    assert job.state.status == "paused"
    time.sleep(0.6)  # (the run reads its control file every 0.2 s)
    paused_at = job.snapshot().data["step"]
    time.sleep(0.4)
    assert job.snapshot().data["step"] == paused_at
    job.resume()
    assert job.state.status == "running"
    wait_until(lambda: job.snapshot().data["step"] > paused_at)
    job.pause()
    job.stop()  # a stop while paused must not hang
    job.join(60)
    assert job.state.status == "stopped"
    job.pause()  # a late click must not make a finished job active again
    job.resume()
    assert job.state.status == "stopped" and registry.active() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux-only")
def test_jobs_run_at_a_lower_cpu_priority_than_the_server(tmp_path):
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    before, seen = nice(), []
    job = JobRegistry(waiting=RunQueue(tmp_path)).start("nice", "test", lambda job: seen.append(nice()))
    job.join(30)
    assert seen == [max(before, NICENESS)]
    assert nice() == before  # only the job's own thread was lowered


def test_listing_table_curves_zip_rename_delete(corpus, tmp_path):
    train_here(corpus, tmp_path / "one")
    train_here(corpus, tmp_path / "two", lr=1e-3)
    listed = runs.list_runs(tmp_path)
    assert {r.name for r in listed} == {"one", "two"}
    one = next(r for r in listed if r.name == "one")
    assert one.best_val == min(one.history["eval_val"]) and one.total_steps == 20
    frame = training.runs_frame(listed)
    assert list(frame.columns) == ["run", "owner", "status", "progress", "best val (estimate)",
                                   "final val (whole split)", "wall time", "params", "corpus", "saved"]
    assert set(frame["progress"]) == {"step 20 of 20"} and set(frame["status"]) == {"finished"}
    curves = training.run_curves(listed)
    assert set(curves.groupby(["run", "series"]).size().items()) == {
        (("one", "train (smoothed)"), 21), (("one", "val"), 3), (("two", "train (smoothed)"), 21), (("two", "val"), 3)}
    with zipfile.ZipFile(BytesIO(runs.zip_run(one.path))) as z:
        assert {"one/model.safetensors", "one/meta.json", "one/config.json", "one/optimizer.safetensors"} <= set(
            z.namelist())
    assert runs.suggest_name("one", tmp_path) == "one-1"
    with pytest.raises(ckpt.CheckpointError, match="two already holds a trained model; continue it with --resume"):
        runs.new_run_dir("two", tmp_path)
    renamed = runs.rename_run(runs.read_run(one.path), "renamed run", tmp_path)
    assert renamed.name == "renamed-run" and ckpt.load_checkpoint(renamed).meta["step"] == 20
    with pytest.raises(ckpt.CheckpointError, match="not inside"):
        runs.delete_run(runs.read_run(renamed))  # the default root is the app's checkpoints folder, not tmp_path
    runs.delete_run(runs.read_run(renamed), tmp_path)
    assert [r.name for r in runs.list_runs(tmp_path)] == ["two"]
    assert os.listdir(tmp_path) == ["two"]
    (tmp_path / "two" / "meta.json").write_text('{"step": "seven", "history": []}')
    assert runs.list_runs(tmp_path)[0].status == "unreadable"


def test_the_shipped_model_is_protected():
    from gptcore.folders import PROJECT_ROOT

    shipped = PROJECT_ROOT / "checkpoints" / runs.SHIPPED
    with pytest.raises(ckpt.CheckpointError, match="ships with the app"):
        runs.delete_run(runs.read_run(shipped))
    with pytest.raises(ckpt.CheckpointError, match="ships with the app"):
        runs.rename_run(runs.read_run(shipped), "mine")
    assert (shipped / "model.safetensors").is_file()


def a_finished_run(owner=None, status="done") -> runs.RunInfo:
    return runs.RunInfo(name="r1", path=folders.PROJECT_ROOT / "no-such-run", status=status, step=20, total_steps=20,
                        best_val=None, final_val=None, wall_time=1.0, params=None, corpus="", saved=0.0,
                        has_weights=True, meta={} if owner is None else {"owner": owner})


def test_who_may_change_a_run_is_decided_and_worded_in_one_place():
    mine, theirs, teachers = a_finished_run("a1"), a_finished_run("b2"), a_finished_run()
    assert (mine.owner, teachers.owner, a_finished_run("").owner) == ("a1", None, None)
    for action in runs.ACTIONS:  # its learner, and the teacher or the command line (no learner), may
        assert [mine.blocker(action, "a1"), theirs.blocker(action), teachers.blocker(action)] == [None, None, None]
    assert theirs.blocker("rename", "a1") == "It is another learner's run: only they and the teacher can change it."
    assert teachers.blocker("delete", "a1") == "It is the teacher's run: only the teacher can change it."
    assert mine.blocker("continue", "a1", waiting=True) == "It is waiting to train: cancel that first."
    # whose it is comes first, then the queue, then the run's own state
    busy = a_finished_run("b2", status="running")
    assert busy.blocker("delete", "a1", waiting=True).startswith("It is another learner's run")
    assert busy.blocker("delete", "b2", waiting=True).startswith("It is waiting to train")
    assert busy.blocker("delete", "b2") == "It is training now: stop it first."
    assert runs.owner_blocker("b2", "a1") == theirs.blocker("continue", "a1")  # (a training's controls ask the same)
    for action, said in (("continue", "Cannot continue 'r1'. "), ("rename", "Cannot rename 'r1'. "),
                         ("delete", "Cannot delete 'r1'. ")):
        with pytest.raises(ckpt.CheckpointError) as refused:
            theirs.refuse(action, "a1")
        assert str(refused.value) == said + "It is another learner's run: only they and the teacher can change it."
        mine.refuse(action, "a1")  # (allowed: nothing raised)


def test_the_shipped_model_says_why_it_cannot_continue():
    [shipped] = [r for r in runs.list_runs(root=folders.PROJECT_ROOT / "checkpoints") if r.name == runs.SHIPPED]
    assert shipped.blocker("continue") is not None
    assert shipped.blocker("continue").startswith("starter ships with the app and stays as it is")


def test_a_run_another_process_is_training_cannot_be_renamed_or_deleted(tmp_path):
    run = tmp_path / "busy"
    run.mkdir()
    (run / "meta.json").write_text("{}")
    message = f"Another process \\(pid {os.getppid()}, the command line\\?\\) is training it"
    with lock_held(run, os.getppid()):  # say, `python -m gptcore train --resume` in a terminal
        for action in (lambda: runs.delete_run(runs.read_run(run), root=tmp_path),
                       lambda: runs.rename_run(runs.read_run(run), "other", root=tmp_path)):
            with pytest.raises(ckpt.CheckpointError, match=message):
                action()
    assert run.is_dir()


def test_a_run_trained_elsewhere_is_shown_as_such_and_a_dead_runs_leftovers_free_its_name(tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "meta.json").write_text('{"status": "running", "step": 3}')
    with lock_held(busy, os.getppid()):
        [run] = runs.list_runs(tmp_path)
    assert run.status == "elsewhere" and f"pid {os.getppid()}" in run.blocker("continue")
    # a server killed before its run's first checkpoint leaves a lock and snapshots, and nothing to list
    dead = tmp_path / "dead"
    (dead / "snapshots").mkdir(parents=True)
    (dead / "snapshots" / "step_000000.safetensors").write_bytes(b"x")
    (dead / locks.LOCK).write_text("999999999")
    assert runs.new_run_dir("dead", tmp_path) == dead and not any(dead.iterdir())
    (dead / "notes.txt").write_text("mine")  # a folder with someone's own files is not ours to clear
    with pytest.raises(ckpt.CheckpointError, match=r"dead already holds files this run did not write \(notes.txt\)"):
        runs.new_run_dir("dead", tmp_path)
    assert (dead / "notes.txt").read_text() == "mine"


# ---------------------------------------------------------------- names that are not UTF-8, damaged meta.json

def test_a_folder_whose_name_is_not_utf8_is_listed_escaped_and_can_be_renamed_and_deleted(corpus, tmp_path):
    import pyarrow as pa

    train_here(corpus, tmp_path / "bad\udcffname", snapshot_every=10)  # os.fsencode gives the bytes b"bad\xffname"
    [run] = runs.list_runs(tmp_path)
    assert run.name == "bad\\xffname" and run.path == tmp_path / "bad\udcffname" and run.status == "finished"
    frame = training.runs_frame([run])
    pa.Table.from_pandas(frame)  # what st.dataframe sends to the browser: every text must be UTF-8
    assert frame.loc[0, "run"] == "bad\\xffname"
    assert runs.continued_run(run.path, runs.resume_config(run, 25), corpus, SOURCE).run() == "finished"
    from gptcore import inspector

    assert [s for s, _ in inspector.training_steps(run.path)] == [0, 10, 20, 25]  # the Inspect page's "Over training"
    renamed = runs.rename_run(runs.read_run(run.path), "good", tmp_path)
    assert ckpt.load_checkpoint(renamed).meta["step"] == 25
    train_here(corpus, tmp_path / "bad\udcffname")
    runs.delete_run(runs.read_run(tmp_path / "bad\udcffname"), tmp_path)
    assert os.listdir(tmp_path) == ["good"]


def test_a_meta_json_with_values_of_the_wrong_kind_lists_the_run_as_damaged(corpus, tmp_path):
    import json

    train_here(corpus, tmp_path / "hurt")
    meta = json.loads((tmp_path / "hurt" / "meta.json").read_text())
    (tmp_path / "hurt" / "meta.json").write_text(json.dumps({**meta, "final_val_loss": "bad", "wall_time": "long"}))
    [run] = runs.list_runs(tmp_path)
    assert (run.status, run.step, run.final_val, run.wall_time) == ("damaged", 20, None, 0.0)
    assert run.damaged == ["final_val_loss", "wall_time"] and run.blocker("continue") is None
    assert training.runs_frame([run]).loc[0, "status"] == "damaged"
    (tmp_path / "hurt" / "meta.json").write_text(json.dumps({**meta, "train_config": "x", "history": 1}))
    run = runs.read_run(tmp_path / "hurt")
    assert run.status == "damaged"
    assert run.blocker("continue") == "Its meta.json is damaged (history, train_config), and the run's settings " \
                                      "and history are kept there."


def test_a_diverging_run_is_flagged_in_the_table_and_in_its_job(corpus, tmp_path):
    state = train(corpus, tmp_path / "wild", lr=10.0, eval_every=5)
    [run] = runs.list_runs(tmp_path)
    assert state.status == "finished" and state.data["diverging"] == run.meta["diverging"]
    assert run.meta["diverging"]["loss"] == run.final_val > 2 * math.log(run.meta["diverging"]["vocab"])
    assert training.runs_frame([run]).loc[0, "status"] == "finished · diverging"
    assert str(run.diverging).startswith("the run is diverging: its validation loss is ")
    assert str(training.diverging_warning(state)) == str(run.diverging)
    calm = train(corpus, tmp_path / "calm")
    assert calm.data["diverging"] is None and runs.read_run(tmp_path / "calm").diverging is None


# ---------------------------------------------------------------- corpus sources read back, server paths

@pytest.mark.parametrize("record", [{"kind": "builtin", "seed": "x"}, {"kind": "builtin", "chars": True},
                                    {"kind": "builtin", "drills": "0.3"}, {"kind": "builtin", "drills": False},
                                    {"kind": "file", "path": ["a"]}, {"kind": "file", "path": "a", "max_chars": "5"},
                                    {"kind": "upload", "name": 3}, {"kind": "tinystories", "max_chars": 2.5}])
def test_a_recorded_source_with_a_field_of_the_wrong_kind_is_not_understood(record):
    assert CorpusSource.from_dict(record) is None
    assert CorpusSource.from_dict({"kind": "file", "path": "a.txt", "max_chars": 5, "seed": 1}) == \
        CorpusSource("file", path="a.txt", max_chars=5, seed=1)


def test_the_app_reads_a_server_file_only_inside_its_folders_and_never_a_hidden_one(tmp_path, monkeypatch):
    from gptcore.sources import allowed_path

    outside = tmp_path / "secret.txt"
    outside.write_text("the server's own file " * 50)
    source = CorpusSource("file", path=str(outside))
    assert source.load().text.startswith("the server's own file")  # the command line reads what it is given
    with pytest.raises(CorpusError, match="is outside the folders this app reads files from"):
        source.load(confine=True)  # the app does not
    data = tmp_path / "data"
    (data / ".cache").mkdir(parents=True)
    (data / ".cache" / "notes.txt").write_text("x")
    (data / "stories.txt").write_text("y")
    (data / "link.txt").symlink_to(folders.PROJECT_ROOT / ".git" / "config")
    monkeypatch.setenv("GPTCORE_DATA", str(data))
    for hidden in (folders.PROJECT_ROOT / ".git" / "config", data / ".cache" / "notes.txt", data / "link.txt"):
        with pytest.raises(CorpusError, match="is hidden, or inside a hidden folder .* this app never reads those"):
            allowed_path(str(hidden))
    assert allowed_path(str(data / "stories.txt")) == data / "stories.txt"
    monkeypatch.chdir(tmp_path)  # a relative path is the project's, whatever folder the server started in
    assert allowed_path("README.md") == folders.PROJECT_ROOT / "README.md"


# ---------------------------------------------------------------- what the runs table says

def test_a_run_trained_elsewhere_names_its_process_even_once_its_lock_is_gone(tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "meta.json").write_text('{"status": "running", "step": 3}')
    with lock_held(busy, os.getppid()):
        run = runs.read_run(busy)
    # that process finished between the listing and the click
    assert run.status == "elsewhere" and run.holder == os.getppid()
    assert run.blocker("continue") == f"Another process (pid {os.getppid()}, the command line?) is training it now."


def test_a_suggested_name_is_always_a_usable_one(tmp_path):
    base = "a" * folders.MAX_NAME
    first = runs.suggest_name(base, tmp_path)
    assert first == "a" * (folders.MAX_NAME - 2) + "-1" and folders.safe_name(first) == first
    (tmp_path / first).mkdir()
    assert runs.suggest_name(base, tmp_path, taken={"a" * (folders.MAX_NAME - 2) + "-2"}) == \
        "a" * (folders.MAX_NAME - 2) + "-3"


def test_the_model_summary_comes_from_the_weights_header_and_a_bug_in_it_is_not_hidden(corpus, tmp_path,
                                                                                       monkeypatch):
    train_here(corpus, tmp_path / "one")
    (tmp_path / "one" / "config.json").unlink()  # only for people to read: the weights say what the model is
    run = runs.read_run(tmp_path / "one")
    assert runs.model_summary(run) == describe.describe_model(ckpt.load_checkpoint(run.path).model.cfg)
    (tmp_path / "one" / "model.safetensors").write_bytes(b"garbage")
    assert runs.model_summary(run) == ""

    def broken(cfg):
        raise TypeError("a bug")
    train_here(corpus, tmp_path / "two")
    monkeypatch.setattr(runs, "describe_model", broken)
    with pytest.raises(TypeError, match="a bug"):
        runs.model_summary(runs.read_run(tmp_path / "two"))


@pytest.mark.parametrize("weights, said", [
    ("device", "model.safetensors is not a regular file but a device or a socket"),
    ("fifo", r"model.safetensors is not a regular file but a FIFO \(a named pipe\)"),
    ("dangling", "model.safetensors is a link to .*gone, which does not exist"),
])
def test_a_run_whose_weights_are_no_file_is_listed_unreadable_as_inspect_leaves_it_out(tmp_path, weights, said):
    run = tmp_path / "odd"
    run.mkdir()
    (run / "meta.json").write_text('{"status": "finished", "step": 3}')
    if weights == "fifo":
        os.mkfifo(run / "model.safetensors")
    else:
        (run / "model.safetensors").symlink_to("/dev/zero" if weights == "device" else tmp_path / "gone")
    [listed] = runs.list_runs(tmp_path)
    assert folders.list_checkpoints(tmp_path) == []
    assert (listed.status, listed.has_weights) == ("unreadable", False)
    assert re.search(said, listed.note) and listed.blocker("continue") == "It has no saved weights to continue from."
    assert listed.blocker("rename") is None and listed.blocker("delete") is None  # (so it can be cleared away)
