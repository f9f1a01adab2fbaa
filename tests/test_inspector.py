"""gptcore.inspector: head scores on hand-built patterns, and every quantity against a direct computation."""
import io
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from gptcore import checkpoint as ckpt
from gptcore import inspector as ins
from gptcore.config import GPTConfig
from gptcore.generate import stream
from gptcore.model import apply_rope
from gptcore.tokenizer import CharTokenizer
from gptcore.train import build_model

STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside. One day, Lily found a "
         "red ball in the park.")
CHARS = sorted(set(STORY + ins.DEFAULT_TEXT + "\n"))


@pytest.fixture(scope="module")
def tiny():
    tokenizer = CharTokenizer(CHARS)
    cfg = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=32, n_layer=2, n_head=4, d_ff=88, context=48)
    model, _ = build_model(cfg, seed=3)
    return model.eval(), tokenizer


def one_hot_rows(T: int, key_of_query) -> torch.Tensor:
    """A (T, T) pattern where query i puts all its weight on key_of_query(i)."""
    pattern = torch.zeros(T, T)
    for i in range(T):
        pattern[i, key_of_query(i)] = 1.0
    return pattern


def test_head_scores_on_heads_built_to_be_exact():
    ids = torch.tensor([0, 1, 2, 0, 1, 2])  # "abcabc": the second half repeats the first
    previous = one_hot_rows(6, lambda i: max(i - 1, 0))
    first = one_hot_rows(6, lambda i: 0)
    induction = one_hot_rows(6, lambda i: i - 2 if i >= 3 else i)  # at the 2nd 'a' look at the 'b' after the 1st
    half = 0.5 * induction + 0.5 * torch.eye(6)
    patterns = torch.stack([previous, first, induction, half])[None]  # one layer, four heads

    scores = ins.head_scores(patterns, ids).set_index("head")

    assert list(scores.index) == ["L0H0", "L0H1", "L0H2", "L0H3"]
    assert scores.loc["L0H0", ["previous_token", "first_token", "induction"]].tolist() == [1.0, 0.2, 0.0]
    assert scores.loc["L0H1", ["previous_token", "first_token", "induction"]].tolist() == [0.2, 1.0, 0.0]
    assert scores.loc["L0H2", ["previous_token", "first_token", "induction"]].tolist() == [0.0, 0.0, 1.0]
    # queries 3..5 give half their weight to the induction target; queries 0..2 have no earlier occurrence
    assert scores.loc["L0H3", "induction"] == 0.5
    assert scores.loc["L0H3", "previous_token"] == 0.0


def test_head_scores_layer_and_head_order():
    ids = torch.tensor([0, 1, 0, 1])
    patterns = torch.zeros(2, 3, 4, 4)
    patterns[:] = one_hot_rows(4, lambda i: i)  # every head attends to itself
    patterns[1, 2] = one_hot_rows(4, lambda i: max(i - 1, 0))  # except layer 1, head 2
    scores = ins.head_scores(patterns, ids)
    assert scores["head"].tolist() == ["L0H0", "L0H1", "L0H2", "L1H0", "L1H1", "L1H2"]
    assert scores["previous_token"].tolist() == [0, 0, 0, 0, 0, 1]
    assert (scores["layer"].tolist(), scores["head_index"].tolist()) == ([0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2])


def test_induction_targets_exclude_the_query_itself():
    # "aaab": query 2 may read key 1 (after the 'a' at 0); key 2 would be the query itself
    targets = ins.induction_targets(torch.tensor([0, 0, 0, 1]))
    expected = torch.zeros(4, 4, dtype=torch.bool)
    expected[2, 1] = True
    expected[3, :] = False
    assert torch.equal(targets, expected)


def test_induction_score_is_nan_without_repeats():
    scores = ins.head_scores(one_hot_rows(3, lambda i: 0)[None, None], torch.tensor([0, 1, 2]))
    assert math.isnan(scores.loc[0, "induction"])
    assert scores.loc[0, "first_token"] == 1.0


