"""gptcore.demos for the model pages: FFN/SwiGLU, norms, the assembled GPT, hyperparameters."""
import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from explorer.jobs import Job
from gptcore.config import GPTConfig, swiglu_hidden
from gptcore.demos import anatomy, ffn, norms
from gptcore.demos import hyperparams as hp
from gptcore.model import GPT

# --- FFN / SwiGLU ----------------------------------------------------------------------------------------

def test_swiglu_hidden_matches_the_tutorial_and_llama():
    assert swiglu_hidden(128, 8) == 344
    assert swiglu_hidden(4096, 256) == 11008
    assert swiglu_hidden(4096, 8) == 10928


@pytest.mark.parametrize("d_model, multiple", [(128, 8), (384, 8), (4096, 256), (50, 1)])
def test_ffn_budget_formulas_match_real_modules(d_model, multiple):
    budget = ffn.ffn_budget(d_model, multiple)
    assert (budget["formula"] == budget["counted in FeedForward"]).all()
    assert budget.loc[0, "formula"] == 8 * d_model ** 2
    assert budget.loc[1, "d_ff"] == swiglu_hidden(d_model, multiple)
    assert budget.loc[2, "formula"] == 12 * d_model ** 2


def test_swiglu_at_eight_thirds_is_exactly_8d2_when_it_divides():
    budget = ffn.ffn_budget(384, 8)  # 8/3 · 384 = 1024, no rounding
    assert budget.loc[1, "d_ff"] == 1024
    assert budget.loc[1, "formula"] == budget.loc[0, "formula"] == 8 * 384 ** 2


def test_gate_readout_is_what_the_model_computes():
    layer = ffn.feedforward(16, 48, seed=3)
    x = ffn.sample_tokens(5, 16, seed=4)
    r = ffn.gate_readout(layer, x)
    assert torch.allclose(r["silu(w1 x)"], F.silu(x @ layer.w1.weight.T), atol=1e-6)
    assert torch.allclose(r["silu(w1 x) ⊙ w3 x"], r["silu(w1 x)"] * r["w3 x"], atol=1e-6)
    assert torch.allclose(layer.w2(r["silu(w1 x) ⊙ w3 x"]), r["output"], atol=1e-6)
    assert not layer.w1._forward_hooks and not layer.w2._forward_pre_hooks  # hooks removed


def test_feedforward_init_is_private_and_seeded():
    a = ffn.feedforward(8, 24, seed=1)
    torch.rand(100)  # global RNG use in between must not matter
    b = ffn.feedforward(8, 24, seed=1)
    c = ffn.feedforward(8, 24, seed=2)
    assert torch.equal(a.w1.weight, b.w1.weight) and torch.equal(a.w2.weight, b.w2.weight)
    assert not torch.equal(a.w1.weight, c.w1.weight)
    bound = 1 / math.sqrt(8)  # PyTorch's default Linear init range
    assert a.w1.weight.abs().max() <= bound


def test_silu_curve_is_z_sigmoid_z_with_its_minimum():
    curves = ffn.activation_curves(-5, 5, 1001)
    z = torch.tensor(curves["z"].values)
    assert torch.allclose(torch.tensor(curves["SiLU"].values), z * torch.sigmoid(z), atol=1e-6)
    low = curves.loc[curves["SiLU"].idxmin()]
    assert low["SiLU"] == pytest.approx(-0.2785, abs=1e-3) and low["z"] == pytest.approx(-1.28, abs=0.01)
    assert (curves["ReLU"] >= 0).all()


# --- norms -----------------------------------------------------------------------------------------------

