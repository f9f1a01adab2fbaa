"""gptcore.interp on the shipped model: the trace rebuilds the logits, attribution adds up, ablation and patching
do exactly what they say."""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gptcore import checkpoint as ckpt
from gptcore import folders, interp
from gptcore.errors import InputError
from gptcore.inspector import DEFAULT_TEXT, sampling_distribution
from gptcore.runs import SHIPPED

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def shipped():
    return ckpt.load_checkpoint(folders.CHECKPOINT_ROOT / SHIPPED)


@pytest.fixture(scope="module")
def cap(shipped):
    return interp.capture(shipped.model, shipped.tokenizer.encode(DEFAULT_TEXT))


def test_capture_sees_every_hook_point_and_the_models_own_logits(shipped, cap):
    model = shipped.model
    unused = {"hook_pos_embed"}  # a RoPE model adds no position rows
    assert set(cap.acts) == set(model.hook_points()) - unused
    with torch.no_grad():
        plain, _ = model(cap.ids[None])
    # hooks observe and change nothing; observed scores make the attention run as written out rather than in
    # SDPA's fused kernel, which rounds differently
    torch.testing.assert_close(cap.logits, plain[0], rtol=0, atol=1e-4)


@pytest.mark.parametrize("position", [0, 17, -1])
def test_the_traced_values_rebuild_the_models_logits(shipped, cap, position):
    model = shipped.model
    position %= len(cap.ids)
    tr = interp.trace(model, cap.ids, position, cap, shipped.tokenizer)
    rebuilt = interp.rebuild_logits(model, tr)
    assert (rebuilt - cap.logits[position]).abs().max() <= 1e-5
    assert torch.equal(tr.logits, cap.logits[position])


def test_each_stage_follows_from_the_one_before(shipped, cap):
    model, position = shipped.model, 20
    tr = interp.trace(model, cap.ids, position, cap, shipped.tokenizer, temperature=0.7, top_k=5)
    token = int(cap.ids[position])
    assert int(tr["token"].value) == token
    torch.testing.assert_close(tr["embed"].value, model.emb.weight[token].detach())
    cfg = model.cfg
    for layer in range(cfg.n_layer):
        scores, pattern = tr[f"L{layer}.scores"].value, tr[f"L{layer}.pattern"].value
        assert scores.shape == pattern.shape == (cfg.n_head, position + 1)  # only the keys up to the query
        torch.testing.assert_close(pattern, scores.softmax(-1))
        z = tr[f"L{layer}.z"]
        torch.testing.assert_close(z.value, torch.einsum("hk,khd->hd", pattern, z.parts["v"]), atol=1e-6, rtol=0)
        result = tr[f"L{layer}.result"]
        torch.testing.assert_close(result.value.sum(0), result.parts["total"], atol=1e-5, rtol=0)
        mid = tr[f"L{layer}.resid_mid"]
        torch.testing.assert_close(mid.value, mid.parts["before"] + mid.parts["added"])
        hidden = tr[f"L{layer}.ffn_hidden"]
        torch.testing.assert_close(hidden.value, hidden.parts["act"] * hidden.parts["gate"])
        torch.testing.assert_close(tr[f"L{layer}.ffn_act"].value, F.silu(tr[f"L{layer}.ffn_pre"].value))
    assert torch.equal(tr["probs"].value, sampling_distribution(cap.logits[position], 0.7, 5))
    assert (tr["probs"].value > 0).sum() == 5
    assert int(tr["next"].value) == int(cap.logits[position].argmax())
    keys = [s.key for s in tr.stages]
    assert len(keys) == len(set(keys)) == 2 + 15 * cfg.n_layer + 4


def test_every_source_line_is_the_line_in_the_file(shipped, cap):
    tr = interp.trace(shipped.model, cap.ids, 5, cap, shipped.tokenizer)
    for stage in tr.stages:
        for source in stage.sources:
            lines = (ROOT / source.path).read_text().splitlines()
            assert lines[source.line - 1].strip() == source.text, source


def test_trace_refuses_a_position_outside_the_text(shipped, cap):
    with pytest.raises(InputError, match="position must be between 0 and"):
        interp.trace(shipped.model, cap.ids, len(cap.ids), cap)


def test_the_last_row_of_the_logit_lens_is_the_models_output(shipped, cap):
    lens = interp.logit_lens(shipped.model, cap)
    assert lens.rows == ["embedding"] + [f"block {i}" for i in range(shipped.model.cfg.n_layer)]
    torch.testing.assert_close(lens.probs[-1], cap.logits.softmax(-1), atol=1e-6, rtol=0)
    true_next = lens.true_next()
    assert torch.equal(true_next[-1], lens.probs[-1, :-1].gather(-1, cap.ids[1:, None])[:, 0])


@pytest.mark.parametrize("position", [3, 40])
def test_attribution_adds_up_to_the_logit(shipped, cap, position):
    target = int(cap.ids[position + 1])
    attribution = interp.logit_attribution(shipped.model, cap, position, target)
    cfg = shipped.model.cfg
    assert len(attribution.parts) == 1 + cfg.n_layer * (cfg.n_head + 1)  # embedding, every head, every FFN
    assert attribution.total == pytest.approx(attribution.logit, abs=1e-4)
    assert attribution.logit == pytest.approx(float(cap.logits[position, target]))


