"""gptcore.interp on the shipped model: the trace rebuilds the logits, attribution adds up, ablation and patching
do exactly what they say."""
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gptcore import checkpoint as ckpt
from gptcore import circuits, folders, interp
from gptcore.config import GPTConfig
from gptcore.errors import InputError
from gptcore.inspector import DEFAULT_TEXT, repeat_position, sampling_distribution
from gptcore.model import GPT
from gptcore.tokenizer import BPETokenizer, CharTokenizer, HFTokenizer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def shipped():
    return ckpt.load_checkpoint(folders.CHECKPOINT_ROOT / folders.SHIPPED)


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


def test_every_entry_of_the_stage_table_finds_its_one_line():
    """Editing the model, the tokenizers or sampling so that a stage's line changes fails here, by its name."""
    for step, entries in interp.STAGE_LINES.items():
        for function, snippet in entries:
            try:
                interp.code_line(function, snippet)
            except LookupError as error:
                pytest.fail(f"Trace's stage {step!r}: {error}")
    for kind, snippet in interp.ENCODE_LINES.items():
        assert snippet in interp.code_line(kind.encode, snippet).text
    assert "scaled_dot_product_attention" in interp.code_line(*interp.FUSED_ATTENTION).text
    with pytest.raises(LookupError, match="GPT.forward has 0 lines containing 'self.no_such_line'"):
        interp.code_line(GPT.forward, "self.no_such_line")


def test_every_stage_of_every_model_variant_shows_its_lines_and_every_entry_of_the_table_is_shown():
    """Whatever the model's norm, its placement, its positions, its FFN and its QK-norm, each stage shows the lines
    its entry names; no entry is left unused."""
    shown, steps = set(), set()
    for norm, placement, position, ffn in itertools.product(("rms", "layer"), ("pre", "post"),
                                                            ("rope", "learned", "none"), ("swiglu", "gelu")):
        cfg = GPTConfig(vocab_size=8, d_model=16, n_layer=1, n_head=2, d_ff=32, context=8, norm=norm,
                        norm_placement=placement, position=position, ffn=ffn, qk_norm=position == "none")
        tr = interp.trace(GPT(cfg).eval(), torch.arange(6), 3, tokenizer=CharTokenizer.from_text("abcdefgh"))
        shown |= {(s.path, s.line) for stage in tr.stages for s in stage.sources}
        steps |= {stage.step for stage in tr.stages}
        for stage in tr.stages:
            if stage.step in interp.STAGE_LINES:
                assert all(line in stage.sources for line in interp.stage_lines(stage.step)), stage.key
    listed = {(s.path, s.line) for step in interp.STAGE_LINES for s in interp.stage_lines(step)}
    assert listed <= shown
    assert set(interp.STAGE_LINES) - {"rmsnorm", "qk_norm"} <= steps  # (those two are parts of other stages)


def test_the_sampling_stage_shows_the_lines_that_computed_it_and_attention_names_its_fused_path(shipped, cap):
    tr = interp.trace(shipped.model, cap.ids, 5, cap, shipped.tokenizer)
    assert {s.path for s in tr["probs"].sources} == {"gptcore/inspector.py"}  # sampling_distribution, not sampling
    assert any("softmax" in s.text for s in tr["probs"].sources)
    fused = tr["L0.z"].unobserved
    assert "scaled_dot_product_attention" in fused.text and fused.path == "gptcore/model.py"
    assert (ROOT / fused.path).read_text().splitlines()[fused.line - 1].strip() == fused.text
    assert fused not in tr["L0.z"].sources  # the traced pass observed the scores: it ran the written-out path


def test_trace_refuses_a_position_outside_the_text(shipped, cap):
    with pytest.raises(InputError, match="position must be between 0 and"):
        interp.trace(shipped.model, cap.ids, len(cap.ids), cap)