def test_rmsnorm_is_layernorm_without_centring():
    x = norms.sample_vector(8, shift=1.5, seed=0)
    out = norms.norm_outputs(x)
    assert torch.allclose(torch.tensor(out["LayerNorm(x)"].values), torch.tensor(out["RMSNorm(x − mean)"].values),
                          atol=1e-6)
    assert not torch.allclose(torch.tensor(out["RMSNorm(x)"].values), torch.tensor(out["LayerNorm(x)"].values),
                              atol=1e-2)
    centred = x - x.mean()  # zero-mean input: the two norms agree outright
    same = norms.norm_outputs(centred)
    assert torch.allclose(torch.tensor(same["RMSNorm(x)"].values), torch.tensor(same["LayerNorm(x)"].values),
                          atol=1e-6)
    summary = norms.norm_summary(x).set_index("vector")
    assert summary.loc["RMSNorm(x)", "RMS"] == pytest.approx(1, abs=1e-4)
    assert summary.loc["LayerNorm(x)", "mean"] == pytest.approx(0, abs=1e-6)
    assert summary.loc["RMSNorm(x)", "mean"] > 0.3  # the offset survives RMSNorm


def test_norm_parameter_counts():
    counts = norms.norm_parameters(128).set_index("norm")["parameters"]
    assert counts["RMSNorm"] == 128 and counts["LayerNorm"] == 256


TINY_RACE = norms.NormRace(n_layer=3, d_model=16, context=16, batch_size=4, steps=6, warmup=3, probe_every=3,
                           corpus_chars=20_000)


def run_race(race):
    job = Job("race", "norm race", lambda j: norms.run_norm_race(j, race), threads=1)
    job.start().join(120)
    return job.snapshot()


def test_norm_race_records_every_variant_on_the_same_data():
    snap = run_race(TINY_RACE)
    assert snap.status == "finished", snap.message
    assert set(snap.data["runs"].values()) == {"finished"}
    assert snap.data["steps_done"] == snap.data["steps_total"] == 4 * 7 and snap.progress == 1.0
    frames = norms.race_frames(snap.data)
    loss = frames["loss"]
    assert len(loss) == 4 * 7
    first = loss[loss["step"] == 0].set_index("variant")["loss"]
    # same seed, same first batch: warmup cannot change the loss measured before the first update
    assert first["pre-norm, no warmup"] == first["pre-norm, with warmup"]
    assert first["post-norm, no warmup"] == first["post-norm, with warmup"]
    assert first["pre-norm, no warmup"] != first["post-norm, no warmup"]
    one = loss[loss["variant"] == "post-norm, with warmup"]
    assert one["smoothed"].iloc[0] == one["loss"].iloc[0]
    assert one["smoothed"].iloc[-1] == pytest.approx(one["loss"].mean())  # 7 steps < the 10-step window
    assert sorted(frames["grads"]["step"].unique()) == [0, 3, 6]
    assert sorted(frames["grads"]["layer"].unique()) == [1, 2, 3]
    assert sorted(frames["resid"]["layer"].unique()) == [0, 1, 2, 3]
    # post-norm renormalises the trunk after every block: ‖x‖ ≈ √d at γ ≈ 1
    post = norms.at_probe(frames["resid"], "first")
    post = post[(post["variant"] == "post-norm, no warmup") & (post["layer"] > 0)]
    assert post["norm"].to_numpy() == pytest.approx(math.sqrt(16), rel=0.05)


def test_norm_race_stops_when_asked():
    job = Job("race", "norm race", lambda j: norms.run_norm_race(j, TINY_RACE), threads=1)
    job.control.request_stop()
    job.start().join(60)
    snap = job.snapshot()
    assert snap.status == "stopped" and not snap.data.get("loss")


def test_residual_and_gradient_norms_per_block():
    model = GPT(GPTConfig(n_layer=2, d_model=16, n_head=2, d_ff=48, vocab_size=10, context=8))
    idx = torch.randint(10, (2, 8), generator=torch.Generator().manual_seed(0))
    assert len(norms.residual_norms(model, idx)) == 3
    model(idx, idx)[1].backward()
    grads = norms.block_grad_norms(model)
    assert len(grads) == 2 and all(g > 0 for g in grads)


# --- the assembled GPT -----------------------------------------------------------------------------------

