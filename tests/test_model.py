import pytest
import torch

from gptcore.config import ConfigError, GPTConfig, swiglu_hidden
from gptcore.demos.anatomy import ModelShape, total_parameters
from gptcore.generate import LayerCache, generate, stream
from gptcore.model import GPT, apply_rope, rope_tables


def model(seed=0, **cfg):
    torch.manual_seed(seed)
    return GPT(GPTConfig(**cfg))


def test_default_config_has_the_tutorials_parameter_count():
    assert model().num_params() == GPTConfig().n_params == 810_624
    assert model(vocab_size=76).num_params() == 811_136


@pytest.mark.parametrize("variant", [
    {}, {"vocab_size": 76}, {"norm": "layer"}, {"norm_placement": "post"}, {"norm": "layer", "norm_placement": "post"},
    {"position": "learned", "context": 64}, {"position": "none"}, {"ffn": "relu", "d_ff": 512}, {"ffn": "gelu"},
    {"ffn": "relu2", "d_ff": 512}, {"qk_norm": True, "n_head": 8},
    {"d_model": 96, "n_head": 3, "n_layer": 7, "d_ff": 40, "vocab_size": 3},
])
def test_config_counts_the_parameters_the_model_has(variant):
    cfg = GPTConfig(**variant)
    with torch.device("meta"):
        assert cfg.n_params == GPT(cfg).num_params()
    assert cfg.n_params == total_parameters(ModelShape.from_config(cfg))  # the Assembled GPT page's derivation


def test_swiglu_hidden_size_rounds_eight_thirds_up():
    assert swiglu_hidden(128) == 344
    assert swiglu_hidden(4096, multiple=256) == 11008


@pytest.mark.parametrize("variant", [
    {}, {"norm": "layer"}, {"norm_placement": "post"}, {"position": "learned"}, {"position": "none"},
    {"scale_attention": False}, {"ffn": "relu", "d_ff": 512}, {"ffn": "gelu", "d_ff": 512}, {"rope_theta": 500.0},
    {"qk_norm": True},
])
def test_explicit_attention_path_matches_sdpa(variant):
    m = model(**variant).eval()
    x = torch.randint(74, (2, 128), generator=torch.Generator().manual_seed(1))
    fast, _ = m(x)
    explicit, patterns = m.run_with_cache(x, names_filter=lambda name: name.endswith("hook_pattern"))
    assert torch.allclose(fast, explicit, atol=1e-5)
    assert len(patterns) == 4 and patterns["blocks.0.attn.hook_pattern"].shape == (2, 4, 128, 128)


def test_attention_patterns_are_causal_distributions():
    _, cache = model().run_with_cache(torch.randint(74, (1, 50)))
    for p in (cache["pattern", layer] for layer in range(4)):
        assert torch.allclose(p.sum(-1), torch.ones(1, 4, 50), atol=1e-6)
        assert p.triu(1).abs().max() == 0


def test_unknown_hook_name_is_a_clear_error():
    with pytest.raises(KeyError, match="no hook point named blocks.9.attn.hook_pattern"):
        model().run_with_cache(torch.zeros(1, 3, dtype=torch.long), names_filter=["blocks.9.attn.hook_pattern"])


def test_residual_hooks_capture_the_stream():
    m = model()
    names = [f"blocks.{i}.hook_resid_post" for i in range(4)]
    _, acts = m.run_with_cache(torch.randint(74, (1, 10)), names_filter=names)
    assert [acts[n].shape for n in names] == [(1, 10, 128)] * 4


def test_without_the_causal_mask_future_tokens_change_the_past():
    x = torch.randint(74, (1, 20))
    y = x.clone()
    y[0, -1] = (y[0, -1] + 1) % 74
    causal, leaky = model().eval(), model(causal=False).eval()
    assert torch.allclose(causal(x)[0][0, :-1], causal(y)[0][0, :-1], atol=1e-6)
    assert not torch.allclose(leaky(x)[0][0, :-1], leaky(y)[0][0, :-1], atol=1e-4)


