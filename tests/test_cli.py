"""The command line's answers to user errors: a message and an exit code, never a traceback, nothing lost."""
import pytest

from gptcore import checkpoint as ckpt
from gptcore.cli import main

SMALL = ["--d-model", "16", "--n-layer", "1", "--n-head", "2", "--d-ff", "32", "--context", "16", "--threads", "1",
         "--batch-size", "4"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "tiny"
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "3", "--out", str(out),
                 *SMALL]) == 0
    return out


def test_a_command_line_run_records_its_corpus_so_the_app_can_continue_it(trained, tmp_path):
    from gptcore import runs

    assert ckpt.read_meta(trained)["corpus_source"] == {"kind": "builtin", "chars": 20000, "seed": 0}
    [run] = [r for r in runs.list_runs(root=trained.parent) if r.name == trained.name]
    assert run.blocker("continue") is None and run.source.reloadable
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world. " * 300)
    out = tmp_path / "f"
    assert main(["train", "--data", str(corpus), "--steps", "1", "--out", str(out), *SMALL]) == 0
    assert ckpt.read_meta(out)["corpus_source"] == {"kind": "file", "path": str(corpus.resolve()),
                                                    "max_chars": 1_000_000}
    cut = tmp_path / "cut"  # --max-chars also cuts the built-in stories: record what was trained on
    assert main(["train", "--data", "builtin", "--builtin-chars", "30000", "--max-chars", "25000", "--steps", "1",
                 "--out", str(cut), *SMALL]) == 0
    assert ckpt.read_meta(cut)["corpus_source"]["chars"] == 25_000


def test_training_into_a_folder_that_holds_a_model_needs_resume(trained, tmp_path, capsys):
    before = (trained / "model.safetensors").read_bytes()
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world. " * 300)
    assert main(["train", "--data", str(corpus), "--steps", "1", "--out", str(trained), *SMALL]) == 2
    assert f"{trained} already holds a trained model; continue it with --resume" in capsys.readouterr().err
    assert (trained / "model.safetensors").read_bytes() == before


def test_a_resumed_run_keeps_its_model_and_needs_more_steps(trained, capsys):
    args = ["train", "--data", "builtin", "--builtin-chars", "20000", "--out", str(trained), "--resume"]
    assert main([*args, "--d-model", "64"]) == 2
    assert "a resumed run keeps its model" in capsys.readouterr().err
    assert main([*args, "--steps", "2"]) == 2
    assert "the run is already at step 3: set steps higher" in capsys.readouterr().err
    assert ckpt.load_checkpoint(trained).meta["step"] == 3


def test_eval_of_a_text_too_short_to_score_says_so(trained, tmp_path, capsys):
    short = tmp_path / "s.txt"
    short.write_text("H")
    assert main(["eval", "--checkpoint", str(trained), "--data", str(short), "--split", "all"]) == 2
    assert "has 1 character(s) the model knows in its all split; scoring needs at least 2" in capsys.readouterr().err
    short.write_text("Hello there")  # shorter than the context: scored from partial windows
    assert main(["eval", "--checkpoint", str(trained), "--data", str(short), "--split", "all"]) == 0
    loss = float(capsys.readouterr().out.split("val_loss ")[1])
    assert 0 < loss < 10


@pytest.mark.parametrize("flags, message", [(["--temperature", "nan"], "temperature must be a finite number"),
                                            (["--temperature", "0"], None), (["--top-k", "0"], "top_k must be"),
                                            (["--chars", "0"], "--chars must be at least 1")])
def test_sampling_settings_are_checked_before_anything_is_printed(trained, capsys, flags, message):
    code = main(["sample", "--checkpoint", str(trained), "--chars", "5", *flags])
    out, err = capsys.readouterr()
    if message is None:  # temperature 0: greedy, so the same text every time
        assert code == 0 and main(["sample", "--checkpoint", str(trained), "--chars", "5", *flags]) == 0
        assert capsys.readouterr().out == out
    else:
        assert code == 2 and message in err and out == ""


def test_a_diverging_run_reports_what_was_kept_and_marks_it(tmp_path, capsys):
    out = tmp_path / "nan"
    code = main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "300", "--lr", "10000",
                 "--checkpoint-every", "1", "--out", str(out), *SMALL])
    err = capsys.readouterr().err
    assert code == 3 and "Training diverged: " in err
    kept = ckpt.load_checkpoint(out)
    assert f"The last good checkpoint (step {kept.meta['step']:,}) is kept in {out}" in err
    assert kept.meta["status"] == "diverged"
