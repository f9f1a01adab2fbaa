"""Page 'From averaging to attention': tutorial printout, interactive heatmaps, the leak demo job, the quiz."""
import threading

import numpy as np
import pytest
from page_helpers import app_page, chart, frame, run_page

from explorer.ui import job_registry, with_story_breaks
from gptcore.config import GPTConfig
from gptcore.demos import averaging as avg
from gptcore.train import TrainConfig

LEAK_JOB = "mask-leak"


@pytest.fixture
def at():
    return run_page("averaging_to_attention.py")


def test_page_prints_the_tutorials_numbers():
    at = app_page("averaging_to_attention")
    assert not at.exception
    printout = at.code[0].value
    assert "tensor([-0.5741, -0.3745]) tensor([-0.5741, -0.3745])" in printout
    assert printout.endswith("tensor([0.3333, 0.3333, 0.3333, 0.0000])")
    assert "[0.3333, 0.3333, 0.3333, 0.0000]" in printout
    table = frame(at, "mask + softmax")
    assert table.loc[2, "loop"] == table.loc[2, "matmul"] == table.loc[2, "mask + softmax"] == "[-0.5741, -0.3745]"


def test_length_slider_resizes_the_weight_matrices(at):
    assert len(chart(at, "avg-matmul")[0]["z"]) == 4
    at.slider(key="avg-T").set_value(7).run()
    z = chart(at, "avg-matmul")[0]["z"]
    assert len(z) == 7 and z[6][0] == pytest.approx(1 / 7)
    np.testing.assert_allclose(chart(at, "avg-softmax")[0]["z"], z, atol=1e-6)


def test_sharpness_changes_the_attention_weights_and_zero_gives_the_plain_average(at):
    before = chart(at, "att-weights")[0]["z"]
    at.slider(key="att-sharpness").set_value(0.0).run()
    after = chart(at, "att-weights")[0]["z"]
    assert after != before
    assert after[3][:4] == pytest.approx([0.25] * 4)


def test_mask_after_softmax_shows_rows_that_no_longer_sum_to_one():
    at = app_page("averaging_to_attention")
    sums = frame(at, "softmax, then mask")
    assert sums.loc["mask, then softmax"].tolist() == pytest.approx([1.0] * sums.shape[1])
    assert (sums.loc["softmax, then mask"].iloc[:-1] < 0.999).all()


def test_empty_text_gives_a_warning_not_a_traceback(at):
    at.text_input(key="att-text").set_value("").run()
    assert not at.exception
    assert "at least one character" in at.warning[0].value


def test_quiz_says_right_and_wrong(at):
    at.radio(key="causal-mask-radio").set_value(1).run()
    at.button(key="causal-mask-check").click().run()
    assert at.success and at.success[0].value.startswith("Right.")
    at.radio(key="causal-mask-radio").set_value(0).run()
    at.button(key="causal-mask-check").click().run()
    assert at.error and at.error[0].value.startswith("Not quite.")


TINY_LEAK = avg.LeakSetup(corpus_chars=20_000, model=GPTConfig(d_model=32, n_layer=2, n_head=2, d_ff=88, context=32),
                          train=TrainConfig(steps=70, batch_size=8, lr=1e-2, eval_every=70, eval_batches=2,
                                            threads=1, sample_chars=40))


def test_a_checked_answer_keeps_its_verdict_through_the_pages_training_run(at, monkeypatch):
    monkeypatch.setattr(avg, "LEAK_SETUP", TINY_LEAK)
    at.radio(key="causal-mask-radio").set_value(1).run()
    at.button(key="causal-mask-check").click().run()
    at.button(key="leak-start").click().run()
    job_registry().get(LEAK_JOB).join(120)
    at.run()
    assert at.radio(key="causal-mask-radio").value == 1
    assert at.success and at.success[0].value.startswith("Right.")
    at.radio(key="causal-mask-radio").set_value(0).run()  # a new answer waits for its own check
    assert not at.success and not at.error


def test_the_quiz_explanation_speaks_of_the_loss_only_as_something_to_train(at):
    at.radio(key="causal-mask-radio").set_value(1).run()
    at.button(key="causal-mask-check").click().run()
    assert "near-zero loss above" not in at.success[0].value and "train the two models above" in at.success[0].value


def test_a_story_break_reads_as_a_divider_not_as_the_corpus_marker():
    assert with_story_breaks("The end.\n<|endoftext|>\nOnce upon a time") == "The end.\n— new story —\nOnce upon a time"
    assert with_story_breaks("cat.<|endoftext|>Lily") == "cat.\n— new story —\nLily"  # (a sample cut anywhere)


def test_leak_demo_refuses_to_start_while_another_job_runs(at):
    release = threading.Event()
    blocker = job_registry().start("blocker", "test", lambda job: release.wait(60))
    try:
        at.button(key="leak-start").click().run()
        assert any("'blocker' (test) is already running" in e.value for e in at.error)
    finally:
        release.set()
        blocker.join(10)


def test_leak_demo_trains_both_models_and_shows_their_losses_and_samples(at, monkeypatch):
    monkeypatch.setattr(avg, "LEAK_SETUP", TINY_LEAK)
    at.button(key="leak-start").click().run()
    job = job_registry().get(LEAK_JOB)
    job.join(120)
    assert job.snapshot().status == "finished"
    at.run()
    curves = chart(at, "leak-curves")
    assert [c["name"] for c in curves] == ["causal", "no mask"] and all(len(c["y"]) == 71 for c in curves)
    losses = {m.label: float(m.value) for m in at.metric if m.label.startswith("Validation loss")}
    assert losses["Validation loss, no mask"] < losses["Validation loss, causal"] - 1.0
    shown = [c.value.strip() for c in at.code]
    for variant in ("causal", "no mask"):
        sample = job.snapshot().data[f"{variant}/sample"]
        assert len(sample) == 41 and with_story_breaks(sample).strip() in shown
