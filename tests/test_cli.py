"""The command line's answers to user errors: a message and an exit code, never a traceback, nothing lost."""
import math

import pytest

from gptcore import checkpoint as ckpt
from gptcore.cli import main
from gptcore.errors import stored_message

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

    assert ckpt.read_meta(trained)["corpus_source"] == {"kind": "builtin", "chars": 20000, "seed": 0, "drills": 0.0,
                                                        "retellings": 0.0}
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


def test_a_run_continues_on_stories_with_copy_drills(trained, tmp_path, capsys):
    import shutil

    run = tmp_path / "drilled"
    shutil.copytree(trained, run)
    args = ["train", "--data", "builtin", "--builtin-chars", "20000", "--builtin-seed", "1", "--out", str(run),
            "--resume", "--steps", "5"]
    assert main([*args, "--builtin-drills", "0.95"]) == 2
    assert "the share of copy drills must be from 0 to 0.9, got 0.95" in capsys.readouterr().err
    assert main([*args, "--builtin-drills", "0.3"]) == 0
    meta = ckpt.read_meta(run)
    assert meta["step"] == 5 and meta["corpus_source"] == {"kind": "builtin", "chars": 20000, "seed": 1, "drills": 0.3,
                                                         "retellings": 0.0}
    assert meta["corpus"] == "built-in stories with 30% copy drills, 20,000 chars, seed 1"


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
                                            (["--temperature", "0"], None), (["--top-k", "-1"], "top_k must be"),
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


# ---------------------------------------------------------------- where a run writes, and what it never overwrites

def files_of(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_new_run_refuses_a_folder_holding_files_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "theirs"
    out.mkdir()
    (out / "config.json").write_text('{"mine": 1}')
    (out / "meta.json").write_text('{"mine": 2}')
    before = files_of(out)
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "1", "--out", str(out),
                 *SMALL]) == 2
    assert f"error: {out} already holds files this run did not write (config.json, meta.json): choose a new or " \
           "empty folder, so that nothing in it is overwritten" in capsys.readouterr().err
    assert files_of(out) == before


def test_a_new_run_says_where_it_writes_even_outside_checkpoints(tmp_path, monkeypatch, capsys):
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "1", "--out", "../../x/y",
                 *SMALL]) == 0
    out = capsys.readouterr().out
    assert f"writing the checkpoint to {tmp_path / 'x' / 'y'}\n" in out
    assert f"checkpoint saved to {tmp_path / 'x' / 'y'}\n" in out
    assert ckpt.load_checkpoint(tmp_path / "x" / "y").meta["step"] == 1


def test_out_naming_a_file_or_a_name_too_long_is_refused_with_a_message(tmp_path, capsys):
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    args = ["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "1", *SMALL]
    assert main([*args, "--out", str(mine)]) == 2
    assert f"error: {mine} is a file, not a folder: choose a folder for the checkpoint" in capsys.readouterr().err
    assert main([*args, "--out", str(mine / "run")]) == 2
    assert f"error: {mine / 'run'} cannot be a checkpoint folder: it, or a folder above it, is a file" in \
        capsys.readouterr().err
    assert mine.read_text() == "mine"
    assert main([*args, "--out", str(tmp_path / ("n" * 300))]) == 2
    assert "error: a checkpoint name has at most 64 characters; 'nnnnnnnnnnnnnnnnnnnnnnnn…' has 300" in \
        capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_full_disk_keeps_the_last_checkpoint_whole_says_so_and_marks_the_run_failed(tmp_path, monkeypatch,
                                                                                      capsys):
    import errno
    import os

    real = ckpt._write_temp

    def weights_fit_once(path, write):  # the first checkpoint (step 0) fits; no weights file fits after it
        if path.suffix == ".safetensors" and (path.parent / "model.safetensors").exists():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, write)

    monkeypatch.setattr(ckpt, "_write_temp", weights_fit_once)
    out = tmp_path / "full"
    code = main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "6", "--checkpoint-every", "2",
                 "--out", str(out), *SMALL])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: The disk is full: the run stopped at step 2, whose checkpoint could not be written (the disk is " \
           f"full: there is no space left to write {out / 'model.safetensors'}). The checkpoint of step 0 is kept " \
           f"whole in {out}. Free some space, then continue the run." in err
    assert "Traceback" not in err
    kept = ckpt.load_checkpoint(out)
    assert kept.meta["step"] == 0 and kept.meta["history"]["step"] == [0] and kept.meta["status"] == "failed"
    assert stored_message(kept.meta["message"]).key == "train.disk_full"
    from safetensors import safe_open

    with safe_open(str(out / "optimizer.safetensors"), framework="pt") as f:
        assert f.metadata()["step"] == "0"  # weights, optimizer and meta.json all from step 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "meta.json", "model.safetensors",
                                                     "optimizer.safetensors"]
    from gptcore import runs

    [run] = runs.list_runs(tmp_path)
    assert (run.status, run.step) == ("failed", 0)