def test_patterns_match_attention_written_out(tiny):
    model, tokenizer = tiny
    run = ins.inspect_text(model, tokenizer, ins.DEFAULT_TEXT[:40])
    ids, T, cfg = run.ids, len(run.ids), model.cfg
    x = model.emb(ids[None])
    rope = (model.rope_cos[:T], model.rope_sin[:T])
    expected = []
    with torch.no_grad():
        for block in model.blocks:
            q, k, _ = block.attn.qkv(block.ln1(x)).split(cfg.d_model, dim=-1)
            q, k = (t.view(1, T, cfg.n_head, cfg.d_head).transpose(1, 2) for t in (q, k))
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
            scores = q @ k.transpose(-2, -1) / math.sqrt(cfg.d_head)
            scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            expected.append(scores.softmax(-1)[0])
            x = block(x, rope)
    assert run.patterns.shape == (cfg.n_layer, cfg.n_head, T, T)
    # (torch.allclose, not torch.testing.assert_close: the latter imports torch.distributed, ~5 s)
    assert torch.allclose(run.patterns, torch.stack(expected), atol=1e-6)
    assert torch.allclose(run.patterns.sum(-1), torch.ones(cfg.n_layer, cfg.n_head, T), atol=1e-6)
    assert run.patterns.triu(1).abs().max() == 0
    # the hooks only read: logits equal those of the ordinary fused-attention forward
    assert torch.allclose(run.logits, model(ids[None])[0][0], atol=1e-5)


def test_attention_patterns_is_the_inspection_tensor(tiny):
    model, tokenizer = tiny
    assert torch.equal(ins.attention_patterns(model, tokenizer, "Lily. Lily"),
                       ins.inspect_text(model, tokenizer, "Lily. Lily").patterns)


def test_long_text_is_cut_to_the_context_and_unknown_characters_are_reported(tiny):
    model, tokenizer = tiny
    text = "Lily€ " * 20  # 120 characters, 20 of them unknown: 100 known, context 48
    run = ins.inspect_text(model, tokenizer, text)
    assert len(run.ids) == 48 and run.text == ("Lily " * 10)[:48]
    assert run.truncated == 100 - 48
    assert run.unknown == {"€": 20}
    with pytest.raises(ValueError, match="no character the model knows"):
        ins.inspect_text(model, tokenizer, "€€€")


def test_char_losses_average_to_the_model_loss(tiny):
    model, tokenizer = tiny
    run = ins.inspect_text(model, tokenizer, ins.DEFAULT_TEXT)
    losses = ins.char_losses(run.logits, run.ids)
    assert losses.shape == (len(run.ids),) and math.isnan(losses[0])
    _, loss = model(run.ids[None, :-1], run.ids[None, 1:])
    assert losses[1:].mean().item() == pytest.approx(loss.item(), rel=1e-5)
    position = 7
    probs = run.logits[position - 1].softmax(-1)
    assert losses[position].item() == pytest.approx(-math.log(probs[run.ids[position]].item()), rel=1e-5)


def test_top_predictions_are_the_largest_softmax_probabilities(tiny):
    model, tokenizer = tiny
    run = ins.inspect_text(model, tokenizer, ins.DEFAULT_TEXT)
    top = ins.top_predictions(run.logits, tokenizer, 10, k=5)
    probs = F.softmax(run.logits[10], -1)
    assert len(top) == 5
    assert top["probability"].tolist() == pytest.approx(sorted(probs.tolist(), reverse=True)[:5])
    assert [tokenizer.stoi[c] for c in top["char"]] == torch.topk(probs, 5).indices.tolist()
    assert top["label"].tolist() == ins.token_labels("".join(top["char"]))


def test_token_labels_make_whitespace_visible():
    assert ins.token_labels("a b\nc\t") == ["a", "␣", "b", "⏎", "c", "⇥"]


def test_repeat_position_finds_where_the_text_is_said_again():
    # a sentence said twice: the space before the first word whose start only the earlier saying predicts
    position = ins.repeat_position(ins.DEFAULT_TEXT)
    second = ins.DEFAULT_TEXT.index("My", 1)
    assert second < position and ins.DEFAULT_TEXT[position] == " "
    assert ins.DEFAULT_TEXT[position - ins.REPEAT_MIN + 1:position + 1] in ins.DEFAULT_TEXT[:second]
    assert ins.repeat_position(["The ", "little ", "dog. ", "The ", "little ", "dog."]) == 4  # a token's pieces
    assert ins.repeat_position(STORY) == STORY.rindex("Lily")  # no span said again: a name that comes back
    assert ins.repeat_position("Tom saw a dog. The dog ran.") is None