def test_the_last_row_of_the_logit_lens_is_the_models_output(shipped, cap):
    lens = interp.logit_lens(shipped.model, cap)
    n_layer = shipped.model.cfg.n_layer
    assert lens.rows == ["embedding"] + [f"{row} {i}" for i in range(n_layer) for row in ("attention", "block")]
    resid_mid = cap["blocks.1.hook_resid_mid"]  # a row after an attention sublayer reads the stream right there
    with torch.no_grad():
        torch.testing.assert_close(lens.probs[3], shipped.model.head(shipped.model.ln_f(resid_mid)).softmax(-1))
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


def test_the_lens_says_from_which_row_on_the_answer_stays_the_top_guess():
    probs = torch.tensor([[[0.6, 0.4]], [[0.3, 0.7]], [[0.6, 0.4]], [[0.2, 0.8]], [[0.1, 0.9]]])
    lens = interp.LogitLens([str(i) for i in range(5)], probs, torch.tensor([0]))
    assert lens.readable_from(0, 1) == 3  # top at row 1 too, but lost again at row 2
    assert lens.readable_from(0, 0) is None  # not even the output's top guess
    assert interp.LogitLens(["a"], probs[3:4], torch.tensor([0])).readable_from(0, 1) == 0


@pytest.mark.parametrize("position", [3, 51])
def test_logit_difference_attribution_adds_up_to_the_models_difference(shipped, cap, position):
    target = int(cap.ids[position + 1])
    foil = interp.runner_up(cap.logits[position], target)
    assert foil != target and cap.logits[position, foil] == cap.logits[position].masked_fill(
        torch.arange(len(cap.logits[position])) == target, -1e9).max()
    attribution = interp.logit_attribution(shipped.model, cap, position, target, foil)
    difference = float(cap.logits[position, target] - cap.logits[position, foil])
    assert attribution.logit == pytest.approx(difference, abs=1e-5)
    assert attribution.total == pytest.approx(difference, abs=1e-4)
    plain = interp.logit_attribution(shipped.model, cap, position, target)
    against = interp.logit_attribution(shipped.model, cap, position, foil)
    # linear in the readout row: the difference's parts are the two logits' parts subtracted
    torch.testing.assert_close(torch.tensor(attribution.parts["logit"].values),
                               torch.tensor((plain.parts["logit"] - against.parts["logit"]).values),
                               atol=1e-6, rtol=0)


def test_logit_difference_attribution_adds_up_with_a_layernorm_and_learned_positions():
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=10, d_model=16, n_layer=2, n_head=2, d_ff=32, context=8, norm="layer",
                    position="learned", ffn="gelu")
    model = GPT(cfg).eval()
    with torch.no_grad():
        model.ln_f.bias.normal_()
    cap = interp.capture(model, torch.tensor([1, 2, 3, 4, 5]))
    attribution = interp.logit_attribution(model, cap, 3, 7, 2)
    assert set(attribution.parts["component"]) >= {"positions", "final norm"}
    assert attribution.total == pytest.approx(float(cap.logits[3, 7] - cap.logits[3, 2]), abs=1e-5)


def test_an_ablated_heads_output_is_zero_at_its_hook(shipped, cap):
    model = shipped.model
    edits = interp.ablation_edits(model, cap, [["L1H2"]], "zero")
    seen = {}

    def hook(activation, hook):
        if hook.name in edits:
            return edits[hook.name](activation)
        seen[hook.name] = activation.clone()

    with torch.no_grad():
        model.run_with_hooks(cap.ids[None], fwd_hooks=[(list(edits) + ["blocks.1.attn.hook_result"], hook)])
    result = seen["blocks.1.attn.hook_result"][0]  # (T, H, d_model)
    assert torch.count_nonzero(result[:, 2]) == 0
    assert torch.count_nonzero(result[:, 1]) > 0  # its neighbours keep working


@pytest.fixture(scope="module")
def means(shipped):
    return interp.reference_means(shipped.model, shipped.tokenizer)


