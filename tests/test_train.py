import math
import os
import threading
from dataclasses import replace

import pytest
import torch
from run_helpers import lock_held

from gptcore import checkpoint as ckpt
from gptcore import failures, locks, train
from gptcore.config import ConfigError, GPTConfig
from gptcore.data import Corpus, CorpusError
from gptcore.events import DoneEvent, SampleEvent, StepEvent
from gptcore.failures import Diverged, diverged_message
from gptcore.step import evaluate, lr_at
from gptcore.threads import CORES, ShardedGrads, single_core_pool
from gptcore.train import RecentRate, TrainConfig, TrainConfigError, TrainControl, Trainer, build_model

TINY = GPTConfig(d_model=32, n_layer=2, n_head=2, d_ff=88, context=32)
TEXT = "the cat sat on the mat. the dog ate the log. " * 200
CORPUS = Corpus(TEXT, "toy")


def test_step_zero_reproduces_the_tutorials_train_loss(tinystories_text):
    trainer = Trainer.fresh(GPTConfig(), TrainConfig(steps=0, final_eval=False), Corpus(tinystories_text, "ts"))
    assert trainer.tokenizer.vocab_size == 76 and trainer.model.num_params() == 811_136
    events = []
    trainer.run(events.append)
    first = next(e for e in events if isinstance(e, StepEvent))
    assert f"{first.loss:.3f}" == "4.505"


def test_training_lowers_loss_and_saves_a_reloadable_checkpoint(tmp_path):
    tc = TrainConfig(steps=60, batch_size=8, eval_every=30, sample_every=30, sample_chars=20, snapshot_every=30)
    trainer = Trainer.fresh(TINY, tc, CORPUS, out_dir=tmp_path / "run")
    kinds = []
    assert trainer.run(lambda event: kinds.append(type(event))) == "finished"
    h = trainer.history
    assert h["eval_step"] == [0, 30, 60] and h["eval_val"][-1] < h["eval_val"][0] - 1
    assert kinds.count(SampleEvent) == 3 and kinds[-1] is DoneEvent
    loaded = ckpt.load_checkpoint(tmp_path / "run")
    assert loaded.meta["step"] == 60 and loaded.meta["status"] == "finished"
    ids = trainer.val_ids
    assert evaluate(loaded.model, ids) == pytest.approx(trainer.final_val, abs=1e-6)
    assert [s for s, _ in ckpt.list_snapshots(tmp_path / "run")] == [0, 30, 60]


def test_resume_continues_from_the_saved_step(tmp_path):
    Trainer.fresh(TINY, TrainConfig(steps=10, batch_size=4, final_eval=False), CORPUS, out_dir=tmp_path / "r").run()
    resumed = Trainer.resume(tmp_path / "r", TrainConfig(steps=15, batch_size=4, final_eval=False), CORPUS)
    assert resumed.start_step == 11 and resumed.optimizer.state  # AdamW moments restored
    steps = []
    resumed.run(lambda event: steps.append(event.step) if isinstance(event, StepEvent) else None)
    assert steps == [11, 12, 13, 14, 15]
    assert len(resumed.history["step"]) == 16


def test_stop_ends_the_run_and_still_saves(tmp_path):
    control = TrainControl()
    trainer = Trainer.fresh(TINY, TrainConfig(steps=1000, batch_size=4, final_eval=False), CORPUS,
                            out_dir=tmp_path / "s")

    samples = []

    def on_event(event):
        if isinstance(event, StepEvent) and event.step == 4:
            control.request_stop()
        if isinstance(event, SampleEvent):
            samples.append(event.step)

    trainer.tc = replace(trainer.tc, sample_every=4)
    assert trainer.run(on_event, control) == "stopped"
    assert samples == [0, 4]  # stopped right after sampling: one sample of step 4, not two
    assert ckpt.load_checkpoint(tmp_path / "s").meta["step"] == 4


def test_diverging_loss_raises_and_keeps_the_last_good_checkpoint(tmp_path):
    tc = TrainConfig(steps=200, batch_size=4, lr=1000.0, checkpoint_every=1, final_eval=False, eval_every=1000)
    trainer = Trainer.fresh(TINY, tc, CORPUS, out_dir=tmp_path / "nan")
    with pytest.raises(Diverged, match="became") as caught:
        trainer.run()
    loaded = ckpt.load_checkpoint(tmp_path / "nan")
    assert all(torch.isfinite(p).all() for p in loaded.model.parameters())
    message = diverged_message(caught.value, trainer.out_dir)
    assert f"The last good checkpoint (step {loaded.meta['step']:,}) is kept in {tmp_path / 'nan'}" in message
    assert ckpt.read_meta(tmp_path / "nan")["status"] == "diverged"


