"""Hooks as TransformerLens has them: fn(activation, hook) with hook.name, run_with_hooks, the hooks context,
run_with_cache's names_filter and a cache that indexes by full name or by (word, layer)."""
import pytest
import torch

from gptcore.config import GPTConfig
from gptcore.hooks import ActivationCache
from gptcore.model import GPT

# our hook names, one block's worth, in TransformerLens' words (the norms' outputs and the MLP's act are ours alone)
BLOCK_HOOKS = {
    "hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out", "hook_ln1_out",
    "hook_ln2_out", "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_q", "attn.hook_rot_k",
    "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z", "attn.hook_result", "mlp.hook_pre", "mlp.hook_act",
    "mlp.hook_pre_linear", "mlp.hook_post",
}


def tiny(**cfg) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=20, d_model=16, n_layer=2, n_head=2, d_ff=24, context=12, **cfg)).eval()


IDS = torch.randint(20, (2, 10), generator=torch.Generator().manual_seed(1))


def test_every_hook_point_knows_its_transformer_lens_name():
    model = tiny(position="learned")
    names = set(model.hook_points())
    blocks = {f"blocks.{i}.{name}" for i in range(2) for name in BLOCK_HOOKS}
    assert names == blocks | {"hook_embed", "hook_pos_embed", "hook_ln_f_out"}
    assert model.blocks[1].ffn.hook_pre.name == "blocks.1.mlp.hook_pre"  # the parameters keep the name ffn
    assert "blocks.1.ffn.w1.weight" in model.state_dict()


def test_a_hook_reads_with_its_name_and_a_returned_tensor_replaces_the_activation():
    model = tiny()
    seen = []

    def read(activation, hook):
        seen.append((hook.name, activation.shape))

    def zero_head_1(z, hook):
        z = z.clone()
        z[:, :, 1] = 0
        return z

    plain, _ = model(IDS)
    logits, loss = model.run_with_hooks(IDS, fwd_hooks=[("blocks.0.attn.hook_pattern", read)])
    assert seen == [("blocks.0.attn.hook_pattern", (2, 2, 10, 10))] and loss is None
    torch.testing.assert_close(logits, plain, atol=1e-5, rtol=0)  # None leaves the activation as it was
    with torch.no_grad():
        ablated, _ = model.run_with_hooks(IDS, fwd_hooks=[("blocks.1.attn.hook_z", zero_head_1),
                                                          ("blocks.1.attn.hook_result", read)])
    assert seen[-1] == ("blocks.1.attn.hook_result", (2, 10, 2, 16))
    assert not torch.allclose(ablated, plain, atol=1e-3)
    # by hand: block 1's attention output without head 1 is W_O times z with head 1's columns zeroed
    _, cache = model.run_with_cache(IDS, names_filter=["blocks.1.attn.hook_z", "blocks.1.hook_attn_out"])
    z = cache["blocks.1.attn.hook_z"].clone()
    z[:, :, 1] = 0
    with torch.no_grad():
        expected = model.blocks[1].attn.proj(z.flatten(2))
    assert not torch.allclose(cache["blocks.1.hook_attn_out"], expected, atol=1e-3)
    with model.hooks([("blocks.1.attn.hook_z", zero_head_1)]):
        _, hooked = model.run_with_cache(IDS, names_filter="blocks.1.hook_attn_out")
    torch.testing.assert_close(hooked["attn_out", 1], expected, atol=1e-6, rtol=0)


def test_a_name_filter_function_attaches_a_hook_to_every_point_it_accepts():
    model = tiny()
    names = []
    model.run_with_hooks(IDS, fwd_hooks=[(lambda name: name.endswith("hook_resid_post"), lambda a, hook:
                                          names.append(hook.name))])
    assert names == ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]  # in the order the pass meets them


