"""gptcore.demos behind the attention concept pages: the tutorial's printed numbers, exactly."""
import math

import pytest
import torch

from gptcore.config import GPTConfig
from gptcore.demos import averaging as avg
from gptcore.demos import multihead as mh
from gptcore.demos import rope, scaling
from gptcore.events import SampleEvent
from gptcore.model import rope_frequencies
from gptcore.texts import builtin_corpus
from gptcore.train import TrainConfig

# --- averaging ------------------------------------------------------------------------------------------

def test_causal_average_three_ways_matches_the_tutorial_printout():
    ex = avg.averaging_example()
    assert avg.tutorial_printout(ex) == (
        "tensor([[1.0000, 0.0000, 0.0000, 0.0000],\n"
        "        [0.5000, 0.5000, 0.0000, 0.0000],\n"
        "        [0.3333, 0.3333, 0.3333, 0.0000],\n"
        "        [0.2500, 0.2500, 0.2500, 0.2500]])\n"
        "tensor([-0.5741, -0.3745]) tensor([-0.5741, -0.3745])\n"
        "tensor([0.3333, 0.3333, 0.3333, 0.0000])")
    assert [round(v, 4) for v in ex.matmul[0, 2].tolist()] == [-0.5741, -0.3745]
    torch.testing.assert_close(ex.loop, ex.matmul)
    torch.testing.assert_close(ex.loop, ex.softmax)


def test_zero_scores_under_the_mask_are_the_row_normalised_triangle():
    for T in (1, 5, 12):
        torch.testing.assert_close(avg.masked_softmax(torch.zeros(T, T)), avg.average_weights(T))


def test_masking_after_softmax_breaks_the_row_sums_but_masking_before_keeps_them():
    before = avg.text_attention("abcab", 1.0, tied=True, causal=True)
    after = avg.zero_future(avg.text_attention("abcab", 1.0, tied=True, causal=False))
    torch.testing.assert_close(before.sum(-1), torch.ones(5))
    sums = after.sum(-1)
    assert sums[-1].item() == pytest.approx(1.0) and (sums[:-1] < 0.999).all()
    assert (after.triu(1) == 0).all() and (before.triu(1) == 0).all()


def test_text_attention_is_the_uniform_average_at_zero_sharpness_and_finds_copies_when_tied():
    torch.testing.assert_close(avg.text_attention("Lucy saw Lucy", 0.0), avg.average_weights(13))
    w = avg.text_attention("Lucy saw Lucy", 2.0, tied=True)
    assert w[9].argmax().item() in (0, 9)  # the second L looks at an L
    assert w[9, 0].item() > 0.3
    with pytest.raises(ValueError, match="at least one character"):
        avg.text_attention("")


def test_attention_module_does_not_touch_the_global_rng():
    state = torch.get_rng_state()
    avg.attention_module(*avg.projections(8))
    assert torch.equal(state, torch.get_rng_state())


def test_training_without_the_mask_reaches_an_implausibly_low_loss():
    setup = avg.LeakSetup(corpus_chars=20_000, model=GPTConfig(d_model=32, n_layer=2, n_head=2, d_ff=88, context=32),
                          train=TrainConfig(steps=70, batch_size=8, lr=1e-2, eval_every=70, eval_batches=2, threads=1,
                                            sample_chars=20))
    text = builtin_corpus(setup.corpus_chars).text
    events = []
    results = avg.leak_experiment(text, lambda variant, event: events.append((variant, type(event))), setup=setup)
    assert set(results) == {"causal", "no mask"}
    assert results["no mask"] < results["causal"] - 1.0  # the leaky model copies its targets
    assert ("causal", SampleEvent) in events and ("no mask", SampleEvent) in events


# --- scaling --------------------------------------------------------------------------------------------

def test_variance_of_dot_products_matches_the_tutorial():
    table = scaling.variance_table()
    assert table["d"].tolist() == [16, 64, 256]
    assert [f"{v:.1f}" for v in table["var(q·k)"]] == ["15.8", "63.5", "261.3"]
    assert [f"{v:.2f}" for v in table["var(q·k/√d)"]] == ["0.99", "0.99", "1.02"]
    assert scaling.variance_printout(table).splitlines()[0] == "d= 16  var(q.k)=   15.8  var(q.k/sqrt(d))=0.99"