def test_mean_ablation_puts_the_heads_mean_over_the_reference_text_in_place(shipped, cap, means):
    edits = interp.ablation_edits(shipped.model, cap, [["L2H0"]], "mean", means)
    z = cap["blocks.2.attn.hook_z"][None]
    out = edits["blocks.2.attn.hook_z"](z)[0]
    reference = interp.capture(shipped.model, shipped.tokenizer.encode(interp.REFERENCE_TEXT[:128]))
    assert len(shipped.tokenizer.encode(interp.REFERENCE_TEXT)) > 128  # read in several windows of the context
    assert not torch.allclose(means["blocks.2.attn.hook_z"], reference["blocks.2.attn.hook_z"].mean(0))
    torch.testing.assert_close(out[:, 0], means["blocks.2.attn.hook_z"][0].expand_as(out[:, 0]))
    assert torch.equal(out[:, 1:], z[0, :, 1:])
    with pytest.raises(ValueError, match="reference means"):
        interp.ablation_edits(shipped.model, cap, [["L2H0"]], "mean")


def test_mean_ablation_is_causal_later_characters_never_move_earlier_logits(shipped, means):
    tok, model, p = shipped.tokenizer, shipped.model, 40
    text = DEFAULT_TEXT
    changed = text[:p + 1] + text[p + 1:].swapcase()  # only characters after position p differ
    names = ["L1H1", "L3H3", "L0 FFN"]
    first, second = (interp.ablate(model, interp.capture(model, tok.encode(t)), names, "mean", means).logits
                     for t in (text, changed))
    torch.testing.assert_close(first[:p + 1], second[:p + 1], atol=1e-5, rtol=0)
    assert (first[p + 1:] - second[p + 1:]).abs().max() > 1  # the change itself does show after p


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


# --- gptcore.circuits -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def repeat(shipped, cap):
    """The default sentence said again: the position of the space before "warm" in its second saying, the true next
    "w" and the runner-up."""
    position = repeat_position(shipped.tokenizer.pieces(cap.ids.tolist()))
    target = int(cap.ids[position + 1])
    return position, target, interp.runner_up(cap.logits[position], target)


def test_direct_and_indirect_effects_add_up_and_show_the_previous_token_head_working_through_later_layers(
        shipped, cap, means, repeat):
    position, target, foil = repeat
    frame = circuits.effects(shipped.model, cap, position, target, foil, means).set_index("component")
    one = interp.ablate(shipped.model, cap, ["L2H0"], "mean", means).logits
    clean = float(cap.logits[position, target] - cap.logits[position, foil])
    assert frame.loc["L2H0", "total"] == pytest.approx(clean - float(one[position, target] - one[position, foil]),
                                                       abs=1e-5)
    np.testing.assert_allclose(frame["direct"] + frame["indirect"], frame["total"], atol=1e-9)
    # direct = the component's output minus its reference mean, through the frozen readout: attribution's terms
    attribution = interp.logit_attribution(shipped.model, cap, position, target, foil).parts.set_index("component")
    w_o = circuits.head_output_matrix(shipped.model, 2, 0)
    mean_part = interp.readout(shipped.model, cap, position, target, foil).direction @ (
        w_o @ means["blocks.2.attn.hook_z"][0]).double()
    assert frame.loc["L2H0", "direct"] == pytest.approx(attribution.loc["L2H0", "logit"] - float(mean_part), abs=1e-5)
    # the shipped model's circuit: the previous-token heads L1H1 and L2H0 write almost nothing the readout sees
    # directly, yet switching either off costs most of the difference through the induction head they feed
    for head in ("L1H1", "L2H0"):
        assert abs(frame.loc[head, "direct"]) < 0.5 < 3 < frame.loc[head, "total"]
    assert frame.loc["L3H2", "total"] > 3