def test_strongest_head_is_the_best_score_only_when_it_is_clear():
    ids = torch.tensor([0, 1, 2, 0, 1, 2])
    patterns = torch.stack([torch.eye(6), one_hot_rows(6, lambda i: i - 2 if i >= 3 else i)])[None]  # L0H1 induces
    scores = ins.head_scores(patterns, ids)
    assert ins.strongest_head(scores, "induction") == (0, 1, 1.0)
    assert ins.strongest_head(scores, "previous_token") is None  # best 0.0: no head is called a role
    assert ins.strongest_head(ins.head_scores(patterns, torch.arange(6)), "induction") is None  # no repeats: NaN


def test_repeated_random_text_is_two_identical_halves():
    tokenizer = CharTokenizer(CHARS)
    text = ins.repeated_random_text(tokenizer, 30, seed=5)
    assert len(text) == 60 and text[:30] == text[30:]
    assert set(text) <= set(CHARS)
    assert text == ins.repeated_random_text(tokenizer, 30, seed=5) != ins.repeated_random_text(tokenizer, 30, 6)


def test_generate_is_model_stream_with_a_seeded_generator(tiny):
    model, tokenizer = tiny
    out = ins.generate(model, tokenizer, "Lily", 30, temperature=0.9, top_k=5, seed=11)
    direct = stream(model, torch.tensor([tokenizer.encode("Lily")]), 30, temperature=0.9, top_k=5,
                          generator=torch.Generator().manual_seed(11))
    assert out == tokenizer.decode(list(direct)) and len(out) == 30
    assert out != ins.generate(model, tokenizer, "Lily", 30, temperature=0.9, top_k=5, seed=12)


def test_training_steps_lists_snapshots_then_the_final_weights(tiny, tmp_path):
    model, tokenizer = tiny
    for step in (0, 50):
        ckpt.save_snapshot(tmp_path, model, tokenizer, step)
    ckpt.save_checkpoint(tmp_path, model, tokenizer, {"step": 80})
    assert [(s, p.name) for s, p in ins.training_steps(tmp_path)] == [
        (0, "step_000000.safetensors"), (50, "step_000050.safetensors"), (80, "model.safetensors")]
    ckpt.save_snapshot(tmp_path, model, tokenizer, 80)  # a snapshot at the final step replaces the final file
    assert [s for s, _ in ins.training_steps(tmp_path)] == [0, 50, 80]
    assert ins.training_steps(tmp_path)[-1][1].name == "step_000080.safetensors"


def test_scores_over_training_has_every_step_head_and_score(tiny):
    model, tokenizer = tiny
    long = ins.scores_over_training([(0, model), (10, model)], tokenizer, "Lily and Lily")
    assert len(long) == 2 * 8 * 3
    assert set(long["score"]) == {"previous_token", "first_token", "induction"}
    direct = ins.head_scores(*(lambda r: (r.patterns, r.ids))(ins.inspect_text(model, tokenizer, "Lily and Lily")))
    at_10 = long[(long["step"] == 10) & (long["score"] == "induction")]["value"].to_numpy()
    np.testing.assert_array_equal(at_10, direct["induction"].to_numpy())


def test_exports_round_trip(tiny):
    model, tokenizer = tiny
    run = ins.inspect_text(model, tokenizer, "Lily, Lily")
    L, H, T = model.cfg.n_layer, model.cfg.n_head, len(run.ids)
    array = np.load(io.BytesIO(ins.patterns_npy(run.patterns)))
    assert array.dtype == np.float32 and np.array_equal(array, run.patterns.numpy())
    frame = pd.read_csv(io.StringIO(ins.patterns_csv(run.patterns, run.text)), keep_default_na=False)
    assert len(frame) == L * H * T * T
    row = frame[(frame.layer == 1) & (frame["head"] == 2) & (frame["query"] == 6) & (frame["key"] == 3)].iloc[0]
    assert (row.query_char, row.key_char) == (run.text[6], run.text[3])
    assert row.weight == pytest.approx(run.patterns[1, 2, 6, 3].item(), rel=1e-5)
    sums = frame.groupby(["layer", "head", "query"])["weight"].sum()
    np.testing.assert_allclose(sums.to_numpy(), 1.0, atol=1e-4)


def test_highlight_html_escapes_and_shows_newlines():
    out = ins.highlight_html("<b>\n", [0.0, 1.0, 0.5, 2.0], mark=1)
    assert "&lt;" in out and "&gt;" in out and "<b>" not in out
    assert "⏎" in out and "rgba(255,75,75,1.00)" in out  # weights above 1 are clipped
    assert out.count("outline") == 1


