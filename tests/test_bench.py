import string
import subprocess
import sys
import threading

import torch
import torch.nn.functional as F

from bench import common, inference, main, rmsnorm, step, time_to_loss, whole_process
from gptcore.config import GPTConfig
from gptcore.data import get_batch
from gptcore.ladder import Curve
from gptcore.model import RMSNorm, apply_rope, rope_tables
from gptcore.recipes import RECIPES, Recipe
from gptcore.reference import tutorial_rope, tutorial_twin
from gptcore.train import TrainConfig, build_model

TINY = GPTConfig(d_model=32, n_layer=2, n_head=2, d_ff=88, context=32)
TEXT = "the cat sat on the mat. the dog ate the log. " * 200


def test_tutorial_twin_has_gptcores_weights_and_loss():
    model, gen = build_model(GPTConfig(vocab_size=76), seed=0)
    twin = tutorial_twin(model)
    assert sum(p.numel() for p in twin.parameters()) == 811_136
    data = torch.randint(76, (20_000,), generator=gen)
    batches = [get_batch(data, 128, 4, gen) for _ in range(3)]
    literal, ours = step.tutorial_step_fn(twin, batches), step.gptcore_step_fn(model, TrainConfig(), batches)
    for i in range(3):  # same loss before and after AdamW steps: plain vs fused, explicit vs SDPA attention
        assert abs(literal(i) - ours(i)) < 1e-5
    x, _ = batches[0]
    assert torch.allclose(twin(x)[0], model(x)[0], atol=1e-5)


def test_tutorial_rope_rebuilds_the_same_rotation_as_the_cached_tables():
    model, _ = build_model(GPTConfig(), seed=0)
    q = torch.randn(2, 4, 128, 32)
    cached = tutorial_rope(q)
    expected = torch.view_as_real(torch.view_as_complex(q.unflatten(-1, (-1, 2)))
                                  * torch.complex(model.rope_cos, model.rope_sin)).flatten(-2)
    assert torch.allclose(cached, expected, atol=1e-6)


def test_flops_per_step_is_the_issues_22_9_gflop():
    assert step.flops_per_step(GPTConfig(), 32) == 6 * 800_000 * 4096 + 12 * 4 * 32 * 128 ** 2 * 128
    assert round(step.flops_per_step(GPTConfig(vocab_size=76), 32) / 1e9, 1) == 22.9


def test_interleave_rotates_the_order_and_drops_warmup_rounds():
    calls = []
    times = common.interleave({name: (lambda r, n=name: calls.append((r, n))) for name in "abc"}, rounds=3, warmup=1)
    assert [len(t) for t in times.values()] == [3, 3, 3]
    assert [n for r, n in calls if r == 1] == ["b", "c", "a"] and [n for r, n in calls if r == 2] == ["c", "a", "b"]


