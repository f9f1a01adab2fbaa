"""gptcore.published: real models' configurations give their published parameter counts; gptcore.demos.real_models:
what each convention comes to in them."""
import json
import math

import pytest
import torch
from safetensors.torch import save_file

from gptcore.capacity import meta_model
from gptcore.config import ConfigError, GPTConfig
from gptcore.demos import real_models as rm
from gptcore.model import RMSNorm
from gptcore.published import LLAMA_3_2_1B, PUBLISHED, QWEN3_0_6B, SMOLLM2_135M, TINYLLAMA_1_1B, PublishedModel

# What the Hugging Face Hub lists for each repository's weights ("safetensors": {"total": …} in its API, the
# numbers its safetensors headers hold), counted apart from our formulas. Qwen3-0.6B's file stores its tied lm_head
# as a tensor of its own, so its total has the embedding twice: 751,632,384 less 151,936 × 1,024 leaves
# 596,049,920, and 440,467,456 without the embedding: its model card's "0.44B non-embedding".
HUB_TOTALS = {"SmolLM2-135M": 134_515_008, "Llama-3.2-1B": 1_235_814_400, "TinyLlama-1.1B": 1_100_048_384,
              "Qwen3-0.6B": 751_632_384}
STORED_TWICE = {"Qwen3-0.6B": 151_936 * 1024}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_published_config_counts_the_parameters_the_hub_lists(name):
    model = PUBLISHED[name]
    assert model.config.n_params == model.params == HUB_TOTALS[name] - STORED_TWICE.get(name, 0)
    assert model.source == f"https://huggingface.co/{model.repo}/blob/main/config.json"


def test_the_model_built_from_a_published_config_has_its_parameters():
    for model in (SMOLLM2_135M, QWEN3_0_6B):  # plain GQA with a tied head; a free head width with QK-norm
        assert meta_model(model.config).num_params() == model.params


def test_the_published_shapes_are_those_of_their_config_json():
    smol = SMOLLM2_135M.config
    assert (smol.n_layer, smol.d_model, smol.n_head, smol.kv_heads, smol.d_head, smol.d_ff, smol.vocab_size,
            smol.context, smol.rope_theta, smol.norm_eps, smol.tie_embeddings) == (
        30, 576, 9, 3, 64, 1536, 49152, 8192, 100_000, 1e-5, True)
    llama = LLAMA_3_2_1B.config
    assert (llama.rope_scaling, llama.rope_factor, llama.rope_low_freq_factor, llama.rope_high_freq_factor,
            llama.rope_original_context, llama.rope_theta, llama.context) == ("llama3", 32, 1, 4, 8192, 500_000,
                                                                               131_072)
    assert QWEN3_0_6B.config.d_head == 128 != QWEN3_0_6B.config.d_model // QWEN3_0_6B.config.n_head
    assert not TINYLLAMA_1_1B.config.tie_embeddings and TINYLLAMA_1_1B.config.kv_heads == 4


def test_the_context_ceiling_holds_llama_3s_128k_and_no_more():
    assert GPTConfig(context=131_072).context == 131_072
    with pytest.raises(ConfigError, match="context must be an integer from 1 to 131,072"):
        GPTConfig(context=131_073)
    assert GPTConfig().context == 128


def test_grouped_query_attention_savings_in_smollm2():
    kv = rm.kv_sharing(SMOLLM2_135M.config)
    assert (kv["query heads"], kv["key/value heads"], kv["group"], kv["d_head"]) == (9, 3, 3, 64)
    assert (kv["KV cache / token"], kv["without sharing"], kv["smaller by"]) == (2 * 3 * 64 * 30, 2 * 9 * 64 * 30, 3)
    assert kv["KV cache at full context (MB)"] == pytest.approx(11_520 * 8192 * 2 / 1e6)
    assert (kv["k/v weights / block"], kv["unshared k/v weights / block"]) == (221_184, 663_552)
    # the saving is exactly the difference between the model and the same model with a key/value head per query head
    unshared = GPTConfig(**{**SMOLLM2_135M.config.to_dict(), "n_kv_head": 0})
    assert kv["weights saved"] == unshared.n_params - SMOLLM2_135M.params == 13_271_040
    ours = rm.kv_sharing(GPTConfig())
    assert ours["smaller by"] == 1 and ours["weights saved"] == 0


