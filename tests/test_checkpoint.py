import errno
import json
import os
import subprocess
import sys

import pytest
import torch
from run_helpers import lock_held
from safetensors.torch import load_file, save_file

from gptcore import checkpoint as ckpt
from gptcore import errors, folders, locks
from gptcore.config import GPTConfig
from gptcore.model import GPT
from gptcore.tokenizer import CharTokenizer


@pytest.fixture
def saved(tmp_path):
    tok = CharTokenizer.from_text("abcdefgh")
    model = GPT(GPTConfig(vocab_size=8, d_model=32, n_layer=2, n_head=2, d_ff=88, context=16))
    directory = ckpt.save_checkpoint(tmp_path / "run", model, tok, {"step": 7, "history": {"x": [1]}})
    return directory, model


def test_round_trip_restores_weights_config_tokenizer_and_meta(saved):
    directory, model = saved
    loaded = ckpt.load_checkpoint(directory)
    assert loaded.model.cfg == model.cfg and loaded.tokenizer.chars == list("abcdefgh")
    assert loaded.meta["step"] == 7 and loaded.meta["history"] == {"x": [1]}
    assert "torch" in loaded.meta["versions"]
    for (n, a), (_, b) in zip(model.state_dict().items(), loaded.model.state_dict().items()):
        assert torch.equal(a, b), n


def test_no_temporary_files_are_left_behind(saved):
    directory, _ = saved
    assert sorted(p.name for p in directory.iterdir()) == ["config.json", "meta.json", "model.safetensors"]


def test_files_are_written_with_the_umask_like_any_other_file(saved, tmp_path):
    directory, _ = saved
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    for path in directory.iterdir():
        assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777, path.name


def test_corrupt_weights_are_a_clear_error(saved):
    directory, _ = saved
    (directory / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ckpt.CheckpointError, match="is not a readable safetensors file"):
        ckpt.load_checkpoint(directory)


def test_a_foreign_safetensors_file_is_refused(tmp_path):
    (tmp_path / "x").mkdir()
    save_file({"weight": torch.zeros(3)}, str(tmp_path / "x" / "model.safetensors"))
    with pytest.raises(ckpt.CheckpointError, match="is not a gptcore checkpoint"):
        ckpt.load_checkpoint(tmp_path / "x")


def test_weights_that_do_not_match_the_config_are_refused(saved):
    directory, model = saved
    meta = {"format": ckpt.FORMAT, "step": "1", "tokenizer": json.dumps(CharTokenizer.from_text("abcdefgh").to_dict()),
            "config": json.dumps({**model.cfg.to_dict(), "d_ff": 96})}
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(directory / "model.safetensors"), metadata=meta)
    with pytest.raises(ckpt.CheckpointError) as refused:
        ckpt.load_checkpoint(directory)
    assert str(refused.value).endswith("model.safetensors: the weights do not match the model config: "
                                       "blocks.0.ffn.w1.weight is 88×32 in the file but the config needs 96×32, "
                                       "and 5 more tensors differ")
    del tensors["head.weight"]
    meta["config"] = json.dumps(model.cfg.to_dict())
    save_file(tensors, str(directory / "model.safetensors"), metadata=meta)
    with pytest.raises(ckpt.CheckpointError, match=r"the file has no head.weight, which the config needs \(8×32\)$"):
        ckpt.load_checkpoint(directory)
    tensors["extra.weight"] = torch.zeros(2, 3)
    tensors["head.weight"] = model.head.weight.detach().contiguous()
    save_file(tensors, str(directory / "model.safetensors"), metadata=meta)
    with pytest.raises(ckpt.CheckpointError, match=r"the file holds extra.weight \(2×3\), which the config has no "
                                                   r"place for$"):
        ckpt.load_checkpoint(directory)


def test_a_pickle_checkpoint_is_never_unpickled(tmp_path):
    (tmp_path / "p").mkdir()
    torch.save({"evil": 1}, tmp_path / "p" / "model.safetensors")
    with pytest.raises(ckpt.CheckpointError):
        ckpt.load_checkpoint(tmp_path / "p")


@pytest.mark.parametrize("name, expected", [("my run", "my-run"), ("../../etc/passwd", "etc-passwd"),
                                            ("ok_name-1.2", "ok_name-1.2")])
def test_names_are_sanitised_into_the_checkpoints_folder(name, expected, tmp_path):
    assert folders.safe_name(name) == expected
    assert folders.checkpoint_dir(name, tmp_path).parent == tmp_path


