"""The Train page through AppTest: start, finish, stop, diverge, refuse, bad corpora, resume, manage.

Runs use a tiny model on 20,000 built-in characters, so each trains in well under a second; the
live fragment does not tick in AppTest, so tests wait on the job and call at.run() again.
"""
import re
import shutil
import socket
import time
import tomllib
import urllib.error
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from explorer.ui import job_registry
from gptcore import checkpoint as ckpt
from gptcore import folders, runs, sources
from gptcore import texts as data_module
from gptcore.config import GPTConfig, settings
from gptcore.recipes import RECIPES
from gptcore.sources import CorpusSource
from gptcore.train import TrainConfig

PAGE = str(Path(__file__).resolve().parent.parent / "app_pages" / "training.py")
TINY = dict(tr_m_d_model=16, tr_m_n_layer=1, tr_m_n_head=2, tr_m_d_ff=48, tr_m_context=16,
            tr_t_steps=20, tr_t_batch_size=4, tr_t_eval_every=10, tr_t_sample_every=10, tr_t_checkpoint_every=10,
            tr_t_threads=1)


@pytest.fixture(autouse=True)
def root(training_root):
    return training_root


def page(lang: str | None = None, **settings) -> AppTest:
    """The page opened from a URL that fills the form in (its numbers are bound to the URL): one run, not two."""
    at = AppTest.from_file(PAGE, default_timeout=60)
    if lang:
        at.query_params["lang"] = lang
    at.session_state["tr_builtin_chars"] = 20_000  # not the 1M default: keeps the corpus instant
    for key, value in {**TINY, **settings}.items():
        at.query_params[key] = value
    at.run()
    for key, value in {**TINY, **settings}.items():
        assert at.number_input(key=key).value == value, f"{key} came from the URL as {at.number_input(key=key).value}"
    return at


def start(at: AppTest, name: str) -> AppTest:
    at.text_input(key="tr_name").set_value(name).run()
    return at.button(key="tr_start").click().run()


def finish(name: str, timeout: float = 60) -> None:
    job = job_registry().get(name)
    assert job is not None, "no job was started"
    job.join(timeout)
    assert not job.state.active


