"""Faults of the command line and the Train page: each answered with a sentence, none of them losing a folder."""
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from run_helpers import lock_held

from gptcore import checkpoint as ckpt
from gptcore import locks, prepare
from gptcore.cli import main
from gptcore.config import GPTConfig
from gptcore.data import CorpusError
from gptcore.model import GPT
from gptcore.tokenizer import CharTokenizer

SMALL = ["--d-model", "16", "--n-layer", "1", "--n-head", "2", "--d-ff", "32", "--context", "16", "--threads", "1",
         "--batch-size", "4"]


# ---------------------------------------------------------------- --out: never a folder the run did not make

@pytest.mark.parametrize("out", ["", ".", "./"])
def test_out_naming_the_current_folder_is_refused_and_the_folder_kept(out, tmp_path, monkeypatch, capsys):
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "1", "--out", out, *SMALL]) == 2
    assert "--out names the current folder" in capsys.readouterr().err
    assert here.is_dir()


def test_checking_an_empty_folder_it_did_not_make_leaves_that_folder(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    locks.check_new_folder(mine)
    assert mine.is_dir()


def test_a_lock_on_a_folder_it_did_not_make_removes_only_its_own_files(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    with locks.training_lock(mine):
        pass
    assert mine.is_dir() and not any(mine.iterdir())
    with locks.training_lock(tmp_path / "new"):  # a folder it made, left empty: removed
        pass
    assert not (tmp_path / "new").exists()


def test_an_abandoned_runs_leftovers_are_cleared_but_its_folder_stays(tmp_path):
    dead = tmp_path / "dead"
    (dead / "snapshots").mkdir(parents=True)
    (dead / "snapshots" / "step_000000.safetensors").write_bytes(b"x")
    (dead / locks.LOCK).write_text("999999999")
    locks.check_new_folder(dead)
    assert dead.is_dir() and not any(dead.iterdir())


# ---------------------------------------------------------------- a prepared folder that does not hold together

@pytest.fixture
def prepared(tmp_path):
    source = tmp_path / "stories.txt"
    source.write_text("Once upon a time, Lily met a cat named Tom.\n" * 200, encoding="utf-8")
    prepare.prepare(source, tmp_path / "p")
    return tmp_path / "p"


def test_token_ids_beyond_the_vocabulary_are_refused_naming_the_folder(prepared, capsys):
    tokens = prepared / prepare.TOKENS
    ids = np.fromfile(tokens, dtype=np.uint16)
    ids[len(ids) // 2] = 500
    ids.tofile(tokens)
    with pytest.raises(CorpusError, match=f"{tokens} holds token id 500, but its tokenizer has only 20 tokens: "
                                          f"prepare {prepared} again"):
        prepare.open_prepared(prepared)
    assert main(["train", "--data", str(prepared), "--steps", "1", "--out", str(prepared.parent / "run"),
                 *SMALL]) == 2
    assert "holds token id 500" in capsys.readouterr().err


def test_the_range_check_reads_the_file_in_chunks(prepared, monkeypatch):
    monkeypatch.setattr(prepare, "CHECK_TOKENS", 7)
    tokens = prepared / prepare.TOKENS
    ids = np.fromfile(tokens, dtype=np.uint16)
    ids[-1] = 20  # one past the last of the 20 characters' ids
    ids.tofile(tokens)
    with pytest.raises(CorpusError, match="holds token id 20,"):
        prepare.open_prepared(prepared)


@pytest.mark.parametrize("damage, said", [
    (lambda p: (p / prepare.TOKENIZER).unlink(), "has no tokenizer.json"),
    (lambda p: (p / prepare.TOKENIZER).write_text("{not json"), "tokenizer.json is not valid JSON"),
    (lambda p: (p / prepare.HEADER).write_text("{not json"), "header.json is not valid JSON"),
    (lambda p: (p / prepare.HEADER).write_text(json.dumps({"format": prepare.FORMAT, "dtype": "uint16"})),
     "header.json lacks a usable 'tokens' entry"),
])
def test_a_damaged_header_or_a_missing_tokenizer_is_said_in_a_sentence(prepared, damage, said):
    damage(prepared)
    with pytest.raises(CorpusError, match=said) as raised:
        prepare.open_prepared(prepared)
    assert "Errno" not in str(raised.value) and "line 1 column" not in str(raised.value)
    assert "prepare the corpus again" in str(raised.value)


# ---------------------------------------------------------------- top-k: 0 is off everywhere, below 0 is refused

STARTER = Path(__file__).resolve().parent.parent / "checkpoints" / "starter"


def test_top_k_zero_is_off_and_a_negative_one_is_refused_with_a_sentence(capsys):
    from gptcore import inspector
    from gptcore.errors import InputError

    args = ["sample", "--checkpoint", str(STARTER), "--prompt", "Once", "--chars", "20", "--seed", "3"]
    assert main([*args, "--top-k", "0"]) == 0
    off = capsys.readouterr().out
    assert main(args) == 0 and capsys.readouterr().out == off
    assert main([*args, "--top-k", "-3"]) == 2
    assert "top_k must be a whole number, 0 (off) or more, got -3" in capsys.readouterr().err
    logits = torch.randn(74)
    assert torch.equal(inspector.sampling_distribution(logits, 0.8, 0), inspector.sampling_distribution(logits, 0.8))
    with pytest.raises(InputError, match="top_k must be a whole number, 0 \\(off\\) or more, got -3"):
        inspector.sampling_distribution(logits, 0.8, -3)


# ---------------------------------------------------------------- under torchrun

def test_under_torchrun_the_launchers_failure_report_names_our_reason(tmp_path, monkeypatch, capsys):
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    error_file = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "1", "--device", "cuda",
                 "--out", str(tmp_path / "run"), *SMALL]) == 2
    said = capsys.readouterr().err.removeprefix("error: ").strip()
    assert said.startswith("--device cuda was asked for, but")
    report = ChildFailedError("gptcore", {0: ProcessFailure(local_rank=0, pid=1, exitcode=2,
                                                            error_file=str(error_file))}).format_msg()
    assert f"traceback : {said}" in report and "To enable traceback" not in report


def test_a_run_killed_in_one_process_of_torchrun_is_said_and_marked_interrupted(tmp_path):
    from test_ddp import NEW, Lines, torchrun

    folder = tmp_path / "run"
    process = torchrun(*NEW, "--eval-every", "5", "--checkpoint-every", "5", "--out", str(folder), "--steps", "100000")
    lines = Lines(process)
    try:
        lines.wait_for(r"^step +10 ")
        [second] = [pid for pid in map(int, Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text()
                                       .split()) if "RANK=1\0" in Path(f"/proc/{pid}/environ").read_text()]
        os.kill(second, signal.SIGKILL)
        process.wait(timeout=120)
    finally:
        process.kill()
    meta = ckpt.read_meta(folder)
    said = (f"error: Another process of this run has stopped (Connection closed by peer), so the run cannot go on. "
            f"The checkpoint of step {meta['step']:,} is kept whole in {folder}. Continue it with --resume.")
    assert said.replace("closed", "reset") in lines.text() or said in lines.text(), lines.text()
    assert meta["status"] == "interrupted" and meta["step"] >= 10
    assert "[rank0]: Traceback" not in lines.text()  # (torchrun's own report follows, whatever the cause)


# ---------------------------------------------------------------- a second Ctrl-C, a busy folder, limits, /proc

def test_a_second_ctrl_c_while_a_checkpoint_is_switched_in_waits_until_it_is_whole(tmp_path, monkeypatch):
    model = GPT(GPTConfig(vocab_size=8, d_model=16, n_layer=1, n_head=2, d_ff=48, context=16))
    tokenizer = CharTokenizer.from_text("abcdefgh")
    ckpt.save_checkpoint(tmp_path, model, tokenizer, {"step": 6, "status": "running"})
    replace, renamed = os.replace, []

    def ctrl_c_after_the_first_rename(source, target):
        replace(source, target)
        renamed.append(Path(target).name)
        if len(renamed) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "replace", ctrl_c_after_the_first_rename)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint(tmp_path, model, tokenizer, {"step": 7, "status": "stopped"})
    assert renamed == ["model.safetensors", "config.json", "meta.json"]  # every rename, then the Ctrl-C
    meta = ckpt.read_meta(tmp_path)
    assert (meta["step"], meta["status"], ckpt.load_checkpoint(tmp_path).meta["step"]) == (7, "stopped", 7)
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_temporary_files_of_a_killed_save_go_when_the_folder_is_trained_again(tmp_path):
    left = [tmp_path / ".meta.json.4242.0123abcd.tmp", tmp_path / ".config.json.4242.89abcdef.tmp"]
    for path in left:
        path.write_text("half")
    (tmp_path / "notes.tmp").write_text("someone's")  # not a name a save makes: kept
    with locks.training_lock(tmp_path):
        assert not any(path.exists() for path in left)
    assert (tmp_path / "notes.tmp").read_text() == "someone's"


