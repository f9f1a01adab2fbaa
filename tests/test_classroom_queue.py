"""Training runs wait their turn: the queue on disk (gptcore.queue) and the job registry that starts its runs, each
in a process of its own.

A run trains a tiny model on 20,000 built-in characters; a "long" one trains until it is stopped, so that the runs
behind it wait for as long as a test needs. Runs train in threads of the test process (tests/run_helpers.py);
tests/test_run_processes.py starts real processes.
"""
import json
import sqlite3
import time

import pytest

from explorer import jobs, training
from explorer.jobs import JobRegistry
from gptcore import checkpoint as ckpt
from gptcore import folders
from gptcore.config import GPTConfig
from gptcore.queue import DATABASE, JOBS, QueuedRun, QueueError, RunQueue
from gptcore.sources import CorpusSource
from gptcore.train import TrainConfig

pytestmark = pytest.mark.usefixtures("runs_in_threads")
TINY = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=48, context=16)
SOURCE = CorpusSource("builtin", chars=20_000, seed=0)


@pytest.fixture(autouse=True)
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    return tmp_path


def queued(name: str, steps: int = 20, by: str | None = "learner-a", **changes) -> QueuedRun:
    tc = TrainConfig(steps=steps, batch_size=4, eval_every=10, threads=1, sample_chars=20, final_eval=steps < 1000)
    return QueuedRun(**{"name": name, "action": "new", "model": TINY.to_dict(), "train": tc.to_dict(),
                        "source": SOURCE.to_dict(), "work": 1.0, "owner": by, "queued_by": by, **changes})