def wait_for_step(name: str, step: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while job_registry().get(name).snapshot().data.get("step", -1) < step:
        assert time.monotonic() < deadline, f"{name} did not reach step {step}"
        time.sleep(0.05)


def texts(elements) -> list[str]:
    return [e.value for e in elements]


def test_lists_every_recipe_and_applies_it():
    at = page()
    preset = at.selectbox(key="tr_recipe")
    assert preset.options == [r.name for r in RECIPES.values()]
    assert preset.value == "tutorial"
    assert at.number_input(key="tr_t_steps").value == 20
    preset.set_value("quick").run()
    quick = RECIPES["quick"].train
    assert at.number_input(key="tr_t_steps").value == quick.steps
    assert at.number_input(key="tr_t_batch_size").value == quick.batch_size
    assert at.number_input(key="tr_m_d_model").value == RECIPES["quick"].model.d_model
    preset.set_value("fast").run()
    assert at.selectbox(key="tr_t_optimizer").value == "muon"
    assert at.number_input(key="tr_t_muon_lr").value == pytest.approx(RECIPES["fast"].train.muon_lr)
    preset.set_value("tutorial").run()
    assert at.selectbox(key="tr_t_optimizer").value == "adamw"
    assert not [n for n in at.number_input if n.key == "tr_t_muon_lr"]  # only shown for Muon
    assert at.number_input(key="tr_t_steps").value == 1500
    assert at.number_input(key="tr_t_lr").value == pytest.approx(3e-3)
    assert at.number_input(key="tr_t_sample_every").value == 100
    # the tutorial's 810,624 at its 74 characters; each character more or fewer is a row of the embedding and
    # one of the head: 2·128 parameters
    vocab = len(set(CorpusSource("builtin", chars=20_000).load().text))
    count = f"**{810_624 + 256 * (vocab - 74):,} parameters** with this corpus's {vocab} characters"
    assert count in texts(at.markdown)


def test_tiny_run_starts_finishes_and_its_checkpoint_reloads(root):
    at = start(page(), "tiny")
    assert not at.exception and not at.error
    finish("tiny")
    at.run()
    [done] = texts(at.success)
    assert done.startswith("Finished step 20 of 20 in ")
    reloaded = ckpt.load_checkpoint(root / "tiny")
    assert reloaded.meta["step"] == 20 and reloaded.meta["status"] == "finished"
    assert f"**{reloaded.meta['final_val_loss']:.4f}**" in done
    assert reloaded.model.num_params() == job_registry().get("tiny").snapshot().data["params"]
    assert [e.label for e in at.metric][:3] == ["Train loss", "Val loss (estimate)", "Tokens / s"]
    samples = [c for c in at.code if c.language != "python"]  # (the step's source is python)
    assert len(samples) == 3  # samples at steps 20 (final), 10 and 0, newest first
    assert texts(at.caption)[texts(at.caption).index("step 20"):][:3] == ["step 20", "step 10", "step 0"]
    table = at.dataframe[0].value
    assert table.loc[0, "run"] == "tiny" and table.loc[0, "status"] == "finished"
    assert table.loc[0, "final val (whole split)"] == pytest.approx(reloaded.meta["final_val_loss"])


def test_stop_ends_the_run_and_saves_it(root):
    at = start(page(tr_t_steps=1_000_000), "long")
    wait_for_step("long", 3)
    at.run()
    assert "long · running" in " ".join(texts(at.markdown))
    at.button(key="tr_stop").click().run()
    finish("long")
    at.run()
    [stopped] = texts(at.warning)
    assert stopped.startswith("Stopped at step")
    meta = ckpt.read_meta(root / "long")
    assert meta["status"] == "stopped" and 3 <= meta["step"] < 1_000_000
    assert f"Stopped at step {meta['step']:,}" in stopped


def test_absurd_learning_rate_ends_with_the_nan_message_and_a_good_checkpoint(root):
    # lr 10 plus weight decay 1: AdamW scales every weight by 1 - 10·1 = -9 per step, so the weights grow
    # ninefold per step on any data (lr 10 alone does not reliably NaN: Adam's update is bounded by about lr per
    # weight). Where it first shows depends on the CPU's kernels: the fused attention's backward may return NaN
    # gradients after two updates (weights ~400), or the weights stay finite until the forward pass overflows
    # (step 9 on AVX-512). Either way a checkpoint is saved every step, so the one before the blow-up is kept.
    at = start(page(tr_t_lr=10.0, tr_t_weight_decay=1.0, tr_t_checkpoint_every=1), "boom")
    finish("boom")
    at.run()
    [error] = texts(at.error)
    found = re.match(r"Training diverged: (the outputs|weights) became NaN or infinite by step (\d+)\. ", error)
    assert found, error
    step = int(found[2])
    assert 2 <= step < 20
    assert f"The last good checkpoint (step {step - 1}) is kept in {root / 'boom'}" in error
    kept = ckpt.load_checkpoint(root / "boom")
    assert kept.meta["step"] == step - 1 and kept.meta["status"] == "diverged"
    assert all(torch.isfinite(p).all() for p in kept.model.parameters())
    window = torch.arange(16).unsqueeze(0) % kept.model.cfg.vocab_size
    assert torch.isfinite(kept.model(window)[0]).all()  # "good": the kept model computes finite logits
    assert at.dataframe[0].value.loc[0, "status"] == "diverged"


def test_a_second_start_is_queued_with_its_place_and_starts_when_the_first_ends():
    at = start(page(tr_t_steps=1_000_000), "first")
    wait_for_step("first", 1)
    other_tab = page()
    assert "**first** is training now: a run you start waits its turn, at place 1 in the queue." in \
        texts(other_tab.caption)
    start(other_tab, "second")
    assert not other_tab.error and not other_tab.exception
    [note] = [i for i in texts(other_tab.info) if "waiting to train" in i]
    assert note.startswith("**second** is waiting to train: place 1 of 1 in the queue. When it should start")
    assert "##### Waiting to train (1)" in texts(other_tab.markdown)
    assert any(m.startswith("**1.** **second** · you · starts ") for m in texts(other_tab.markdown))
    table = other_tab.dataframe[0].value
    assert list(table.loc[:1, "run"]) == ["first", "second"] and list(table.loc[:1, "status"]) == ["running", "queued"]
    assert set(job_registry().live()) == {"first"}  # one at a time
    assert "##### Waiting to train (1)" in texts(at.run().markdown)  # (everyone sees the queue)
    job_registry().get("first").stop()
    finish("first")
    finish("second")  # (started by the end of the first)
    assert job_registry().get("second").state.status == "finished"
    assert not [m for m in texts(other_tab.run().markdown) if "Waiting to train" in m]


def test_the_suggested_name_moves_on_as_soon_as_a_run_starts(root):
    at = page(tr_t_steps=1_000_000, tr_t_checkpoint_every=0)  # its checkpoint appears only when it stops
    suggested = at.text_input(key="tr_name").value
    at = at.button(key="tr_start").click().run()
    assert job_registry().get(suggested) is not None
    assert not (root / suggested / "model.safetensors").exists()  # no checkpoint yet: its job holds the name
    following = at.text_input(key="tr_name").value
    assert following != suggested and following.rsplit("-", 1)[0] == suggested.rsplit("-", 1)[0]


@pytest.mark.parametrize("content, message", [
    (b"", "is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "looks binary"),
    ("Lucy's caf\u00e9".encode("cp1252"), "is not UTF-8 text"),
])
def test_bad_corpus_files_get_a_clear_message(tmp_path, content, message):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    at = page()
    at.radio(key="tr_source").set_value("file").run()
    at.text_input(key="tr_path").set_value(str(path)).run()
    assert len(at.error) == 1 and message in at.error[0].value
    assert at.button(key="tr_start").disabled


def test_too_large_and_too_short_corpora_get_a_clear_message(tmp_path):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.write(b"Once upon a time, Lucy had a cat. " * 100)
        f.truncate(65 * 1024 * 1024)  # sparse file: only its beginning is ever read
    at = page()
    at.radio(key="tr_source").set_value("file").run()
    at.number_input(key="tr_max_chars").set_value(0).run()  # all of it: refused from its size
    at.text_input(key="tr_path").set_value(str(huge)).run()
    assert "over the limit of 67,108,864 bytes" in at.error[0].value
    at.number_input(key="tr_max_chars").set_value(500).run()  # its first 500 characters: read and used
    assert not at.error and "500 characters" in " ".join(texts(at.caption))

    at.radio(key="tr_source").set_value("upload").run()
    assert not at.error and "Choose a UTF-8 text file to train on." in texts(at.info)  # nothing wrong yet
    at.file_uploader(key="tr_upload").upload("short.txt", b"Once upon a time, Lucy had a cat.", "text/plain")
    at.run()  # said as soon as the corpus is chosen, not after Start
    assert "33 characters" in " ".join(texts(at.caption))
    assert [e.value for e in at.error] == ["corpus has 33 usable characters; context 16 needs at least 180 so that "
                                           "the 10% validation split still holds one window of 17 characters"]
    assert at.button(key="tr_start").disabled
    at.text_input(key="tr_name").set_value("short run!").run()
    assert "Saved as **short-run** (letters, digits" in " ".join(texts(at.caption))
    at.file_uploader(key="tr_upload").upload("one.txt", b"a" * 47, "text/plain")
    at.run()
    assert [e.value for e in at.error] == ["the corpus uses a single character ('a'): there is nothing to predict"]
    assert at.button(key="tr_start").disabled
    at.radio(key="tr_source").set_value("builtin").run()
    assert not at.error and not at.button(key="tr_start").disabled


def test_interrupted_run_shows_as_such_and_continues_from_the_page(root):
    # What a server restart leaves behind: meta.json says "running", and no job of this process owns it.
    source = CorpusSource("builtin", chars=20_000, seed=0)
    cfg = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=48, context=16)
    trainer = runs.new_run(cfg, TrainConfig(steps=20, batch_size=4, checkpoint_every=5, threads=1),
                           source.load(), source, root / "cut")

    def crash(t):
        if t.step + 1 == 13:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        trainer.run(after_backward=crash)
    at = page()
    assert at.dataframe[0].value.loc[0, "status"] == "interrupted"
    assert at.selectbox(key="tr_manage").value == "cut"
    assert at.number_input(key="tr_until_cut").value == 20  # the run's own goal
    at.number_input(key="tr_until_cut").set_value(15).run()
    at.button(key="tr_continue").click().run()
    finish("cut")
    at.run()
    meta = ckpt.read_meta(root / "cut")
    assert meta["status"] == "finished" and meta["step"] == 15
    assert meta["history"]["step"] == list(range(16))
    assert at.dataframe[0].value.loc[0, "status"] == "finished"


def test_rename_and_delete_from_the_page(root):
    at = start(page(), "old")
    finish("old")
    at.run()
    at.text_input(key="tr_new_name_old").set_value("new name").run()
    at.button(key="tr_rename").click().run()
    assert not at.error
    assert ckpt.load_checkpoint(root / "new-name").meta["step"] == 20 and not (root / "old").exists()
    assert "Saved as" not in " ".join(texts(at.caption))
    assert "#### new-name · finished" in texts(at.markdown)  # the live panel (and the sidebar) follow the rename
    assert job_registry().get("old") is None and job_registry().get("new-name") is not None
    assert at.selectbox(key="tr_manage").value == "new-name"
    assert at.button(key="tr_delete").disabled
    at.checkbox(key="tr_delete_sure").check().run()
    at.button(key="tr_delete").click().run()
    assert not (root / "new-name").exists()
    assert any("**new-name**, was renamed or deleted since it ended" in i.value for i in at.info)
    assert "No saved runs" in at.info[-1].value


def test_a_new_run_is_compared_and_managed_and_the_shipped_one_cannot_be_renamed(root):
    import shutil

    shutil.copytree(folders.PROJECT_ROOT / "checkpoints" / runs.SHIPPED, root / runs.SHIPPED)
    at = page()
    assert at.selectbox(key="tr_manage").value == runs.SHIPPED
    assert at.button(key="tr_rename").disabled and at.checkbox(key="tr_delete_sure").disabled
    assert f"{runs.SHIPPED} ships with the app and cannot be renamed or deleted here." in texts(at.caption)
    at = start(at, "fresh")
    finish("fresh")
    at.run()
    assert at.selectbox(key="tr_manage").value == "fresh"
    assert at.multiselect(key="tr_compare").value[0] == "fresh"
    assert not at.button(key="tr_rename").disabled
    # a 20-step run beside the shipped 16,000: the comparison's steps on a log scale, so both curves have room
    from page_helpers import figure

    assert at.multiselect(key="tr_compare").value == ["fresh", runs.SHIPPED] and at.toggle(key="tr_compare_log").value
    assert figure(at, "tr_compare_chart")["layout"]["xaxis"]["type"] == "log"


def sidebar_line(name: str) -> str:
    # A fresh AppTest each time: a second run() of an st.navigation app comes back without its sidebar.
    app = AppTest.from_file(str(Path(PAGE).parent.parent / "app.py"), default_timeout=60).run()
    [line] = [c.value for c in app.sidebar.caption if f"train **{name}**" in c.value]
    return line


def test_sidebar_shows_the_training_job_on_every_page():
    at = start(page(tr_t_steps=1_000_000), "side")
    wait_for_step("side", 2)
    at.run()
    line = sidebar_line("side")
    assert line.startswith(":material/play_circle: train **side** · step ") and line.endswith(" · running")
    at.button(key="tr_stop").click().run()
    finish("side")
    line = sidebar_line("side")
    assert line.startswith(":material/stop_circle: train **side** · step ") and line.endswith(" of 1,000,000 · stopped")


def test_tinystories_download_reports_progress_failure_and_success(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "DOWNLOAD_CACHE", tmp_path / "cache")
    calls = []

    def no_network(url, timeout):  # what urlopen raises on a machine without a network
        calls.append(url)
        raise urllib.error.URLError(socket.gaierror(-3, "Temporary failure in name resolution"))

    monkeypatch.setattr(data_module.urllib.request, "urlopen", no_network)
    at = page()
    at.radio(key="tr_source").set_value("tinystories").run()
    assert "download the TinyStories validation split first" in at.error[0].value
    assert at.button(key="tr_start").disabled
    at.button(key="tr_download").click().run()
    assert calls == [data_module.TINYSTORIES_VALID_URL]
    target = tmp_path / "cache" / "TinyStoriesV2-GPT4-valid.txt"
    said = [e.value for e in at.error if e.value.startswith("could not download")]
    url = data_module.TINYSTORIES_VALID_URL
    assert said == [f"could not download {url}: huggingface.co could not be found, so this machine seems to be "
                    "offline. Connect to the internet and try again, or fetch that file on "
                    f"another machine and copy it to {target}, where it is picked up without a network. The "
                    "built-in stories need no download."]
    zh = page(lang="zh")
    zh.radio(key="tr_source").set_value("tinystories").run()
    zh.button(key="tr_download").click().run()
    assert any("huggingface.co" in e.value and "这台机器似乎没有联网" in e.value for e in zh.error), texts(zh.error)

    def online(cache_dir, progress):  # like the real one: fetch once, then serve the cached file
        path = cache_dir / "TinyStoriesV2-GPT4-valid.txt"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("Once upon a time there was a cat named Tom. " * 200)
            progress(path.stat().st_size, path.stat().st_size)
        return path

    monkeypatch.setattr(sources, "download_tinystories_valid", online)
    at.button(key="tr_download").click().run()
    at.run()
    assert not at.error and not at.exception
    assert "TinyStories' validation split is downloaded." in texts(at.caption)
    assert "8,800 characters · 19 distinct · 90% train / 10% validation" in texts(at.caption)


def test_an_uploaded_run_continues_after_the_upload_is_given_again(root):
    story = ("Lily saw a big red ball. She ran to the ball and kicked it far away. " * 300).encode()
    at = page()
    at.radio(key="tr_source").set_value("upload").run()
    at.file_uploader(key="tr_upload").upload("lily.txt", story, "text/plain")
    at.number_input(key="tr_max_chars").set_value(0)
    at = start(at.run(), "up")
    finish("up")
    at.run()
    assert ckpt.read_meta(root / "up")["corpus_source"] == {"kind": "upload", "name": "lily.txt", "max_chars": None}
    at.number_input(key="tr_until_up").set_value(25).run()
    at.button(key="tr_continue").click().run()
    assert "choose a text file to upload" not in " ".join(texts(at.error))  # falls back to the path field
    assert "enter the path" in at.error[0].value
    at.file_uploader(key="tr_cont_upload").upload("lily.txt", story, "text/plain")
    at.run()
    at.button(key="tr_continue").click().run()
    assert not at.error
    finish("up")
    meta = ckpt.read_meta(root / "up")
    assert meta["step"] == 25 and meta["history"]["step"] == list(range(26))


def test_the_apps_config_turns_streamlits_full_gc_after_every_rerun_off(monkeypatch):
    """A gc.collect(2) after each live-panel rerun walks the whole server's heap (.streamlit/config.toml)."""
    root = Path(__file__).resolve().parent.parent
    assert tomllib.loads((root / ".streamlit" / "config.toml").read_text())["runner"]["postScriptGC"] is False
    monkeypatch.chdir(root)  # where `streamlit run app.py` starts, so Streamlit itself must read it as set
    st_config.get_config_options(force_reparse=True)
    assert st_config.get_option("runner.postScriptGC") is False


def tutorial_note(vocab: int) -> str:
    """The sentence comparing the tutorial's shape at `vocab` characters with the tutorial's 810,624 at 74."""
    extra = vocab - 74
    start = "The tutorial's 810,624 are at the 74 characters of the tutorial's own copy of TinyStories"
    if extra == 0:
        return start + ", as many as this corpus has."
    more = "more" if extra > 0 else "fewer"
    return f"{start}: {abs(extra):,} {more} characters here, {256 * abs(extra):,} {more} parameters."


def test_the_parameter_count_is_explained_and_checked_before_start():
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["tr_builtin_chars"] = 20_000
    at.run()  # the tutorial's shape on the first 20,000 built-in characters
    vocab = len(set(CorpusSource("builtin", chars=20_000).load().text))
    total = 810_624 + 256 * (vocab - 74)
    captions = " ".join(texts(at.caption))
    assert tutorial_note(vocab) in captions and not at.error
    assert f"256 per character in all: {256 * vocab:,} of the {total:,} ({256 * vocab / total:.0%}) for these " \
           f"{vocab} characters." in captions
    assert "Copies of TinyStories differ" not in captions  # said only for a corpus that may be such a copy
    for key, value in {"tr_m_d_model": 4096, "tr_m_n_layer": 64, "tr_m_n_head": 64, "tr_m_d_ff": 16384}.items():
        at.number_input(key=key).set_value(value)
    at.run()
    assert any("parameters (" in e.value and "the limit is 100,000,000" in e.value for e in at.error)
    assert at.button(key="tr_start").disabled


# ---------------------------------------------------------------- faults: odd names, damaged runs, full disks, paths

INSPECT = str(Path(PAGE).parent / "inspector.py")


def make_run(root, name: str, corpus_text: str | None = None, **changes) -> Path:
    """A tiny finished run in root/name (on a file corpus when corpus_text is given)."""
    if corpus_text is None:
        source = CorpusSource("builtin", chars=20_000, seed=0)
    else:
        path = root / "n\udcffx.txt"  # a corpus file whose name is not UTF-8 (bytes n, 0xff, x)
        path.write_text(corpus_text)
        source = CorpusSource("file", path=str(path), max_chars=None)
    cfg = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=48, context=16)
    tc = TrainConfig(**{"steps": 5, "batch_size": 4, "threads": 1, "eval_every": 5, **changes})
    runs.new_run(cfg, tc, source.load(), source, root / name).run()
    return root / name