def test_a_run_whose_loss_explodes_without_nan_is_flagged_as_diverging(tmp_path, capsys):
    out = tmp_path / "wild"
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "20", "--lr", "10",
                 "--eval-every", "10", "--out", str(out), *SMALL]) == 0
    err = capsys.readouterr().err
    meta, vocab = ckpt.read_meta(out), ckpt.load_checkpoint(out).tokenizer.vocab_size
    assert meta["final_val_loss"] > 50 and meta["diverging"] == {"step": 20, "loss": meta["final_val_loss"],
                                                                 "vocab": vocab}
    assert err.endswith(f"warning: the run is diverging: its validation loss is {meta['final_val_loss']:,.1f} at "
                        f"step 20, far above ln V = {math.log(vocab):.2f}, the loss of a uniform guess over its "
                        f"{vocab} tokens. Try a smaller learning rate, warmup or gradient clipping.\n")


def test_an_empty_prompt_is_said_as_such(trained, capsys):
    assert main(["sample", "--checkpoint", str(trained), "--prompt", ""]) == 2
    out, err = capsys.readouterr()
    assert err == "error: the prompt is empty: give --prompt at least one character to continue from\n" and out == ""


def test_a_corpus_file_whose_name_is_not_utf8_trains_and_is_listed_escaped(tmp_path, capsys):
    from gptcore import runs

    corpus = tmp_path / "n\udcffx.txt"  # the file name's bytes: n, 0xff, x
    corpus.write_text("hello world. " * 300)
    out = tmp_path / "runs" / "odd"
    assert main(["train", "--data", str(corpus), "--steps", "1", "--out", str(out), *SMALL]) == 0
    [run] = runs.list_runs(tmp_path / "runs")
    assert str(run.corpus) == "file n\\xffx.txt"
    assert ckpt.read_meta(out)["corpus_source"]["path"] == str(corpus)  # the real name, to load it again


def test_the_inspect_pages_generation_says_an_empty_prompt_is_empty(trained):
    from gptcore import inspector
    from gptcore.errors import InputError

    loaded = ckpt.load_checkpoint(trained)
    with pytest.raises(InputError, match="^the prompt is empty: type at least one character to continue from$"):
        inspector.generate(loaded.model, loaded.tokenizer, "", 5, 1.0, None, 0)


def test_weights_that_are_a_link_to_a_device_or_miss_their_tokenizer_are_named(trained, tmp_path, capsys):
    import json
    import shutil

    from safetensors.torch import load_file, save_file

    odd = tmp_path / "odd"
    shutil.copytree(trained, odd)
    (odd / "model.safetensors").unlink()
    (odd / "model.safetensors").symlink_to("/dev/zero")
    assert main(["sample", "--checkpoint", str(odd), "--chars", "5"]) == 2
    assert capsys.readouterr().err == f"error: {odd / 'model.safetensors'} is not a regular file but a device or a " \
                                      "socket: weights are a file written by this program\n"
    (odd / "model.safetensors").unlink()
    config = json.loads((trained / "config.json").read_text())["model"]
    save_file(load_file(str(trained / "model.safetensors")), str(odd / "model.safetensors"),
              metadata={"format": ckpt.FORMAT, "step": "3", "config": json.dumps(config)})
    assert main(["sample", "--checkpoint", str(odd), "--chars", "5"]) == 2
    assert capsys.readouterr().err == f"error: {odd / 'model.safetensors'} has no 'tokenizer' in its metadata, so " \
                                      "the model cannot be rebuilt from it\n"


def test_the_built_in_stories_are_as_long_as_asked_and_a_file_gives_its_first_million_characters(tmp_path):
    from gptcore.cli import parse_args, training_corpus

    corpus, source = training_corpus(parse_args(["train", "--data", "builtin", "--builtin-chars", "1000050",
                                                 "--out", "x"]))
    assert len(corpus.text) == 1_000_050 and source.chars == 1_000_050  # not cut to --max-chars' default
    text = tmp_path / "long.txt"
    text.write_text("a" * 1_000_100)
    corpus, source = training_corpus(parse_args(["train", "--data", str(text), "--out", "x"]))
    assert len(corpus.text) == 1_000_000 and source.max_chars == 1_000_000  # the tutorial's first million


def test_copying_with_fewer_than_two_repeats_is_refused_with_a_message(trained, capsys):
    assert main(["copying", "--checkpoint", str(trained), "--repeats", "0"]) == 2
    assert "error: repeats must be at least 2: copying needs a copy to copy from, got 0" in capsys.readouterr().err


def test_an_out_name_that_is_changed_is_said_and_a_dotted_path_names_its_folder(tmp_path, monkeypatch, capsys):
    args = ["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "1", *SMALL]
    assert main([*args, "--out", str(tmp_path / "my run")]) == 0
    assert "note: the checkpoint folder is named my-run: 'my run' is not a usable checkpoint name" in \
        capsys.readouterr().err
    assert ckpt.load_checkpoint(tmp_path / "my-run").meta["step"] == 1
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main([*args, "--out", "here/."]) == 0
    assert ckpt.load_checkpoint(tmp_path / "here").meta["step"] == 1
