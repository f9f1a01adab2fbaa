import json

import pytest
import torch
from safetensors.torch import save_file

from gptcore import checkpoint as ckpt
from gptcore.config import GPTConfig
from gptcore.data import CharTokenizer
from gptcore.model import GPT


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
    with pytest.raises(ckpt.CheckpointError, match="weights do not match the model config"):
        ckpt.load_checkpoint(directory)


def test_a_pickle_checkpoint_is_never_unpickled(tmp_path):
    (tmp_path / "p").mkdir()
    torch.save({"evil": 1}, tmp_path / "p" / "model.safetensors")
    with pytest.raises(ckpt.CheckpointError):
        ckpt.load_checkpoint(tmp_path / "p")


@pytest.mark.parametrize("name, expected", [("my run", "my-run"), ("../../etc/passwd", "etc-passwd"),
                                            ("ok_name-1.2", "ok_name-1.2")])
def test_names_are_sanitised_into_the_checkpoints_folder(name, expected, tmp_path):
    assert ckpt.safe_name(name) == expected
    assert ckpt.checkpoint_dir(name, tmp_path).parent == tmp_path


@pytest.mark.parametrize("name", ["", "..", "///", "é"])
def test_unusable_names_are_refused(name):
    with pytest.raises(ckpt.CheckpointError, match="is not a usable checkpoint name"):
        ckpt.safe_name(name)


def test_delete_refuses_folders_outside_the_root(saved, tmp_path):
    directory, _ = saved
    with pytest.raises(ckpt.CheckpointError, match="is not inside"):
        ckpt.delete_checkpoint(directory, root=tmp_path / "elsewhere")
    ckpt.delete_checkpoint(directory, root=tmp_path)
    assert not directory.exists()


def test_snapshots_are_listed_in_step_order(saved):
    directory, model = saved
    tok = CharTokenizer.from_text("abcdefgh")
    for step in (20, 5, 100):
        ckpt.save_snapshot(directory, model, tok, step)
    assert [s for s, _ in ckpt.list_snapshots(directory)] == [5, 20, 100]
    assert ckpt.load_weights(ckpt.list_snapshots(directory)[0][1])[2] == 5