def test_names_that_are_not_utf8_show_escaped_and_the_runs_can_be_inspected_and_deleted(root):
    import json

    make_run(root, "bad\udcffname")
    make_run(root, "plain", corpus_text="Once upon a time there was a cat. " * 100)
    meta = json.loads((root / "plain" / "meta.json").read_text())
    (root / "plain" / "meta.json").write_text(json.dumps({**meta, "final_val_loss": "bad"}))
    at = page()
    assert not at.exception
    table = at.dataframe[0].value.set_index("run")
    assert set(table.index) == {"bad\\xffname", "plain"}
    assert table.loc["plain", "corpus"] == "file n\\xffx.txt" and table.loc["plain", "status"] == "damaged"
    assert at.selectbox(key="tr_manage").options == ["plain", "bad\\xffname"] or \
        set(at.selectbox(key="tr_manage").options) == {"plain", "bad\\xffname"}
    at.selectbox(key="tr_manage").set_value("plain").run()
    assert "Its meta.json is damaged: final_val_loss could not be used and are left out." in texts(at.warning)

    inspect = AppTest.from_file(INSPECT, default_timeout=60).run()  # both checkpoints open on the Inspect page
    assert not inspect.exception and not inspect.error
    for name in ("plain", "bad\\xffname"):
        inspect.selectbox(key="inspect-checkpoint").set_value(name).run()
        assert not inspect.exception and not inspect.error, name

    at.selectbox(key="tr_manage").set_value("bad\\xffname").run()
    at.checkbox(key="tr_delete_sure").check().run()
    at.button(key="tr_delete").click().run()
    assert not at.exception and not at.error
    assert sorted(p.name for p in root.iterdir()) == ["n\udcffx.txt", "plain"]