# ---------------------------------------------------------------- real models: tokens, the atlas, chat

@pytest.fixture(scope="module")
def tiny_bpe():
    """A stand-in for an imported model: a byte-level BPE, grouped-query attention and tied embeddings."""
    from gptcore.tokenizer import BPETokenizer

    tokenizer = BPETokenizer.train([ins.DEFAULT_TEXT * 10 + " Lily met Tom.\nThe dog ran home." * 10], 300)
    cfg = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=32, n_layer=2, n_head=4, n_kv_head=2, d_ff=64,
                    context=64, tie_embeddings=True)
    model, _ = build_model(cfg, seed=5)
    return model.eval(), tokenizer


def test_the_atlas_scores_random_tokens_shown_twice_as_the_copying_test_does(tiny):
    from gptcore import atlas, copying

    model, _ = tiny
    scores, report = atlas.repeated_token_scores(model, length=20, n_sequences=3, seed=4)
    direct = copying.measure_copying(model, length=20, repeats=2, n_sequences=3, seed=4)
    for column, expected in (("induction", direct.induction), ("previous_token", direct.previous_token),
                             ("first_token", direct.first_token)):
        np.testing.assert_array_equal(scores[column].to_numpy(), expected.flatten().numpy())
    assert report.copy_losses == direct.copy_losses
    assert scores["head"].tolist() == ins.head_names(2, 4)