def test_softmax_of_scaled_logits_matches_the_tutorial():
    plain, sharp = scaling.softmax_pair()
    assert str(plain) == "tensor([0.0900, 0.2447, 0.6652])"
    assert str(sharp) == "tensor([1.2664e-14, 1.1254e-07, 1.0000e+00])"


def test_softmax_jacobian_matches_autograd_and_collapses_with_scale():
    logits = torch.tensor([1.0, 2.0, 3.0])
    expected = torch.autograd.functional.jacobian(lambda z: z.softmax(-1), logits)
    torch.testing.assert_close(scaling.softmax_jacobian(logits.softmax(-1)), expected)
    grad = scaling.gradient_vs_scale(factors=[1.0, 16.0])
    assert grad["jacobian norm"][0] > 0.3 and grad["jacobian norm"][1] < 1e-6


def test_scaling_keeps_attention_entropy_while_unscaled_attention_saturates():
    stats = scaling.attention_stats(256).set_index("scores")
    assert stats.loc["q·k/√d", "score std"] == pytest.approx(1.0, abs=0.05)
    assert stats.loc["q·k", "mean entropy (nats)"] < 0.5 < 2.5 < stats.loc["q·k/√d", "mean entropy (nats)"]
    assert stats.loc["q·k", "near one-hot rows"] > 0.3 and stats.loc["q·k/√d", "near one-hot rows"] == 0
    curve = scaling.entropy_vs_d((4, 64, 1024))
    assert curve["q·k"].is_monotonic_decreasing
    assert (curve["q·k/√d"] > 2.9).all() and (curve["q·k/√d"] < math.log(32)).all()


def test_entropy_curve_uses_the_stats_draws_at_every_d():
    curve = scaling.entropy_vs_d((64, 1024)).set_index("d")
    for d in (64, 1024):
        stats = scaling.attention_stats(d).set_index("scores")["mean entropy (nats)"]
        assert curve.loc[d].to_dict() == stats.to_dict()


# --- heads and order ------------------------------------------------------------------------------------

def test_attention_parameters_and_compute_do_not_depend_on_the_head_count():
    costs = mh.attention_costs(128, 128, (1, 2, 4, 8, 16))
    assert costs["parameters"].tolist() == [65_536] * 5
    assert costs["d_head"].tolist() == [128, 64, 32, 16, 8]
    # measured by FlopCounterMode: 2·T·4d² for the four projections, 2·2·T²·d for scores and mixing
    assert costs["projection FLOPs"].tolist() == [2 * 128 * 4 * 128 ** 2] * 5
    assert costs["score + mixing FLOPs"].tolist() == [4 * 128 ** 2 * 128] * 5


def test_head_profiles_name_a_previous_character_head_and_a_word_start_head():
    text = "ab\ncd ef"  # a line break and a space open the words; no character repeats
    T = len(text)
    previous = torch.zeros(T, T)
    previous[0, 0] = 1
    previous[torch.arange(1, T), torch.arange(T - 1)] = 1
    word = torch.zeros(T, T)
    word[0, 0] = word[1, 1] = word[2, 2] = 1
    for i, start in ((3, 2), (4, 2), (5, 5), (6, 5), (7, 5)):
        word[i, start] = 1  # the space that opened the current word
    patterns = torch.stack([previous, word])[None]  # (1 layer, 2 heads, T, T)
    ids = torch.tensor([ord(c) for c in text])
    profiles = mh.head_profiles(patterns, ids, text).set_index("head")
    assert profiles.loc["L0H0", "previous_token"] == pytest.approx(1.0)
    assert profiles.loc["L0H0", "role"] == "previous character"
    assert profiles.loc["L0H0", "mean reach"] == pytest.approx(1.0)
    assert profiles.loc["L0H1", "word_start"] == pytest.approx(1.0)
    assert profiles.loc["L0H1", "role"] == "start of the current word"
    assert math.isnan(profiles.loc["L0H0", "induction"])  # no character repeats
    assert mh.varied_layer(profiles.reset_index()) == 0
    assert mh.clearest_head(profiles.reset_index())["head"] == "L0H0"  # both score 1.0: the first wins


