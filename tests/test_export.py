"""A run exported as a Hugging Face model: transformers loads the folder as it is, with our logits (to 1e-4, float32)
and our token ids; a run no Hugging Face model can express is refused with the setting named, and a failed
export leaves nothing behind."""
import errno
import io
import json
import string
import zipfile
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from explorer.ui import job_registry
from gptcore import checkpoint as ckpt
from gptcore import export, folders
from gptcore.cli import main
from gptcore.config import GPTConfig
from gptcore.model import GPT
from gptcore.rope_layout import to_adjacent_pairs, to_rotate_half
from gptcore.tokenizer import END_OF_TEXT, BPETokenizer, CharTokenizer, HFTokenizer

transformers = pytest.importorskip("transformers", reason="transformers (the test referee) is not installed")

PAGE = str(Path(__file__).resolve().parent.parent / "app_pages" / "training.py")
# 74 characters like the tutorial's: a newline, a space, punctuation, the digits but 0, both cases of the alphabet
CHARS = sorted("\n !\"'(),-.:;?" + string.digits[1:] + string.ascii_letters)
CHAR_TEXTS = ["Once upon a time, there was a little dog named Max.",
              "\"Hi!\" she said.  Then:\n\n(a nap)\n",
              "a dog , a cat . Is n't it ? I 'm sure !",  # what a decode that cleans up spaces would change
              "Tom's 3 cats -- all asleep? Yes; all 8. " * 3]
UNKNOWN = "A café, 100 € — ok"  # é, €, — and the 0 are not among the characters
BPE_TEXTS = ["Once upon a time, there was a little dog . Is n't it ?",
             f"The end.{END_OF_TEXT}Lily saw a big tree.\n\n  It was", "A cat 你好 and a 🐱!\ttab"]