def test_a_server_path_outside_the_allowed_folders_is_refused_and_said(root, tmp_path_factory, monkeypatch):
    outside = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    outside.write_text("the password is swordfish. " * 100)
    link = root / "innocent.txt"
    link.symlink_to(outside)  # a link inside the data folder counts where it leads
    at = page()
    at.radio(key="tr_source").set_value("file").run()
    assert f"data folder ({root}; set GPTCORE_DATA to choose another)" in " ".join(texts(at.caption))
    for path in (outside, link, "/etc/hostname"):
        at.text_input(key="tr_path").set_value(str(path)).run()
        [error] = texts(at.error)
        assert error.startswith(f"{path} is outside the folders this app reads files from (") and \
            error.endswith("): copy it into one of them, or upload it")
        assert at.button(key="tr_start").disabled
    inside = root / "stories.txt"
    inside.write_text("Once upon a time there was a cat. " * 100)
    at.text_input(key="tr_path").set_value(str(inside)).run()
    assert not at.error and not at.button(key="tr_start").disabled


# (steps 0 is a run of one step, step 0: range(0 + 1) in the tutorial's loop)
@pytest.mark.parametrize("key, value, label", [("tr_t_lr", 1_000_000.0, "Learning rate"),
                                               ("tr_t_steps", -5, "Last step"), ("tr_t_batch_size", 0, "Batch size"),
                                               ("tr_m_context", 200_000, settings(GPTConfig)["context"].label)])
