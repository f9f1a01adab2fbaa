"""Tokenizers: the tutorial's characters and a byte-level BPE, their readable tokens, and a BPE run that
trains, saves, loads (without executing code) and samples."""
import json

import pytest
import torch
from safetensors import safe_open

from gptcore import checkpoint as ckpt
from gptcore import cli, folders
from gptcore import inspector as ins
from gptcore.config import GPTConfig, TrainConfig
from gptcore.data import Corpus
from gptcore.tokenizer import (
    END_OF_TEXT,
    BPETokenizer,
    CharTokenizer,
    TokenizerError,
    make_tokenizer,
    text_blocks,
    tokenizer_from_dict,
)
from gptcore.train import Trainer

STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside.\n"
         "One day, Lily found a red ball in the park. \"Mom, look!\" she said.\n<|endoftext|>\n")
TEXT = STORY * 60
CORPUS = Corpus(TEXT, "stories")
TINY = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=32, context=16)


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    return make_tokenizer("bpe", TEXT, 300)


def test_bpe_round_trips_any_text_even_characters_it_never_saw(bpe):
    assert bpe.kind == "bpe" and bpe.vocab_size == 300
    for text in (STORY, "Lily and Tom", "你好，世界 🙂", "\ttabs\n\nand  spaces ", "é" * 5, ""):
        assert bpe.decode(bpe.encode(text)) == text
    assert bpe.unknown("你好") == {}  # bytes cover everything: nothing is ever dropped
    assert len(bpe.encode("Lily")) < len("Lily")  # a frequent word is fewer tokens than characters
    assert bpe.encode(END_OF_TEXT) == [bpe.encode(END_OF_TEXT)[0]]  # the story separator is one token


def test_a_long_text_encodes_in_blocks_to_the_same_ids_as_in_one_piece(bpe):
    long = (STORY + "  indented line\n\nplain line\n") * 2000
    assert len(long) > 1 << 16 and len(list(text_blocks(long))) > 1
    assert bpe.encode(long) == bpe.hf.encode(long, add_special_tokens=False).ids
    assert "".join(text_blocks(long)) == long


def test_a_long_text_without_line_breaks_is_cut_before_a_space_and_still_encodes_the_same(bpe):
    long = "Lily and Tom played in the park,  all day! 12 34 " * 3000  # one line of 150,000 characters
    blocks = list(text_blocks(long))
    assert len(blocks) > 2 and all(b.startswith(" ") and not b[1].isspace() for b in blocks[1:])
    assert "".join(blocks) == long
    assert bpe.encode(long) == bpe.hf.encode(long, add_special_tokens=False).ids


def test_tokens_show_with_visible_spaces_and_partial_bytes_marked(bpe):
    space_word = next(i for i in range(bpe.vocab_size) if bpe.token_bytes(i) == b" Lily")
    assert bpe.piece(space_word) == " Lily" and bpe.display(space_word) == "␣Lily"
    newline = next(i for i in range(bpe.vocab_size) if bpe.token_bytes(i) == b"\n")
    assert bpe.display(newline) == "⏎"
    half = next(i for i in range(bpe.vocab_size) if bpe.token_bytes(i) == b"\xe4")  # first byte of 你
    assert bpe.display(half) == "⟨e4⟩" and not bpe.is_whole(half) and bpe.is_whole(space_word)
    ids = bpe.encode("你")  # three bytes, none of them merged in this English vocabulary
    assert bpe.pieces(ids) == ["⟨e4⟩", "⟨bd⟩", "⟨a0⟩"]
    assert "".join(bpe.stream(ids)) == "你"  # written once whole, not as three replacement characters
    chars = CharTokenizer.from_text("a b\n")
    assert chars.labels(chars.encode("a b\n")) == ["a", "␣", "b", "⏎"]


def test_a_tokenizer_is_stored_as_data_and_refused_when_it_is_not_byte_level_bpe(bpe):
    stored = json.loads(json.dumps(bpe.to_dict()))
    assert tokenizer_from_dict(stored) == bpe and tokenizer_from_dict(stored).encode(STORY) == bpe.encode(STORY)
    assert tokenizer_from_dict({"type": "char", "chars": ["a", "b"]}) == CharTokenizer(["a", "b"])
    word_level = json.loads(stored["json"])
    word_level["pre_tokenizer"] = {"type": "Whitespace"}
    with pytest.raises(TokenizerError, match="only byte-level BPE tokenizers are supported"):
        tokenizer_from_dict({"type": "bpe", "json": json.dumps(word_level)})
    with pytest.raises(TokenizerError, match="the BPE tokenizer's JSON cannot be read"):
        tokenizer_from_dict({"type": "bpe", "json": "{not json"})
    with pytest.raises(TokenizerError, match="unknown tokenizer type 'pickle'"):
        tokenizer_from_dict({"type": "pickle"})


