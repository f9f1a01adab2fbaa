"""The Trace page explains what a learner may doubt, from the run on screen and only where it applies, and keeps its
view in the address so that one link opens it again (the shipped checkpoint)."""
from pathlib import Path

import numpy as np
import pytest
import torch
from page_helpers import captions, chart, notes
from streamlit.testing.v1 import AppTest

from gptcore import checkpoint as ckpt
from gptcore import circuits, folders, interp
from gptcore import inspector as ins
from gptcore.heldout import held_out_text
from gptcore.runs import SHIPPED

PAGES = Path(__file__).resolve().parent.parent / "app_pages"
SAID_TWICE = "The little dog ran home. The little dog ran home."  # the learner's sentence of the review
POSITION = 35  # the position the page picks on it: the space before the second 'dog'
TABS = ("step", "lens", "attribution", "ablation", "patching")


@pytest.fixture(scope="module")
def shipped():
    return ckpt.load_checkpoint(folders.CHECKPOINT_ROOT / SHIPPED)


@pytest.fixture(scope="module")
def means(shipped):
    return interp.reference_means(shipped.model, shipped.tokenizer)


def run_page(typed: str | None = None, page: str = "trace", **link) -> AppTest:
    """A new session: the text typed into the box, or the page opened from a link with these parameters."""
    at = AppTest.from_file(str(PAGES / f"{page}.py"), default_timeout=120)
    for name, value in link.items():
        at.query_params[name] = value
    if typed is not None:
        at.session_state["trace-text" if page == "trace" else "inspect-text"] = typed
    return rerun(at)