def test_ropes_slowest_pair_and_the_pairs_slower_than_the_context():
    smol = rm.rope_reach(SMOLLM2_135M.config)
    assert smol["slowest wavelength"] == pytest.approx(2 * math.pi * 100_000 ** (62 / 64), rel=1e-6)
    assert round(smol["slowest wavelength"]) == 438_460
    # 2π·θ^(2i/64) > 8192 from pair 20 on at θ = 100,000, from pair 25 on at θ = 10,000
    assert smol["pairs slower than the context"] == 12 and smol["pairs"] == 32
    tutorial_base = rm.rope_reach(GPTConfig(**{**SMOLLM2_135M.config.to_dict(), "rope_theta": 10_000.0}))
    assert tutorial_base["pairs slower than the context"] == 7 and round(tutorial_base["slowest wavelength"]) == 47_117
    # Llama 3's scaling divides the slowest pairs' frequency by its factor
    llama = rm.rope_reach(LLAMA_3_2_1B.config)
    assert llama["slowest wavelength"] == pytest.approx(32 * 2 * math.pi * 500_000 ** (62 / 64), rel=1e-6)


def test_the_swiglu_widths_follow_or_leave_eight_thirds():
    rules = {name: str(rule) for name, rule in zip(rm.ffn_table()["model"], rm.ffn_table()["rule"])}
    assert rules == {"this app's GPT": "8/3·d_model rounded up to a multiple of 8",
                     "SmolLM2-135M": "exactly 8/3·d_model", "Qwen3-0.6B": "not 8/3: 3·d_model",
                     "Llama-3.2-1B": "not 8/3: 4·d_model",
                     "TinyLlama-1.1B": "8/3·d_model rounded up to a multiple of 256"}


def test_the_embeddings_share_tied_and_untied():
    smol = rm.embedding_share(SMOLLM2_135M.config)
    assert (smol["embedding"], smol["embedding + head"]) == (49152 * 576, 28_311_552)
    assert smol["embedding share"] == pytest.approx(28_311_552 / 134_515_008)
    assert smol["untied parameters"] == 134_515_008 + 28_311_552
    ours = rm.embedding_share(GPTConfig())
    assert (ours["embedding + head"], ours["parameters"]) == (2 * 9472, 810_624)


def test_the_norm_count_is_the_models_own():
    for model in (SMOLLM2_135M, QWEN3_0_6B):
        counted = [m for m in meta_model(model.config).modules() if isinstance(m, RMSNorm)]
        norms = rm.norm_count(model.config)
        assert norms["norms"] == len(counted) and norms["gains"] == sum(m.weight.numel() for m in counted)
    assert rm.norm_count(SMOLLM2_135M.config)["norms"] == 61


def test_the_side_by_side_table_has_one_row_per_model():
    table = rm.side_by_side().set_index("model")
    assert list(table.index) == ["this app's GPT", *PUBLISHED]
    assert table.loc["SmolLM2-135M", ["layers", "heads", "kv heads", "d_ff", "parameters"]].tolist() == [
        30, 9, 3, 1536, 134_515_008]
    assert table.loc["this app's GPT", "parameters"] == 810_624


TINY = PublishedModel("tiny", "nobody/tiny", GPTConfig(vocab_size=16, d_model=8, n_layer=1, n_head=2, n_kv_head=1,
                                                       d_ff=16, context=32, tie_embeddings=True), params=0)


def copy_of(folder, cfg: GPTConfig, meta: dict):
    """A checkpoint folder as far as converted_copy reads it: meta.json, and weights whose header holds the config
    (a checkpoint's config.json, which repeats it beside a real model's tokenizer of megabytes, is not read)."""
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps(meta))
    save_file({"emb.weight": torch.zeros(16, 8), "ln_f.weight": torch.zeros(8)}, str(folder / "model.safetensors"),
              metadata={"config": json.dumps(cfg.to_dict())})
    return folder


def test_a_converted_copy_is_found_and_counted_from_its_header(tmp_path):
    rm.header_facts.cache_clear()
    capped = GPTConfig(**{**TINY.config.to_dict(), "context": 16})  # an import may cap the context
    trained = copy_of(tmp_path / "a-run", TINY.config, {"step": 10})  # not imported
    (trained / "model.safetensors").write_bytes(b"never opened")
    other = copy_of(tmp_path / "b-other", GPTConfig(vocab_size=16, d_model=8, n_layer=1, n_head=2, d_ff=16),
                    {"imported": True})  # imported, another shape
    broken = copy_of(tmp_path / "c-broken", TINY.config, {"imported": True})
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    copy = copy_of(tmp_path / "d-smol", capped, {"imported": True})
    folders = [trained, other, broken, copy]
    assert rm.converted_copy(folders, TINY) == (copy, {"embedding": 128, "parameters": 136})
    assert rm.converted_copy(folders[:3], TINY) is None
    info = rm.header_facts.cache_info()  # the second look had b-other's header from the cache (a broken file is
    assert (info.hits, info.currsize) == (1, 2)  # tried again)
