"""The Inspect page explains what a learner may doubt, from the run on screen and only where it applies, and keeps
its view in the address so that one link opens it again (the shipped checkpoint)."""
import math
from pathlib import Path

import pytest
import torch
from page_helpers import captions, notes
from streamlit.testing.v1 import AppTest

from gptcore import checkpoint as ckpt
from gptcore import folders
from gptcore import inspector as ins
from gptcore.runs import SHIPPED as SHIPPED_NAME

PAGE = Path(__file__).resolve().parent.parent / "app_pages" / "inspector.py"
SAID_TWICE = "The little dog ran home. The little dog ran home."  # the learner's sentence of the review
NO_REPEAT = "Once upon a time, a girl named Lily found a red ball in the park."
INDUCTION = (3, 2)  # the shipped model's induction head (checkpoints/README.md), the one the page enlarges first


@pytest.fixture(scope="module")
def shipped():
    return ckpt.load_checkpoint(folders.CHECKPOINT_ROOT / SHIPPED_NAME)


def run_page(typed: str | None = None, **link) -> AppTest:
    """A new session: the text typed into the box, or the page opened from a link with these parameters."""
    at = AppTest.from_file(str(PAGE), default_timeout=90)
    for name, value in link.items():
        at.query_params[name] = value
    if typed is not None:
        at.session_state["inspect-text"] = typed
    at.run()
    assert not at.exception, at.exception
    return at


def open_tab(at: AppTest, label: str) -> AppTest:
    at.session_state["inspect-tab"] = label
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def said_twice():
    return run_page(SAID_TWICE)


@pytest.fixture(scope="module")
def default_text():
    return run_page()


def test_a_missed_copy_is_explained_by_the_heads_keys_and_the_prefix_it_matched(said_twice, shipped):
    """At the position the page picks, 35 (the space before the second 'dog'), the model guesses 'l': the two
    characters 'e␣' came before followed by 'l' (4, 29) and by 'd' (11), and L3H2 splits its weight over them."""
    ids = torch.tensor(shipped.tokenizer.encode(SAID_TWICE))
    assert ins.repeat_position(list(SAID_TWICE)) == 35 and SAID_TWICE[36] == "d"
    with torch.no_grad():
        probs = shipped.model(ids[None])[0][0, 35].softmax(-1)
    pattern = ins.attention_patterns(shipped.model, shipped.tokenizer, SAID_TWICE)[INDUCTION][35, :36].double()
    top = torch.topk(pattern, 4)
    keys = ", ".join(f"{w:.2f} on '{'␣' if SAID_TWICE[k] == ' ' else SAID_TWICE[k]}' ({k})"
                     for w, k in zip(top.values.tolist(), top.indices.tolist()))
    d, l_ = (shipped.tokenizer.encode(c)[0] for c in "dl")
    assert probs.argmax() == l_
    [note] = notes(said_twice)  # on the Attention tab, above the enlarged head
    assert note.startswith(f"**Why not 'd'?** The text goes on with 'd', as it did before, but the model's top "
                           f"guess here is 'l' (probability {probs[l_]:.2f}; 'd' gets {probs[d]:.3f}).")
    assert "- The last 2 characters, 'e␣', came before with different continuations: 'l' at 4, 29; 'd' at 11." in note
    assert "- It takes the last 3 characters, 'le␣', to point to 'd' alone." in note
    assert f"- Where L3H2, the strongest induction head, looks from position 35: {keys}." in note
    assert (f"It splits its weight over the earlier continuations: {pattern[11]:.2f} on 'd', "
            f"{pattern[4] + pattern[29]:.2f} on the others.") in note
    # the same note where the prediction itself is shown, beside the model's own probability
    open_tab(said_twice, "Predictions")
    assert notes(said_twice) == [note]
    assert (f"The text continues with 'd': the model gives it probability {probs[d]:.3f}, rank "
            f"{int((probs > probs[d]).sum()) + 1} of 76. That is at temperature 1:") in captions(said_twice)


def test_inspect_and_trace_give_one_probability_and_name_the_temperature_of_any_other(said_twice, shipped):
    from gptcore import interp

    open_tab(said_twice, "Predictions")
    ids = torch.tensor(shipped.tokenizer.encode(SAID_TWICE))
    traced = interp.trace(shipped.model, ids, 35, None, shipped.tokenizer, 1.0, None)
    d = shipped.tokenizer.encode("d")[0]
    assert f"the model gives it probability {traced.probs[d]:.3f}" in captions(said_twice)  # Trace at temperature 1
    sampled = ins.sampling_distribution(ins.inspect_text(shipped.model, shipped.tokenizer, SAID_TWICE).logits_at(35),
                                        0.8)
    assert (f"At the temperature (0.8) and top-k (—) set here, sampling draws 'd' with probability "
            f"{sampled[d]:.3f}.") in captions(said_twice)
    said_twice.slider(key="inspect-temperature").set_value(1.0).run()
    assert "sampling draws" not in captions(said_twice)  # the same distribution: nothing to tell apart
    said_twice.slider(key="inspect-temperature").set_value(0.8).run()