def random_model(cfg: GPTConfig, seed: int = 0) -> GPT:
    """A model with seeded random weights; the norm gains too, which start at one, so that a gain in the wrong place
    changes the logits."""
    torch.manual_seed(seed)
    model = GPT(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name or "qk_norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def bpe_tokenizer() -> BPETokenizer:
    story = "Once upon a time, there was a little dog. The dog saw a big tree and was happy.\n"
    return BPETokenizer.train([(story + END_OF_TEXT) * 20], 300)


def exported(root: Path, name: str, cfg: GPTConfig, tokenizer) -> tuple[GPT, Path]:
    model = random_model(cfg)
    ckpt.save_checkpoint(root / name, model, tokenizer, {"step": 7})
    return model, export.export_hf(root / name, root / f"{name}-hf")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tutorial's model with characters; GQA, tied embeddings, q/k/v biases and llama3 RoPE scaling with a BPE;
    QK-norm (Qwen3) with a free head width, biases and linear RoPE scaling."""
    root = tmp_path_factory.mktemp("export")
    chars, bpe = CharTokenizer(CHARS), bpe_tokenizer()
    tutorial = GPTConfig(vocab_size=len(CHARS))
    gqa = GPTConfig(vocab_size=bpe.vocab_size, d_model=48, n_layer=2, n_head=6, n_kv_head=2, d_ff=128, context=64,
                    qkv_bias=True, tie_embeddings=True, rope_theta=500.0, rope_scaling="llama3", rope_factor=4.0,
                    rope_original_context=16)
    qk = GPTConfig(vocab_size=len(CHARS), d_model=32, n_layer=2, n_head=4, n_kv_head=2, head_dim=16, d_ff=64,
                   context=160, qk_norm=True, qkv_bias=True, rope_scaling="linear", rope_factor=2.0, norm_eps=1e-6)
    return {name: (*exported(root, name, cfg, tok), tok, texts) for name, cfg, tok, texts in
            [("tutorial", tutorial, chars, CHAR_TEXTS), ("gqa", gqa, bpe, BPE_TEXTS), ("qk", qk, chars, CHAR_TEXTS)]}


def hf_logits(folder: Path, ids: list[int]) -> torch.Tensor:
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


@pytest.mark.parametrize("name, architecture", [("tutorial", "LlamaForCausalLM"), ("gqa", "LlamaForCausalLM"),
                                                ("qk", "Qwen3ForCausalLM")])
def test_transformers_computes_our_logits_from_the_exported_folder(runs, name, architecture):
    model, folder, tokenizer, texts = runs[name]
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "generation_config.json", "model.safetensors",
                                                        "tokenizer.json", "tokenizer_config.json"]
    loaded = transformers.AutoModelForCausalLM.from_pretrained(folder)
    assert type(loaded).__name__ == architecture and loaded.dtype == torch.float32
    assert loaded.num_parameters() == model.num_params() + (model.cfg.n_layer * model.cfg.d_model
                                                            if model.cfg.qkv_bias else 0)  # (W_O's zero bias)
    for text in texts:
        ids = tokenizer.encode(text)
        with torch.no_grad():
            ours = model(torch.tensor([ids]))[0][0]
            theirs = loaded(torch.tensor([ids])).logits[0]
        assert (theirs - ours).abs().max().item() <= 1e-4, text


@pytest.mark.parametrize("name", ["tutorial", "gqa", "qk"])
def test_autotokenizer_gives_our_ids_and_the_text_back(runs, name):
    _, folder, tokenizer, texts = runs[name]
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    for text in texts:
        ids = tokenizer.encode(text)
        assert theirs(text)["input_ids"] == ids, text
        assert theirs.decode(ids) == text


def test_a_character_outside_the_vocabulary_is_dropped_as_ours_drops_it(runs):
    _, folder, tokenizer, _ = runs["tutorial"]
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    assert set(tokenizer.unknown(UNKNOWN)) == {"é", "€", "—", "0"}
    assert theirs(UNKNOWN)["input_ids"] == tokenizer.encode(UNKNOWN)
    assert theirs.decode(tokenizer.encode(UNKNOWN)) == "A caf, 1   ok"


def test_the_config_names_the_models_shape_and_the_tokens_it_starts_and_ends_with(runs):
    tutorial = json.loads((runs["tutorial"][1] / "config.json").read_text())
    assert {k: tutorial[k] for k in ("architectures", "model_type", "hidden_size", "intermediate_size",
                                     "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                                     "max_position_embeddings", "vocab_size", "rope_theta", "tie_word_embeddings",
                                     "attention_bias", "torch_dtype", "bos_token_id", "eos_token_id")} == {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 344,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 32,
        "max_position_embeddings": 128, "vocab_size": 74, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "attention_bias": False, "torch_dtype": "float32", "bos_token_id": None, "eos_token_id": None}
    assert "rope_scaling" not in tutorial
    _, folder, bpe, _ = runs["gqa"]
    gqa = json.loads((folder / "config.json").read_text())
    end = bpe.encode(END_OF_TEXT)
    assert len(end) == 1 and gqa["bos_token_id"] == gqa["eos_token_id"] == end[0]
    assert gqa["rope_scaling"] == {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    assert transformers.AutoTokenizer.from_pretrained(folder).eos_token == END_OF_TEXT
    assert json.loads((runs["qk"][1] / "config.json").read_text())["rope_scaling"] == {"rope_type": "linear",
                                                                                         "factor": 2.0}


def test_tied_embeddings_are_stored_once_and_q_and_k_rows_in_rotate_half_order(runs):
    from safetensors.torch import load_file

    model, folder, _, _ = runs["gqa"]
    tensors = load_file(folder / "model.safetensors")
    assert "lm_head.weight" not in tensors and "model.embed_tokens.weight" in tensors
    k = tensors["model.layers.0.self_attn.k_proj.weight"]  # 2 heads of 8 channels; ours are rows 48…63
    ours = model.blocks[0].attn.qkv.weight[48:64].detach()
    assert torch.equal(k[:4], ours[0:8:2]) and torch.equal(k[4:8], ours[1:8:2])  # head 0: evens, then odds
    assert torch.equal(k[8:12], ours[8:16:2])


def test_the_two_rope_layouts_undo_each_other():
    # one head of 4 channels: rotate-half pairs (0, 2) and (1, 3); adjacent pairs (0, 1) and (2, 3)
    assert to_adjacent_pairs(torch.arange(4), 4).tolist() == [0, 2, 1, 3]
    assert to_rotate_half(torch.arange(4), 4).tolist() == [0, 2, 1, 3]
    rows = torch.arange(3 * 8 * 5).reshape(3 * 8, 5)  # 3 heads of 8 channels, 5 columns
    assert to_rotate_half(rows, 8)[:8, 0].tolist() == [0, 10, 20, 30, 5, 15, 25, 35]  # evens, then odds
    assert to_adjacent_pairs(rows, 8)[8:16, 0].tolist() == [40, 60, 45, 65, 50, 70, 55, 75]  # the halves interleaved
    assert torch.equal(to_adjacent_pairs(to_rotate_half(rows, 8), 8), rows)
    assert torch.equal(to_rotate_half(to_adjacent_pairs(rows, 8), 8), rows)
    assert not torch.equal(to_rotate_half(rows, 8), rows)


def test_an_imported_models_tokenizer_goes_out_as_it_came_with_its_special_tokens_and_chat_template(tmp_path):
    bpe = bpe_tokenizer()
    end = bpe.encode(END_OF_TEXT)[0]
    template = "{% for m in messages %}{{ m['content'] }}<|endoftext|>{% endfor %}"
    # the model's rows padded past the tokenizer's ids, as real models pad theirs to a round number
    imported = HFTokenizer(bpe.hf, vocab_size=bpe.vocab_size + 4, bos_id=end, eos_id=end,
                                      chat_template=template)
    cfg = GPTConfig(vocab_size=imported.vocab_size, d_model=32, n_layer=1, n_head=4, n_kv_head=1, d_ff=64, context=64,
                    tie_embeddings=True)
    model, folder = exported(tmp_path, "imported", cfg, imported)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(folder)
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    assert loaded.config.vocab_size == bpe.vocab_size + 4 and loaded.config.eos_token_id == end
    assert theirs.eos_token == theirs.bos_token == END_OF_TEXT and theirs.chat_template == template
    assert theirs.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False) == "Hi" + END_OF_TEXT
    for text in BPE_TEXTS:
        ids = imported.encode(text)
        assert theirs(text)["input_ids"] == ids and theirs.decode(ids) == text
        with torch.no_grad():
            difference = loaded(torch.tensor([ids])).logits[0] - model(torch.tensor([ids]))[0][0]
        assert difference.abs().max().item() <= 1e-4


# ---------------------------------------------------------------- refusals and failures

REFUSED = [(dict(norm_placement="post"), "(norm_placement = post)"), (dict(norm="layer"), "LayerNorm (norm = layer)"),
           (dict(position="learned"), "(position = learned)"), (dict(position="none"), "(position = none)"),
           (dict(ffn="gelu"), "GELU (ffn = gelu)"), (dict(ffn="relu"), "ReLU (ffn = relu)"),
           (dict(ffn="relu2"), "ReLU² (ffn = relu2)"), (dict(scale_attention=False), "(scale_attention = false)"),
           (dict(causal=False), "(causal = false)")]


@pytest.mark.parametrize("setting, named", REFUSED)
def test_a_setting_no_target_expresses_is_named_and_nothing_is_written(tmp_path, setting, named):
    cfg = GPTConfig(vocab_size=8, d_model=16, n_layer=1, n_head=2, d_ff=32, context=16, **setting)
    ckpt.save_checkpoint(tmp_path / "run", GPT(cfg), CharTokenizer.from_text("abcdefgh"), {"step": 1})
    with pytest.raises(export.ExportError) as refused:
        export.export_hf(tmp_path / "run", tmp_path / "out")
    said = str(refused.value)
    assert said.startswith("this run cannot be written as a Hugging Face model: ") and named in said
    assert str(export.run_problem(tmp_path / "run")) == said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.fixture
def starter(tmp_path):
    cfg = GPTConfig(vocab_size=8, d_model=16, n_layer=1, n_head=2, d_ff=32, context=16)
    ckpt.save_checkpoint(tmp_path / "run", random_model(cfg), CharTokenizer.from_text("abcdefgh"), {"step": 1})
    return tmp_path / "run"


def test_a_full_disk_midway_leaves_no_folder_and_no_temporary_one(starter, monkeypatch):
    def full(*_):  # after the weights and tokenizer.json are written
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export, "tokenizer_config", full)
    out = starter.parent / "out"
    with pytest.raises(ckpt.DiskFull, match=f"the disk is full: there is no space left to write {out}"):
        export.export_hf(starter, out)
    assert sorted(p.name for p in starter.parent.iterdir()) == ["run"]


def test_a_folder_with_files_is_replaced_only_when_asked(starter):
    out = starter.parent / "out"
    out.mkdir()
    export.export_hf(starter, out)  # an empty folder is fine
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(export.ExportError, match=f"{out} already holds files: choose a new or empty folder, or ask "
                                                 r"to replace it \(--overwrite\)"):
        export.export_hf(starter, out)
    assert (out / "mine.txt").read_text() == "keep me"
    export.export_hf(starter, out, overwrite=True)
    assert not (out / "mine.txt").exists() and (out / "model.safetensors").is_file()
    assert (out / "model.safetensors").stat().st_mode == (out / "config.json").stat().st_mode  # (not 0600)
    for around in (starter, starter / "hf", starter.parent):  # the run itself is never overwritten
        with pytest.raises(export.ExportError, match="is the run's folder, or inside or around it"):
            export.export_hf(starter, around, overwrite=True)
    assert sorted(p.name for p in starter.parent.iterdir()) == ["out", "run"]


def test_the_command_line_exports_and_says_a_missing_checkpoint_in_a_sentence(starter, capsys):
    missing, out = starter.parent / "nowhere", starter.parent / "out"
    assert main(["export", "--checkpoint", str(missing), "--format", "hf", "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"error: no checkpoint folder at {missing}\n"
    assert not out.exists()
    assert main(["export", "--checkpoint", str(starter), "--format", "hf", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: load it with transformers' ")
    assert main(["export", "--checkpoint", str(starter), "--format", "hf", "--out", str(out)]) == 2
    assert "already holds files" in capsys.readouterr().err


def test_the_zip_holds_the_folder_under_its_name(starter):
    folder = export.export_hf(starter, starter.parent / "out")
    with zipfile.ZipFile(io.BytesIO(export.export_zip(starter, "run-hf"))) as z:
        assert sorted(z.namelist()) == [f"run-hf/{p.name}" for p in sorted(folder.iterdir())]
        for p in folder.iterdir():
            assert z.read(f"run-hf/{p.name}") == p.read_bytes(), p.name


# ---------------------------------------------------------------- the Train page

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_runs_tab_offers_the_download_or_says_which_setting_stops_it(tmp_path, monkeypatch, lang):
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    job_registry.clear()
    small = dict(vocab_size=8, d_model=16, n_layer=1, n_head=2, d_ff=32, context=16)
    for name, cfg in (("gelu", GPTConfig(**small, ffn="gelu")), ("llama", GPTConfig(**small))):
        ckpt.save_checkpoint(tmp_path / name, GPT(cfg), CharTokenizer.from_text("abcdefgh"),
                             {"step": 3, "status": "finished", "train_config": {"steps": 3}, "history": {}})
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    at.selectbox(key="tr_manage").set_value("llama").run()
    [button] = [b for b in at.get("download_button") if b.key == "tr_export_hf"]
    assert button.label == {"en": "Download for Hugging Face (.zip)", "zh": "下载为 Hugging Face 模型（.zip）"}[lang]
    assert not button.proto.disabled and button.proto.deferred_file_id
    at.selectbox(key="tr_manage").set_value("gelu").run()
    assert not [b for b in at.get("download_button") if b.key == "tr_export_hf"]
    said = {"en": "**Hugging Face:** this run cannot be written as a Hugging Face model: its feed-forward block is "
                  "GELU (ffn = gelu), and Llama-family models use SwiGLU.",
            "zh": "**Hugging Face**：这个运行无法写成 Hugging Face 模型：它的前馈网络是 GELU（ffn = gelu），而 Llama "
                  "系列模型用 SwiGLU。"}[lang]
    assert said in [c.value for c in at.caption]
    job_registry.clear()