def test_nan_weights_stop_the_run_before_a_snapshot_is_taken_of_them(tmp_path):
    """Snapshots come after the update: NaN weights must stop the run before a snapshot is taken of them."""
    tc = TrainConfig(steps=50, batch_size=4, snapshot_every=1, checkpoint_every=1, final_eval=False, eval_every=1000)
    trainer = Trainer.fresh(TINY, tc, CORPUS, out_dir=tmp_path / "nan")

    def poison(tr):  # the update of step 3 writes NaN into the weights
        if tr.step + 1 == 3:
            next(tr.model.parameters()).grad.fill_(float("nan"))
    with pytest.raises(Diverged, match="weights became NaN or infinite by step 3"):
        trainer.run(after_backward=poison)
    assert [s for s, _ in ckpt.list_snapshots(tmp_path / "nan")] == [0, 1, 2]
    for _, path in ckpt.list_snapshots(tmp_path / "nan"):
        ckpt.load_weights(path)  # a NaN snapshot would raise CheckpointError
    assert ckpt.load_checkpoint(tmp_path / "nan").meta["step"] == 2


def test_finite_weights_too_large_to_compute_with_stop_the_run(tmp_path):
    """Weights can all be finite and still overflow the forward pass: the check before a save runs one."""
    tc = TrainConfig(steps=50, batch_size=4, checkpoint_every=1, final_eval=False, eval_every=1000)
    trainer = Trainer.fresh(TINY, tc, CORPUS, out_dir=tmp_path / "big")

    def inflate(tr):  # step 3 leaves every weight 1e12 times larger: the norms still compute (1e30 would overflow
        # their squares and zero every activation), the attention scores (~1e48) do not
        if tr.step + 1 == 3:
            with torch.no_grad():
                for p in tr.model.parameters():
                    p.mul_(1e12)
    with pytest.raises(Diverged, match="the outputs became NaN or infinite by step 3"):
        trainer.run(after_backward=inflate)
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert ckpt.load_checkpoint(tmp_path / "big").meta["step"] == 2


def test_a_run_that_diverges_before_its_first_checkpoint_leaves_nothing(tmp_path):
    tc = TrainConfig(steps=200, batch_size=4, lr=1e4, sample_every=1, snapshot_every=1, final_eval=False,
                     eval_every=1000)
    trainer = Trainer.fresh(TINY, tc, CORPUS, out_dir=tmp_path / "nan")
    with pytest.raises(Diverged, match="became") as caught:
        trainer.run()
    assert not (tmp_path / "nan").exists()  # its snapshots cannot be opened without a model: removed, name free
    said = diverged_message(caught.value, trainer.out_dir)
    assert "No checkpoint had been saved yet, so nothing was written." in said


def test_a_model_over_the_parameter_cap_is_refused_before_it_is_built():
    huge = GPTConfig(d_model=4096, n_layer=64, n_head=64, d_ff=16384)
    with pytest.raises(ConfigError, match=r"17,\d{3},\d{3},\d{3} parameters \(68\.\d GB of weights\); the limit"):
        build_model(huge, 0)


def test_a_step_that_would_not_fit_in_memory_is_refused(monkeypatch):
    monkeypatch.setattr(train, "physical_memory", lambda: 24 * 2**30)
    with pytest.raises(TrainConfigError, match=r"one training step would need about 27\.7 GB \(batch 4096 × "
                                               r"context 128, d_model 128, 4 layers\) and this machine has 25\.8 GB"):
        Trainer.fresh(GPTConfig(), TrainConfig(batch_size=4096), CORPUS)
    # the tutorial's step: ~0.2 GB, far under any cap
    assert train.step_memory_bytes(GPTConfig(), 32, 810_624) < 300e6


def test_a_corpus_of_one_character_is_refused():
    with pytest.raises(CorpusError, match=r"the corpus uses a single character \('a'\): there is nothing to predict"):
        Trainer.fresh(TINY, TrainConfig(), Corpus("a" * 5000, "a"))