def test_tutorial_parameter_breakdown():
    parts = anatomy.breakdown(GPTConfig()).set_index("part")
    assert parts.loc["token embedding", "parameters"] == 9472
    assert parts.loc["attention: qkv + proj", "parameters"] == 65536
    assert parts.loc["FFN (SwiGLU)", "parameters"] == 132096
    assert parts.loc["two RMSNorms", "parameters"] == 256
    assert parts.loc["one block", "parameters"] == 197888
    assert parts.loc["final RMSNorm", "parameters"] == 128
    assert parts.loc["output head", "parameters"] == 9472
    assert parts.loc["total", "parameters"] == 810624
    assert (parts["parameters"] == parts["counted in GPT"]).all()


@pytest.mark.parametrize("changes", [
    dict(norm="layer"), dict(ffn="gelu", d_ff=512), dict(ffn="relu"), dict(position="learned", context=64),
    dict(norm_placement="post"), dict(vocab_size=1000, d_model=96, n_layer=7, n_head=6, d_ff=swiglu_hidden(96)),
])
def test_breakdown_matches_the_real_model_for_variants(changes):
    cfg = GPTConfig(**changes)
    parts = anatomy.breakdown(cfg)
    assert (parts["parameters"] == parts["counted in GPT"]).all()
    with torch.device("meta"):
        assert anatomy.total_parameters(anatomy.ModelShape.from_config(cfg)) == GPT(cfg).num_params()



def test_default_d_ff_and_the_total_label_follow_the_config():
    assert anatomy.default_d_ff(128, "swiglu") == 344 and anatomy.default_d_ff(4096, "swiglu") == 10928
    assert anatomy.default_d_ff(128, "relu") == anatomy.default_d_ff(128, "gelu") == 512

    def total_label(**changes):
        parts = anatomy.parameter_parts(anatomy.ModelShape.from_config(GPTConfig(**changes)))
        return parts.set_index("part").loc["total", "formula"]

    assert total_label() == "token embedding + all 4 blocks + final RMSNorm + output head"
    assert total_label(norm_placement="post") == "token embedding + all 4 blocks + output head"  # no final norm
    assert total_label(position="learned", norm="layer") == \
        "token embedding + position embedding + all 4 blocks + final LayerNorm + output head"
    shape = anatomy.ModelShape.from_config(GPTConfig())
    tied = anatomy.parameter_parts(dataclasses.replace(shape, tied_head=True)).set_index("part")
    assert tied.loc["total", "formula"] == "token embedding + all 4 blocks + final RMSNorm"  # the head adds nothing

def test_forward_shapes_come_from_the_real_forward():
    shapes = anatomy.forward_shapes(GPTConfig(), batch=2, T=16).set_index("module")["output shape"]
    assert shapes["emb"] == "(2, 16, 128)"
    assert shapes["blocks.0.attn.qkv"] == "(2, 16, 384)"
    assert shapes["blocks.0.attn.hook_pattern"] == "(2, 4, 16, 16)"
    assert shapes["blocks.0.ffn.w1"] == "(2, 16, 344)"
    assert shapes["head"] == "(2, 16, 74)"
    assert "blocks.1 … blocks.3" in shapes.index and "blocks.2.ffn.w1" not in shapes.index
    every = anatomy.forward_shapes(GPTConfig(), 1, 4, all_blocks=True)["module"]
    assert "blocks.3.ffn.w2" in set(every)
    with pytest.raises(ValueError, match="context"):
        anatomy.forward_shapes(GPTConfig(), 1, 129)