@pytest.mark.parametrize("name", ["", "..", "///", "é"])
def test_unusable_names_are_refused(name):
    with pytest.raises(ckpt.CheckpointError, match="is not a usable checkpoint name"):
        folders.safe_name(name)


def test_delete_refuses_folders_outside_the_root(saved, tmp_path):
    directory, _ = saved
    with pytest.raises(ckpt.CheckpointError, match="is not inside"):
        folders.delete_checkpoint(directory, root=tmp_path / "elsewhere")
    folders.delete_checkpoint(directory, root=tmp_path)
    assert not directory.exists()


def test_snapshots_are_listed_in_step_order(saved):
    directory, model = saved
    tok = CharTokenizer.from_text("abcdefgh")
    for step in (20, 5, 100):
        ckpt.save_snapshot(directory, model, tok, step)
    assert [s for s, _ in ckpt.list_snapshots(directory)] == [5, 20, 100]
    assert ckpt.load_weights(ckpt.list_snapshots(directory)[0][1])[2] == 5


def rewrite_weights(directory, tensors, **config_changes):
    """Save tensors as directory's weights with a valid gptcore header (config changed as asked)."""
    loaded = ckpt.load_checkpoint(directory)
    meta = {"format": ckpt.FORMAT, "step": "7", "tokenizer": json.dumps(loaded.tokenizer.to_dict()),
            "config": json.dumps({**loaded.model.cfg.to_dict(), **config_changes})}
    save_file(tensors, str(directory / "model.safetensors"), metadata=meta)


def test_weights_stored_in_bfloat16_load_into_the_float32_model(saved):
    """The shipped model keeps its snapshots in bfloat16 (half the bytes); they load as float32 weights."""
    directory, model = saved
    path = directory / "model.safetensors"
    tensors, header = ckpt.read_safetensors(path)
    save_file({k: v.to(torch.bfloat16) for k, v in tensors.items()}, str(path), metadata=header)
    loaded, _, step = ckpt.load_weights(path)
    assert step == 7 and all(p.dtype == torch.float32 for p in loaded.parameters())
    for name, value in loaded.state_dict().items():
        assert torch.equal(value, model.state_dict()[name].to(torch.bfloat16).float()), name

def test_a_tiny_file_describing_a_huge_model_is_refused_before_any_memory_is_allocated(saved):
    directory, model = saved
    rewrite_weights(directory, {"x": torch.zeros(1)}, d_model=4096, n_layer=64, n_head=64, d_ff=16384)
    with pytest.raises(ckpt.CheckpointError, match=r"has 17,\d{3},\d{3},\d{3} parameters, 68.7 GB in float32; this "
                                                    r"server opens models up to"):
        ckpt.load_checkpoint(directory)


@pytest.mark.parametrize("spoil, message", [(lambda t: t.long(), "holds torch.int64 values, not floating-point"),
                                            (lambda t: t.bool(), "holds torch.bool values"),
                                            (lambda t: t.clone().fill_(float("nan")), "contains NaN or infinite")])
def test_weights_of_the_wrong_kind_or_not_finite_are_refused(saved, spoil, message):
    directory, model = saved
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    tensors["head.weight"] = spoil(tensors["head.weight"]).contiguous()
    rewrite_weights(directory, tensors)
    with pytest.raises(ckpt.CheckpointError, match=f"head.weight {message}"):
        ckpt.load_checkpoint(directory)


def test_optimizer_state_of_the_wrong_shape_is_refused_and_one_from_another_step_is_skipped(tmp_path):
    from gptcore.data import Corpus
    from gptcore.train import TrainConfig, Trainer

    text = Corpus("the cat sat on the mat. " * 200, "cats")
    tiny = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=32, context=16)
    run = tmp_path / "r"
    Trainer.fresh(tiny, TrainConfig(steps=3, batch_size=4, final_eval=False), text, out_dir=run).run()
    resume = lambda: Trainer.resume(run, TrainConfig(steps=5, batch_size=4), text)  # noqa: E731
    assert resume().optimizer_restored
    state = load_file(str(run / "optimizer.safetensors"))
    save_file(state, str(run / "optimizer.safetensors"), {"step": "2"})  # as if an interrupted save left step 2's
    assert not resume().optimizer_restored
    state["head.weight::exp_avg"] = torch.zeros(5)
    save_file(state, str(run / "optimizer.safetensors"), {"step": "3"})
    with pytest.raises(ckpt.CheckpointError, match="head.weight::exp_avg has 5 torch.float32 values; "
                                                   "it needs 176 floats"):
        resume()


