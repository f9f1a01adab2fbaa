import fnmatch
import hashlib
import random
import re
import string
import tomllib
from pathlib import Path

import pytest

from gptcore.corpus import (
    BUILTIN_DEFAULT_CHARS,
    DRILL_CHARS,
    DRILL_LENGTHS,
    SEPARATOR,
    STORIES_FILE,
    WORDS_FILE,
    _compile,
    _retold_material,
    as_typed,
    builtin_description,
    copy_drill,
    generate_stories,
    generate_story,
    retelling,
)
from gptcore.errors import InputError

GENDERED = {"he": "he", "him": "he", "his": "he", "himself": "he",
            "she": "she", "her": "she", "hers": "she", "herself": "she"}
ALLOWED = set(string.ascii_letters + string.digits + " \n.,!?'\"-:;<|>")


@pytest.fixture(scope="module")
def text():
    return generate_stories(200_000, seed=0)


@pytest.fixture(scope="module")
def stories():
    rng = random.Random(123)
    return [generate_story(rng) for _ in range(400)]


def narration(line):
    """The line with quoted speech removed."""
    return re.sub(r'"[^"]*"', "", line)


@pytest.mark.parametrize("n", [0, 1, 137, 5_000, 54_321])
def test_exact_length(n):
    assert len(generate_stories(n, seed=1)) == n


def test_negative_length_rejected():
    with pytest.raises(ValueError):
        generate_stories(-1)


def test_deterministic_and_prefix_stable(text):
    assert generate_stories(200_000, seed=0) == text
    for n in (1, 999, 12_345, 150_001):
        assert generate_stories(n, seed=0) == text[:n]


def test_seeds_differ():
    assert generate_stories(2_000, seed=0) != generate_stories(2_000, seed=1)


def test_does_not_touch_global_rngs():
    state = random.getstate()
    generate_stories(10_000, seed=5)
    assert random.getstate() == state


def test_separators(text):
    parts = text.split(SEPARATOR)
    assert len(parts) > 80
    assert all(p.strip() for p in parts)
    # the marker only ever appears as a whole line between stories
    assert text.count("<|endoftext|>") == len(parts) - 1
    assert "<" not in "".join(parts) and ">" not in "".join(parts)


def test_vocab_ascii_and_modest(text):
    vocab = set(text)
    assert vocab <= ALLOWED, vocab - ALLOWED
    assert 55 <= len(vocab) <= 85


def test_story_length_like_tinystories(text):
    lengths = [len(p) for p in text.split(SEPARATOR)[:-1]]
    assert 600 <= sum(lengths) / len(lengths) <= 2200  # the echo games make the longest ones
    assert all(p.count("\n") >= 2 for p in text.split(SEPARATOR)[:-1])  # several paragraphs


def test_hero_named_and_recurs(stories):
    for s in stories:
        first = s.text.split("\n")[0]
        assert re.search(rf"\bnamed {s.hero}\b", first), first
        assert len(re.findall(rf"\b{s.hero}\b", s.text)) >= 4
        assert s.text.split("\n")[-1].count(s.hero) >= 1  # the ending comes back to the hero


def test_gendered_pronouns_match_a_named_character(stories):
    """Every he/she/his/her in narration agrees with a character named in that paragraph."""
    for s in stories:
        assert s.cast[s.hero.lower()] == s.pronoun
        for line in s.text.split("\n"):
            words = re.findall(r"[A-Za-z]+", narration(line))
            present = {s.cast[w.lower()] for w in words if w.lower() in s.cast}
            for w in words:
                gender = GENDERED.get(w.lower())
                assert gender is None or gender in present, (w, s.cast, line)


def test_hero_pronoun_is_used(stories):
    subj = {"she": "She", "he": "He", "it": "It"}
    used = sum(bool(re.search(rf"\b({s.pronoun}|{subj[s.pronoun]})\b", narration(s.text)))
               for s in stories)
    assert used > 0.9 * len(stories)
    assert {s.pronoun for s in stories} == {"she", "he", "it"}