def rerun(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_tab(at: AppTest, name: str) -> AppTest:
    at.session_state["trace-tab"] = at.tabs[TABS.index(name)].label
    return rerun(at)


@pytest.fixture(scope="module")
def said_twice():
    return run_page(SAID_TWICE)


@pytest.fixture(scope="module")
def default_text():
    return run_page()


def capture(shipped, text_or_ids) -> interp.Capture:
    ids = shipped.tokenizer.encode(text_or_ids) if isinstance(text_or_ids, str) else text_or_ids
    return interp.capture(shipped.model, torch.tensor(ids))


# --- ablation: heads that lower the loss ------------------------------------------------------------------------------

def test_heads_that_lower_the_loss_when_switched_off_are_counted_and_explained(said_twice, shipped, means):
    at = open_tab(said_twice, "ablation")
    assert at.radio(key="trace-ablate-mode").value == "zero" and at.radio(key="trace-sweep-on").value == "text"
    at.button(key="trace-sweep").click()
    rerun(at)
    cap = capture(shipped, SAID_TWICE)
    frame = interp.ablation_sweep(shipped.model, cap)
    lower = frame[frame["loss increase"] < 0]
    assert len(lower) == 6  # (the review's count, 9, is mean ablation's: below)
    [note] = notes(at)
    assert note == (
        f"**Why does switching a head off lower the loss?** 6 of the 16 heads, each switched off alone, lower the "
        f"loss on this text (most: {lower.iloc[-1]['component']}, {lower.iloc[-1]['loss increase']:+.3f} nats per "
        f"token). The loss averages {len(SAID_TWICE) - 1} predictions, and on these such a head does more harm than "
        "good: with nothing in its place (zero ablation), the later layers predict these characters better than with "
        "what it writes. That is a small sample, where a few predictions can decide it: rank on the held-out text to "
        "see whether it holds on text the model never trained on.")

    at.radio(key="trace-ablate-mode").set_value("mean")
    rerun(at)
    at.button(key="trace-sweep").click()
    rerun(at)
    frame = interp.ablation_sweep(shipped.model, cap, "mean", means=means)
    lower = frame[frame["loss increase"] < 0]
    [note] = notes(at)
    assert note.startswith(f"**Why does switching a head off lower the loss?** {len(lower)} of the 16 heads") \
        and len(lower) == 9
    assert ("its average output over the reference text, which mean ablation puts in its place, serves these "
            "characters better than what it writes for them.") in note
    at.radio(key="trace-ablate-mode").set_value("zero")
    rerun(at)


def test_on_held_out_text_no_head_lowers_the_loss_and_nothing_is_said(said_twice, shipped):
    """The run's validation split, 1,024 characters in windows of the context: every head is needed there."""
    at = open_tab(said_twice, "ablation")
    at.radio(key="trace-sweep-on").set_value("held_out")
    rerun(at)
    at.button(key="trace-sweep").click()
    rerun(at)
    held_out = held_out_text(ckpt.read_meta(folders.CHECKPOINT_ROOT / SHIPPED), 1024)
    assert held_out.source == "split"
    ids = shipped.tokenizer.encode(held_out.text)
    parts = [interp.ablation_sweep(shipped.model, capture(shipped, ids[i:i + 128])).set_index("component")
             for i in range(0, len(ids), 128)]
    weights = [len(ids[i:i + 128]) - 1 for i in range(0, len(ids), 128)]
    increase = sum(p["loss increase"] * w for p, w in zip(parts, weights)) / sum(weights)
    bars = chart(at, "trace-sweep-bars")[0]
    np.testing.assert_allclose(bars["y"], increase.loc[list(bars["x"])].to_numpy(), atol=1e-6)
    assert (increase > 0).all() and not notes(at)  # nothing to explain
    assert ("Ranked on 1,024 characters of held-out text in 8 windows of up to 128: the start of the run's "
            "validation split") in captions(at)
    at.radio(key="trace-sweep-on").set_value("text")
    rerun(at)


def test_the_held_out_text_is_the_runs_validation_split_or_else_built_in_stories():
    from gptcore.corpus import generate_stories
    from gptcore.sources import CorpusSource

    meta = ckpt.read_meta(folders.CHECKPOINT_ROOT / SHIPPED)
    corpus = CorpusSource.from_dict(meta["corpus_source"]).load().text
    held_out = held_out_text(meta, 300)
    start = int(0.95 * len(corpus))  # inside the last 10%, the validation split: never trained on
    at = corpus.index(held_out.text, start)
    assert held_out.source == "split" and len(held_out.text) == 300
    assert at == start or (at - start < 150 and corpus[at - 1] == "\n")  # (at a line's start where one is near)
    imported = held_out_text({"imported": True}, 300)  # (an imported model: no corpus of its own to rebuild)
    assert imported == type(held_out)(generate_stories(300, 7), "stories")


# --- attribution: one baseline per number, signs in words -------------------------------------------------------------

def test_direct_and_total_name_their_baselines_and_say_their_sign_in_words(said_twice, shipped, means):
    at = open_tab(said_twice, "attribution")
    cap = capture(shipped, SAID_TWICE)
    d, l_ = (shipped.tokenizer.encode(c)[0] for c in "dl")
    effects = circuits.effects(shipped.model, cap, POSITION, d, l_, means).set_index("component")
    total = effects.loc["L0H3", "total"]
    assert total < -9
    said = captions(at)
    assert (f"The head that works most through later layers here is L0H3: switching it off makes 'd' more likely "
            f"against 'l' (the difference rises by {-total:.2f}). Straight through the readout, its output against "
            f"its mean adds {effects.loc['L0H3', 'direct']:+.2f} to the difference") in said
    assert "(against zero, as in the first chart; attention weight" in said  # the head by source: the bars' baseline
    assert "against nothing written (zero); the direct effects below set it against its mean instead." in said
    names = [bar["name"] for bar in chart(at, "trace-effects")[:2]]
    assert names == ["direct (against its mean)", "total (switched off to its mean)"]


def test_a_total_effect_that_helps_the_answer_says_so(default_text, shipped, means):
    at = open_tab(default_text, "attribution")
    cap = capture(shipped, ins.DEFAULT_TEXT)
    position = ins.repeat_position(list(ins.DEFAULT_TEXT))
    target = int(cap.ids[position + 1])
    foil = interp.runner_up(cap.logits[position], target)
    effects = circuits.effects(shipped.model, cap, position, target, foil, means).set_index("component")
    heads = effects[effects["head"].notna()]
    name = heads["indirect"].abs().idxmax()
    assert effects.loc[name, "total"] > 0
    label, foil_label = shipped.tokenizer.display(target), shipped.tokenizer.display(foil)
    assert (f"is {name}: switching it off makes '{label}' less likely against '{foil_label}' (the difference falls "
            f"by {effects.loc[name, 'total']:.2f})") in captions(at)
    assert "more likely" not in captions(at)


# --- patching ---------------------------------------------------------------------------------------------------

def test_patching_runs_on_the_learners_text_and_position_by_default(said_twice, shipped):
    at = open_tab(said_twice, "patching")
    assert at.selectbox(key="trace-pair").value == "own"
    ids = shipped.tokenizer.encode(SAID_TWICE)
    assert at.select_slider(key="trace-corrupt-at").value == 11  # the 'd' of the first 'dog': what copying brings
    cap = capture(shipped, ids)
    replacement = next(i for i in cap.logits[10].argsort(descending=True).tolist() if i != ids[11])
    assert at.selectbox(key="trace-corrupt-with-11").value == replacement
    clean, corrupted = ids[:POSITION + 1], ids[:11] + [replacement] + ids[12:POSITION + 1]
    corrupted_cap = capture(shipped, corrupted)
    good, guess = ids[POSITION + 1], int(corrupted_cap.logits[-1].argmax())
    bad = guess if guess != good else interp.runner_up(cap.logits[POSITION], good)
    setup = interp.PatchingSetup(capture(shipped, clean), corrupted_cap, good, bad)
    grid = np.array(chart(at, "trace-patch-heads")[0]["z"], dtype=float)
    np.testing.assert_allclose(grid, interp.patch_heads(shipped.model, setup).numpy(), atol=1e-5)
    assert "The clean prompt is your text up to position 35: 'The␣little␣dog␣ran␣home.␣The␣little␣'." in captions(at)

    at.select_slider(key="trace-corrupt-at").set_value(POSITION)  # the learner's own corruption
    rerun(at)
    corrupted = clean[:POSITION] + [at.selectbox(key=f"trace-corrupt-with-{POSITION}").value]
    assert at.selectbox(key=f"trace-corrupt-with-{POSITION}").value != clean[POSITION]
    guess = int(capture(shipped, corrupted).logits[-1].argmax())
    bad = guess if guess != good else interp.runner_up(cap.logits[POSITION], good)
    setup = interp.PatchingSetup(capture(shipped, clean), capture(shipped, corrupted), good, bad)
    np.testing.assert_allclose(np.array(chart(at, "trace-patch-heads")[0]["z"], dtype=float),
                               interp.patch_heads(shipped.model, setup).numpy(), atol=1e-5)


def pick_pair(at: AppTest, pair: str) -> AppTest:
    at.selectbox(key="trace-pair").set_value(pair)
    return rerun(at)


def test_a_share_above_100_percent_is_explained_where_it_occurs(said_twice, shipped):
    """The broken key: L2H0 alone restores 198%; copying a password: no head passes 100%."""
    at = pick_pair(open_tab(said_twice, "patching"), "key")
    pair = next(p for p in interp.PATCHING_PAIRS if p.id == "key")
    setup = interp.patching_setup(shipped.model, shipped.tokenizer, pair.clean, pair.corrupted, pair.clean_answer,
                                  pair.corrupted_answer)
    heads = interp.patch_heads(shipped.model, setup).numpy()
    share = float(heads[2, 0])
    assert share == heads.max() > 1.9
    patched = setup.corrupted_difference + share * (setup.clean_difference - setup.corrupted_difference)
    assert notes(at)[0] == (
        f"**Above 100%:** with L2H0 copied from the clean run, the patched run's difference logit('n') − logit('␣') "
        f"is {patched:+.2f}, beyond the clean run's own {setup.clean_difference:+.2f} ({share:.0%}). The share runs "
        "from the corrupted run (0%) to the clean one (100%) and nothing caps it: in the clean run other components "
        "hold the difference back, while in the patched run they stay as in the corrupted run, so this one path goes "
        "past it.")
    assert notes(at)[1].startswith("**Above 100%:** with L2H0 → L3H2's key copied from the clean run")

    pick_pair(at, "password")
    assert not notes(at)


def test_each_pair_says_the_path_its_answer_comes_back_through(said_twice, shipped):
    at = pick_pair(open_tab(said_twice, "patching"), "key")
    pair = next(p for p in interp.PATCHING_PAIRS if p.id == "key")
    setup = interp.patching_setup(shipped.model, shipped.tokenizer, pair.clean, pair.corrupted, pair.clean_answer,
                                  pair.corrupted_answer)
    whole = circuits.patch_sides(shipped.model, setup, "L3H2", [None]).iloc[0]
    markdown = "\n".join(m.value for m in at.markdown)
    shown = {side: f"{round(share, 2) + 0.0:.0%}" for side, share in whole.items()}  # (a -0.3% reads 0%)
    assert (f"On this pair the answer comes back through L3H2's **key**: the whole clean input restores "
            f"{shown['k']} through it, {shown['q']} through the query, {shown['v']} through the value.") in markdown
    assert "-0%" not in markdown
    pick_pair(at, "password")
    markdown = "\n".join(m.value for m in at.markdown)
    assert "On this pair the answer comes back through L3H2's **value**" in markdown and "**key**" not in markdown


def test_a_space_answer_shows_as_a_visible_space(said_twice, shipped):
    at = pick_pair(open_tab(said_twice, "patching"), "key")
    assert at.text_input(key="trace-bad-key").value == "␣"  # the corrupted answer: a space
    assert at.get("plotly_chart")  # read back as a space: the pair runs
    pick_pair(at, "password")
    assert "␣" not in at.text_input(key="trace-bad-password").value + at.text_input(key="trace-good-password").value
    pick_pair(at, "own")


# --- one probability on both pages -----------------------------------------------------------------------------------

def test_trace_and_inspect_report_one_probability_and_name_the_temperature_of_another(said_twice, shipped):
    d = shipped.tokenizer.encode("d")[0]
    probs = interp.trace(shipped.model, torch.tensor(shipped.tokenizer.encode(SAID_TWICE)), POSITION, None,
                         shipped.tokenizer).logits.softmax(-1)
    assert (f"After position 35 the text goes on with 'd': the model gives it probability {probs[d]:.3f} "
            "(temperature 1, the number Inspect reports).") in captions(said_twice)
    inspect = run_page(SAID_TWICE, page="inspector")
    inspect.session_state["inspect-tab"] = "Predictions"
    rerun(inspect)
    assert f"the model gives it probability {probs[d]:.3f}, rank" in "\n".join(c.value for c in inspect.caption)
    assert "Step through's last stages sample" not in captions(said_twice)
    said_twice.slider(key="trace-temperature").set_value(0.8)
    rerun(said_twice)
    sampled = ins.sampling_distribution(probs.log(), 0.8)[d]
    assert (f"Step through's last stages sample at temperature 0.8 and top-k —: there 'd' gets {sampled:.3f}."
            ) in captions(said_twice)
    said_twice.slider(key="trace-temperature").set_value(1.0)
    rerun(said_twice)


# --- the view in the address ------------------------------------------------------------------------------------------

def test_the_first_view_has_a_short_address():
    assert dict(run_page().query_params) == {"ckpt": SHIPPED}  # everything else at its default


def test_a_link_opens_the_view_it_names_and_follows_each_change():
    at = run_page(ckpt=SHIPPED, text=SAID_TWICE, pos="44", stage="5", tab="step")
    assert at.text_area(key="trace-text").value == SAID_TWICE
    assert at.select_slider(key="trace-position").value == 44
    assert at.select_slider(key="trace-stage").value == 4
    assert dict(at.query_params) == {"ckpt": SHIPPED, "text": SAID_TWICE, "pos": "44", "stage": "5"}
    at.select_slider(key="trace-position").set_value(POSITION)  # the page's own start: left out
    rerun(at)
    open_tab(at, "attribution")
    assert dict(at.query_params) == {"ckpt": SHIPPED, "text": SAID_TWICE, "tab": "attribution"}
    at.selectbox(key="trace-source-head").set_value("L2H0")
    rerun(at)
    assert at.query_params["head"] == "L2H0"

    again = run_page(**dict(at.query_params))  # the address handed out opens the same head
    assert again.selectbox(key="trace-source-head").value == "L2H0"
    assert again.select_slider(key="trace-position").value == POSITION


def test_a_link_to_a_checkpoint_that_is_not_here_opens_the_page_with_a_sentence():
    at = run_page(ckpt="no-such-run", tab="lens")
    assert [w.value for w in at.warning] == [
        f"The link asks for the checkpoint 'no-such-run', which this server does not have: {SHIPPED} is open "
        "instead."]
    assert at.selectbox(key="trace-checkpoint").value == SHIPPED
    assert [c for c in at.get("plotly_chart") if c.proto.id.endswith("-trace-lens")]  # the lens, drawn
    assert dict(at.query_params) == {"ckpt": SHIPPED, "tab": "lens"}


# --- words that read well in every case -----------------------------------------------------------------------------

def test_a_share_that_rounds_to_zero_reads_0_percent_never_minus_0():
    from explorer.trace_notes import percent

    assert [f"{percent(x):.0%}" for x in (-0.004, 0.0, 0.004, -0.006, 0.125, 1.2)] == \
        ["0%", "0%", "0%", "-1%", "12%", "120%"]


def test_the_lens_sentence_names_the_output_alone_when_only_the_last_row_ranks_the_answer_first():
    from explorer.trace_views import lens_readable

    rows = ["embedding", "after block 0", "after block 1"]
    assert lens_readable(1, rows, "w") == ("Read through the final norm and the head, from the row **after block 0** "
                                           "on the lens already ranks 'w' first, and it stays first to the output.")
    assert lens_readable(2, rows, "w") == ("Only the output, the last row (**after block 1**), ranks 'w' first: every "
                                           "earlier row's top guess is another character.")
    assert lens_readable(None, rows, "w").startswith("Even the model's output does not rank 'w' first")


def test_the_character_strip_breaks_its_rows_between_words_only():
    from explorer.trace_figures import text_strip, word_wrapped

    text = "My cat likes warm milk and soft socks. My cat likes warm milk and soft socks.".replace(" ", "␣")
    strip = text_strip(list(text), 0)["data"][0]
    rows: dict[int, str] = {}
    for char, row in zip(strip["text"], strip["y"]):
        rows[row] = rows.get(row, "") + char
    assert list(rows.values()) == ["My␣cat␣likes␣warm␣milk␣and␣soft␣socks.␣My␣cat␣likes␣warm␣milk␣",
                                   "and␣soft␣socks."]
    assert list(strip["x"][:3]) == [0, 1, 2] and strip["x"][62] == 0  # 'a' of the second "and" opens row 1
    assert word_wrapped(list("ab⏎c"), 64, gap=0) == [(0, 0), (0, 1), (0, 2), (1, 0)]  # a newline ends its row
    assert word_wrapped(list("x" * 66), 64, gap=0)[63:] == [(0, 63), (1, 0), (1, 1)]  # a word longer than a row
    # tokens of several characters: "␣lik" "es" stay together, and a row may open with a token's own space
    assert word_wrapped(["My", "␣cat", "␣lik", "es", "␣warm"], 10, gap=1) == [(0, 0), (0, 3), (1, 0), (1, 5), (2, 0)]