def test_take_turns_alternates_threads_and_lets_the_last_one_finish_alone():
    turns, log = time_to_loss.TakeTurns(["a", "b"]), []

    def run(name, n):
        turns.wait(name)
        for i in range(n):
            log.append(name)
            if i < n - 1:
                turns.pass_on(name)
                turns.wait(name)
        turns.leave(name)
    threads = [threading.Thread(target=run, args=("b", 4)), threading.Thread(target=run, args=("a", 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert log == ["a", "b", "a", "b", "b", "b"]


def test_curve_reports_the_first_checkpoint_at_or_below_a_target():
    curve = Curve("x", step=[0, 10, 20, 30], seconds=[0.0, 5.0, 9.0, 14.0], val=[3.0, 1.2, 0.99, 1.01])
    assert curve.first_at_or_below(1.0) == (20, 9.0)
    assert curve.first_at_or_below(0.5) is None


def test_time_to_loss_interleaves_runs_and_writes_curves(tmp_path):
    tutorial = Recipe("t", "", TINY, TrainConfig(steps=8, batch_size=4, eval_every=4, sample_chars=5))
    fast = Recipe("f", "", TINY, TrainConfig(steps=4, batch_size=4, lr=1e-2, schedule="cosine", warmup=1,
                                             sample_chars=5))
    order = []
    runs = {"tutorial": (time_to_loss.train_tutorial_script, tutorial), "fast": (time_to_loss.train_recipe, fast)}
    curves = time_to_loss.time_to_loss(TEXT, runs, points=4, report=lambda c: order.append((c.name, c.step[-1])))
    assert curves["tutorial"].step == [0, 2, 4, 6, 8] and curves["fast"].step == [0, 1, 2, 3, 4]
    assert order[:4] == [("tutorial", 0), ("fast", 0), ("fast", 1), ("tutorial", 2)]
    assert curves["tutorial"].val[-1] < curves["tutorial"].val[0]
    assert all(b >= a for a, b in zip(curves["fast"].seconds, curves["fast"].seconds[1:]))
    csv_path, html_path = time_to_loss.write_curves(curves, curves["tutorial"].val[-1], tmp_path)
    rows = csv_path.read_text().splitlines()
    assert rows[0] == "recipe,step,seconds,val_loss" and len(rows) == 1 + 5 + 5
    assert "plotly" in html_path.read_text()[:5000].lower()


def test_the_tutorial_script_and_gptcores_trainer_follow_the_same_curve():
    recipe = Recipe("t", "", TINY, TrainConfig(steps=6, batch_size=4, eval_every=3, sample_chars=5))
    runs = {"script": (time_to_loss.train_tutorial_script, recipe), "trainer": (time_to_loss.train_recipe, recipe)}
    curves = time_to_loss.time_to_loss(TEXT, runs, points=3)
    assert curves["script"].step == curves["trainer"].step == [0, 2, 4, 6]
    assert all(abs(a - b) < 1e-4 for a, b in zip(curves["script"].val, curves["trainer"].val))


def test_time_to_loss_skips_with_a_reason_when_the_data_is_absent(tmp_path, capsys):
    assert main(["time-to-loss", "--data", str(tmp_path / "missing.txt")]) == 0
    assert f"skipping time-to-loss: {tmp_path / 'missing.txt'} is absent" in capsys.readouterr().out


def test_a_tiny_step_bench_runs_through_the_cli_and_prints_every_figure(capsys):
    assert main(["--rounds", "1", "--batch-size", "2", "--context", "16", "--matmul-size", "128",
                 "--no-hog"]) == 0
    out = capsys.readouterr().out
    for text in ("threads: ", "tutorial ", "gptcore ", "ms/step", "tok/s", "of peak", "GFLOP/s",
                 "where gptcore's step goes", "linear GEMMs ", "attention ", "everything else ",
                 "if everything else took no time"):
        assert text in out
    assert ("gptcore, 1 shard" in out) == (torch.get_num_threads() > 1)


def test_a_tiny_inference_bench_prints_every_figure(capsys):
    assert inference.main(["--batch-size", "2", "--context", "16", "--gen-chars", "20", "--val-chars", "500",
                           "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    for text in ("run_with_cache, full context 16", "with KV cache", "without cache", "chars/s",
                 "evaluate over 500", "training steps of "):
        assert text in out


def test_bench_runs_a_named_benchmark_and_refuses_an_unknown_one(capsys):
    assert main(["corpus", "3000"]) == 0
    assert " chars/s, vocab " in capsys.readouterr().out
    assert main(["nonsense"]) == 2
    assert "unknown benchmark 'nonsense'" in capsys.readouterr().out


def test_fast_recipe_trains_the_tutorials_architecture_on_under_half_its_characters():
    fast, tutorial = RECIPES["fast"], RECIPES["tutorial"]
    assert fast.model == tutorial.model
    assert fast.train.schedule == "cosine" and fast.train.grad_clip > 0 and not fast.train.decay_all
    assert fast.train.steps * fast.train.batch_size < tutorial.train.steps * tutorial.train.batch_size / 2


def test_the_benchmarks_hand_written_rms_norm_backward_is_right_and_the_models_norm_is_f_rms_norm():
    x = torch.randn(3, 5, 16, dtype=torch.float64, requires_grad=True)
    w = torch.randn(16, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: rmsnorm.HandWrittenRMSNorm.apply(x, w, 1e-5), (x, w))
    x32 = torch.randn(2, 7, 16)
    assert torch.equal(RMSNorm(16)(x32), F.rms_norm(x32, (16,), torch.ones(16), 1e-5))
    norm = RMSNorm(16)
    assert torch.equal(rmsnorm.hand_written_norm(norm, x32), norm(x32))  # the same forward, bit for bit


def test_a_tiny_rmsnorm_bench_prints_both_steps_and_their_ratio(capsys):
    assert main(["rmsnorm", "--rounds", "1", "--batch-size", "2"]) == 0
    out = capsys.readouterr().out
    for text in ("hand-written", "autograd", "ms/step", "autograd / hand-written:", "load average"):
        assert text in out, text


def test_rope_as_complex_product_equals_the_tutorials_two_formulas_with_gradients():
    x = torch.randn(2, 4, 128, 32, requires_grad=True)
    cos, sin = rope_tables(torch.arange(128.0), 32)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    tutorial = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)
    ours = apply_rope(x, cos, sin)
    g = torch.randn_like(ours)
    assert torch.allclose(ours, tutorial, atol=1e-6)
    assert torch.allclose(torch.autograd.grad(ours, x, g)[0], torch.autograd.grad(tutorial, x, g)[0], atol=1e-6)


def test_the_whole_process_baseline_is_the_tutorials_script_with_its_810624_parameters(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text((string.ascii_letters + string.digits + ".,!?;:'\" \n-()")[:74] * 400, encoding="utf-8")
    script = tmp_path / "tutorial_gpt.py"
    script.write_text(whole_process.tutorial_script())
    # one step, on one thread: the test's neighbours keep the other core (the benchmark itself runs the defaults)
    done = subprocess.run([sys.executable, str(script), str(corpus), "0"], capture_output=True, text=True,
                          env=whole_process.shell_environment(OMP_NUM_THREADS="1"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "import gptcore" not in script.read_text() and "OMP_WAIT_POLICY" not in whole_process.shell_environment()
    lines = done.stdout.splitlines()
    assert lines[0] == "vocab 74, params 810,624"
    assert lines[1].startswith("step    0  train ") and lines[-1].endswith("s")


def test_whole_process_takes_each_rounds_step_time_from_the_difference_of_two_runs(monkeypatch):
    """Start-up (2 s and 5 s) cancels; the per-step times (0.25 and 0.2 s) come out exactly, order rotating."""
    order = []
    def fake_time(argv, env):
        name, steps = argv
        order.append(name)
        return {"a": 2.0, "b": 5.0}[name] + steps * {"a": 0.25, "b": 0.2}[name]
    monkeypatch.setattr(whole_process, "time_process", fake_time)
    runs = {name: (lambda steps, i, name=name: ([name, steps], {})) for name in ("a", "b")}
    estimates = whole_process.measure(runs, n1=10, n2=210, rounds=2)
    assert [round(s, 9) for s in estimates["a"]] == [0.25, 0.25] and [round(s, 9) for s in estimates["b"]] == [0.2, 0.2]
    assert order == ["a", "b", "a", "b", "b", "a", "b", "a"]


def test_sample_words_counts_only_words_of_two_stories():
    from bench.sample_words import real_words, word_share
    from gptcore.corpus import SEPARATOR

    # "q7x" and "said" come up in one story only, "zib" in two: only words of two stories or more count
    vocabulary = real_words(SEPARATOR.join(["The dog ran. Zib said Q7x.", "A dog sat. The cat ran.", "Zib."]))
    assert vocabulary == {"the", "dog", "ran", "zib"}
    assert word_share("the dog, Zib said Q7x ran", vocabulary) == (4 / 6, 6)