def test_a_heads_output_split_by_source_position_adds_up_to_its_output(shipped, cap, repeat):
    position, target, foil = repeat
    pieces = circuits.head_by_source(shipped.model, cap, 3, 2, position)
    assert pieces.shape == (position + 1, shipped.model.cfg.d_model)
    torch.testing.assert_close(pieces.sum(0), cap["blocks.3.attn.hook_result"][position, 2], atol=1e-5, rtol=1e-6)
    shares = circuits.source_attribution(shipped.model, cap, 3, 2, position, target, foil)
    direct = interp.logit_attribution(shipped.model, cap, position, target, foil).parts.set_index("component")
    assert float(shares.sum()) == pytest.approx(direct.loc["L3H2", "logit"], abs=1e-4)
    # the induction head's share comes from the "w" of the first saying's "warm": the character it copies
    assert int(shares.argmax()) == DEFAULT_TEXT.index("warm")


@pytest.fixture(scope="module")
def key_setup(shipped):
    pair = next(p for p in interp.PATCHING_PAIRS if p.id == "key")
    return interp.patching_setup(shipped.model, shipped.tokenizer, pair.clean, pair.corrupted, pair.clean_answer,
                                 pair.corrupted_answer)


def every_side(model, residuals, sides=circuits.SIDES):
    return [circuits.SidePatch(layer, head, side, residuals[layer]) for layer in range(model.cfg.n_layer)
            for head in range(model.cfg.n_head) for side in sides]


def test_key_side_patching_of_everything_from_its_own_run_restores_that_run_exactly(shipped, cap):
    model = shipped.model
    names = [f"blocks.{layer}.hook_resid_pre" for layer in range(model.cfg.n_layer)]
    # observing the stream keeps the fused attention path
    plain, acts = model.run_with_cache(cap.ids[None], names_filter=names)
    own = [acts[name][0] for name in names]
    logits = interp.run_hooked(model, cap.ids[None], circuits.side_edits(model, [every_side(model, own, "k")]))
    assert torch.equal(logits, plain)  # recomputing each head's k from the stream is that k, bit for bit


def test_patching_all_three_sides_of_a_layers_heads_is_patching_their_outputs(shipped, key_setup):
    model, layer = shipped.model, 3
    residual = key_setup.clean[f"blocks.{layer}.hook_resid_pre"]
    rows = [[circuits.SidePatch(layer, head, side, residual) for head in range(model.cfg.n_head)
             for side in circuits.SIDES]]
    sides = interp.run_hooked(model, key_setup.corrupted.ids[None], circuits.side_edits(model, rows))
    outputs = interp.patched_logits(model, key_setup.clean, key_setup.corrupted.ids,
                                    [[interp.Patch(f"blocks.{layer}.attn.hook_z")]])
    torch.testing.assert_close(sides, outputs, atol=1e-4, rtol=0)


def test_the_previous_token_head_restores_the_induction_head_through_its_keys_only(shipped, key_setup):
    shares = circuits.patch_sides(shipped.model, key_setup, "L3H2", [None, "L2H0", "L0H0", "embedding"])
    assert shares.loc["L2H0", "k"] > 0.8 and shares.loc["", "k"] > 0.8
    assert shares.loc["L2H0", ["q", "v"]].abs().max() < 0.1 and shares.loc["L0H0"].abs().max() < 0.1
    # the senders before a layer are the embedding, then every head and FFN in order
    assert circuits.senders_before(shipped.model, 1) == ["embedding", "L0H0", "L0H1", "L0H2", "L0H3", "L0 FFN"]


def test_the_password_comes_back_through_the_copying_heads_values_written_by_the_first_ffn(shipped, setup, key_setup):
    shares = circuits.patch_sides(shipped.model, setup, "L3H2", [None] + circuits.senders_before(shipped.model, 3))
    assert shares.loc["", "v"] > 0.6 and shares[["q", "k"]].abs().max().max() < 0.1  # what it copies, not where
    # the character's identity reaches layer 3's values mostly as L0's FFN rewrote it, not as the raw embedding
    assert shares["v"].iloc[1:].idxmax() == "L0 FFN" and shares.loc["L0 FFN", "v"] > 0.4
    with pytest.raises(InputError, match="earlier layers"):
        circuits.patch_sides(shipped.model, key_setup, "L1H1", ["L2H0"])
    with pytest.raises(InputError, match="only a head"):
        circuits.patch_sides(shipped.model, key_setup, "L1 FFN", [None])