def test_quotes_balanced_and_tagged(text):
    for line in text.split("\n")[:-1]:  # the last line may be cut mid-quote
        assert line.count('"') % 2 == 0, line
        for speech in re.findall(r'"([^"]*)"', line):
            assert speech[0].isupper() and speech[-1] in ".,!?", speech
    # 'asked' only tags questions
    assert not re.search(r'[.,!]" asked', text)


def test_grammar_basics(text):
    assert not re.search(r"[.!?] [a-z]", text)  # sentences start with a capital
    assert all(line[0].isupper() or line[0] in '"<' for line in text.split("\n"))
    assert not re.search(r"\ba [aeiouAEIOU]", text)
    assert not re.search(r"\ban [^aeiouAEIOU]", text)
    assert not re.search(r"\b(\w+) \1\b|  | [,.!?]", text)


def test_objects_are_referred_back_to(stories):
    # "She had a red ball." ... later "the red ball" / "her red ball" / "it"
    hits = 0
    for s in stories:
        m = re.search(r"\b(?:a|an|some) ((?:\w+ )*?\w+)\.", s.text.split("\n")[0])
        hits += bool(m) and s.text.count(m.group(1).split()[-1]) >= 2
    assert hits > 0.5 * len(stories)


def occurrences(s, word):
    return [m.start() for m in re.finditer(re.escape(word), s.text)]


def test_names_are_invented_per_story(stories):
    heroes = [s.hero for s in stories]
    assert len(set(heroes)) > 0.95 * len(heroes)  # no list to memorise: a name seldom comes back in another story
    names = [w for s in stories for w in s.invented if w.lower() in s.cast]
    assert all(re.fullmatch(r"[A-Z][a-z]{3,}", name) for name in names)
    assert all(len({w.lower() for w in s.invented}) == len(s.invented) for s in stories)


def test_invented_words_come_back_within_the_context_window(stories):
    """Copying pays: a made-up string recurs, mostly while its last occurrence is still in the model's context."""
    context = 128
    strings = [(s, w) for s in stories for w in s.invented]
    recurring = [occurrences(s, w) for s, w in strings if len(occurrences(s, w)) >= 2]
    assert len(recurring) > 0.97 * len(strings)  # only a companion the plot never mentions again is said once
    gaps = [b - a for spots in recurring for a, b in zip(spots, spots[1:])]
    assert sum(g < context for g in gaps) > 0.8 * len(gaps)
    for s in stories:
        hero = occurrences(s, s.hero)
        assert hero[1] - hero[0] < 3 * context


def test_codes_songs_and_magic_words_repeat_verbatim(stories):
    """Besides names, stories repeat a random code, a secret message, a silly song or a magic word, word for word,
    soon."""
    kinds = {"code": 0, "note": 0, "song": 0, "magic word": 0}
    note = re.compile(r"[A-Z][A-Za-z0-9]{2,4}( [A-Z][A-Za-z0-9]{2,4}){2,4}")
    for s in stories:
        for w in s.invented:
            if w.lower() in s.cast:
                continue
            kind = "note" if note.fullmatch(w) else "song" if " " in w else "magic word" if "-" in w else "code"
            kinds[kind] += 1
            spots = occurrences(s, w)
            assert len(spots) >= 2 and spots[1] - spots[0] < 128, (w, s.text)
            if kind == "code":
                assert re.fullmatch(r"[A-Z][A-Za-z0-9]{3,8}", w)
    assert all(n > 5 for n in kinds.values()), kinds


def test_variety(stories):
    assert len({s.hero for s in stories}) > 350
    openings = {s.text.split(",")[0].split(" there")[0] for s in stories}
    assert len(openings) >= 4
    assert len({s.text for s in stories}) == len(stories)


def test_description():
    assert BUILTIN_DEFAULT_CHARS == 1_000_000
    assert builtin_description(1_000_000, 0) == "built-in stories, 1,000,000 chars, seed 0"