def test_varied_layer_prefers_heads_that_divide_the_work_over_one_clear_role():
    text = "ab\ncd ef"
    T = len(text)
    previous = torch.zeros(T, T)
    previous[0, 0] = 1
    previous[torch.arange(1, T), torch.arange(T - 1)] = 1
    first = torch.zeros(T, T)
    first[:, 0] = 1
    layer0 = torch.stack([previous, previous])  # one role, twice
    layer1 = torch.stack([previous, first])  # two roles
    ids = torch.tensor([ord(c) for c in text])
    profiles = mh.head_profiles(torch.stack([layer0, layer1]), ids, text)
    assert [str(r) for r in profiles["role"]] == ["previous character"] * 3 + ["first character"]
    assert mh.varied_layer(profiles) == 1


def test_head_role_falls_back_to_how_far_a_head_reads():
    row = {"previous_token": 0.1, "word_start": 0.1, "first_token": 0.05, "induction": float("nan"),
           "mean reach": 12.3}
    assert mh.head_role(row) == "spread out, about 12 characters back"
    assert mh.head_role({**row, "mean reach": 2.0}) == "local, the last few characters"


def test_permutation_check_matches_the_tutorial_and_breaks_with_mask_or_rope():
    perm = [4, 2, 0, 1, 3]
    assert mh.permutation_check(perm)["equal"] is True
    assert mh.permutation_check(perm, causal=True)["equal"] is False
    assert mh.permutation_check(perm, use_rope=True)["equal"] is False
    assert mh.permutation_table(perm, n_head=2)["allclose"].tolist() == [True, False, False, False]


def test_model_attention_is_the_tutorials_attn_function():
    x, Wq, Wk, Wv = mh.tutorial_inputs()
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    expected = torch.softmax(q @ k.T / 8 ** 0.5, -1) @ v
    _, attn = mh.model_attention()
    torch.testing.assert_close(attn(x)[0], expected, atol=1e-5, rtol=1e-5)


def test_identity_permutation_is_equal_even_with_mask_and_rope():
    assert mh.permutation_check([0, 1, 2, 3, 4], causal=True, use_rope=True)["equal"] is True


@pytest.mark.parametrize("text, message", [
    ("", "enter an order"), ("4 2 0 1", "give 5 numbers"), ("4 2 0 1 x", "'x' is not a whole number"),
    ("4 2 0 1 5", "5 is out of range"), ("4 2 0 1 1", "missing: 3")])
def test_parse_permutation_explains_bad_input(text, message):
    with pytest.raises(ValueError, match=message):
        mh.parse_permutation(text, 5)


def test_parse_permutation_accepts_commas_and_spaces():
    assert mh.parse_permutation("4, 2,0 1  3", 5) == [4, 2, 0, 1, 3]


# --- RoPE -----------------------------------------------------------------------------------------------

def test_rope_invariance_table_matches_the_tutorial():
    q, k = rope.tutorial_qk()
    table = rope.invariance_table(q, k)
    assert [f"{v:.4f}" for v in table["RoPE q·k"]] == ["-10.1427"] * 3
    assert table["absolute q·k"].round(2).nunique() == 3  # added position vectors: depends on m and n


def test_rope_score_grid_is_constant_along_diagonals_unlike_absolute_positions():
    q, k = rope.tutorial_qk()
    assert rope.diagonal_spread(rope.rope_score_grid(q, k, 32)) < 1e-3
    assert rope.diagonal_spread(rope.absolute_score_grid(q, k, 32)) > 10
    assert rope.diagonal_spread(rope.rope_score_grid(q, k, 32, theta=500.0)) < 1e-3


def test_pair_path_turns_by_theta_i_per_position_and_keeps_the_length():
    q, _ = rope.tutorial_qk()
    path = rope.pair_path(q, 3, range(6))
    lengths = (path["x"] ** 2 + path["y"] ** 2) ** 0.5
    assert lengths.max() - lengths.min() < 1e-5
    turn = math.atan2(path["y"][1], path["x"][1]) - math.atan2(path["y"][0], path["x"][0])
    assert math.remainder(turn - rope_frequencies(64)[3].item(), 2 * math.pi) == pytest.approx(0, abs=1e-5)


def test_frequency_table_spans_one_radian_down_to_near_one_over_theta():
    freqs = rope.frequency_table(64, 10_000.0)
    assert freqs["θ_i (rad/token)"][0] == 1.0 and len(freqs) == 32
    assert freqs["θ_i (rad/token)"].is_monotonic_decreasing
    assert freqs["wavelength (tokens)"].iloc[-1] == pytest.approx(2 * math.pi * 10_000 ** (62 / 64), rel=1e-4)