def wait_until(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def registry_of():
    """registry_of(slots=1): a JobRegistry over the test's folder, its queue cleared and every run it started
    stopped and waited for once the test ends."""
    made = []

    def make(slots: int = 1) -> JobRegistry:
        made.append(JobRegistry(slots=slots))
        return made[-1]

    yield make
    for registry in made:
        registry.waiting.clear()
        for name in registry.live():
            registry.get(name).stop()
        for job in list(registry.jobs.values()):
            job.join(60)


# ---------------------------------------------------------------- the queue on disk

def test_runs_keep_their_order_and_a_new_queue_object_over_the_folder_has_them(root):
    queue = RunQueue()
    assert [queue.add(queued(name, by=name), per_learner=1) for name in ("a", "b", "c")] == [1, 2, 3]
    restarted = RunQueue(root)  # (a server started again over the same folder)
    assert [run.name for run in restarted.runs()] == ["a", "b", "c"]
    assert restarted.runs()[1] == queue.runs()[1]
    assert not list(root.glob("*.tmp"))  # written whole, then renamed into place


def test_a_learner_may_have_one_run_waiting_and_the_teacher_any_number():
    queue = RunQueue()
    queue.add(queued("mine"), per_learner=1)
    with pytest.raises(QueueError, match=r"Each learner may have 1 run\(s\) waiting to train, and yours are "
                                         r"waiting already \(mine\)"):
        queue.add(queued("another"), per_learner=1)
    assert queue.add(queued("another", by="learner-b"), per_learner=1) == 2
    assert queue.add(queued("t1", by=None), per_learner=1) == 3 and queue.add(queued("t2", by=None), 1) == 4
    assert queue.add(queued("second", by="learner-b"), per_learner=2) == 5  # (the limit is a setting)
    with pytest.raises(QueueError, match="a run named 'mine' is already waiting"):
        queue.add(queued("mine", by="learner-c"), per_learner=1)


def test_cancel_and_clear_remove_runs_and_their_uploaded_corpora(root):
    queue = RunQueue()
    kept = queued("kept", by="b")
    queue.add(gone := queued("gone", source={"kind": "upload", "name": "s.txt"}), 1, upload=b"once upon a time")
    queue.add(kept, 1)
    assert queue.upload_of(queue.runs()[0]) == b"once upon a time"
    assert queue.cancel(gone.id).name == "gone" and queue.cancel(gone.id) is None
    assert [run.name for run in queue.runs()] == ["kept"]
    assert not (root / JOBS / gone.id).exists()
    assert [run.name for run in queue.clear()] == ["kept"] and queue.runs() == []
    assert sorted(p.name for p in (root / JOBS).iterdir() if p.is_dir()) == []


def test_a_record_that_is_not_a_run_is_a_sentence_and_clearing_the_queue_mends_it():
    queue = RunQueue()
    queue.add(queued("x"), per_learner=1)
    with sqlite3.connect(queue.path) as db:
        db.execute("UPDATE jobs SET record = ?", (json.dumps({"name": "../escape"}),))
    with pytest.raises(QueueError, match="The queue of waiting runs cannot be read"):
        queue.runs()
    assert queue.clear() == [] and queue.runs() == []


# ---------------------------------------------------------------- the registry starts them

def test_a_second_start_is_queued_not_refused_and_runs_start_in_order(root, registry_of):
    registry = registry_of()
    assert registry.enqueue(queued("long", steps=1_000_000, by="a"), per_learner=1) is None  # started at once
    assert registry.enqueue(queued("second", by="b"), per_learner=1) == 1
    assert registry.enqueue(queued("third", by="c"), per_learner=1) == 2
    assert set(registry.live()) == {"long"}
    registry.get("long").stop()
    wait_until(lambda: registry.get("third") is not None and not registry.get("third").state.active)
    second, third = registry.get("second").state, registry.get("third").state
    assert second.status == third.status == "finished"
    assert second.ended <= third.started  # one at a time, in order
    assert registry.waiting.runs() == []
    assert ckpt.read_meta(root / "second")["owner"] == "b"  # the run is its starter's


def test_a_cancelled_run_never_starts(root, registry_of):
    registry = registry_of()
    registry.enqueue(queued("long", steps=1_000_000, by="a"), per_learner=1)
    cancelled, after = queued("cancelled", by="b"), queued("after", by="c")
    registry.enqueue(cancelled, per_learner=1)
    registry.enqueue(after, per_learner=1)
    assert registry.waiting.cancel(cancelled.id) is not None
    assert registry.place(after.id) == 1
    registry.get("long").stop()
    wait_until(lambda: registry.get("after") is not None and not registry.get("after").state.active)
    assert registry.get("cancelled") is None and not (root / "cancelled").exists()


def test_two_slots_train_two_runs_at_once(root, registry_of):
    registry = registry_of(2)
    for name in ("one", "two", "three"):
        registry.enqueue(queued(name, steps=1_000_000, by=name), per_learner=1)
    assert set(registry.live()) == {"one", "two"} and [r.name for r in registry.waiting.runs()] == ["three"]


def test_a_name_that_is_training_is_neither_queued_again_nor_taken_by_a_second_slot(root, registry_of):
    """A Start from a page drawn before the first run took the name, and a Continue asked for twice: with two
    slots, the second is refused while the first trains (the store checks it as it adds), rather than replacing
    its job (which nobody could stop then)."""
    registry = registry_of(2)
    registry.enqueue(queued("same", steps=1_000_000, by="a"), per_learner=1)
    first = registry.get("same")
    for add in (lambda: registry.enqueue(queued("same", by="b"), per_learner=1),
                lambda: registry.waiting.add(queued("same", by="a"), per_learner=1)):
        with pytest.raises(QueueError, match="'same' is training now"):
            add()
    assert registry.start_waiting() == [] and registry.get("same") is first and registry.waiting.runs() == []
    # the just-started run has no ETA yet, and nothing breaks on that: the free slot starts the next at once
    assert [starts for starts, _ in training.waiting_times(registry, [queued("next")])] == [0.0]


def test_a_run_whose_process_cannot_start_stays_in_the_queue(root, monkeypatch):
    registry = JobRegistry(slots=1)
    registry.waiting.add(queued("kept", by="a"), per_learner=1)

    def no_process(claim, on_end=None):
        import os

        os.close(claim.lock)
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(jobs, "launch", no_process)
    with pytest.raises(OSError):
        registry.start_waiting()
    assert [run.name for run in registry.waiting.runs()] == ["kept"]


def test_a_restarted_server_starts_the_waiting_runs(root, registry_of):
    RunQueue().add(queued("waited", by="a"), per_learner=1)  # left by the server before the restart
    registry = registry_of()  # made by the first page anyone opens
    wait_until(lambda: registry.get("waited") is not None and not registry.get("waited").state.active)
    assert registry.get("waited").state.status == "finished" and (root / "waited" / "model.safetensors").is_file()
    assert RunQueue(root).runs() == [] and (root / JOBS / DATABASE).is_file()


def test_a_waiting_run_whose_corpus_has_gone_fails_with_the_reason_and_the_next_one_starts(root, registry_of):
    registry = registry_of()
    registry.enqueue(queued("long", steps=1_000_000, by="a"), per_learner=1)
    registry.enqueue(queued("lost", by="b", source={"kind": "file", "path": str(root / "gone.txt")}), 1)
    registry.enqueue(queued("next", by="c"), per_learner=1)
    registry.get("long").stop()
    wait_until(lambda: registry.get("next") is not None and not registry.get("next").state.active)
    lost = registry.get("lost").state
    assert lost.status == "failed" and not lost.traceback and "gone.txt" in str(lost.message)
    assert registry.get("next").state.status == "finished"


def test_the_expected_start_adds_the_running_eta_and_the_durations_before_it(root, registry_of):
    registry = registry_of()
    registry.enqueue(queued("long", steps=1_000_000, by="a"), per_learner=1)
    wait_until(lambda: registry.get("long").snapshot().data.get("tokens_per_s"))
    data = registry.get("long").snapshot().data
    rate = data["params"] * data["tokens_per_s"]
    waiting = [queued("b", by="b", work=30 * rate), queued("c", by="c", work=60 * rate)]
    (b_starts, b_lasts), (c_starts, c_lasts) = training.waiting_times(registry, waiting)
    assert b_lasts == pytest.approx(30, rel=0.2) and c_lasts == pytest.approx(60, rel=0.2)
    assert b_starts == pytest.approx(data["eta_s"], rel=0.2)  # (the run keeps measuring as the test reads)
    assert c_starts == pytest.approx(b_starts + b_lasts, rel=1e-9)


def test_an_uploaded_corpus_waits_with_its_run_and_goes_once_it_starts(root, registry_of):
    registry = registry_of()
    registry.enqueue(queued("long", steps=1_000_000, by="a"), per_learner=1)
    text = SOURCE.load().text.encode()
    uploaded = queued("uploaded", by="b", source={"kind": "upload", "name": "mine.txt"})
    registry.enqueue(uploaded, 1, upload=text)
    assert (root / JOBS / uploaded.id / "upload").stat().st_size == len(text)
    registry.get("long").stop()
    wait_until(lambda: registry.get("uploaded") is not None and not registry.get("uploaded").state.active)
    assert registry.get("uploaded").state.status == "finished"
    assert ckpt.read_meta(root / "uploaded")["corpus_source"] == {"kind": "upload", "name": "mine.txt",
                                                                   "max_chars": None}
    assert not (root / JOBS / uploaded.id / "upload").exists()


def test_a_run_continued_by_the_teacher_waits_its_turn_and_stays_its_learners(root, registry_of):
    registry = registry_of()
    registry.enqueue(queued("theirs", by="b"), per_learner=1)
    first = registry.get("theirs")
    first.join(60)
    registry.enqueue(queued("long", steps=1_000_000, by="a"), per_learner=1)
    more = TrainConfig.from_dict({**queued("theirs").train, "steps": 30})
    assert registry.enqueue(QueuedRun(name="theirs", action="continue", train=more.to_dict(),
                                      source=SOURCE.to_dict(), work=1.0, owner="b", queued_by=None), 1) == 1
    registry.get("long").stop()
    wait_until(lambda: registry.get("theirs") is not first and not registry.get("theirs").state.active)
    assert registry.get("theirs").state.status == "finished"
    meta = ckpt.read_meta(root / "theirs")
    assert (meta["step"], meta["owner"]) == (30, "b")