def test_hooks_are_removed_after_the_pass_and_after_an_error():
    model = tiny()

    def fail(activation, hook):
        raise RuntimeError("inside a hook")

    with pytest.raises(RuntimeError, match="inside a hook"):
        model.run_with_hooks(IDS, fwd_hooks=[("blocks.0.hook_resid_mid", fail)])
    assert not any(point.active for point in model.hook_points().values())
    with pytest.raises(KeyError, match="no hook point named blocks.0.hook_typo"):
        model.run_with_hooks(IDS, fwd_hooks=[("blocks.0.hook_resid_pre", fail), ("blocks.0.hook_typo", fail)])
    model(IDS)  # runs: nothing was left attached


def test_the_hooks_context_keeps_a_hook_for_several_passes():
    model = tiny()
    calls = []
    with model.hooks(fwd_hooks=[("hook_embed", lambda a, hook: calls.append(a.shape))]):
        model(IDS)
        model(IDS[:1])
    model(IDS)
    assert calls == [(2, 10, 16), (1, 10, 16)]


def test_run_with_cache_keeps_every_hook_point_by_default_and_what_a_filter_picks():
    model = tiny()
    logits, cache = model.run_with_cache(IDS)
    assert isinstance(cache, ActivationCache)
    assert set(cache.keys()) == set(model.hook_points()) - {"hook_pos_embed"} and len(cache) == 2 * 20 + 2
    torch.testing.assert_close(logits, model(IDS)[0], atol=1e-5, rtol=0)
    assert torch.equal(cache["pattern", 1], cache["blocks.1.attn.hook_pattern"])
    assert torch.equal(cache["resid_post", 0], cache["blocks.0.hook_resid_post"])
    assert torch.equal(cache["pre_linear", 0], cache["blocks.0.mlp.hook_pre_linear"])
    assert torch.equal(cache["embed"], cache["hook_embed"])
    for alias, word in (("attn", "attn.hook_pattern"), ("key", "attn.hook_k"), ("mlp_post", "mlp.hook_post")):
        assert torch.equal(cache[alias, 1], cache[f"blocks.1.{word}"])  # (TransformerLens' words for them)
    assert ("pattern", 1) in cache and "blocks.0.attn.hook_q" in cache and ("pattern", 5) not in cache
    with pytest.raises(KeyError):
        cache["blocks.0.attn.hook_scores"]
    for names_filter, kept in (("hook_embed", ["hook_embed"]),
                               (["blocks.1.attn.hook_v", "hook_ln_f_out"], ["blocks.1.attn.hook_v", "hook_ln_f_out"]),
                               (lambda name: name.startswith("blocks.0.mlp"),
                                ["blocks.0.mlp.hook_pre", "blocks.0.mlp.hook_act", "blocks.0.mlp.hook_pre_linear",
                                 "blocks.0.mlp.hook_post"])):
        _, cache = model.run_with_cache(IDS, names_filter=names_filter)
        assert sorted(cache) == sorted(kept)
    assert not cache["blocks.0.mlp.hook_post"].requires_grad


def test_the_mlp_hooks_are_transformer_lens_gated_mlp_and_the_scores_are_masked_before_the_softmax():
    model = tiny()
    _, cache = model.run_with_cache(IDS)
    ffn = model.blocks[0].ffn
    x = cache["blocks.0.hook_ln2_out"]
    with torch.no_grad():
        torch.testing.assert_close(cache["pre", 0], ffn.w1(x))  # TL's W_gate side, before the activation
        torch.testing.assert_close(cache["pre_linear", 0], ffn.w3(x))  # TL's W_in side
        torch.testing.assert_close(cache["post", 0], torch.nn.functional.silu(ffn.w1(x)) * ffn.w3(x))
    scores = cache["attn_scores", 0]
    assert torch.isinf(scores[..., 0, 1:]).all() and torch.isfinite(scores[..., -1, :]).all()
    torch.testing.assert_close(scores.softmax(-1), cache["pattern", 0])