# --- a real model's shape: grouped-query attention, tied embeddings, a BPE ----------------------------------------

WORDS = ["When Mary and John went to the store, John gave a drink to Mary. ", "My cat likes warm milk and soft "
         "socks. ", 'The secret word is "blue fox". Later I said the secret word again: "blue fox". ']


@pytest.fixture(scope="module")
def real_like():
    """A tiny random model shaped like SmolLM2: 4 query heads sharing 2 key/value heads, tied embeddings, RoPE θ of
    100,000, a byte-level BPE; weights far larger than at initialisation, so every prompt gets its own logits."""
    tokenizer = BPETokenizer.train([text * 20 for text in WORDS], 320)
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=32, n_layer=3, n_head=4, n_kv_head=2, d_ff=48,
                    context=64, tie_embeddings=True, rope_theta=100_000.0)
    model = GPT(cfg).eval()
    with torch.no_grad():
        for weight in model.parameters():
            weight.normal_(0, 0.5)
    return model, tokenizer


@pytest.fixture(scope="module")
def real_cap(real_like):
    model, tokenizer = real_like
    return interp.capture(model, tokenizer.encode("My cat likes warm milk. My cat likes warm milk."))


@pytest.fixture(scope="module")
def real_setup(real_like):
    model, tokenizer = real_like
    pair = next(p for p in interp.WORD_PATCHING_PAIRS if p.id == "ioi")
    return interp.patching_setup(model, tokenizer, pair.clean, pair.corrupted, pair.clean_answer,
                                 pair.corrupted_answer)


def test_a_grouped_query_trace_names_the_key_value_head_each_query_head_reads(real_like, real_cap):
    model, tokenizer = real_like
    cfg, position = model.cfg, 9
    tr = interp.trace(model, real_cap.ids, position, real_cap, tokenizer)
    assert (rebuilt := interp.rebuild_logits(model, tr) - real_cap.logits[position]).abs().max() <= 1e-4, rebuilt
    qkv = tr["L1.qkv"]
    assert qkv.description == "qkv_gqa" and qkv.parts["kv_head"].tolist() == [0, 0, 1, 1]
    assert tr["L1.pattern"].parts["kv_head"].tolist() == [0, 0, 1, 1]
    assert tr["logits"].description == "logits_tied"  # (the readout's rows are the embedding's)
    # recomputed by hand: key/value head g is the g-th block of d_head rows after the query rows of W_qkv
    W, D, H = model.blocks[1].attn.qkv.weight.detach(), cfg.d_head, cfg.n_head
    normed = real_cap["blocks.1.hook_ln1_out"][position]
    for head, group in enumerate([0, 0, 1, 1]):
        torch.testing.assert_close(qkv.parts["k"][head], W[(H + group) * D:(H + group + 1) * D] @ normed)
        torch.testing.assert_close(qkv.parts["v"][head], W[(H + 2 + group) * D:(H + 3 + group) * D] @ normed)
        torch.testing.assert_close(qkv.value[head], W[head * D:(head + 1) * D] @ normed)


def test_attribution_of_a_tied_model_reads_the_embedding_rows_and_adds_up_to_the_difference(real_like, real_cap):
    model, _ = real_like
    assert interp.unembedding(model) is model.emb.weight and model.head.weight is model.emb.weight
    position = 7
    target = int(real_cap.ids[position + 1])
    foil = interp.runner_up(real_cap.logits[position], target)
    attribution = interp.logit_attribution(model, real_cap, position, target, foil)
    assert len(attribution.parts) == 1 + model.cfg.n_layer * (model.cfg.n_head + 1)
    difference = float(real_cap.logits[position, target] - real_cap.logits[position, foil])
    assert attribution.total == pytest.approx(difference, abs=1e-4) and attribution.logit == pytest.approx(difference)
    # each part by hand: the component's vector · (γ ⊙ (E[target] − E[foil])) / rms(final stream)
    final = real_cap[f"blocks.{model.cfg.n_layer - 1}.hook_resid_post"][position]
    direction = model.ln_f.weight.detach() * (model.emb.weight[target] - model.emb.weight[foil]).detach() / \
        final.square().mean().add(model.ln_f.eps).sqrt()
    by_hand = float(real_cap["blocks.2.attn.hook_result"][position, 3] @ direction)
    assert attribution.parts.set_index("component").loc["L2H3", "logit"] == pytest.approx(by_hand, abs=1e-4)