def test_view_after_transpose_raises_and_reshape_merges_heads():
    demo = anatomy.view_vs_reshape(1, 4, 3, 2)
    assert not demo["contiguous after transpose"]
    assert "view size is not compatible with input tensor's size and stride" in demo["view error"]
    assert demo["reshape copied"] and demo["reshape equals contiguous().view"]
    correct = demo["correct"]
    assert torch.equal(correct % 100, torch.arange(3)[:, None].expand(3, 8).float())  # row t holds position t
    assert torch.equal(correct[0] // 100, torch.tensor([0., 0, 1, 1, 2, 2, 3, 3]))  # heads side by side
    assert not demo["wrong equals correct"]


def test_block_diagram_follows_the_config():
    pre = anatomy.block_diagram(GPTConfig())
    labels = [n["label"] for n in pre["nodes"]]
    assert pre["block_label"] == "block × 4 (pre-norm)" and "final<br>RMSNorm" in labels
    assert any("RoPE" in label for label in labels) and any("128→344→128" in label for label in labels)
    kinds = [n["kind"] for n in pre["nodes"]]
    assert all(kinds[b] == "add" for _, b in pre["residuals"])
    first, last = pre["block"]
    assert kinds[first:last + 1] == ["norm", "attention", "add", "norm", "ffn", "add"]
    post = anatomy.block_diagram(GPTConfig(norm_placement="post", norm="layer", position="learned"))
    kinds = [n["kind"] for n in post["nodes"]]
    first, last = post["block"]
    assert kinds[first:last + 1] == ["attention", "add", "norm", "ffn", "add", "norm"]
    assert not any(n["label"].startswith("final") for n in post["nodes"])
    assert any("positions<br>128 × 128" in n["label"] for n in post["nodes"])


# --- hyperparameters -------------------------------------------------------------------------------------

def test_published_ratios():
    table = hp.published_table().set_index("model")
    gpt3, llama = table.loc["GPT-3 175B"], table.loc["LLaMA-2-7B"]
    assert gpt3["d_model / n_layer"] == 128 and gpt3["d_head"] == 128 and gpt3["n_head"] == 96
    assert llama["d_model / n_layer"] == 128 and llama["d_head"] == 128 and llama["d_ff"] == 11008
    assert round(llama["d_ff / d_model"], 2) == 2.69
    assert llama["parameters"] == 6_738_415_616  # LLaMA-2-7B's published exact count
    assert gpt3["parameters"] == pytest.approx(175e9, rel=0.01)
    assert table.loc["this app's GPT", "parameters"] == 810624


def test_consensus_check():
    assert hp.consensus_check(hp.PUBLISHED["LLaMA-2-7B"])["usual?"].all()
    assert hp.consensus_check(hp.PUBLISHED["GPT-3 175B"])["usual?"].all()
    tiny = hp.consensus_check(hp.PUBLISHED["this app's GPT"]).set_index("rule")["usual?"]
    assert not tiny["d_model / n_layer in 100–200"] and not tiny["d_head is 64 or 128"]


def test_flops_and_memory():
    tutorial = hp.PUBLISHED["this app's GPT"]
    assert hp.compute_parameters(tutorial) == 810624 - 9472
    f = hp.flops_per_token(tutorial)
    assert f["training: 6N"] == 3 * f["inference: 2N"] == 6 * 801152
    assert f["inference: attention"] == 2 * 4 * 128 * 128
    assert f["training total"] == 3 * f["inference total"]
    gpt3 = hp.PUBLISHED["GPT-3 175B"]  # tied head: the embedding matrix still costs a matmul
    assert hp.compute_parameters(gpt3) == anatomy.total_parameters(gpt3) - 2048 * 12288
    curve = hp.flops_vs_context(tutorial, [128, 1024]).set_index("context")
    assert curve.loc[128, "training total"] == f["training total"]
    assert curve.loc[1024, "attention"] == 8 * curve.loc[128, "attention"]
    memory = hp.memory_table(1_000_000_000).set_index("precision")
    assert memory["bytes / param"].tolist() == [16, 16, 8]
    assert memory.loc["fp32", "weights"] == 4 and memory.loc["fp32", "AdamW m + v"] == 8



def test_huge_configs_stay_chartable_and_readable():
    huge = anatomy.ModelShape(vocab_size=32000, d_model=10_000_000, n_layer=10_000_000, n_head=1, d_ff=11008,
                              context=4096)
    curve = hp.flops_vs_context(huge, [128, 1024])
    assert curve["training total"].dtype == float and curve["training total"].iloc[0] > 2.0 ** 63
    assert [hp.human_count(n) for n in (999, 810_624, 6.74e9, 1.2e14, 4.0033e21)] == [
        "999", "810.62 k", "6.74 B", "120.00 T", "4.00e+21"]
    assert [hp.human_bytes(n) for n in (12, 12.97e6, 107.8e9, 2.79e12, 6.4e22)] == [
        "12 bytes", "12.97 MB", "107.8 GB", "2.79 TB", "6.40e+22 bytes"]
    assert hp.format_gb(1234.5678) == "1,234.568" and hp.format_gb(6.4e13) == "6.400e+13"

def test_stability_patches_on_the_attention_logits():
    curves = hp.stability_curves([0.5, 1, 4, 16, 64], cap=5.0)
    by = {name: rows.reset_index(drop=True) for name, rows in curves.groupby("patch")}
    assert set(by) == {"no patch", "QK-norm", "soft-cap 5"}  # z-loss is not an attention patch
    plain = by["no patch"]
    assert plain["entropy (nats)"].is_monotonic_decreasing and plain["max prob"].iloc[-1] > 0.999
    assert by["QK-norm"]["entropy (nats)"].to_numpy() == pytest.approx(by["QK-norm"]["entropy (nats)"].iloc[0],
                                                                       rel=1e-4)
    assert (by["soft-cap 5"]["largest logit"] <= 5).all()
    assert by["soft-cap 5"]["entropy (nats)"].iloc[-1] > 1.0  # capped logits keep several keys in play


def test_z_loss_reads_the_output_layers_log_sum_exp():
    torch.manual_seed(0)
    model = GPT(GPTConfig())
    chars = [chr(c) for c in range(32, 32 + 74)]
    from gptcore.tokenizer import CharTokenizer
    tokenizer = CharTokenizer(chars)
    logits = hp.next_char_logits(model, tokenizer, "Once upon a tim")
    assert logits.shape == (74,)  # one logit per character of the vocabulary: the output layer, not attention
    ids = torch.tensor(tokenizer.encode("Once upon a tim"))[None]
    assert torch.equal(logits, model(ids)[0][0, -1])
    terms = hp.z_loss_terms(logits, target=tokenizer.stoi["e"])
    assert terms["log Z"] == pytest.approx(torch.logsumexp(logits, -1).item(), rel=1e-6)
    assert terms["z-loss"] == pytest.approx(1e-4 * terms["log Z"] ** 2)
    assert terms["cross-entropy"] == pytest.approx(F.cross_entropy(logits[None], torch.tensor([tokenizer.stoi["e"]]))
                                                   .item(), rel=1e-6)


def test_z_loss_gradient_has_the_sign_of_log_z_while_cross_entropy_ignores_a_common_shift():
    logits = torch.randn(72, generator=torch.Generator().manual_seed(1)) * 3
    sweep = hp.z_loss_sweep(logits, 5, [-20.0, -5.0, 0.0, 5.0])
    log_z0 = torch.logsumexp(logits, -1).item()
    assert sweep["log Z"].to_numpy() == pytest.approx(log_z0 + sweep["shift"].to_numpy(), abs=1e-4)
    assert sweep["cross-entropy"].to_numpy() == pytest.approx(sweep["cross-entropy"].iloc[0], abs=1e-4)
    assert sweep["Σ ∂cross-entropy/∂zᵢ"].abs().max() < 1e-5
    for shift in (-20.0, 5.0):
        t = hp.z_loss_terms(logits, 5, shift)
        torch.testing.assert_close(t["z-loss gradient"], 2e-4 * t["log Z"] * t["probs"])
        sign = 1 if t["log Z"] > 0 else -1
        assert (sign * t["z-loss gradient"] > 0).all()  # log Z > 0: every logit pushed down; < 0: every one up
    assert hp.z_loss_terms(logits, 5, -log_z0)["z-loss"] < 1e-10  # log Z = 0: the logits are log-probabilities


def test_attention_flops_state_the_causal_halving():
    tutorial = hp.PUBLISHED["this app's GPT"]
    full = 4 * tutorial.n_layer * tutorial.context * tutorial.d_model  # q·k and weights·v over the whole context
    assert hp.flops_per_token(tutorial)["inference: attention"] == full // 2
    assert "causal" in hp.flops_per_token.__doc__ and "halves" in hp.flops_per_token.__doc__
