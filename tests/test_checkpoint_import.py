"""gptcore.archive.import_checkpoint_zip: a checkpoint zip becomes a run only after every check passes."""
import io
import json
import os
import stat
import zipfile

import pytest
import torch

from gptcore import archive, runs
from gptcore import checkpoint as ckpt
from gptcore.config import GPTConfig
from gptcore.model import GPT
from gptcore.tokenizer import CharTokenizer


@pytest.fixture
def run(tmp_path):
    """A saved checkpoint with an optimizer-free meta.json, a snapshot and config.json, in tmp_path/src/lesson."""
    tok = CharTokenizer.from_text("abcdefgh")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=8, d_model=16, n_layer=1, n_head=2, d_ff=48, context=16))
    folder = ckpt.save_checkpoint(tmp_path / "src" / "lesson", model, tok,
                                  {"step": 7, "status": "finished", "history": {"step": [0, 7], "train_loss": [2, 1]}})
    ckpt.save_snapshot(folder, model, tok, 0)
    return folder, model


def zip_of(entries: dict[str, bytes], links: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def files_of(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_downloaded_run_comes_back_whole_under_its_own_name(run, tmp_path):
    folder, model = run
    root = tmp_path / "checkpoints"
    imported = archive.import_checkpoint_zip(runs.zip_run(folder), root=root)
    assert imported == root / "lesson"
    assert sorted(files_of(imported)) == ["config.json", "meta.json", "model.safetensors",
                                          "snapshots/step_000000.safetensors"]
    assert files_of(imported)["model.safetensors"] == files_of(folder)["model.safetensors"]
    loaded = ckpt.load_checkpoint(imported)
    assert loaded.meta["step"] == 7 and loaded.meta["status"] == "finished"
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.model.state_dict().values()))
    [listed] = runs.list_runs(root)
    assert (listed.name, listed.status, listed.step) == ("lesson", "finished", 7)
    assert sorted(os.listdir(root)) == ["lesson"]  # nothing left of the unpacking


def test_a_name_can_be_given_and_a_taken_name_is_refused(run, tmp_path):
    folder, _ = run
    root, data = tmp_path / "checkpoints", runs.zip_run(folder)
    archive.import_checkpoint_zip(data, root=root)
    with pytest.raises(ckpt.CheckpointError, match="a checkpoint named 'lesson' already exists"):
        archive.import_checkpoint_zip(data, root=root)
    assert archive.import_checkpoint_zip(data, "lesson copy", root=root) == root / "lesson-copy"
    flat = zip_of(files_of(folder))  # the files at the zip's top, no folder
    with pytest.raises(ckpt.CheckpointError, match="give the checkpoint a name"):
        archive.import_checkpoint_zip(flat, root=root)
    assert archive.import_checkpoint_zip(flat, "flat", root=root) == root / "flat"
    assert sorted(os.listdir(root)) == ["flat", "lesson", "lesson-copy"]


@pytest.mark.parametrize("member, said", [
    ("/etc/cron.d/evil", "the zip holds '/etc/cron.d/evil', a name that could point outside its folder: refused"),
    ("lesson/../../evil.py", "the zip holds 'lesson/../../evil.py', a name that could point outside its folder"),
    ("lesson\\..\\evil.py", "a name that could point outside its folder"),
    ("C:/evil.py", "a name that could point outside its folder"),
    ("lesson/run.py", "the zip holds lesson/run.py, which is not a file of a checkpoint"),
    ("lesson/model.pt", "the zip holds lesson/model.pt, which is not a file of a checkpoint"),
])
def test_names_that_are_not_a_checkpoints_own_files_refuse_the_whole_zip(run, tmp_path, member, said):
    folder, _ = run
    entries = {f"lesson/{name}": data for name, data in files_of(folder).items()}
    root = tmp_path / "checkpoints"
    with pytest.raises(ckpt.CheckpointError) as refused:
        archive.import_checkpoint_zip(zip_of({**entries, member: b"import os; os.system('rm -rf ~')"}), root=root)
    assert said in str(refused.value)
    assert not root.exists() or os.listdir(root) == []