@pytest.mark.parametrize("mode", interp.ABLATIONS)
def test_the_batched_sweep_equals_each_head_switched_off_in_a_whole_pass(real_like, real_cap, mode):
    model, tokenizer = real_like
    means = interp.reference_means(model, tokenizer) if mode == "mean" else None
    done = []
    names = interp.components(model)
    frame = interp.ablation_sweep(model, real_cap, mode, names, batch=7, means=means,
                                  progress=lambda d, n: done.append(d)).set_index("component")
    assert done == sorted(done) and done[-1] == 15 and len(done) > 3  # the work done, block by block
    for name in names:  # the plain way: the whole text again, the component switched off at its hook point
        logits = interp.run_hooked(model, real_cap.ids[None],
                                   interp.ablation_edits(model, real_cap, [[name]], mode, means))
        assert frame.loc[name, "loss"] == pytest.approx(float(interp.text_losses(logits, real_cap.ids).mean()),
                                                        abs=1e-5), name
    several = interp.ablate(model, real_cap, ["L0H1", "L2 FFN", "L1H3"], mode, means).logits
    whole = interp.run_hooked(model, real_cap.ids[None],
                              interp.ablation_edits(model, real_cap, [["L0H1", "L2 FFN", "L1H3"]], mode, means))
    torch.testing.assert_close(several, whole[0], atol=1e-4, rtol=0)


def test_the_lens_column_and_grid_are_the_whole_lens_at_their_positions(real_like, real_cap):
    model, _ = real_like
    lens = interp.logit_lens(model, real_cap)
    T, position = len(real_cap.ids), 5
    column = interp.lens_column(model, real_cap, position)
    assert column.rows == lens.rows
    torch.testing.assert_close(column.probs, lens.probs[:, position], atol=1e-6, rtol=0)
    assert column.readable_from(int(real_cap.ids[position + 1])) == lens.readable_from(position,
                                                                                        int(real_cap.ids[position + 1]))
    positions = [0, 3, 5, T - 1]
    done = []
    grid = interp.lens_grid(model, real_cap, positions, progress=lambda d, n: done.append((d, n)))
    torch.testing.assert_close(grid.true_next[:, :3], lens.true_next()[:, positions[:3]], atol=1e-6, rtol=0)
    assert grid.true_next[:, 3].isnan().all()  # the text's last position has no next token
    assert torch.equal(grid.top, lens.probs[:, positions].argmax(-1)) and done[-1] == (len(lens.rows) * 4,) * 2
    blocks = interp.lens_column(model, real_cap, position, attention=False)
    assert blocks.rows == ["embedding", "block 0", "block 1", "block 2"]
    torch.testing.assert_close(blocks.probs, lens.probs[[0, 2, 4, 6], position], atol=1e-6, rtol=0)


def test_runs_entering_later_blocks_or_positions_are_the_whole_pass(real_like, real_cap):
    model, n_layer = real_like[0], real_like[0].cfg.n_layer
    final = real_cap[f"blocks.{n_layer - 1}.hook_resid_post"]
    for start, layer in ((0, 0), (0, 2), (6, 1), (11, 0)):
        runs = [interp.Run(layer)]
        out = interp.run_batched(model, lambda i, start=start: interp.stream_at(real_cap, i, n_layer)[start:], runs,
                                 lambda x: x, start=start, prefix=real_cap)
        torch.testing.assert_close(out[0], final[start:], atol=1e-4, rtol=1e-5)


