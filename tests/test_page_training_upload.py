"""Add a trained checkpoint, on the Train page: each refusal is a sentence in the page's language that ends with
what to do, naming the fields as the page labels them, and the size the page states is the one the server enforces."""
import tomllib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.i18n import catalog
from explorer.ui import job_registry
from gptcore import archive, folders, runs
from gptcore import checkpoint as ckpt
from gptcore.config import GPTConfig
from gptcore.model import GPT
from gptcore.tokenizer import CharTokenizer

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "app_pages" / "training.py")


@pytest.fixture
def lesson_zip(tmp_path, monkeypatch) -> bytes:
    """A checkpoint zip of a tiny run, "lesson", already kept in a private checkpoints folder."""
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    job_registry.clear()
    model = GPT(GPTConfig(vocab_size=8, d_model=16, n_layer=1, n_head=2, d_ff=48, context=16))
    ckpt.save_checkpoint(tmp_path / "lesson", model, CharTokenizer.from_text("abcdefgh"),
                         {"step": 3, "status": "finished", "train_config": {"steps": 3}, "history": {}})
    yield runs.zip_run(tmp_path / "lesson")
    job_registry.clear()


def add(at: AppTest, data: bytes, name: str = "") -> str:
    """Upload data as a zip, Save it as name, click Add; the error said."""
    at.file_uploader(key="tr_import_zip").upload("upload.zip", data, "application/zip")
    at.text_input(key="tr_import_name").set_value(name)
    at.run()
    at.button(key="tr_import").click().run()
    return at.error[-1].value


@pytest.mark.parametrize("lang, taken, no_zip", [
    ("en", "The checkpoint was not added: a checkpoint named 'lesson' already exists. Choose another name under "
           "**Save it as** and click **Add the checkpoint** again.",
     "This zip cannot be added: this is not a readable zip file (File is not a zip file). Nothing was kept: upload a "
     "zip made by **Download checkpoint (.zip)** under **Manage a run**, on this page of any machine."),
    ("zh", "检查点没有添加：已经有名为“lesson”的检查点。请在 **保存为** 里换一个名字，再点一次 **添加检查点**。",
     "这个 zip 不能添加：这不是一个可读的 zip 文件（File is not a zip file）。什么都没有保留："
     "请上传用 **管理一个运行** 里的 **下载检查点（.zip）** 得到的 zip（在任何一台机器的这个页面上都行）。")])
def test_each_refusal_is_a_sentence_that_says_what_to_do(lesson_zip, lang, taken, no_zip):
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    assert add(at, lesson_zip) == taken
    assert add(at, b"just some text", "notes") == no_zip
    words = catalog(lang)
    # the fields and buttons named as the page labels them
    assert f"**{words['training.upload.add']}**" in taken
    assert words["training.upload.name"].startswith(taken.split("**")[1])
    assert f"**{words['training.runs.download']}**" in no_zip and f"**{words['training.runs.manage'][6:]}**" in no_zip


def test_a_name_a_run_training_or_waiting_will_take_is_refused_with_what_to_do(lesson_zip, monkeypatch):
    from explorer import run_actions

    monkeypatch.setattr(run_actions, "taken_names", lambda registry: ["later"])  # (a run waiting, named so)
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert add(at, lesson_zip, "later") == "A run named 'later' is training or waiting to train: choose another name " \
        "under **Save it as** and click **Add the checkpoint** again."


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_size_stated_under_the_uploader_is_the_servers_cap(lesson_zip, lang):
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    uploader = at.file_uploader(key="tr_import_zip")
    cap = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]["maxUploadSize"]
    stated = catalog(lang)["training.upload.limit"].format(mb=uploader.proto.max_upload_size_mb, unpacked=256)
    assert stated in [c.value for c in at.caption]
    assert cap * 2**20 <= archive.IMPORT_LIMIT  # (a zip the server takes is never refused for its size)
    assert f"{uploader.proto.max_upload_size_mb} MB" in stated and archive.IMPORT_LIMIT == 256 * 2**20
    if lang == "zh":  # the uploader's own English, said in Chinese
        assert f"`{uploader.proto.max_upload_size_mb}MB per file • ZIP` 是“每个文件最多" in stated