def test_a_large_model_is_scored_on_fewer_shorter_sequences():
    from gptcore import atlas, copying

    smollm2 = GPTConfig(vocab_size=49152, d_model=576, n_layer=30, n_head=9, n_kv_head=3, d_ff=1536, context=2048,
                        tie_embeddings=True)
    assert atlas.repeated_shape(smollm2) == (atlas.LARGE_LENGTH, atlas.LARGE_SEQUENCES) == (50, 4)
    assert atlas.repeated_shape(GPTConfig()) == (GPTConfig().context // 2, copying.DEFAULT_SEQUENCES)
    # every head's patterns of a text fit in PATTERN_BYTES: SmolLM2 reads 128 tokens, the tutorial's model its context
    assert ins.inspect_limit(smollm2) == 128 and 4 * 30 * 9 * 128 ** 2 <= ins.PATTERN_BYTES
    assert ins.inspect_limit(GPTConfig()) == GPTConfig().context


def test_clear_heads_are_the_ones_at_the_threshold_best_first():
    from gptcore import atlas

    ids = torch.tensor([0, 1, 2, 0, 1, 2])
    induction = one_hot_rows(6, lambda i: i - 2 if i >= 3 else i)
    patterns = torch.stack([torch.eye(6), induction, 0.5 * induction + 0.5 * torch.eye(6)])[None]
    scores = ins.head_scores(patterns, ids)
    assert atlas.clear_heads(scores, "induction", 0.3)["head"].tolist() == ["L0H1", "L0H2"]
    assert atlas.clear_heads(scores, "induction", 0.6)["head"].tolist() == ["L0H1"]
    assert atlas.clear_heads(ins.head_scores(patterns, torch.arange(6)), "induction", 0.3).empty  # NaN: none


def test_a_bpe_model_is_inspected_token_by_token(tiny_bpe):
    model, tokenizer = tiny_bpe
    text = "My cat likes warm milk.\nMy cat"
    run = ins.inspect_text(model, tokenizer, text)
    ids = tokenizer.encode(text)
    assert run.ids.tolist() == ids and run.pieces == tokenizer.pieces(ids) and "".join(run.pieces) == text
    assert ins.token_labels(run.pieces) == tokenizer.labels(ids)
    assert "␣cat" in ins.token_labels(run.pieces) and "⏎" in "".join(ins.token_labels(run.pieces))
    logits = model(run.ids[None])[0][0]
    assert torch.allclose(run.logits, logits, atol=1e-5)  # the final state times the tied head: the model's logits
    assert torch.allclose(run.logits_at(3), logits[3], atol=1e-5)
    assert torch.allclose(run.losses[1:], F.cross_entropy(logits[:-1], run.ids[1:], reduction="none"), atol=1e-5)
    top = ins.predictions(run.logits_at(3), tokenizer, 5)
    assert top["label"].tolist() == tokenizer.labels(logits[3].topk(5).indices.tolist())


def test_token_boxes_show_each_token_with_its_whitespace_and_escape_the_rest():
    out = ins.token_boxes_html(["My", "␣<b>", "⏎"], lambda i: f"position {i}")
    assert out.count("<span") == 3 and "&lt;b&gt;" in out and "<b>" not in out
    assert '>My</span>' in out and '>⏎</span>' in out
    assert 'title="position 2"' in out
    assert out.count("#e3edfb") == 2 and out.count("#fbe9d7") == 1  # neighbours in two colours: each cut shows


def test_a_text_longer_than_a_large_models_limit_is_cut_there(tiny_bpe, monkeypatch):
    model, tokenizer = tiny_bpe
    monkeypatch.setattr(ins, "PATTERN_BYTES", 4 * 2 * 4 * 20 ** 2)  # room for 20 tokens of this model's 8 heads
    text = "My cat likes warm milk and soft socks. " * 4
    run = ins.inspect_text(model, tokenizer, text)
    assert run.limit == 16 and len(run.ids) == 16  # (the power of two at or below 20)
    assert run.truncated == len(tokenizer.encode(text)) - 16 and run.patterns.shape[-1] == 16


def test_generation_stops_at_the_end_of_sequence_token(tiny):
    model, tokenizer = tiny
    whole = ins.generate(model, tokenizer, "Lily", 30, temperature=0.0, top_k=None, seed=0)
    stop = whole[7]
    tokenizer = CharTokenizer(CHARS)
    tokenizer.eos_id = tokenizer.stoi[stop]
    assert ins.generate(model, tokenizer, "Lily", 30, temperature=0.0, top_k=None, seed=0) == whole[:whole.index(stop)]


SMOLLM2_TEMPLATE = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                    "{{ '<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n' }}{% endif %}"
                    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
                    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def test_a_chat_prompt_is_the_message_in_the_models_template():
    from gptcore.chat import TemplateError, chat_prompt

    assert chat_prompt(SMOLLM2_TEMPLATE, "Hi!") == ("<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n"
                                                    "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n")
    with pytest.raises(TemplateError, match="has no chat template"):
        chat_prompt(None, "Hi!")
    with pytest.raises(TemplateError, match="refused the message: only system"):
        chat_prompt("{{ raise_exception('only system') }}", "Hi!")
    with pytest.raises(TemplateError, match="cannot be rendered"):
        chat_prompt("{% for %}", "Hi!")
    with pytest.raises(TemplateError, match="cannot be rendered"):  # the sandbox: no reaching into Python
        chat_prompt("{{ ''.__class__.__mro__[1].__subclasses__() }}", "Hi!")


def test_a_model_trained_with_a_first_token_gets_it(tiny):
    _, tokenizer = tiny
    tokenizer = CharTokenizer(CHARS)
    assert ins.prepare_ids(tokenizer, "Lily", 10)[0] == tokenizer.encode("Lily")
    tokenizer.add_bos, tokenizer.bos_id = True, 0
    assert ins.prepare_ids(tokenizer, "Lily", 10)[0] == [0, *tokenizer.encode("Lily")]
    assert ins.prepare_ids(tokenizer, "Lily", 3)[0] == [0, *tokenizer.encode("Li")]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """SmolLM2-135M-Instruct imported from the cache (never from checkpoints/): skipped when it was never fetched."""
    from gptcore import hub

    if hub.cached_smollm2() is None:
        print(f"skipping: SmolLM2 is not in the cache {hub.cache_dir()} (python -m gptcore fetch smollm2)")
        pytest.skip(f"SmolLM2 is not in the cache {hub.cache_dir()}: run python -m gptcore fetch smollm2")
    out = hub.import_model("smollm2", tmp_path_factory.mktemp("smollm2") / "smollm2")
    model, tokenizer, _ = ckpt.load_weights(out / "model.safetensors")
    return model, tokenizer


def test_smollm2s_induction_heads_are_found_on_a_sentence_said_twice(smollm2):
    from gptcore import atlas

    model, tokenizer = smollm2
    run = ins.inspect_text(model, tokenizer, ins.DEFAULT_TEXT)
    assert ins.token_labels(run.pieces)[:3] == ["My", "␣cat", "␣likes"] and len(run.ids) == 18
    on_text = ins.head_scores(run.patterns, run.ids)
    layer, head, score = ins.strongest_head(on_text, "induction")
    assert layer >= 10 and score >= 0.5  # a real model's induction heads sit in its middle and later layers
    on_random, report = ins.repeated_sequence_scores(model)
    assert (report.length, report.n_sequences) == (50, 4)
    assert report.copy_losses[1] < 0.5 * report.copy_losses[0]  # it copies a random sequence it has seen once
    clear = set(atlas.clear_heads(on_random, "induction", ins.CLEAR_SCORE)["head"])
    assert f"L{layer}H{head}" in clear and on_random["induction"].max() >= 0.7  # the same heads copy on both


def test_smollm2_answers_in_its_chat_template_and_stops_at_its_end_of_turn(smollm2):
    model, tokenizer = smollm2
    prompt = ins.generation_prompt(tokenizer, "What is the capital of France?", chat=True)
    assert prompt.endswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
    answer = ins.generate(model, tokenizer, "What is the capital of France?", 60, 0.0, None, 0, chat=True)
    assert "Paris" in answer and len(tokenizer.encode(answer)) < 60  # ended by <|im_end|>, which is left out


def crafted_inspection(text: str, guess: str, head_weights: dict[int, float], query: int) -> ins.Inspection:
    """An Inspection of a character text whose logits put `guess` first at every position, and whose one head
    (L0H0) puts head_weights on its keys from `query` (the rest of the row on the query itself)."""
    tokenizer = CharTokenizer(sorted(set(text + guess)))
    ids = torch.tensor(tokenizer.encode(text))
    T, V = len(ids), tokenizer.vocab_size
    unembed = torch.eye(V)  # the final state is the logits
    final = torch.zeros(T, V)
    final[:, tokenizer.encode(guess)[0]] = 5.0
    patterns = torch.eye(T)[None, None].clone()
    patterns[0, 0, query] = 0.0
    for key, weight in head_weights.items():
        patterns[0, 0, query, key] = weight
    patterns[0, 0, query, query] += 1 - sum(head_weights.values())
    return ins.Inspection(text, ids, final, unembed, torch.zeros(T), patterns, {}, 0, list(text), T)


def test_a_missed_copy_names_the_short_prefix_that_came_before_with_other_continuations():
    text = "The little dog ran home. The little dog ran home."
    run = crafted_inspection(text, "l", {10: 0.16, 4: 0.15, 11: 0.14, 29: 0.02}, 35)
    miss = ins.copy_miss(run, 35, 0, 0)
    ids = run.ids.tolist()
    assert (miss.expected, miss.guess) == (ids[11], ids[4])  # 'd' expected, 'l' guessed
    # 'e␣' came before followed by 'l' (at 4 and 29) and by 'd' (at 11); 'le␣' only by 'd'
    assert miss.prefix == 2 and miss.continuations == {ids[4]: [4, 29], ids[11]: [11]}
    assert miss.telling == 3
    assert [k for k, _ in miss.keys] == [35, 10, 4, 11] and miss.keys[0][1] == pytest.approx(0.53)
    assert miss.weight_expected == pytest.approx(0.14) and miss.weight_others == pytest.approx(0.17)
    V = len(set(text))
    assert miss.p_guess == pytest.approx(math.exp(5) / (math.exp(5) + V - 1))  # the model's own, temperature 1
    assert miss.p_expected == pytest.approx(1 / (math.exp(5) + V - 1))


def test_nothing_is_explained_where_the_guess_is_right_or_nothing_was_said_before():
    text = "The little dog ran home. The little dog ran home."
    assert ins.copy_miss(crafted_inspection(text, "d", {11: 0.9}, 35), 35, 0, 0) is None  # right
    assert ins.copy_miss(crafted_inspection(text, "l", {}, 10), 10, 0, 0) is None  # first saying: no copy to miss
    run = crafted_inspection(text, "x", {}, 35)
    # the second saying (from 25) once eight of its characters have come, the next one included
    assert ins.copy_misses(run) == list(range(25 + 8 - 2, len(text) - 1))


def test_said_before_needs_a_passage_of_eight_characters_said_earlier():
    ids = list("abcdefghij abcdefghij")
    pieces = list(ids)
    assert [q for q in range(len(ids)) if ins.said_before(ids, pieces, q)] == list(range(17, 20))
    assert not ins.said_before(list("the cat. the dog."), list("the cat. the dog."), 12)  # 'the ' is too short