def test_an_ablated_heads_output_is_zero_at_its_hook(shipped, cap):
    model = shipped.model
    edits = interp.ablation_edits(model, cap, [["L1H2"]], "zero")
    seen = {}

    def hook(name, act):
        if name in edits:
            return edits[name](act)
        seen[name] = act.clone()

    names = list(edits) + ["blocks.1.attn.hook_result"]
    with model.hooks(names, hook), torch.no_grad():
        model(cap.ids[None])
    result = seen["blocks.1.attn.hook_result"][0]  # (T, H, d_model)
    assert torch.count_nonzero(result[:, 2]) == 0
    assert torch.count_nonzero(result[:, 1]) > 0  # its neighbours keep working


def test_mean_ablation_puts_the_heads_mean_over_the_text_in_place(shipped, cap):
    edits = interp.ablation_edits(shipped.model, cap, [["L2H0"]], "mean")
    z = cap["blocks.2.attn.hook_z"][None]
    out = edits["blocks.2.attn.hook_z"](z)[0]
    torch.testing.assert_close(out[:, 0], cap["blocks.2.attn.hook_z"][:, 0].mean(0).expand_as(out[:, 0]))
    assert torch.equal(out[:, 1:], z[0, :, 1:])


def test_the_sweep_ranks_heads_by_the_loss_each_costs_alone(shipped, cap):
    done = []
    frame = interp.ablation_sweep(shipped.model, cap, batch=5, progress=lambda d, n: done.append((d, n)))
    cfg = shipped.model.cfg
    assert len(frame) == cfg.n_layer * cfg.n_head and done[-1] == (len(frame), len(frame))
    assert frame["loss increase"].is_monotonic_decreasing
    for _, row in frame.head(3).iterrows():
        before, after = interp.ablate(shipped.model, cap, [row["component"]]).loss
        assert row["loss"] == pytest.approx(after, abs=1e-5)
        assert row["loss increase"] == pytest.approx(after - before, abs=1e-5)


def test_ablating_nothing_changes_nothing(shipped, cap):
    ablation = interp.ablate(shipped.model, cap, [])
    assert torch.equal(ablation.logits, cap.logits)
    with pytest.raises(InputError, match="names no head or FFN"):
        interp.ablate(shipped.model, cap, ["L9"])
    with pytest.raises(InputError, match="does not exist"):
        interp.ablate(shipped.model, cap, ["L9H0"])


@pytest.fixture(scope="module")
def setup(shipped):
    pair = interp.PATCHING_PAIRS[0]
    return interp.patching_setup(shipped.model, shipped.tokenizer, pair.clean, pair.corrupted, pair.clean_answer,
                                 pair.corrupted_answer)


def test_patching_everything_gives_the_clean_logits_and_nothing_the_corrupted(shipped, setup):
    model = shipped.model
    everything = [interp.Patch(name) for name in setup.clean.acts]
    logits = interp.patched_logits(model, setup.clean, setup.corrupted.ids, [everything])[0]
    assert torch.equal(logits, setup.clean.logits)
    assert float(setup.restored(logits)) == pytest.approx(1.0, abs=1e-6)
    nothing = interp.patched_logits(model, setup.clean, setup.corrupted.ids, [[]])[0]
    with torch.no_grad():
        assert torch.equal(nothing, model(setup.corrupted.ids[None])[0][0])
    assert float(setup.restored(nothing)) == pytest.approx(0.0, abs=1e-4)


def test_patching_the_last_residual_at_the_last_position_restores_everything(shipped, setup):
    shares = interp.patch_residual(shipped.model, setup)
    T = len(setup.clean.ids)
    assert shares.shape == (shipped.model.cfg.n_layer + 1, T)
    assert float(shares[-1, -1]) == pytest.approx(1.0, abs=1e-4)
    assert shares[-1, :-1].abs().max() <= 1e-4  # the last block's output elsewhere is never read by the last logits
    assert float(shares[0, :].abs().max()) > 0  # the embedding of the differing character matters


def test_head_patching_agrees_with_patching_one_head_by_hand(shipped, setup):
    heads = interp.patch_heads(shipped.model, setup)
    by_position = interp.patch_heads_by_position(shipped.model, setup, batch=128)
    cfg = shipped.model.cfg
    assert heads.shape == (cfg.n_layer, cfg.n_head) and by_position.shape == (cfg.n_layer * cfg.n_head,
                                                                               len(setup.clean.ids))
    one = interp.patched_logits(shipped.model, setup.clean, setup.corrupted.ids,
                                [[interp.Patch("blocks.2.attn.hook_z", 1)]])
    assert float(heads[2, 1]) == pytest.approx(float(setup.restored(one)[0]), abs=1e-5)


def test_a_patching_pair_must_be_usable(shipped):
    tok, model = shipped.tokenizer, shipped.model
    with pytest.raises(InputError, match="same length in tokens: 3 and 2"):
        interp.patching_setup(model, tok, "abc", "ab", "a", "b")
    with pytest.raises(InputError, match="exactly one token"):
        interp.patching_setup(model, tok, "abc", "abd", "ab", "b")
    with pytest.raises(InputError, match="must differ"):
        interp.patching_setup(model, tok, "abc", "abd", "a", "a")
    with pytest.raises(InputError, match="does not know: €"):
        interp.patching_setup(model, tok, "ab€", "abd", "a", "b")