def test_kv_cache_step_equals_a_full_forward():
    m = model().eval()
    seq = torch.randint(74, (1, 100))
    caches = [LayerCache() for _ in m.blocks]
    m(seq[:, :60], caches=caches)
    for p in range(60, 100):
        step_logits, _ = m(seq[:, p:p + 1], caches=caches, start=p)
    full, _ = m(seq)
    assert torch.allclose(step_logits[0, -1], full[0, -1], atol=1e-5)


@pytest.mark.parametrize("position", ["rope", "learned"])
def test_cached_generation_matches_uncached_within_the_window(position):
    m = model(position=position).eval()
    prompt = torch.randint(74, (1, 5))
    runs = [list(stream(m, prompt, 100, generator=torch.Generator().manual_seed(3), use_cache=c))
            for c in (True, False)]
    assert runs[0] == runs[1]


def test_generation_runs_past_the_context_window():
    m = model(context=16).eval()
    out = generate(m, torch.zeros(1, 1, dtype=torch.long), 100, top_k=5, temperature=0.8)
    assert out.shape == (1, 101)


def test_temperature_zero_and_vanishing_temperatures_pick_the_most_likely_token():
    m = model(context=16).eval()
    prompt = torch.randint(74, (1, 4))
    greedy, seq = list(stream(m, prompt, 6, temperature=0)), prompt
    for token in greedy:
        assert token == int(m(seq)[0][0, -1].argmax())
        seq = torch.cat([seq, torch.tensor([[token]])], 1)
    assert list(stream(m, prompt, 6, temperature=1e-45, generator=torch.Generator().manual_seed(1))) == greedy


@pytest.mark.parametrize("kw, message", [({"temperature": float("nan")}, "temperature must be a finite number"),
                                         ({"temperature": -1.0}, "temperature must be"),
                                         ({"top_k": -2}, r"top_k must be a whole number, 0 \(off\) or more"),
                                         ({"top_k": 1.5}, "top_k must be")])
def test_bad_sampling_settings_are_refused_before_anything_is_generated(kw, message):
    with pytest.raises(ValueError, match=message):
        stream(model(), torch.zeros(1, 1, dtype=torch.long), 5, **kw)  # raised by the call, not the first next()


def test_sampling_from_broken_weights_says_so():
    m = model(context=16).eval()
    with torch.no_grad():
        m.head.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="outputs are NaN or infinite: its weights are broken"):
        list(stream(m, torch.zeros(1, 1, dtype=torch.long), 3))


def test_too_long_input_is_refused_with_the_context_named():
    with pytest.raises(ValueError, match="exceed the model's context of 128"):
        model()(torch.zeros(1, 129, dtype=torch.long))


def test_rope_scores_depend_only_on_the_offset():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 64, generator=g), torch.randn(1, 64, generator=g)
    scores = []
    for m, n in [(3, 1), (10, 8), (1002, 1000)]:
        rq = apply_rope(q, *rope_tables(torch.tensor([float(m)]), 64))
        rk = apply_rope(k, *rope_tables(torch.tensor([float(n)]), 64))
        scores.append(round((rq * rk).sum().item(), 4))
    assert scores == [-10.1427] * 3


@pytest.mark.parametrize("bad, message", [
    ({"d_model": 130, "n_head": 4}, "must be divisible by n_head"),
    ({"d_model": 12, "n_head": 4}, "d_head \\(3\\) must be even"),
    ({"norm": "batch"}, "norm must be rms or layer"),
    ({"n_layer": 0}, "n_layer must be an integer from 1"),
    ({"d_model": 10**7}, "d_model must be an integer from 1 to 4,096"),
    ({"scale_attention": "no"}, "scale_attention must be true or false, got 'no'"),
    ({"rope_theta": float("inf")}, "rope_theta must be a finite number, got inf"),
    ({"norm_eps": "1e-5"}, "norm_eps must be a finite number, got '1e-5'"),
])
def test_bad_configs_get_clear_messages(bad, message):
    with pytest.raises(ConfigError, match=message):
        GPTConfig(**bad)