def test_a_bpe_vocabulary_size_is_checked_with_its_range():
    with pytest.raises(TokenizerError) as refused:
        make_tokenizer("bpe", TEXT, 100)
    assert str(refused.value) == ("a BPE vocabulary size must be a whole number from 257 (the 256 bytes and "
                                  "<|endoftext|>) to 100,000, got 100")
    with pytest.raises(ValueError, match="bpe_vocab must be an integer from 257 to 100,000"):
        TrainConfig(tokenizer="bpe", bpe_vocab=10)


def test_a_bpe_model_trains_saves_loads_and_samples(tmp_path, capsys):
    tc = TrainConfig(steps=20, batch_size=4, eval_every=10, tokenizer="bpe", bpe_vocab=300, final_eval=False)
    trainer = Trainer.fresh(TINY, tc, CORPUS, out_dir=tmp_path / "run")
    assert trainer.tokenizer.vocab_size == trainer.model.cfg.vocab_size == 300
    assert trainer.run() == "finished"
    # the tokenizer is JSON inside the weights file: loading it parses data, no pickle, no code
    with safe_open(str(tmp_path / "run" / "model.safetensors"), framework="pt") as f:
        assert json.loads(f.metadata()["tokenizer"])["type"] == "bpe"
    loaded = ckpt.load_checkpoint(tmp_path / "run")
    assert loaded.tokenizer == trainer.tokenizer and loaded.meta["tokenizer"] == "byte-level BPE of 300 tokens"
    assert loaded.meta["train_config"]["tokenizer"] == "bpe"
    val = trainer.val_ids
    assert len(val) == len(trainer.tokenizer.encode(TEXT[int(0.9 * len(TEXT)):]))  # val text encoded on its own
    assert cli.main(["sample", "--checkpoint", str(tmp_path / "run"), "--prompt", "Once", "--chars", "30"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Once") and "\ufffd" not in printed[:4]
    with torch.no_grad():
        run = ins.inspect_text(loaded.model, loaded.tokenizer, STORY[:60])
    assert len(run.pieces) == len(run.ids) == 16 and "".join(run.pieces) == run.text == STORY[:len(run.text)]
    assert ins.token_labels(run.pieces)[2:4] == [loaded.tokenizer.display(int(i)) for i in run.ids[2:4]]


def test_a_resumed_run_keeps_its_tokenizer(tmp_path):
    tc = TrainConfig(steps=2, batch_size=4, final_eval=False)
    Trainer.fresh(TINY, tc, CORPUS, out_dir=tmp_path / "run").run()
    with pytest.raises(ValueError, match="the run was trained with the char tokenizer and keeps it"):
        Trainer.resume(tmp_path / "run", TrainConfig(steps=4, batch_size=4, tokenizer="bpe"), CORPUS)


def test_the_inspect_page_shows_a_bpe_model_token_by_token(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    tc = TrainConfig(steps=2, batch_size=4, tokenizer="bpe", bpe_vocab=300, final_eval=False)
    trainer = Trainer.fresh(TINY, tc, CORPUS, out_dir=tmp_path / "bpe-run")
    trainer.run()
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    page = str(folders.PROJECT_ROOT / "app_pages" / "inspector.py")
    at = AppTest.from_file(page, default_timeout=90)
    at.session_state["inspect-text"] = "Lily met Lily."
    at.run()
    assert not at.exception, at.exception
    assert "byte-level BPE of 300 tokens" in at.caption[1].value and "CPU (" in at.caption[0].value
    pieces = trainer.tokenizer.pieces(trainer.tokenizer.encode("Lily met Lily."))
    slider = at.select_slider(key="inspect-query-" + str(len(pieces)))
    assert slider.format_func(1) == f"1 '{trainer.tokenizer.display(trainer.tokenizer.encode('Lily met Lily.')[1])}'"
    assert any("␣" in slider.format_func(i) for i in range(len(pieces)))
    ends = [len("".join(pieces[:i + 1])) for i in range(len(pieces))]
    second_lily = "Lily met Lily.".rindex("Lily")
    assert slider.value == next(i for i, end in enumerate(ends) if end > second_lily)  # the token holding its L