def test_continuing_needs_more_steps_and_counts_only_characters_the_model_knows(tmp_path):
    run = tmp_path / "r"
    Trainer.fresh(TINY, TrainConfig(steps=3, batch_size=4, final_eval=False), CORPUS, out_dir=run).run()
    with pytest.raises(TrainConfigError, match="the run is already at step 3: set steps higher to continue it"):
        Trainer.resume(run, TrainConfig(steps=3, batch_size=4), CORPUS)
    unknown_mostly = "QQQQQQQQQQ" * 1000 + "the"  # 10,003 characters, 3 of them in the vocabulary
    with pytest.raises(CorpusError, match="corpus has 3 usable characters; context 32 needs at least 340"):
        Trainer.resume(run, TrainConfig(steps=5, batch_size=4), Corpus(unknown_mostly, "Q"))


def test_a_diverging_record_is_read_back_only_when_its_message_can_say_it():
    record = {"step": 12, "loss": 99.5, "vocab": 74}
    for loss in (99.5, 99, float("inf")):
        assert failures.diverging_record({"diverging": {**record, "loss": loss}}) == {**record, "loss": loss}
    for loss in (10 ** 400, True, "99"):  # (10**400: too large for the float it is formatted as)
        assert failures.diverging_record({"diverging": {**record, "loss": loss}}) is None


def test_a_bpe_corpus_too_short_for_the_context_is_said_in_tokens():
    with pytest.raises(CorpusError, match="corpus has [0-9]+ tokens; context 32 needs at least 340 so that the 10% "
                                          "validation split still holds one window of 33 tokens"):
        Trainer.fresh(TINY, TrainConfig(tokenizer="bpe", bpe_vocab=300), Corpus(TEXT[:600], "short"))


@pytest.mark.parametrize("bad, message", [({"lr": -1}, "lr must be"), ({"steps": -1}, "steps must be an integer"),
                                          ({"batch_size": 10**6}, "batch_size must be"),
                                          ({"lr": float("nan")}, "lr must be"), ({"schedule": "step"}, "schedule")])
def test_absurd_hyperparameters_are_refused(bad, message):
    with pytest.raises(TrainConfigError, match=message):
        TrainConfig(**bad)


def test_cosine_schedule_warms_up_then_decays_to_the_floor():
    tc = TrainConfig(steps=100, lr=1.0, schedule="cosine", warmup=10, min_lr_ratio=0.1)
    assert lr_at(0, tc) == pytest.approx(0.1) and lr_at(9, tc) == pytest.approx(1.0)
    assert lr_at(100, tc) == pytest.approx(0.1) and lr_at(55, tc) == pytest.approx(0.55)
    assert lr_at(50, TrainConfig()) == 3e-3


def test_evaluate_scores_every_position_once():
    trainer = Trainer.fresh(TINY, TrainConfig(steps=1), CORPUS)
    ids = trainer.val_ids[:100]
    trainer.model.eval()
    # 99 targets: three full windows of 32 and a tail of 3
    total = 0.0
    for s in (0, 32, 64, 96):
        x, y = ids[s:min(s + 32, 99)], ids[s + 1:min(s + 33, 100)]
        total += torch.nn.functional.cross_entropy(trainer.model(x[None])[0][0], y, reduction="sum").item()
    assert evaluate(trainer.model, ids) == pytest.approx(total / 99, rel=1e-5)
    assert math.isfinite(total)


def test_time_spent_paused_is_not_counted():
    control = TrainControl()
    trainer = Trainer.fresh(TINY, TrainConfig(steps=3, batch_size=2, final_eval=False), CORPUS)
    walls = []

    def on_event(event):
        if isinstance(event, StepEvent):
            walls.append(event.elapsed_s)
            if event.step == 1:
                control.pause()
                threading.Timer(1.5, control.resume).start()

    trainer.run(on_event, control)
    assert walls[2] - walls[1] < 1.0  # the 1.5 s pause between steps 1 and 2 is excluded


def test_the_eta_follows_the_recent_steps_not_a_slow_start():
    rate = RecentRate(start=0.0, window=20)
    at = 0.0
    for _ in range(5):  # five slow first steps, 2 s each
        at += 2.0
        rate.step_done(at)
    for _ in range(40):  # then 0.1 s a step
        at += 0.1
        steps_per_s = rate.step_done(at)
    assert steps_per_s == pytest.approx(10.0)  # the mean since the start would say 45 / 14 s = 3.2 steps/s