def test_a_new_run_into_a_folder_another_process_trains_names_that_process(tmp_path, capsys):
    trained = tmp_path / "busy"
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "1", "--out", str(trained),
                 *SMALL]) == 0
    with lock_held(trained, os.getppid()):  # (what torchrun's process 0 finds when another process trains it)
        assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "1", "--out",
                     str(trained), *SMALL]) == 2
    assert f"is being trained by another process (pid {os.getppid()}); stop it first" in capsys.readouterr().err


def test_builtin_chars_has_the_forms_limit_on_the_command_line(tmp_path, capsys):
    from gptcore.config import settings
    from gptcore.sources import BuiltinStories

    limit = settings(BuiltinStories)["builtin_chars"]
    assert (limit.low, limit.high) == (1, 50_000_000)
    assert main(["train", "--data", "builtin", "--builtin-chars", "1000000000000", "--steps", "1", "--out",
                 str(tmp_path / "huge"), *SMALL]) == 2
    assert capsys.readouterr().err == "error: builtin_chars must be an integer from 1 to 50,000,000, got " \
                                      "1000000000000\n"
    assert not (tmp_path / "huge").exists()


@pytest.mark.parametrize("out", ["/proc/self/x", "/sys/kernel/x"])
def test_an_out_folder_that_cannot_be_made_is_a_sentence(out, capsys):
    assert main(["train", "--data", "builtin", "--builtin-chars", "20000", "--steps", "1", "--out", out, *SMALL]) == 2
    said = capsys.readouterr().err
    assert said.startswith("error: ") and "Traceback" not in said and out.rsplit("/", 1)[0] in said