def test_patching_sweeps_equal_patching_each_cell_in_a_whole_pass(real_like, real_setup):
    model, setup = real_like[0], real_setup
    start, T = setup.start, len(setup.clean.ids)
    assert 0 < start < T - 1 and torch.equal(setup.clean.ids[:start], setup.corrupted.ids[:start])

    def whole(patches):
        return float(setup.restored(interp.patched_logits(model, setup.clean, setup.corrupted.ids, [patches]))[0])

    heads = interp.patch_heads(model, setup, batch=5)
    for layer, head in itertools.product(range(3), range(4)):
        assert float(heads[layer, head]) == pytest.approx(whole([interp.Patch(f"blocks.{layer}.attn.hook_z", head)]),
                                                          abs=1e-4)
    residual = interp.patch_residual(model, setup)
    assert residual.shape == (4, T) and residual[:, :start].abs().max() == 0  # nothing differs before start
    for row, (_, hook) in enumerate(interp.residual_rows(model)):
        for p in (start, T - 1):
            assert float(residual[row, p]) == pytest.approx(whole([interp.Patch(hook, position=p)]), abs=1e-4)
    assert float(residual[-1, -1]) == pytest.approx(1.0, abs=1e-5)
    picked = [(2, 1), (0, 3)]
    by_position = interp.patch_heads_by_position(model, setup, heads=picked)
    assert by_position.shape == (2, T) and by_position[:, :start].abs().max() == 0
    for row, (layer, head) in enumerate(picked):
        for p in range(start, T):
            assert float(by_position[row, p]) == pytest.approx(
                whole([interp.Patch(f"blocks.{layer}.attn.hook_z", head, p)]), abs=1e-4)
    everything = [interp.Patch(name) for name in setup.clean.acts]
    logits = interp.patched_logits(model, setup.clean, setup.corrupted.ids, [everything])[0]
    assert torch.equal(logits, setup.clean.logits)


def test_effects_and_side_patching_equal_whole_passes(real_like, real_cap, real_setup):
    model, tokenizer = real_like
    means = interp.reference_means(model, tokenizer)
    position = 8
    target = int(real_cap.ids[position + 1])
    foil = interp.runner_up(real_cap.logits[position], target)
    frame = circuits.effects(model, real_cap, position, target, foil, means, batch=4).set_index("component")
    clean = float(interp.logit_difference(real_cap.logits, target, foil, position))
    for name in interp.components(model):
        ablated = interp.run_hooked(model, real_cap.ids[None],
                                    interp.ablation_edits(model, real_cap, [[name]], "mean", means))
        assert frame.loc[name, "total"] == pytest.approx(
            clean - float(interp.logit_difference(ablated, target, foil, position)[0]), abs=1e-4), name
    senders = [None, "embedding", "L0H2", "L1 FFN"]
    shares = circuits.patch_sides(model, real_setup, "L2H1", senders)
    rows = [[circuits.SidePatch(2, 1, side, circuits.sender_residual(model, real_setup, 2, sender))]
            for sender in senders for side in circuits.SIDES]
    logits = interp.run_hooked(model, real_setup.corrupted.ids.expand(len(rows), -1), circuits.side_edits(model, rows))
    np.testing.assert_allclose(shares.to_numpy().ravel(), real_setup.restored(logits).numpy(), atol=1e-4)


@pytest.mark.parametrize("changes", [{}, {"position": "learned", "ffn": "gelu"}, {"position": "none"},
                                     {"n_kv_head": 1, "head_dim": 12, "qk_norm": True}])