def test_start_is_off_while_a_field_is_out_of_range(key, value, label):
    at = page()
    at.number_input(key=key).set_value(value).run()
    assert at.button(key="tr_start").disabled
    [start_off] = [w for w in texts(at.warning) if w.startswith("**Start is off.**")]
    assert f"**{label}**" in start_off or "Model: fix the fields marked in red." in start_off
    assert any(f"got {value:g}" in e or f"got {value}" in e for e in texts(at.error))


def test_a_run_trains_with_exactly_what_the_form_shows(root):
    at = page(tr_t_lr=1_000_000.0)
    assert at.button(key="tr_start").disabled
    at = start(at.number_input(key="tr_t_lr").set_value(0.0123).run(), "exact")
    finish("exact")
    assert job_registry().get("exact").snapshot().data["train"]["lr"] == 0.0123
    assert ckpt.read_meta(root / "exact")["train_config"]["lr"] == 0.0123


def test_a_run_on_stories_with_copy_drills_and_text_said_again_records_them(root):
    at = page()
    at.slider(key="tr_builtin_drills").set_value(0.3)
    at = start(at.run(), "drilled")
    finish("drilled")
    meta = ckpt.read_meta(root / "drilled")
    assert meta["corpus_source"] == {"kind": "builtin", "chars": 20_000, "seed": 0, "drills": 0.3,
                                   "retellings": 0.0}
    assert meta["corpus"] == "built-in stories with 30% copy drills, 20,000 chars, seed 0"
    at.slider(key="tr_builtin_drills").set_value(0.05)
    at.slider(key="tr_builtin_retellings").set_value(0.1)
    at = start(at.run(), "retold")
    finish("retold")
    meta = ckpt.read_meta(root / "retold")
    assert meta["corpus_source"] == {"kind": "builtin", "chars": 20_000, "seed": 0, "drills": 0.05,
                                   "retellings": 0.1}
    assert meta["corpus"] == "built-in stories with 10% of their text said again and 5% copy drills, 20,000 chars, " \
                             "seed 0"