def test_config_round_trips_through_json_and_rejects_unknown_keys():
    cfg = GPTConfig(position="learned", ffn="gelu", d_ff=512)
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="unknown model config keys: dropout"):
        GPTConfig.from_dict({"dropout": 0.1})


def test_a_grouped_query_model_caches_one_key_and_value_per_group_and_generates_as_without_the_cache():
    cfg = GPTConfig(vocab_size=50, d_model=48, n_head=6, n_kv_head=2, context=32)
    m = GPT(cfg).eval()
    prompt = torch.randint(50, (1, 5), generator=torch.Generator().manual_seed(0))
    greedy = [list(stream(m, prompt, 20, temperature=0, use_cache=c)) for c in (True, False)]
    assert greedy[0] == greedy[1]
    caches = [LayerCache(group=3) for _ in m.blocks]
    with torch.no_grad():
        m(prompt, caches=caches)
    assert caches[0].k.shape == caches[0].v.shape == (1, 2, 5, 8)  # 2 key/value heads, not 6


def test_evaluation_batches_stay_within_the_logits_budget_and_score_the_same(monkeypatch):
    from gptcore import step

    m = GPT(GPTConfig(vocab_size=50, d_model=32, n_layer=1, n_head=2, d_ff=64, context=16)).eval()
    ids = torch.randint(50, (16 * 9 + 5,), generator=torch.Generator().manual_seed(1))
    whole = step.evaluate(m, ids)
    monkeypatch.setattr(step, "LOGITS_BUDGET", 2 * 16 * 50 * 4)  # two windows a batch
    seen = []
    monkeypatch.setattr(m, "forward", lambda x, y=None, **kw: seen.append(len(x)) or GPT.forward(m, x, y, **kw))
    assert step.evaluate(m, ids) == pytest.approx(whole, abs=1e-6)
    assert max(seen) == 2


@pytest.mark.parametrize("options", [dict(n_kv_head=2), dict(head_dim=16), dict(tie_embeddings=True),
                                     dict(qkv_bias=True, qk_norm=True), dict(n_kv_head=1, head_dim=6)])
def test_the_parameter_count_of_each_real_model_option_is_the_built_models(options):
    cfg = GPTConfig(vocab_size=40, d_model=48, n_head=6, d_ff=64, n_layer=2, **options)
    assert cfg.n_params == GPT(cfg).num_params()


def test_the_tutorials_defaults_draw_the_same_weights_whatever_the_real_model_options_add():
    torch.manual_seed(0)
    default = GPT(GPTConfig())
    torch.manual_seed(0)
    explicit = GPT(GPTConfig(n_kv_head=4, head_dim=32, tie_embeddings=False, qkv_bias=False, rope_scaling="none"))
    assert default.num_params() == explicit.num_params() == 810_624
    assert all(torch.equal(a, b) for a, b in zip(default.state_dict().values(), explicit.state_dict().values()))


def test_several_new_tokens_after_a_cache_see_the_cached_keys_and_each_other_causally():
    m = GPT(GPTConfig(vocab_size=50, d_model=32, n_layer=2, n_head=4, d_ff=64, context=32)).eval()
    ids = torch.randint(50, (1, 12), generator=torch.Generator().manual_seed(2))
    caches = [LayerCache() for _ in m.blocks]
    with torch.no_grad():
        m(ids[:, :7], caches=caches)
        continued = m(ids[:, 7:], caches=caches, start=7)[0]
        whole = m(ids)[0]
    assert torch.allclose(continued, whole[:, 7:], atol=1e-5)