def test_echo_games_say_every_word_right_back(stories):
    """In an echo game each made-up word comes back twice within a few dozen characters: copying at short range."""
    games = [s.text for s in stories if "the echo game" in s.text]
    assert 0.7 < len(games) / len(stories) < 0.9
    for text in games:
        rounds = re.findall(r'"([A-Z][A-Za-z0-9]{1,9})!"[^"]{1,60}"\1[!,] \1!"', text)
        assert not re.search(r'!" (the )?[a-z]+ said it', text)  # the echoing speaker starts a sentence: a capital
        assert len(rounds) >= 10, text
        assert max(len(word) for word in rounds) >= 6  # the words grow longer as the game goes on


def test_drills_share_their_characters_with_the_stories(text):
    assert set(DRILL_CHARS) == set(text) | set(SEPARATOR) and len(DRILL_CHARS) == len(set(DRILL_CHARS)) == 76


def said_again(drill: str) -> tuple[str, str, int] | None:
    """(line, separator, times) when the drill is one line said 2 or 3 times, else None."""
    for sep in ("", " ", "\n"):
        for times in (2, 3):
            size, left = divmod(len(drill) - (times - 1) * len(sep), times)
            if not left and sep.join([drill[:size]] * times) == drill:
                return drill[:size], sep, times
    return None


def test_copy_drill_says_one_random_line_again():
    rng = random.Random(3)
    drills = [copy_drill(rng) for _ in range(300)]
    found = [said_again(d) for d in drills]
    assert all(found)
    assert all(DRILL_LENGTHS[0] <= len(line) <= DRILL_LENGTHS[1] for line, _, _ in found)
    assert {sep for _, sep, _ in found} == {"", " ", "\n"} and {n for _, _, n in found} == {2, 3}
    assert set("".join(line for line, _, _ in found)) == set(DRILL_CHARS)  # any character may come up


@pytest.mark.parametrize("share", [0.1, 0.3, 0.6])
def test_drills_take_their_share_and_leave_the_stories_as_they_were(share):
    text = generate_stories(300_000, seed=0, drills=share)
    mixed = text.split(SEPARATOR)[:-1]
    plain = iter(generate_stories(300_000, seed=0).split(SEPARATOR))
    expected, stories, drills = next(plain), [], []
    for part in mixed:  # the stories come in their own order; whatever else stands between them is a drill
        if part == expected:
            stories.append(part)
            expected = next(plain)
        else:
            drills.append(part)
    assert len(stories) > 40 and all(said_again(d) for d in drills)
    assert abs(sum(map(len, drills)) / len(text) - share) < 0.01


def test_drills_deterministic_prefix_stable_and_checked():
    mixed = generate_stories(50_000, seed=2, drills=0.3)
    assert generate_stories(50_000, seed=2, drills=0.3) == mixed
    assert generate_stories(12_345, seed=2, drills=0.3) == mixed[:12_345]
    for bad in (-0.1, 0.95, 1.0):
        with pytest.raises(InputError, match="share of copy drills must be from 0 to 0.9"):
            generate_stories(1_000, drills=bad)
    assert builtin_description(9_000, 1, 0.3) == "built-in stories with 30% copy drills, 9,000 chars, seed 1"


def test_the_corpus_is_the_text_the_shipped_model_was_trained_on(text):
    """The word lists live in corpus_words.toml; any change to them or to the grammar changes this text (and then
    the shipped model's corpus and every number measured on it)."""
    assert hashlib.sha256(text.encode()).hexdigest() == \
        "bcf85257fe05d15080ab753a1ac9869d47851c6340efd8e80f0a416b3d77383c"
    shipped = generate_stories(200_000, seed=0, drills=0.05, retellings=0.15)  # (the beginning of its corpus)
    assert hashlib.sha256(shipped.encode()).hexdigest() == \
        "6ce5f973b85fa88be50e70af74fe49368be0f8776c3ce28b70070679a7c2c505"