def test_a_run_whose_loss_explodes_is_flagged_as_diverging_in_the_app(root):
    at = start(page(tr_t_lr=10.0, tr_t_eval_every=5), "wild")
    finish("wild")
    at.run()
    assert any(w.startswith("the run is diverging: its validation loss is ") for w in texts(at.warning))
    assert at.dataframe[0].value.loc[0, "status"] == "finished · diverging"


def test_a_full_disk_fails_the_run_with_a_message_and_keeps_its_last_checkpoint(root, monkeypatch):
    import errno
    import os

    real = ckpt._write_temp

    def weights_fit_once(path, write):
        if path.suffix == ".safetensors" and (path.parent / "model.safetensors").exists():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, write)

    monkeypatch.setattr(ckpt, "_write_temp", weights_fit_once)
    at = start(page(tr_t_checkpoint_every=5, tr_t_snapshot_every=0), "full")
    finish("full")
    at.run()
    [error] = texts(at.error)
    assert error.startswith("The disk is full: the run stopped at step 5, whose checkpoint could not be written")
    assert f"The checkpoint of step 0 is kept whole in {root / 'full'}." in error and "Traceback" not in error
    assert at.dataframe[0].value.loc[0, "status"] == "failed"
    assert ckpt.load_checkpoint(root / "full").meta["step"] == 0
    at.selectbox(key="tr_manage").set_value("full").run()
    assert any(w.startswith("The disk is full: the run stopped at step 5") for w in texts(at.warning))


@pytest.mark.parametrize("content, problem", [
    ("Once upon a time, Lucy had a cat and a dog. They played in the park all day long until the sun set!!",
     "corpus has 100 usable characters; context 16 needs at least 180 so that the 10% validation split still holds "
     "one window of 17 characters"),
    ("a", "the corpus uses a single character ('a'): there is nothing to predict"),
])
def test_a_corpus_too_short_is_reported_as_soon_as_it_is_chosen(root, content, problem):
    assert len(content) in (100, 1)
    at = page()
    at.radio(key="tr_source").set_value("upload").run()
    at.file_uploader(key="tr_upload").upload("short.txt", content.encode(), "text/plain")
    at.run()
    assert texts(at.error) == [problem] and at.button(key="tr_start").disabled
    (root / "short.txt").write_text(content)
    at.radio(key="tr_source").set_value("file").run()
    at.text_input(key="tr_path").set_value(str(root / "short.txt")).run()
    assert texts(at.error) == [problem] and at.button(key="tr_start").disabled


def test_a_failed_continue_says_why_only_under_its_own_run(root):
    data = root / "story.txt"
    data.write_text("Once upon a time there was a cat. " * 300)
    for name in ("aaa", "bbb"):
        source = CorpusSource("file", path=str(data), max_chars=None)
        cfg = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=48, context=16)
        runs.new_run(cfg, TrainConfig(steps=3, batch_size=4, threads=1), source.load(), source, root / name).run()
    data.unlink()
    at = page()
    first = at.selectbox(key="tr_manage").value
    at.number_input(key=f"tr_until_{first}").set_value(6).run()
    at.button(key="tr_continue").click().run()
    assert texts(at.error) == [f"no such file: {data}"]
    other = next(o for o in at.selectbox(key="tr_manage").options if o != first)
    at.selectbox(key="tr_manage").set_value(other).run()
    assert texts(at.error) == []
    at.selectbox(key="tr_manage").set_value(first).run()
    assert texts(at.error) == []  # picking a run again starts afresh


