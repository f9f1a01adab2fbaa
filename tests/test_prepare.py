"""Corpora larger than memory: a text file tokenized once into a memory-mapped token file trains exactly like the
same text held in memory, read window by window. (That memory stays flat is measured by bench/memmap.py.)"""
import json

import numpy as np
import pytest
import torch

from gptcore import cli, prepare
from gptcore.config import GPTConfig, TrainConfig
from gptcore.data import Corpus, CorpusError
from gptcore.tokenizer import CharTokenizer
from gptcore.train import Trainer, encode_split

TINY = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=32, context=16)
STORY = ("Once upon a time, Lily met a cat named Tom. «Bonjour», said the cat, and Lily said 你好.\n"
         "  They played all day.\n<|endoftext|>\n")


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "stories.txt"
    path.write_text(STORY * 150, encoding="utf-8")
    return path


@pytest.fixture
def small_reads(monkeypatch):
    """Read the file 1,000 bytes at a time, so pieces end inside characters, lines and the split point."""
    monkeypatch.setattr(prepare, "READ_BYTES", 1000)


def test_a_prepared_corpus_trains_exactly_like_the_same_text_in_memory(text_file, tmp_path, small_reads):
    header = prepare.prepare(text_file, tmp_path / "p")
    text = text_file.read_text(encoding="utf-8")
    assert header["chars"] == len(text) and header["tokens"] == len(text) and header["dtype"] == "uint16"
    prepared = prepare.open_prepared(tmp_path / "p")
    assert prepared.tokenizer == CharTokenizer.from_text(text)
    tc = TrainConfig(steps=6, batch_size=4, eval_every=3, eval_batches=2, final_eval=True)
    from_file, in_memory = Trainer.fresh(TINY, tc, prepared), Trainer.fresh(TINY, tc, Corpus(text, "the file"))
    assert torch.equal(from_file.train_ids[0:len(from_file.train_ids)], in_memory.train_ids)
    assert torch.equal(from_file.val_ids[0:len(from_file.val_ids)], in_memory.val_ids)
    from_file.run(), in_memory.run()
    for key in ("train_loss", "eval_val"):
        assert from_file.history[key] == in_memory.history[key]  # bit for bit: the same batches in the same order
    assert from_file.final_val == in_memory.final_val


def test_a_prepared_bpe_corpus_holds_the_ids_the_run_would_encode(text_file, tmp_path, small_reads):
    header = prepare.prepare(text_file, tmp_path / "p", "bpe", 300)
    prepared = prepare.open_prepared(tmp_path / "p")
    assert header["vocab_size"] == prepared.tokenizer.vocab_size == 300 and header["tokenizer"] == "bpe"
    train, val, _ = encode_split(prepared.tokenizer, text_file.read_text(encoding="utf-8"))
    assert torch.equal(prepared.train[0:len(prepared.train)], train)
    assert torch.equal(prepared.val[0:len(prepared.val)], val)
    assert torch.equal(prepared.whole[0:header["tokens"]], torch.cat([train, val]))


def test_a_bpe_corpus_without_line_breaks_is_cut_only_where_no_token_changes(tmp_path, small_reads):
    one_line = tmp_path / "one_line.txt"
    one_line.write_text(STORY.replace("\n", " ") * 150, encoding="utf-8")  # 8,000 characters and more per block
    prepare.prepare(one_line, tmp_path / "p", "bpe", 300)
    prepared = prepare.open_prepared(tmp_path / "p")
    train, val, _ = encode_split(prepared.tokenizer, one_line.read_text(encoding="utf-8"))
    assert torch.equal(prepared.whole[0:len(prepared.whole)], torch.cat([train, val]))