def test_a_runs_eta_is_the_remaining_steps_at_the_recent_speed():
    events = []
    Trainer.fresh(TINY, TrainConfig(steps=30, batch_size=2, final_eval=False, eval_every=1000), CORPUS).run(
        lambda event: events.append(event) if isinstance(event, StepEvent) else None)
    last = events[-2]  # one step left
    assert last.eta_s == pytest.approx(1 / last.tokens_per_s * 2 * TINY.context)
    assert events[-1].eta_s == 0


def _grads_of(model):
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("batch, shards", [(8, 2), (3, 2), (1, 2), (2, 3)])
def test_sharded_gradients_equal_one_pass_over_the_whole_batch(batch, shards):
    model, gen = build_model(TINY, seed=0)
    ids = torch.randint(TINY.vocab_size, (batch, TINY.context + 1), generator=gen)
    x, y = ids[:, :-1], ids[:, 1:]
    _, loss = model(x, y)
    loss.backward()
    whole = _grads_of(model)
    sharded = ShardedGrads(model, shards)
    try:
        shard_loss = sharded(x, y)
        first = _grads_of(model)
        sharded(x, y)
        again = _grads_of(model)
    finally:
        sharded.close()
    assert shard_loss.item() == pytest.approx(loss.item(), rel=1e-6)
    for a, b, c in zip(whole, first, again):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
        assert torch.equal(b, c)  # shards are summed in a fixed order: the same batch gives the same bits


def _in_new_thread(fn):
    out = []
    worker = threading.Thread(target=lambda: out.append(fn()))
    worker.start()
    worker.join()
    return out[0]


def test_every_run_shards_over_every_core_and_two_runs_agree_bit_for_bit(monkeypatch):
    """Runs start in fresh threads, as app jobs do; neither a finished run's workers nor a one-thread job may
    leave later threads on one core."""
    shard_counts = []
    start = ShardedGrads.__init__

    def counting_start(self, model, shards):
        shard_counts.append(shards)
        start(self, model, shards)
    monkeypatch.setattr(ShardedGrads, "__init__", counting_start)
    tc = TrainConfig(steps=15, batch_size=8, eval_every=15, final_eval=False, sample_chars=10)
    runs = [Trainer.fresh(TINY, tc, CORPUS) for _ in range(2)]
    _in_new_thread(lambda: Trainer.fresh(TINY, replace(tc, threads=1, steps=2), CORPUS).run())
    for trainer in runs:
        _in_new_thread(trainer.run)
    assert shard_counts == [1, CORES, CORES]
    assert _in_new_thread(torch.get_num_threads) == CORES
    assert runs[0].history["train_loss"] == runs[1].history["train_loss"]
    assert all(torch.equal(a, b) for a, b in zip(runs[0].model.parameters(), runs[1].model.parameters()))


@pytest.mark.skipif(CORES < 2, reason="one core: every thread runs on one thread anyway")
def test_shard_workers_compute_on_one_thread_each():
    """torch gives a thread its count on first use, from the count set last anywhere: the pool's creator setting
    its own count back must not put the workers on every core (two shards would then fight over each core)."""
    pool = single_core_pool(2, "test-shard")
    try:
        counts = [pool.submit(lambda: (torch.ones(512, 512) @ torch.ones(512, 512), torch.get_num_threads())[1])
                  for _ in range(6)]
        assert [c.result() for c in counts] == [1] * 6
    finally:
        pool.shutdown()
    assert torch.get_num_threads() == CORES


def test_a_run_folder_is_trained_by_one_process_at_a_time(tmp_path):
    run = tmp_path / "locked"
    run.mkdir()
    trainer = Trainer.fresh(TINY, TrainConfig(steps=2, batch_size=4, final_eval=False), CORPUS, out_dir=run)
    with lock_held(run, os.getppid()):  # a live process that is not this one
        with pytest.raises(ckpt.CheckpointError, match=f"is being trained by another process \\(pid {os.getppid()}\\)"):
            trainer.run()
    assert not (run / "model.safetensors").exists()
    assert (run / locks.LOCK).read_text() == str(os.getppid())  # left by a process that ended: taken
    assert trainer.run() == "finished" and not (run / locks.LOCK).exists()


def test_a_run_that_saved_nothing_leaves_no_folder(tmp_path):
    trainer = Trainer.fresh(TINY, TrainConfig(steps=50, batch_size=4, lr=1e4, final_eval=False), CORPUS,
                      out_dir=tmp_path / "nothing")
    with pytest.raises(Diverged):
        trainer.run()
    assert not (tmp_path / "nothing").exists()  # its name is free again