def test_the_app_listens_on_localhost_unless_asked_otherwise(monkeypatch):
    root = Path(__file__).resolve().parent.parent
    assert tomllib.loads((root / ".streamlit" / "config.toml").read_text())["server"]["address"] == "localhost"
    monkeypatch.chdir(root)
    st_config.get_config_options(force_reparse=True)
    assert st_config.get_option("server.address") == "localhost"


# ---------------------------------------------------------------- both languages, a Chinese corpus, uploads

def test_the_page_reads_in_chinese_before_during_and_after_a_run(root):
    from i18n_check import english_left

    at = page(lang="zh", tr_t_steps=1_000_000)
    assert english_left(at) == [] and at.title[0].value == "训练"
    at = start(at, "zh-run")
    wait_for_step("zh-run", 3)
    at.run()
    assert english_left(at) == []
    assert "#### zh-run · 运行中" in texts(at.markdown)
    table = at.dataframe[0].value
    assert list(table.columns)[:4] == ["运行", "所有者", "状态", "进度"] and table.loc[0, "状态"] == "运行中"
    assert table.loc[0, "所有者"] == "你"  # (on localhost the one user is the teacher, whose run it is)
    assert table.loc[0, "进度"].startswith("第 ") and table.loc[0, "进度"].endswith(" 步，共 1,000,000 步")
    assert [m.label for m in at.metric][:3] == ["训练损失", "验证集损失（估计）", "词元 / 秒"]
    at.button(key="tr_stop").click().run()
    finish("zh-run")
    at.run()
    assert english_left(at) == []
    [stopped] = texts(at.warning)
    step = ckpt.read_meta(root / "zh-run")["step"]
    assert stopped.startswith(f"训练已停止（第 {step:,} 步，共 1,000,000 步）；检查点已保存")


def test_switching_the_language_keeps_the_run_and_the_form(root):
    at = start(page(tr_t_steps=1_000_000, tr_t_lr=0.005, tr_t_batch_size=6), "both")
    wait_for_step("both", 2)
    at.query_params["lang"] = "zh"
    at.run()
    assert at.number_input(key="tr_t_lr").value == 0.005 and at.number_input(key="tr_t_lr").label == "学习率"
    assert at.number_input(key="tr_t_batch_size").value == 6 and at.number_input(key="tr_m_d_model").value == 16
    assert at.selectbox(key="tr_recipe").value == "tutorial"  # the preset is its identifier, shown in Chinese
    assert at.selectbox(key="tr_recipe").options[0] == "教程配置"
    step = job_registry().get("both").snapshot().data["step"]
    assert job_registry().get("both").state.status == "running"
    wait_for_step("both", step + 2)  # it kept training through the switch
    at.query_params["lang"] = "en"
    at.run()
    assert at.number_input(key="tr_t_lr").value == 0.005 and at.number_input(key="tr_t_lr").label == "Learning rate"
    assert "#### both · running" in texts(at.markdown)


# Four thousand different CJK ideographs in sentences: as many distinct characters as a Chinese novel uses.
CHINESE = "".join(chr(0x4E00 + (i * 7919) % 4000) + ("，" if i % 9 == 8 else "。\n" if i % 31 == 30 else "")
                  for i in range(60_000))


def test_a_chinese_text_makes_the_character_tables_most_of_the_model_and_the_page_says_so(root):
    vocab = len(set(CHINESE))
    assert vocab == 4003  # 4,000 ideographs, "，", "。" and the newline
    at = AppTest.from_file(PAGE, default_timeout=60).run()  # the tutorial's shape
    at.radio(key="tr_source").set_value("upload").run()
    at.file_uploader(key="tr_upload").upload("novel.txt", CHINESE.encode(), "text/plain")
    at.number_input(key="tr_max_chars").set_value(0).run()
    total, tables = 810_624 + 256 * (vocab - 74), 256 * vocab
    assert f"**{total:,} parameters** with this corpus's {vocab:,} characters" in texts(at.markdown)
    captions = " ".join(texts(at.caption))
    assert f"{len(CHINESE):,} characters · {vocab:,} distinct" in captions
    assert f"With {vocab:,} distinct characters (a Chinese text uses thousands) the two tables hold " \
           f"{tables / total:.0%} of the model: V·d = {vocab:,} × 128 = {128 * vocab:,} parameters in the embedding " \
           f"and as many in the head, against {total - tables:,} in everything else. Each further character costs " \
           "256 parameters; the attention and feed-forward layers stay the size they are." in captions
    assert tutorial_note(vocab) in captions and "Copies of TinyStories differ in a few rare characters" in captions
    assert total - tables == 810_624 - 256 * 74  # the layers do not depend on the corpus
    assert not at.error and not at.button(key="tr_start").disabled
    at.query_params["lang"] = "zh"
    at.run()
    assert f"**{total:,} 个参数**，词表是这份语料的 {vocab:,} 种字符" in texts(at.markdown)
    captions = " ".join(texts(at.caption))
    assert f"这份语料有 {vocab:,} 种字符（中文文本动辄几千种），两张表占了模型的 {tables / total:.0%}：" \
           f"嵌入里有 V·d = {vocab:,} × 128 = {128 * vocab:,} 个参数，输出头里也有这么多，其余所有部分加起来只有 " \
           f"{total - tables:,} 个。" in captions
    assert f"这里多 {vocab - 74:,} 种字符，参数也就多 {256 * (vocab - 74):,} 个。" in captions