@pytest.mark.parametrize("meta", [None, {"step": 3}, {"train_config": [], "history": {}},
                                  {"train_config": {}, "history": 5}])
def test_a_run_without_readable_settings_and_history_cannot_be_continued(tmp_path, meta):
    from gptcore.data import Corpus
    from gptcore.train import TrainConfig, Trainer

    text = Corpus("the cat sat on the mat. " * 200, "cats")
    run = tmp_path / "r"
    Trainer.fresh(GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=32, context=16),
                  TrainConfig(steps=2, batch_size=4, final_eval=False), text, out_dir=run).run()
    if meta is None:
        (run / "meta.json").unlink()
    else:
        (run / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ckpt.CheckpointError, match="meta.json is missing or damaged: .* cannot be continued"):
        Trainer.resume(run, TrainConfig(steps=5, batch_size=4), text)
    assert ckpt.load_checkpoint(run).meta["step"] == 2  # still inspectable


# ---------------------------------------------------------------- a full disk, odd files, damaged meta.json

def full_disk_after(monkeypatch, files_written: int):
    """Let `files_written` checkpoint files be written, then fail every write as a full disk does."""
    real, count = ckpt._write_temp, []

    def write_temp(path, write):
        if len(count) >= files_written:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        count.append(path)
        return real(path, write)

    monkeypatch.setattr(ckpt, "_write_temp", write_temp)


def files_of(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("written", [0, 1, 2, 3])
def test_a_full_disk_changes_no_file_of_the_checkpoint(saved, monkeypatch, written):
    directory, model = saved
    before = files_of(directory)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4, dtype=torch.long))[1].backward()
    optimizer.step()  # new weights and optimizer moments: four files to write
    full_disk_after(monkeypatch, written)
    with pytest.raises(ckpt.DiskFull, match="the disk is full: there is no space left to write .*/run/"):
        ckpt.save_checkpoint(directory, model, CharTokenizer.from_text("abcdefgh"), {"step": 8}, optimizer)
    assert files_of(directory) == before  # every file as it was, no temporary file left
    assert ckpt.load_checkpoint(directory).meta["step"] == 7


def test_safetensors_reports_a_full_disk_as_the_oserror_it_is(saved, monkeypatch):
    from safetensors import SafetensorError

    directory, model = saved

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "
                              "\"No space left on device\" }) (os error 28)")

    monkeypatch.setattr(ckpt, "save_file", full)
    with pytest.raises(ckpt.DiskFull):
        ckpt.save_checkpoint(directory, model, CharTokenizer.from_text("abcdefgh"), {"step": 8})
    assert ckpt.load_checkpoint(directory).meta["step"] == 7


def test_a_weights_file_that_is_a_link_to_a_device_or_a_fifo_is_named_as_such(saved, tmp_path):
    directory, _ = saved
    weights = directory / "model.safetensors"
    weights.unlink()
    weights.symlink_to("/dev/zero")
    with pytest.raises(ckpt.CheckpointError, match="model.safetensors is not a regular file but a device or a "
                                                   "socket: weights are a file written by this program"):
        ckpt.load_checkpoint(directory)
    weights.unlink()
    os.mkfifo(tmp_path / "fifo")
    weights.symlink_to(tmp_path / "fifo")
    with pytest.raises(ckpt.CheckpointError, match=r"is not a regular file but a FIFO \(a named pipe\)"):
        ckpt.load_checkpoint(directory)  # (refused before opening it: opening a FIFO would wait forever)
    weights.unlink()
    weights.symlink_to(tmp_path / "gone")
    with pytest.raises(ckpt.CheckpointError, match="model.safetensors is a link to .*gone, which does not exist"):
        ckpt.load_checkpoint(directory)


def test_a_missing_tokenizer_is_named(saved):
    directory, model = saved
    meta = {"format": ckpt.FORMAT, "step": "7", "config": json.dumps(model.cfg.to_dict())}
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"),
              metadata=meta)
    with pytest.raises(ckpt.CheckpointError, match="model.safetensors has no 'tokenizer' in its metadata, so the "
                                                   "model cannot be rebuilt from it"):
        ckpt.load_checkpoint(directory)