def test_links_two_checkpoints_and_missing_files_are_refused(run, tmp_path):
    folder, _ = run
    entries = {f"lesson/{name}": data for name, data in files_of(folder).items()}
    root = tmp_path / "checkpoints"
    with pytest.raises(ckpt.CheckpointError, match=r"the zip holds a link \(lesson/meta.json\)"):
        archive.import_checkpoint_zip(zip_of({k: v for k, v in entries.items() if k != "lesson/meta.json"},
                                          links=("lesson/meta.json",)), root=root)
    with pytest.raises(ckpt.CheckpointError, match=r"more than one checkpoint \(lesson, other\)"):
        archive.import_checkpoint_zip(zip_of({**entries, "other/model.safetensors": b"x"}), root=root)
    with pytest.raises(ckpt.CheckpointError, match="the zip holds no meta.json"):
        archive.import_checkpoint_zip(zip_of({k: v for k, v in entries.items() if k != "lesson/meta.json"}), root=root)
    with pytest.raises(ckpt.CheckpointError, match="this is not a readable zip file"):
        archive.import_checkpoint_zip(b"PK\x03\x04 not really a zip", root=root)
    assert not root.exists() or os.listdir(root) == []


def test_weights_are_checked_by_the_loader_before_anything_is_kept(run, tmp_path):
    folder, model = run
    entries = {f"lesson/{name}": data for name, data in files_of(folder).items()}
    root = tmp_path / "checkpoints"
    pickle = b"\x80\x04\x95" + b"cos\nsystem\n" + b"\x00" * 64  # what a torch.save file starts like: never loaded
    with pytest.raises(ckpt.CheckpointError, match="is not a readable safetensors file"):
        archive.import_checkpoint_zip(zip_of({**entries, "lesson/model.safetensors": pickle}), root=root)
    broken = GPT(model.cfg)
    with torch.no_grad():
        broken.head.weight[0, 0] = float("nan")
    ckpt.save_weights(tmp_path / "nan.safetensors", broken, CharTokenizer.from_text("abcdefgh"), 7)
    with pytest.raises(ckpt.CheckpointError, match="head.weight contains NaN or infinite values"):
        archive.import_checkpoint_zip(zip_of({**entries, "lesson/snapshots/step_000000.safetensors":
                                           (tmp_path / "nan.safetensors").read_bytes()}), root=root)
    with pytest.raises(ckpt.CheckpointError, match="the zip's meta.json is not a JSON object"):
        archive.import_checkpoint_zip(zip_of({**entries, "lesson/meta.json": b"[1, 2]"}), root=root)
    assert os.listdir(root) == []  # each refusal took its unpacked files with it


def test_config_json_is_written_again_from_the_weights(run, tmp_path):
    folder, model = run
    entries = {f"lesson/{name}": data for name, data in files_of(folder).items()}
    lying = json.dumps({"model": {**model.cfg.to_dict(), "n_layer": 99}, "tokenizer": {}}).encode()
    imported = archive.import_checkpoint_zip(zip_of({**entries, "lesson/config.json": lying}), root=tmp_path / "c")
    assert json.loads((imported / "config.json").read_text())["model"] == model.cfg.to_dict()


def test_a_zip_that_unpacks_past_the_limit_is_refused_before_anything_is_written(run, tmp_path):
    folder, _ = run
    entries = {f"lesson/{name}": data for name, data in files_of(folder).items()}
    data = zip_of({**entries, "lesson/snapshots/step_000001.safetensors": b"\x00" * 200_000})
    root = tmp_path / "checkpoints"
    with pytest.raises(ckpt.CheckpointError, match="the checkpoint unpacks to more than 100,000 bytes: refused"):
        archive.import_checkpoint_zip(data, root=root, limit=100_000)  # (its 200,000 zeros pack into a few hundred)
    assert len(data) < 100_000 and not root.exists()


def test_a_zip_with_truncated_weights_names_its_own_file_not_the_hidden_folder_it_was_unpacked_to(run, tmp_path):
    folder, _ = run
    entries = {f"lesson/{name}": data for name, data in files_of(folder).items()}
    weights = entries["lesson/model.safetensors"]
    with pytest.raises(ckpt.CheckpointError) as refused:
        archive.import_checkpoint_zip(zip_of({**entries, "lesson/model.safetensors": weights[:len(weights) // 2]}),
                                      root=tmp_path / "c")
    said = str(refused.value)
    assert said.startswith("lesson/model.safetensors in the zip is not a readable safetensors file (") and \
        ".import" not in said and str(tmp_path) not in said
    assert refused.value.message.params["path"].key == "checkpoint.zip_member"  # (a Message: the app translates it)