@pytest.mark.parametrize(("n", "seed", "digest"), [
    (BUILTIN_DEFAULT_CHARS, 0, "36bcbc5f6531ff3d8d2e8f00f12dab1e8bd90d35f1d78afcb6a753e081ddb933"),
    (54_321, 7, "a39e498e21a08ce59b635914bb042cd61ee560b0b880c50df88efcf816e49744"),
])
def test_the_builtin_text_is_the_one_every_shipped_number_was_measured_on(n, seed, digest):
    """The app's default corpus and one other seed and size, byte for byte: the story templates may move or be
    reworded in code, never change what they write."""
    assert hashlib.sha256(generate_stories(n, seed=seed).encode()).hexdigest() == digest


def test_the_facts_told_about_each_story_are_the_ones_recorded():
    rng = random.Random(123)
    facts = [(s.hero, s.pronoun, sorted(s.cast.items()), s.invented) for s in (generate_story(rng) for _ in range(300))]
    assert hashlib.sha256(repr(facts).encode()).hexdigest() == \
        "2df8d588453800ebbd14a30a5e7565ea5520909c749e85fb8367ab83eb8cb756"


def test_a_story_script_step_that_is_not_one_of_the_kinds_is_refused_when_the_file_is_read():
    with pytest.raises(ValueError, match="no step is called 'H shouts:'"):
        _compile([["One day, {H} woke up."], ["H shouts:", "Hello!"]])
    with pytest.raises(ValueError, match="no step is called 'maybe half:'"):
        _compile([["chance 0.5:", [["maybe half:", "Hi."]], []]])


def test_the_word_lists_the_story_templates_and_the_ladder_measurements_are_installed_with_the_package():
    from gptcore.ladder import LADDER_CURVES

    config = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["gptcore"]
    for data in (WORDS_FILE, STORIES_FILE, LADDER_CURVES):
        assert any(fnmatch.fnmatch(data.name, pattern) for pattern in patterns), data.name


def test_retellings_say_ordinary_text_again_inside_the_same_stories_at_their_share():
    rng, (words, sentences) = random.Random(4), _retold_material(0)
    spans = [retelling(rng, words, sentences) for _ in range(400)]
    assert set("".join(spans)) <= set(DRILL_CHARS)
    def said_twice(span: str) -> bool:
        return any(span == first + sep + first for sep in (" ", ". ", "\n", ", ")
                   for first in [span[:(len(span) - len(sep)) // 2]])

    assert all(said_twice(span) and len(span) <= 128 for span in spans)  # (the whole within a context)
    assert sum(all(w in words for w in re.findall(r"[a-z]+", span.lower())) for span in spans) > 80  # words
    # the retold sentences are plain ones (no quote, no echo game's code), half of them as a learner types them
    assert all(re.fullmatch(r"[A-Za-z ,'.!?]+", s) for s in sentences) and len(set(sentences)) > 4_000
    typed = {as_typed(s) for s in sentences}
    assert as_typed("Lily ran home.") == "lily ran home" and "lily ran home" not in sentences
    said = [span[:(len(span) - 1) // 2] for span in spans]
    assert 40 < sum(s in typed for s in said) < sum(s in sentences or s in typed for s in said) - 40
    text = generate_stories(200_000, seed=0, retellings=0.1)
    plain = generate_stories(200_000, seed=0).split(SEPARATOR)
    stories = text.split(SEPARATOR)[:-1]
    added = sum(len(story) - len(original) for story, original in zip(stories, plain))
    assert abs(added / len(text) - 0.1) < 0.01
    for story, original in zip(stories, plain):  # the same stories, in the same order, with spans put in
        kept = iter(story.split("\n"))
        assert all(any(line.startswith(para) for line in kept) for para in original.split("\n"))
    with pytest.raises(InputError, match="share of copy drills must be from 0 to 0.9"):
        generate_stories(1_000, drills=0.5, retellings=0.5)