def test_every_value_of_meta_json_is_checked_and_a_wrong_one_left_out(saved):
    directory, _ = saved
    meta = json.loads((directory / "meta.json").read_text())
    (directory / "meta.json").write_text(json.dumps({
        **meta, "final_val_loss": "bad", "wall_time": -3, "params": 1.5, "corpus": ["x"],
        "history": {"step": [0, 1], "train_loss": [4.0]}}))
    checked, damaged = ckpt.checked_meta(directory)
    assert damaged == ["corpus", "final_val_loss", "history", "params", "wall_time"]
    assert {"final_val_loss", "wall_time", "params", "corpus", "history"}.isdisjoint(checked)
    assert checked["step"] == 7 and ckpt.read_meta(directory) == checked
    ckpt.update_meta(directory, status="failed")  # other entries stay as they are on disk, damaged or not
    assert json.loads((directory / "meta.json").read_text())["final_val_loss"] == "bad"
    (directory / "meta.json").write_text("[1, 2]")
    assert ckpt.checked_meta(directory) == ({}, None)


def test_a_name_too_long_is_refused_not_cut():
    assert folders.safe_name("a" * 64) == "a" * 64
    with pytest.raises(ckpt.CheckpointError, match="a checkpoint name has at most 64 characters; 'a{24}…' has 300"):
        folders.safe_name("a" * 300)


# ---------------------------------------------------------------- the training lock