def test_out_naming_a_file_or_a_source_behind_a_closed_folder_is_refused_with_a_message(text_file, tmp_path,
                                                                                         monkeypatch, capsys):
    from pathlib import Path

    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    assert cli.main(["prepare", "--data", str(text_file), "--out", str(mine)]) == 2
    assert f"error: {mine} is a file, not a folder: choose a folder for the prepared corpus" in \
        capsys.readouterr().err
    assert mine.read_text() == "mine"
    real_stat = Path.stat

    def deny(self, *args, **kw):  # what stat says of a path under a folder without x permission (as non-root)
        if self == text_file:
            raise PermissionError(13, "Permission denied", str(self))
        return real_stat(self, *args, **kw)
    monkeypatch.setattr(Path, "stat", deny)
    with pytest.raises(CorpusError, match=f"cannot read {text_file}: Permission denied"):
        prepare.prepare(text_file, tmp_path / "p")
    monkeypatch.undo()
    real_open = open

    def deny_open(path, *args, **kw):  # a file its owner may read, and this user may not
        if str(path) == str(text_file):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kw)
    monkeypatch.setattr("builtins.open", deny_open)
    with pytest.raises(CorpusError, match=f"cannot read {text_file}: Permission denied"):
        prepare.prepare(text_file, tmp_path / "p")


def test_windows_are_read_from_the_file_at_their_starts(text_file, tmp_path):
    prepare.prepare(text_file, tmp_path / "p")
    prepared = prepare.open_prepared(tmp_path / "p")
    on_disk = np.fromfile(tmp_path / "p" / prepare.TOKENS, dtype=np.uint16).astype(np.int64)
    starts = torch.tensor([0, 5, len(prepared.val) - 9])
    windows = prepared.val.windows(starts, 9)
    split = prepared.header["train_tokens"]
    assert windows.dtype == torch.int64 and windows.shape == (3, 9)
    for row, start in zip(windows, starts.tolist()):
        assert row.tolist() == on_disk[split + start:split + start + 9].tolist()


def test_the_command_line_prepares_trains_and_scores_from_the_folder(text_file, tmp_path, capsys):
    folder, run = str(tmp_path / "p"), str(tmp_path / "run")
    assert cli.main(["prepare", "--data", str(text_file), "--out", folder, "--tokenizer", "bpe",
                     "--vocab-size", "300"]) == 0
    assert "tokens" in capsys.readouterr().out
    assert cli.main(["train", "--data", folder, "--out", run, "--d-model", "16", "--n-layer", "1", "--n-head", "2",
                     "--d-ff", "32", "--context", "16", "--batch-size", "4", "--steps", "3", "--eval-every", "3",
                     "--eval-batches", "1"]) == 0
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["train_config"]["tokenizer"] == "bpe" and meta["corpus_source"] is None
    assert meta["corpus"].startswith("prepared p (stories.txt, ")
    capsys.readouterr()
    assert cli.main(["eval", "--checkpoint", run, "--data", folder]) == 0
    assert "val_loss" in capsys.readouterr().out
    assert cli.main(["train", "--data", folder, "--out", str(tmp_path / "again"), "--tokenizer", "char"]) == 2
    assert "was prepared with the bpe tokenizer, which it keeps" in capsys.readouterr().err
    assert cli.main(["prepare", "--data", str(text_file), "--out", folder]) == 2
    assert "already holds a prepared corpus" in capsys.readouterr().err


def test_a_file_that_is_not_utf8_text_is_refused_with_the_offset(tmp_path, small_reads):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(("é" * 1500).encode() + b"\xff" + b"tail")
    with pytest.raises(CorpusError, match="is not UTF-8 text \\(invalid byte at offset 3,000\\)"):
        prepare.prepare(bad, tmp_path / "p")
    (tmp_path / "nul.txt").write_bytes(b"abc\x00def")
    with pytest.raises(CorpusError, match="looks binary"):
        prepare.prepare(tmp_path / "nul.txt", tmp_path / "p")
    assert not prepare.is_prepared(tmp_path / "p")


def test_a_damaged_folder_is_refused_before_training(text_file, tmp_path):
    prepare.prepare(text_file, tmp_path / "p")
    tokens = tmp_path / "p" / prepare.TOKENS
    tokens.write_bytes(tokens.read_bytes()[:-2])
    with pytest.raises(CorpusError, match="but the header announces .* uint16 tokens .*: prepare the corpus again"):
        prepare.open_prepared(tmp_path / "p")
    (tmp_path / "p" / prepare.HEADER).write_text("{}")
    with pytest.raises(CorpusError, match="is not a gptcore token header"):
        prepare.open_prepared(tmp_path / "p")


def test_ids_take_two_bytes_while_the_vocabulary_fits_and_four_after():
    assert prepare.token_dtype(74) == np.uint16 and prepare.token_dtype(65_536) == np.uint16
    assert prepare.token_dtype(65_537) == np.uint32