def test_a_captures_size_is_known_before_it_is_made(changes):
    cfg = GPTConfig(vocab_size=50, d_model=24, n_layer=2, n_head=4, d_ff=40, context=32, **changes)
    cap = interp.capture(GPT(cfg).eval(), torch.arange(20) % 50)
    assert interp.capture_bytes(cfg, 20) == cap.nbytes
    budget = interp.capture_bytes(cfg, 11) + 1
    assert interp.traceable_tokens(cfg, budget) == 11 and interp.traceable_tokens(cfg, 1) == 1
    assert interp.traceable_tokens(cfg, 10**12) == cfg.context


def test_a_model_that_reads_words_gets_word_pairs():
    assert interp.patching_pairs(CharTokenizer.from_text("abc")) == interp.PATCHING_PAIRS
    bpe = BPETokenizer.train(WORDS, 300)
    assert interp.patching_pairs(bpe) == interp.WORD_PATCHING_PAIRS
    assert interp.patching_pairs(HFTokenizer(bpe.hf)) == interp.WORD_PATCHING_PAIRS
    for pair in interp.WORD_PATCHING_PAIRS:  # the prompts differ early and end on the same text
        assert pair.clean != pair.corrupted and pair.clean[-12:] == pair.corrupted[-12:]


# --- SmolLM2 itself (skips, and says why, where it has not been fetched) -------------------------------------------

@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M as the importer converts it, kept in the cache beside the file it comes from (a second run
    finds it there: import_model leaves a finished import as it is)."""
    from gptcore import hub

    if hub.cached_smollm2() is None:
        print(f"skipping: SmolLM2 is not in the cache {hub.cache_dir()} (python -m gptcore fetch smollm2)")
        pytest.skip(f"SmolLM2 is not in the cache {hub.cache_dir()}: run python -m gptcore fetch smollm2")
    return ckpt.load_checkpoint(hub.import_model("smollm2", hub.cache_dir() / "converted" / "smollm2"))


def test_smollm2_is_traced_attributed_ablated_and_patched_through_all_its_layers(smollm2):
    model, tokenizer = smollm2.model, smollm2.tokenizer
    assert (model.cfg.n_layer, model.cfg.n_head, model.cfg.kv_heads, model.cfg.tie_embeddings) == (30, 9, 3, True)
    cap = interp.capture(model, tokenizer.encode(DEFAULT_TEXT))
    position = repeat_position(tokenizer.pieces(cap.ids.tolist()))  # the sentence said again: the copy
    tr = interp.trace(model, cap.ids, position, cap, tokenizer)
    assert (interp.rebuild_logits(model, tr) - cap.logits[position]).abs().max() <= 1e-3
    assert tr["L29.qkv"].parts["kv_head"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    target = int(cap.ids[position + 1])
    assert int(cap.logits[position].argmax()) == target  # SmolLM2 copies the second saying
    foil = interp.runner_up(cap.logits[position], target)
    attribution = interp.logit_attribution(model, cap, position, target, foil)
    assert attribution.total == pytest.approx(attribution.logit, abs=2e-3)
    column = interp.lens_column(model, cap, position)
    torch.testing.assert_close(column.probs[-1], cap.logits[position].softmax(-1), atol=1e-5, rtol=0)
    names = [f"L{layer}H{head}" for layer in (0, 29) for head in range(9)]
    frame = interp.ablation_sweep(model, cap, names=names).set_index("component")
    for name in ("L0H4", "L29H7"):
        assert frame.loc[name, "loss"] == pytest.approx(interp.ablate(model, cap, [name]).loss[1], abs=1e-4)
    pair = next(p for p in interp.WORD_PATCHING_PAIRS if p.id == "ioi")
    setup = interp.patching_setup(model, tokenizer, pair.clean, pair.corrupted, pair.clean_answer,
                                  pair.corrupted_answer)
    assert setup.clean_difference > 3 > -3 > setup.corrupted_difference  # each prompt's answer, as the pair says
    residual = interp.patch_residual(model, setup)
    assert float(residual[-1, -1]) == pytest.approx(1.0, abs=1e-4)
    assert float(residual[0, setup.start]) == pytest.approx(1.0, abs=1e-3)  # the differing name, at the embedding