def test_a_lock_file_nobody_holds_is_free_whatever_it_says_and_a_held_one_is_busy(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    for text in ("", "not a pid", "0", str(os.getppid())):  # (left by processes that have ended: flock went with them)
        (run / locks.LOCK).write_text(text)
        with locks.training_lock(run):
            assert (run / locks.LOCK).read_text() == str(os.getpid())
        assert not (run / locks.LOCK).exists()
    with lock_held(run):  # held by a process that has not written its pid yet
        with pytest.raises(ckpt.CheckpointError, match="r is being trained by another process; stop it first"):
            with locks.training_lock(run):
                pass


def test_a_second_run_of_this_process_cannot_take_the_lock_nor_clear_the_first_runs_snapshots(saved):
    directory, model = saved
    (directory / "model.safetensors").unlink()  # a run that has saved snapshots but no checkpoint yet
    snapshot = ckpt.save_snapshot(directory, model, CharTokenizer.from_text("abcdefgh"), 0)
    with locks.training_lock(directory):
        assert (directory / locks.LOCK).read_text().split()[0] == str(os.getpid())
        for second in (lambda: locks.training_lock(directory).__enter__(), lambda: locks.check_new_folder(directory)):
            with pytest.raises(ckpt.CheckpointError, match="is being trained by another job of this program"):
                second()
        assert snapshot.is_file() and not locks.clear_abandoned(directory)
    assert not (directory / locks.LOCK).exists()


def test_a_lock_goes_with_its_process_however_it_ends(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run / locks.LOCK)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    assert locks.lock_holder(run) == holder.pid
    with pytest.raises(ckpt.CheckpointError, match=f"is being trained by another process \\(pid {holder.pid}\\)"):
        locks.check_new_folder(run)
    holder.kill()  # SIGKILL: nothing of it runs again, and the kernel lets go of its lock
    holder.wait()
    assert locks.lock_holder(run) is None and (run / locks.LOCK).read_text() == str(holder.pid)
    with locks.training_lock(run):  # taken
        assert (run / locks.LOCK).read_text() == str(os.getpid())
    assert run.is_dir() and not any(run.iterdir())  # released: its lock gone, the folder (not its own) kept


HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, str(os.getpid()).encode())
print("held", flush=True)
time.sleep(60)
"""


# ---------------------------------------------------------------- optimizer state, links, metadata, history

def test_optimizer_state_missing_a_slot_is_refused_before_training(tmp_path):
    from gptcore.data import Corpus
    from gptcore.train import TrainConfig, Trainer

    text = Corpus("the cat sat on the mat. " * 200, "cats")
    run = tmp_path / "r"
    tiny = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=32, context=16)
    # an AdamW moment gone (a step would fail on that parameter), and an AdamW moment on a matrix Muon updates
    for optimizer, name, found in (("adamw", "head.weight", "exp_avg, step"),
                                   ("muon", "blocks.0.ffn.w1.weight", "exp_avg, momentum")):
        tc = TrainConfig(steps=3, batch_size=4, final_eval=False, threads=1, optimizer=optimizer)
        Trainer.fresh(tiny, tc, text, out_dir=run / optimizer).run()
        state = load_file(str(run / optimizer / "optimizer.safetensors"))
        if optimizer == "adamw":
            del state[f"{name}::exp_avg_sq"]
        else:
            state[f"{name}::exp_avg"] = torch.zeros_like(state[f"{name}::momentum"])
        save_file(state, str(run / optimizer / "optimizer.safetensors"), {"step": "3"})
        needed = "exp_avg, exp_avg_sq, step" if optimizer == "adamw" else "momentum"
        with pytest.raises(ckpt.CheckpointError, match=f"the optimizer state of {name} holds {found} where it needs "
                                                       f"{needed}: delete that file to continue with a fresh "
                                                       "optimizer"):
            Trainer.resume(run / optimizer, TrainConfig(**{**tc.to_dict(), "steps": 5}), text)


def test_deleting_or_renaming_a_link_never_touches_what_it_points_to(saved, tmp_path):
    directory, _ = saved
    link = tmp_path / "link"
    link.symlink_to(directory)
    for action in (lambda: folders.delete_checkpoint(link, tmp_path),
                   lambda: folders.rename_checkpoint(link, "x", tmp_path)):
        with pytest.raises(ckpt.CheckpointError, match="link is a link or a file, not a checkpoint folder"):
            action()
    assert ckpt.load_checkpoint(directory).meta["step"] == 7 and link.is_symlink() and not (tmp_path / "x").exists()
    with pytest.raises(ckpt.CheckpointError, match="is not inside"):
        folders.delete_checkpoint(directory / "..", tmp_path)  # (the root itself)
    assert directory.is_dir()


def test_the_inspector_reads_a_weights_step_through_the_checked_header_reader(saved):
    from gptcore import inspector

    directory, _ = saved
    assert inspector.weights_step(directory / "model.safetensors") == 7
    with pytest.raises(ckpt.CheckpointError, match="run is not a regular file but a folder"):
        inspector.weights_step(directory)


def test_a_bug_while_rebuilding_the_model_is_not_called_unusable_metadata(saved, monkeypatch):
    directory, model = saved

    def broken(data):
        raise TypeError("a bug")
    monkeypatch.setattr(GPTConfig, "from_dict", broken)
    with pytest.raises(TypeError, match="a bug"):
        ckpt.load_checkpoint(directory)
    monkeypatch.undo()
    meta = {"format": ckpt.FORMAT, "step": "seven", "config": json.dumps(model.cfg.to_dict()),
            "tokenizer": json.dumps(CharTokenizer.from_text("abcdefgh").to_dict())}
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"),
              metadata=meta)
    with pytest.raises(ckpt.CheckpointError, match="records the step 'seven', not a whole number"):
        ckpt.load_checkpoint(directory)


@pytest.mark.parametrize("history", [{"step": [0, 1], "train_loss": [4.0, 3.0], "lr": [0.1]},
                                     {"step": [0, 1], "train_loss": [4.0, 3.0], "time": [0.5, 1.0, 2.0]},
                                     {"eval_step": [0], "eval_val": [4.0], "eval_train": []}])
def test_series_recorded_together_must_have_the_same_length(saved, history):
    directory, _ = saved
    meta = json.loads((directory / "meta.json").read_text())
    (directory / "meta.json").write_text(json.dumps({**meta, "history": history}))
    assert ckpt.checked_meta(directory)[1] == ["history"]
    whole = {"step": [0, 1], "train_loss": [4.0, 3.0], "lr": [0.1, 0.1], "time": [0.5, 1.0]}
    (directory / "meta.json").write_text(json.dumps({**meta, "history": whole}))
    assert ckpt.checked_meta(directory) == ({**meta, "history": whole}, [])


def test_a_stored_message_whose_template_would_build_a_huge_string_is_left_out(saved):
    directory, _ = saved
    meta = json.loads((directory / "meta.json").read_text())
    for template in ("{a:>100000000}", "{a:.100000000f}", "{a.__class__}", "{a[0]}", "{0}"):
        (directory / "meta.json").write_text(json.dumps({**meta, "message": {"key": "train.x", "template": template,
                                                                             "params": {"a": 1}}}))
        assert ckpt.checked_meta(directory)[1] == ["message"], template
    said = {"key": "train.x", "template": "loss {a:,.1f} at step {n:,} ({kind!r})", "params": {"a": 1234.5, "n": 7,
                                                                                                "kind": "x"}}
    (directory / "meta.json").write_text(json.dumps({**meta, "message": said}))
    assert ckpt.checked_meta(directory)[1] == []
    assert errors.stored_message(said) == "loss 1,234.5 at step 7 ('x')"