def test_a_chinese_text_trains_and_its_checkpoint_keeps_every_character(root):
    at = page()
    at.radio(key="tr_source").set_value("upload").run()
    at.file_uploader(key="tr_upload").upload("novel.txt", CHINESE.encode(), "text/plain")
    at.number_input(key="tr_max_chars").set_value(0)
    at = start(at.run(), "novel")
    finish("novel")
    at.run()
    assert not at.error and texts(at.success)[0].startswith("Finished step 20 of 20")
    kept = ckpt.load_checkpoint(root / "novel")
    assert kept.tokenizer.vocab_size == kept.model.cfg.vocab_size == len(set(CHINESE))
    layers = replace(kept.model.cfg, vocab_size=1).n_params - 32  # the tiny model without its two tables
    assert kept.model.num_params() == layers + 32 * len(set(CHINESE))  # and 2·16 per character
    sample = next(c.value for c in at.code if c.language != "python")
    assert sum("\u4e00" <= c <= "\u9fff" for c in sample) > len(sample) / 2  # it writes ideographs


def test_a_run_in_progress_is_in_the_runs_table_and_the_overlay():
    from page_helpers import chart

    at = start(page(tr_t_steps=1_000_000, tr_t_eval_every=2), "live")
    wait_for_step("live", 5)
    at.run()
    table = at.dataframe[0].value
    step = job_registry().get("live").snapshot().data["step"]
    assert (table.loc[0, "run"], table.loc[0, "status"]) == ("live", "running")
    assert table.loc[0, "progress"].startswith("step ") and table.loc[0, "progress"].endswith(" of 1,000,000")
    assert int(table.loc[0, "progress"].split()[1].replace(",", "")) <= step
    assert at.multiselect(key="tr_compare").value[0] == "live"
    assert {trace["name"] for trace in chart(at, "tr_compare_chart")} == {"live · train (smoothed)",
                                                                         "live · val (estimate)"}
    assert not at.button(key="tr_start").disabled  # a Start now waits its turn (test_a_second_start_is_queued…)


def sidebar_lines(name: str) -> list[str]:
    app = AppTest.from_file(str(Path(PAGE).parent.parent / "app.py"), default_timeout=60).run()
    return [c.value for c in app.sidebar.caption if f"train **{name}**" in c.value]


def test_a_deleted_run_leaves_the_sidebar(root):
    at = start(page(), "brief")
    finish("brief")
    at.run()
    [line] = sidebar_lines("brief")
    assert line.endswith(" · step 20 of 20 · finished")
    at.checkbox(key="tr_delete_sure").check().run()
    at.button(key="tr_delete").click().run()
    assert not (root / "brief").exists()
    assert sidebar_lines("brief") == []


def test_an_uploaded_checkpoint_zip_becomes_a_run_and_a_bad_one_says_why(root):
    zipped = runs.zip_run(make_run(root, "lesson"))
    shutil.rmtree(root / "lesson")  # as on a student's machine: only the teacher's zip
    at = page()
    assert at.button(key="tr_import").disabled  # nothing uploaded yet
    at.file_uploader(key="tr_import_zip").upload("lesson.zip", zipped, "application/zip")
    at.run()
    at.button(key="tr_import").click().run()
    assert texts(at.success)[-1] == "Added **lesson**: pick it under **Manage a run** or on the Inspect page."
    assert at.selectbox(key="tr_manage").value == "lesson" and at.dataframe[0].value.loc[0, "run"] == "lesson"
    assert ckpt.load_checkpoint(root / "lesson").meta["step"] == 5
    at.button(key="tr_import").click().run()  # the same zip again
    assert texts(at.error)[-1] == "The checkpoint was not added: a checkpoint named 'lesson' already exists. Choose " \
        "another name under **Save it as** and click **Add the checkpoint** again."
    at.text_input(key="tr_import_name").set_value("lesson two").run()
    at.button(key="tr_import").click().run()
    assert texts(at.success)[-1].startswith("Added **lesson-two**")
    at.file_uploader(key="tr_import_zip").upload("notes.zip", b"just some text", "application/zip")
    at.run()
    at.button(key="tr_import").click().run()
    assert texts(at.error)[-1] == "This zip cannot be added: this is not a readable zip file (File is not a zip " \
        "file). Nothing was kept: upload a zip made by **Download checkpoint (.zip)** under **Manage a run**, on " \
        "this page of any machine."
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["lesson", "lesson-two"]