def test_the_surprise_strip_names_the_repeated_characters_the_model_misses(said_twice, default_text):
    open_tab(said_twice, "Predictions")
    assert ("5 characters that an earlier saying predicts are not the model's top guess: 'd' at 36, 'n' at 42, "
            "'o' at 45, 'm' at 46, '\\.' at 48. Choose the position just before one of them (35, 41, 44, 45, 47) "
            "to see why.") in captions(said_twice)
    at = run_page(NO_REPEAT)
    open_tab(at, "Predictions")
    assert "earlier saying predicts" not in captions(at)


def test_nothing_is_explained_where_the_model_copies_right(default_text, shipped):
    """The default sentence: at the position the page picks, the model copies the right character."""
    assert not notes(default_text)
    open_tab(default_text, "Predictions")
    assert not notes(default_text)
    open_tab(default_text, "Attention")


def test_the_head_finder_states_its_threshold(said_twice, default_text):
    open_tab(said_twice, "Head finder")
    metrics = {m.label: m.value for m in said_twice.metric}
    assert metrics["Strongest induction head"] == f"L3H2 · {metrics['Strongest induction head'][-4:]}"
    assert "Reaching the threshold of 0.3: 1 of the 16 heads." in captions(said_twice)
    report = ins.repeated_sequence_scores(ckpt.load_checkpoint(folders.CHECKPOINT_ROOT / SHIPPED_NAME).model)[1]
    excess = report.copy_losses[0] - math.log(76)
    assert excess > 0 and (f"ln 76 = {math.log(76):.2f} nats per character. This one pays "
                           f"{report.copy_losses[0]:.2f}, {excess:.2f} more") in captions(said_twice)
    # scored on the text itself, no head parks on the first character: none reaches the threshold, the best is named
    said_twice.radio(key="inspect-score-source").set_value("text").run()
    metrics = {m.label: m.value for m in said_twice.metric}
    assert metrics["Strongest first token head"] == "none reaches 0.3"
    assert "No head reaches the threshold of 0.3; the best is L3H2, 0.13." in captions(said_twice)
    said_twice.radio(key="inspect-score-source").set_value("repeated").run()
    open_tab(said_twice, "Attention")


def test_a_first_copy_at_an_even_guess_is_said_to_cost_about_that():
    from explorer import inspector_notes

    said = inspector_notes.first_copy(math.log(76) - 0.002, 76, tokens=False)  # (below it by the sample's chance)
    assert said.endswith("ln 76 = 4.33 nats per character, about what this one pays (4.33). Only the second copy, "
                         "which can be copied from the first, tests its heads.")
    assert "ln 49152 = 10.80 nats per token. This one pays 14.49, 3.69 more" in inspector_notes.first_copy(
        14.49, 49152, tokens=True)


# --- the view in the address ------------------------------------------------------------------------------------------

def test_the_first_view_has_a_short_address(default_text):
    assert dict(default_text.query_params) == {"ckpt": SHIPPED_NAME}  # everything else at its default


def test_a_link_opens_the_view_it_names_and_follows_each_change(shipped):
    at = run_page(ckpt=SHIPPED_NAME, text=SAID_TWICE, pos="44", head="L2H0", tab="predictions")
    T = len(SAID_TWICE)
    assert at.text_area(key="inspect-text").value == SAID_TWICE
    assert at.select_slider(key=f"inspect-query-{T}").value == 44
    assert (at.session_state["inspect-layer"], at.session_state["inspect-head"]) == (2, 0)
    assert [c for c in at.get("plotly_chart") if c.proto.id.endswith("-inspect-predictions")]  # that tab is open
    assert "After …" in str(at.get("plotly_chart")[0].proto.spec) and "Why not 'o'?" in notes(at)[0]
    assert dict(at.query_params) == {"ckpt": SHIPPED_NAME, "text": SAID_TWICE, "pos": "44", "head": "L2H0",
                                     "tab": "predictions"}
    at.select_slider(key=f"inspect-query-{T}").set_value(35).run()  # the page's own start: left out
    open_tab(at, "Head finder")
    assert dict(at.query_params) == {"ckpt": SHIPPED_NAME, "text": SAID_TWICE, "head": "L2H0", "tab": "finder"}


def test_a_link_to_a_checkpoint_that_is_not_here_opens_the_page_with_a_sentence():
    at = run_page(ckpt="no-such-run", tab="finder")
    assert [w.value for w in at.warning] == [
        f"The link asks for the checkpoint 'no-such-run', which this server does not have: {SHIPPED_NAME} is open "
        "instead."]
    assert at.selectbox(key="inspect-checkpoint").value == SHIPPED_NAME and at.metric  # the head finder, drawn
    assert dict(at.query_params) == {"ckpt": SHIPPED_NAME, "tab": "finder"}


def test_a_long_text_is_cut_in_the_address_with_a_sentence():
    text = NO_REPEAT * 8
    at = run_page(text)
    assert at.query_params["text"] == text[:500]
    assert "A link to this page (its address) keeps the first 500 characters of the text." in captions(at)
