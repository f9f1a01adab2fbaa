"""Deterministic generator of TinyStories-like children's stories.

This is the app's embedded default training corpus (we cannot ship the real
TinyStories). It is built to reward attention: every story introduces a named
hero, a companion, an object and a place, and later paragraphs refer back to
them by name, by the matching pronoun and by "the <adjective> <noun>", so a
model that only sees the previous character (a bigram) cannot predict them.

It is also built to reward copying from the context. The names are invented per
story, and most stories hold a password or a secret message of random letters
and digits said two or three times in a row, or a silly song sung twice: no
amount of memorising predicts their later mentions, only finding the earlier one
does. That is what makes a model trained on it grow induction heads.

Copy drills can be mixed in at a chosen share of the characters: lines of random
characters, each said again right after. Stories alone grow a copying head; the
drills then teach the model to trust it over what its language habits expect (the
shipped model had both, one after the other: checkpoints/README.md).

The words and sentences are data: corpus_words.toml holds the word lists, corpus_stories.toml the sentence
templates as short scripts (its header says how they read). This module draws each story's cast, props and
invented words and tells the scripts. Only `random.Random` is used, so generating text never touches torch's RNG.
"""

import random
import re
import string
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .errors import InputError, Message, message

BUILTIN_DEFAULT_CHARS = 1_000_000
SEPARATOR = "\n<|endoftext|>\n"
SONG_CHANCE = 0.3  # share of stories whose hero has a silly song
PASSWORD_CHANCE = 0.8  # share of stories with a secret hideout and its password
NOTE_CHANCE = 0.9  # share of stories with a secret message of random letters, read out three times
ECHO_CHANCE = 0.8  # share of stories that are a game of echo: a made-up word said, then said right back
MAX_DRILLS = 0.9  # the largest share of copy drills: the rest are stories
DRILL_LENGTHS = (8, 64)  # characters in one drill's line, at least and at most

# The vocabulary and the story parts: word lists, places, plots' props, songs and speech tags (see the file's notes)
WORDS_FILE = Path(__file__).with_name("corpus_words.toml")
STORIES_FILE = Path(__file__).with_name("corpus_stories.toml")  # the sentence templates, as scripts
with WORDS_FILE.open("rb") as _file:
    _WORDS = tomllib.load(_file)

_PRONOUNS = _WORDS["pronouns"]  # pronoun -> subject, object, possessive, reflexive, past tense of "to be"
_ONSETS, _VOWELS, _MIDDLES = (_WORDS["names"][part].split() for part in ("onsets", "vowels", "middles"))
_NAME_ENDS = {pron: ends.split() for pron, ends in _WORDS["names"]["ends"].items()}
_CODE_CHARS = string.ascii_uppercase + string.ascii_lowercase + string.digits
_GIBBERISH_CHARS = _CODE_CHARS + "  ,;:'-"  # (spaces twice: gibberish has words in it)
# every character the stories and their separator use: a drill may hold any of them, as a model's vocabulary does
DRILL_CHARS = "\n !\"',-.:;<>?|" + _CODE_CHARS

_CAST = _WORDS["cast"]
_KID_ADJS, _ANIMALS, _GROUPS, _TRAITS = (_CAST[part].split() for part in ("kid_adjectives", "animals", "groups",
                                                                          "traits"))
_HOBBIES, _HOMES, _TIMES, _ADULTS = _CAST["hobbies"], _CAST["homes"], _CAST["times"], _CAST["adults"]
_OBJ_ADJS, _COLOURS = _WORDS["objects"]["adjectives"].split(), _WORDS["objects"]["colours"].split()
_OBJECTS = [(group[:5], noun) for group in _WORDS["objects"]["groups"] for noun in group[5].split()]
_FOODS, _FOOD_ADJS = _WORDS["food"]["foods"].split(), _WORDS["food"]["adjectives"].split()

_PLACES = [line.split("|") for line in _WORDS["places"]["places"].splitlines()]
_WATER, _INDOOR = set(_WORDS["places"]["water"]), set(_WORDS["places"]["indoor"])
_SPOTS, _DISTRACTIONS = _WORDS["places"]["spots"], _WORDS["places"]["distractions"]

_PLOT_PARTS = _WORDS["plots"]
_FEARS, _HELPEES, _GIFTS = _PLOT_PARTS["fears"], _PLOT_PARTS["helpees"], _PLOT_PARTS["gifts"]
_TREASURES, _WEATHER, _WARNINGS = _PLOT_PARTS["treasures"], _PLOT_PARTS["weather"], _PLOT_PARTS["warnings"]
_RIDES, _ECHO_ROUNDS = _PLOT_PARTS["rides"], _PLOT_PARTS["echo_rounds"]
_SONG_VERBS, _SONG_GOALS = _WORDS["songs"]["verbs"].split(), _WORDS["songs"]["goals"].split()
_SONGS = _WORDS["songs"]["songs"]
_TAGS = _WORDS["speech_tags"]  # a line's last character -> [verbs of a first line, verbs of a reply]


@dataclass(frozen=True)
class Story:
    """One story plus the facts tests need to check its long-range consistency."""

    text: str
    hero: str
    pronoun: str  # subject pronoun of the hero: "she", "he" or "it"
    cast: dict    # lower-case word naming a character -> that character's subject pronoun
    invented: tuple  # the story's made-up names, magic words, codes and songs, in order of invention


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _cap(s: str) -> str:
    # sentences may open with a quote, so capitalise the first letter after it
    i = 1 if s[0] == '"' else 0
    return s[:i] + s[i].upper() + s[i + 1:]


class _Builder:
    """Holds one story's cast and tells scripts of sentence templates (corpus_stories.toml), filled from `ctx`."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.ctx = {}
        self.speakers = {}  # template key -> (name, subject pronoun, cast word)
        self.cast = {}
        self.invented = []
        self.hero_kind = "kid"  # "kid", "animal" or "robot"; set by _hero
        self.paras = []
        self.cur = []

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def char(self, key, prefix, name, pron, cast_word=None):
        """Bind a character's name and pronoun forms, e.g. {C}, {c_he}, {c_his}."""
        self.ctx[key] = name
        for form, word in zip(("he", "him", "his", "himself", "was"), _PRONOUNS[pron]):
            self.ctx[prefix + form] = word
        word = (cast_word or name).lower()
        self.speakers[key] = (name, pron, word)
        self.cast[word] = pron

    def run(self, script: tuple):
        for action, arguments in script:
            action(self, *arguments)

    def add(self, templates):
        self.cur.append(_cap(self.pick(templates).format_map(self.ctx)))

    def maybe(self, p, templates):
        if self.rng.random() < p:
            self.add(templates)

    def either(self, p, then: tuple, otherwise: tuple):
        self.run(then if self.rng.random() < p else otherwise)

    def one_of(self, scripts: list):
        self.run(self.pick(scripts))

    def say(self, who, lines, reply=False):
        """Add a quoted line with a speech tag; 'asked' only ever tags a question."""
        name, pron, word = self.speakers[who]
        line = _cap(self.pick(lines).format_map(self.ctx))
        verb = self.pick(_TAGS[line[-1]][reply])
        lead = line[:-1] + "," if line[-1] == "." else line
        form = self.rng.randrange(3)
        if form == 0:
            s = f'{name} {verb}, "{line}"'
        elif form == 1:
            s = f'"{lead}" {verb} {name}.'
        else:
            s = f'"{lead}" {pron if self._clear(word, pron) else name} {verb}.'
        self.cur.append(_cap(s))

    def _clear(self, word, pron):
        """A pronoun is clear if the last sentence's narration named this speaker
        and nobody else who shares the pronoun."""
        last = re.sub(r'"[^"]*"', "", self.cur[-1]).lower() if self.cur else ""
        named = {w for w in re.findall(r"[a-z]+", last) if w in self.cast}
        return word in named and all(self.cast[w] != pron for w in named - {word})

    def para(self):
        self.paras.append(" ".join(self.cur))
        self.cur = []


# --- invented words ------------------------------------------------------------

def _syllable(rng: random.Random) -> str:
    return rng.choice(_ONSETS) + rng.choice(_VOWELS)


def _invent_name(b: _Builder, pron: str) -> str:
    """A new name for this story, e.g. Tavina (she), Brokus (he) or Zemix (it); never one the cast has."""
    while True:
        stem = "".join(_syllable(b.rng) for _ in range(b.rng.choice((1, 1, 2))))
        name = (stem + b.pick(_MIDDLES) + b.pick(_NAME_ENDS[pron])).capitalize()
        if name.lower() not in b.cast:
            b.invented.append(name)
            return name


def _invent_magic_word(rng: random.Random) -> str:
    """A spell like "Zibo-kaloo": two or three made-up parts, joined so no word is ever doubled."""
    parts = [_syllable(rng) + rng.choice(("", "", "b", "m", "z", "loo", "ka")) for _ in range(rng.choice((2, 3)))]
    return "-".join(parts).capitalize()


def _invent_gibberish(rng: random.Random, length: int) -> str:
    """Random letters, digits, spaces and light punctuation, e.g. "Qx7 b;kLm zz9"; it opens with a capital and has
    no word "a" or "an", no word twice in a row and nothing but a letter or digit after a space, so the text around
    it keeps its grammar."""
    while True:
        text = rng.choice(string.ascii_uppercase) + "".join(rng.choices(_GIBBERISH_CHARS, k=length - 1))
        if text == text.strip() and not re.search(r"\b[Aa]n?\b|\b(\w+) \1\b| [ ,;:'-]", text):
            return text


def _invent_code(rng: random.Random, length: int) -> str:
    """Random letters and digits, e.g. Kq7B2; it opens with a capital so it can start speech."""
    return rng.choice(string.ascii_uppercase) + "".join(rng.choices(_CODE_CHARS, k=length - 1))


# --- cast and setting --------------------------------------------------------

def _hero(b: _Builder):
    """Bind the hero {H} and its description."""
    r = b.rng.random()
    if r < 0.72:
        pron = b.pick(("she", "he"))
        noun, kind = ("girl" if pron == "she" else "boy"), "kid"
    elif r < 0.93:
        pron, noun, kind = b.pick(("she", "he")), b.pick(_ANIMALS), "animal"
    else:
        pron, noun, kind = "it", "robot", "robot"
    name = _invent_name(b, pron)
    b.hero_kind = kind
    adj = b.pick(_KID_ADJS) + " " if b.rng.random() < 0.6 else ""
    b.ctx.update(a_kind=_a(adj + noun), noun_kind=noun, call=name,
                 trait=b.pick(_TRAITS), hobby=b.pick(_HOBBIES), home=b.pick(_HOMES),
                 age=str(b.rng.randint(3, 8)))
    b.char("H", "", name, pron)


def _named_friend(b: _Builder, animals=None):
    """A kid, or (given a list of animals) an animal, with a name new to the story."""
    pron = b.pick(("she", "he"))
    if animals is None:
        noun = "girl" if pron == "she" else "boy"
    else:
        noun = b.pick(animals)
    return _invent_name(b, pron), pron, noun


def _companion(b: _Builder, role: str):
    """Bind the second character {C}; its intro sentence is chosen in _intro."""
    if role in _ADULTS:
        name, pron = _ADULTS[role]
        b.ctx.update(c_call=name, c_kind=role, c_poss=name + "'s")
        b.char("C", "c_", name, pron)
        return
    if role == "group":
        group = b.pick(_GROUPS)
        b.ctx.update(c_call=group, c_kind=group, c_poss=f"the {group}'")
        b.char("C", "c_", "the " + group, "they", group)
        return
    # pets are small house animals; an animal hero's friends are animals too
    animals = _ANIMALS[:6] if role == "pet" else None if b.hero_kind == "kid" else _ANIMALS
    name, pron, noun = _named_friend(b, animals)
    b.ctx.update(c_call=name, c_kind=noun, c_a_kind=_a(noun), c_poss=name + "'s")
    b.char("C", "c_", name, pron)


def _object(b: _Builder):
    (use, used, using, breaks, tool), noun = b.pick(_OBJECTS)
    plural = noun.endswith("*")
    noun = noun.rstrip("*").replace("_", " ")
    r = b.rng.random()
    colour = b.pick(_COLOURS)
    words = [b.pick(_OBJ_ADJS)] if r < 0.55 else []
    if r > 0.25:
        words.append(colour)
    obj = " ".join(words + [noun])
    b.ctx.update(
        obj=obj, noun=noun, a_obj=("some " + obj) if plural else _a(obj),
        o_it="them" if plural else "it", o_sub="they" if plural else "it",
        o_was="were" if plural else "was", o_is="are" if plural else "is",
        o_itis="they are" if plural else "it is",
        o_col=colour if r > 0.25 else "shiny", use=use, used=used, using=using,
        breaks=breaks, tool=tool,
    )


def _place(b: _Builder, prefix: str, avoid: str = "", outdoor: bool = False):
    # boats only ever sail somewhere wet
    water = prefix == "" and b.ctx["use"] == "sail"
    name, prep, feats = b.pick(_PLACES)
    while name == avoid or outdoor and name in _INDOOR or water and name not in _WATER:
        name, prep, feats = b.pick(_PLACES)
    f1, f2 = b.rng.sample(feats.split(";"), 2)
    b.ctx.update({prefix + "place": name, prefix + "at_place": f"{prep} {name}",
                  prefix + "to_place": "to " + name, prefix + "feat": f1, prefix + "feat2": f2})


def _food(b: _Builder):
    b.ctx["food"] = b.pick(_FOOD_ADJS) + " " + b.pick(_FOODS).replace("_", " ")


# --- the story templates: scripts in corpus_stories.toml --------------------------

def _compile(script: list) -> tuple:
    """A script of corpus_stories.toml (its header says the steps) as (builder method, arguments) pairs."""
    steps = []
    for step in script:
        if step == "paragraph":
            steps.append((_Builder.para, ()))
            continue
        head, *rest = step
        if speaker := re.fullmatch(r"([A-Z]) (says|replies):", head):
            steps.append((_Builder.say, (speaker[1], rest, speaker[2] == "replies")))
        elif maybe := re.fullmatch(r"maybe ([0-9.]+):", head):
            steps.append((_Builder.maybe, (float(maybe[1]), rest)))
        elif chance := re.fullmatch(r"chance ([0-9.]+):", head):
            then, otherwise = rest
            steps.append((_Builder.either, (float(chance[1]), _compile(then), _compile(otherwise))))
        elif head == "one of:":
            steps.append((_Builder.one_of, ([_compile(branch) for branch in rest],)))
        elif head.endswith(":"):
            raise ValueError(f"{STORIES_FILE.name}: no step is called {head!r}")
        else:
            steps.append((_Builder.add, (step,)))
    return tuple(steps)


def _scripts(table: dict) -> dict:
    return {name: _compile(script) for name, script in table.items()}


with STORIES_FILE.open("rb") as _file:
    _STORIES = tomllib.load(_file)
_INTRO, _COMPANION_INTRO = _scripts(_STORIES["intro"]), _scripts(_STORIES["companion_intro"])
_SONG, _PASSWORD, _NOTE = _scripts(_STORIES["song"]), _scripts(_STORIES["password"]), _scripts(_STORIES["note"])
_ECHO = _scripts(_STORIES["echo"])


# --- story parts ---------------------------------------------------------------

def _intro(b: _Builder, role: str):
    b.run(_INTRO["hero"])
    if b.hero_kind == "kid":
        b.run(_INTRO["age"])
    b.run(_INTRO["likes"])
    b.run(_COMPANION_INTRO["adult" if role in _ADULTS else role])
    b.run(_INTRO["place"])
    if b.rng.random() < SONG_CHANCE:
        _song(b)
    if b.rng.random() < PASSWORD_CHANCE:
        _password(b)
    if b.rng.random() < NOTE_CHANCE:
        _note(b)
    b.para()


def _song(b: _Builder):
    """A made-up song the hero sings twice in a row, word for word, and maybe once more at the end."""
    v, v2 = b.rng.sample(_SONG_VERBS, 2)
    word = _invent_magic_word(b.rng)
    b.ctx["song"] = b.pick(_SONGS).format(V=v.capitalize(), v=v, v2=v2, W=word, w=word.lower(),
                                          colour=b.pick(_COLOURS), animal=b.pick(_ANIMALS), goal=b.pick(_SONG_GOALS))
    b.invented.append(b.ctx["song"])
    b.run(_SONG["story"])


def _password(b: _Builder):
    """A hideout whose password, a string of random letters and digits, is said three times in a row."""
    b.ctx["password"] = _invent_code(b.rng, b.rng.randint(5, 9))
    b.invented.append(b.ctx["password"])
    b.run(_PASSWORD["story"])


def _note(b: _Builder):
    """A secret message of random letters and digits in small groups, read out three times: nothing but copying
    predicts its second and third readings."""
    groups = [_invent_code(b.rng, b.rng.randint(3, 5)) for _ in range(b.rng.randint(3, 5))]
    b.ctx["note"] = " ".join(groups)
    b.invented.append(b.ctx["note"])
    b.run(_NOTE["story"])


def _echo_game(b: _Builder):
    """The echo game: one says a made-up word, the other says it right back twice, the words growing longer.

    Each word comes back a few characters after it was said, so copying the earlier mention is the only way to
    predict it: many short copies, which is where a model first learns to copy at all.
    """
    b.run(_ECHO["opening"])
    names = {"H": b.speakers["H"][0], "C": b.speakers["C"][0]}
    rounds = b.rng.randint(14, 20)
    for r in range(rounds):
        first, second = ("H", "C") if r % 2 == 0 else ("C", "H")
        word = _invent_code(b.rng, min(2 + r // 2 + b.rng.randint(0, 2), 10))
        b.cur.append(_cap(b.pick(_ECHO_ROUNDS).format(a=names[first], b=names[second], B=_cap(names[second]),
                                                      w=word)))
        if r % 4 == 3 and r < rounds - 1:
            b.para()
    b.para()
    # the last word is long gibberish, and comes back after a whole sentence: copying from farther back
    b.ctx["long_word"] = _invent_gibberish(b.rng, b.rng.randint(16, 36))
    b.run(_ECHO["closing"])


# --- each plot's props, drawn before its script is told ---------------------------

def _lost_props(b: _Builder):
    b.ctx.update(spot=b.pick(_SPOTS), spot2=b.pick(_SPOTS), spot3=b.pick(_SPOTS),
                 distraction=b.pick(_DISTRACTIONS), time=b.pick(_TIMES))


def _sharing_props(b: _Builder):
    b.ctx["time"] = b.pick(_TIMES)


def _fear_props(b: _Builder):
    b.ctx.update(zip(("fear", "challenge", "challenged", "to_fear"), b.pick(_FEARS)))
    b.ctx["magic"] = _invent_magic_word(b.rng)
    b.invented.append(b.ctx["magic"])


def _helping_props(b: _Builder):
    who, the, pron, problem, fix = b.pick(_HELPEES)
    b.ctx.update(x_a=who, x_the=the, x_problem=problem, x_fix=fix)
    b.char("X", "x_", the, pron, the.split()[-1])


def _trip_props(b: _Builder):
    _place(b, "t_", avoid=b.ctx["place"])
    _food(b)
    b.ctx["ride"] = b.pick(_RIDES)


def _surprise_props(b: _Builder):
    b.ctx.update(zip(("make", "gift"), b.pick(_GIFTS)))


def _lesson_props(b: _Builder):
    warning, oops = b.pick(_WARNINGS)
    b.ctx["warning"] = warning
    b.ctx["oops"] = oops.format_map(b.ctx)


def _new_friend_props(b: _Builder):
    name, pron, noun = _named_friend(b, None if b.hero_kind == "kid" else _ANIMALS)
    b.ctx["x_a"] = _a(noun)
    b.char("X", "x_", name, pron)


def _weather_props(b: _Builder):
    b.ctx.update(zip(("sign", "event", "after", "fun"), b.pick(_WEATHER)))


def _code_props(b: _Builder):
    b.ctx.update(code=_invent_code(b.rng, b.rng.randint(4, 6)), spot=b.pick(_SPOTS), treasure=b.pick(_TREASURES))
    b.invented.append(b.ctx["code"])


def _no_props(b: _Builder):
    pass


_PROPS = {"lost": _lost_props, "sharing": _sharing_props, "fear": _fear_props, "helping": _helping_props,
          "trip": _trip_props, "surprise": _surprise_props, "lesson": _lesson_props, "broken": _no_props,
          "new_friend": _new_friend_props, "weather": _weather_props, "code": _code_props}


@dataclass(frozen=True)
class _Plot:
    roles: tuple[str, ...]  # the companion roles it reads well with
    outdoor: bool  # whether the home place must be outdoors
    props: Callable[[_Builder], None]
    story: tuple  # its compiled script

    def tell(self, b: _Builder):
        self.props(b)
        b.run(self.story)


_PLOTS = [_Plot(tuple(plot["roles"].split()), plot.get("outdoor", False), _PROPS[name], _compile(plot["story"]))
          for name, plot in _STORIES["plots"].items()]
_ROLES = "friend friend friend mom mom dad dad grandma grandpa pet pet group".split()
_ANIMAL_ROLES = [r if r != "pet" else "friend" for r in _ROLES]  # an animal's pet is odd


def generate_story(rng: random.Random) -> Story:
    """One story drawn from `rng`; also returns the hero and cast so tests can check it."""
    b = _Builder(rng)
    _hero(b)
    role = b.pick(_ANIMAL_ROLES if b.hero_kind == "animal" else _ROLES)
    _companion(b, role)
    _object(b)
    plot = b.pick([p for p in _PLOTS if role in p.roles])
    tell = _echo_game if b.rng.random() < ECHO_CHANCE else plot.tell
    _place(b, "", outdoor=plot.outdoor)
    _intro(b, role)
    tell(b)
    if "song" in b.ctx:
        b.run(_SONG["reprise"])
    b.para()
    name, pron, _ = b.speakers["H"]
    return Story("\n".join(b.paras), name, pron, b.cast, tuple(b.invented))


def copy_drill(rng: random.Random) -> str:
    """A line of random characters said two or three times: back to back, or after a space or a new line.

    Nothing but the line's first saying predicts its later ones, character by character."""
    line = "".join(rng.choices(DRILL_CHARS, k=rng.randint(*DRILL_LENGTHS)))
    return rng.choice(("", " ", "\n")).join([line] * rng.choice((2, 2, 3)))  # twice in 2 drills of 3


RETOLD_WORDS = 600  # the retold word sequences draw from the stories' most widespread words
RETOLD_SENTENCE = (15, 60)  # characters in a retold sentence, at least and at most
FEW_LETTERS = (3, 8)  # distinct letters in a few-letter line
MAX_RETOLD = 8  # spans said again in one story, at most


@cache
def _retold_material(seed: int) -> tuple[list[str], list[str]]:
    """(words, sentences) to say again: the most widespread words of other stories (those of seed + 100), and
    their sentences of one line."""
    stories = generate_stories(1_500_000, seed=seed + 100).split(SEPARATOR)
    spread = Counter(w for story in stories for w in set(re.findall(r"\b[a-z]{2,}\b", story)))
    sentences = [s.strip() for story in stories for line in story.split("\n")
                 for s in re.split(r"(?<=[.!?])\s+", line)]
    lo, hi = RETOLD_SENTENCE
    return widespread(spread, RETOLD_WORDS), [s for s in sentences if lo <= len(s) <= hi and _plain(s)]


def _plain(sentence: str) -> bool:
    """A sentence of ordinary words, no quote and no code of the echo games in it."""
    return re.fullmatch(r"[A-Z]?[a-z']+(,? [A-Z]?[a-z']+)*[.!?]", sentence) is not None


def widespread(spread: Counter, n: int) -> list[str]:
    """The n words of the largest counts, ties in alphabetical order (a Counter filled from sets would break them
    by the sets' order, which changes with Python's string hashing from one process to the next)."""
    return [w for w, _ in sorted(spread.items(), key=lambda item: (-item[1], item[0]))[:n]]


def _few_letters(rng: random.Random) -> str:
    """A line of a handful of letters (and maybe spaces): each letter comes back often, so copying it needs the
    characters before the last one too, as copying words does."""
    letters = rng.sample(string.ascii_lowercase, rng.randint(*FEW_LETTERS)) + [" "] * rng.randint(0, 2)
    return "".join(rng.choices(letters, k=rng.randint(16, 50))).strip() or "ab"


def as_typed(sentence: str) -> str:
    """A sentence the way people often type one into a box: no capital to start, no closing mark."""
    return sentence[:1].lower() + sentence[1:].rstrip(".!?")


def retelling(rng: random.Random, words: list[str], sentences: list[str]) -> str:
    """A span of text said again right after itself, with no cue: common words in a random order, a sentence of
    another story (half of them as typed), a line of a few letters, or a code. Only the first saying predicts the
    second, so copying pays on ordinary words and sentences, not only on strings of noise."""
    kind = rng.random()
    if kind < 0.3:
        span = _few_letters(rng)
    elif kind < 0.52:
        span = " ".join(rng.choice(words) for _ in range(rng.randint(3, 8)))
        span = span.capitalize() if rng.random() < 0.5 else span
    elif kind < 0.94:
        span = rng.choice(sentences)
        span = as_typed(span) if rng.random() < 0.5 else span
    else:
        span = "".join(rng.choices(_CODE_CHARS, k=rng.randint(6, 30)))
    return rng.choice((" ", " ", " ", ". ", "\n", ", ")).join([span, span])


def _retell_in(story: str, rng: random.Random, words: list[str], sentences: list[str], budget: int) -> tuple[str, int]:
    """The story with spans said again put in, until their characters reach budget (MAX_RETOLD at most): each at
    the end of a paragraph or as a paragraph of its own. Returns the story and the characters put in."""
    paras, added = story.split("\n"), 0
    for _ in range(MAX_RETOLD):
        if added >= budget:
            break
        span = retelling(rng, words, sentences)
        at = rng.randrange(len(paras))
        if rng.random() < 0.5:
            paras[at] += " " + span
        else:
            paras.insert(at + 1, span)
        added += len(span) + 1
    return "\n".join(paras), added


def check_drills(drills: float) -> None:
    if not 0 <= drills <= MAX_DRILLS:
        raise InputError("corpus.drills", "the share of copy drills must be from 0 to {limit}, got {drills}",
                         limit=MAX_DRILLS, drills=drills)


def generate_stories(n_chars: int, seed: int = 0, drills: float = 0.0, retellings: float = 0.0) -> str:
    """Return exactly n_chars characters (truncate the last story) of stories,
    deterministic for (n_chars, seed, drills, retellings); the prefix for a smaller n_chars with the
    same seed and shares must equal the prefix of a larger one.

    drills: the share of the characters given to copy drills, placed between the stories. The drills draw from
    their own generator, so the stories are the same ones, in the same order, whatever the share.
    retellings: the share given to spans said again (`retelling`), put inside the stories; at most MAX_DRILLS
    together with the drills."""
    if n_chars < 0:
        raise ValueError("n_chars must be >= 0")
    check_drills(drills)
    check_drills(retellings)
    check_drills(drills + retellings)
    rng, drill_rng = random.Random(seed), random.Random(f"copy drills {seed}")
    retell_rng = random.Random(f"retellings {seed}")
    words, sentences = _retold_material(seed) if retellings else ([], [])
    parts, total, drilled, retold = [], -len(SEPARATOR), 0, 0
    while total < n_chars:
        if drilled < drills * max(total, 0):
            parts.append(copy_drill(drill_rng))
            drilled += len(parts[-1])
        else:
            story = generate_story(rng).text
            if retellings:
                # enough spans that the share is met once this story is in (a large share: MAX_RETOLD a story)
                budget = (retellings * (total + len(SEPARATOR) + len(story)) - retold) / (1 - retellings)
                story, added = _retell_in(story, retell_rng, words, sentences, int(budget))
                retold += added
            parts.append(story)
        total += len(SEPARATOR) + len(parts[-1])
    return SEPARATOR.join(parts)[:n_chars]


def builtin_description(n_chars: int, seed: int, drills: float = 0.0, retellings: float = 0.0) -> Message:
    if retellings:
        return message("corpus.builtin_retellings", "built-in stories with {share:.0%} of their text said again and "
                       "{drills:.0%} copy drills, {n:,} chars, seed {seed}", share=retellings, drills=drills, n=n_chars,
                       seed=seed)
    if drills:
        return message("corpus.builtin_drills", "built-in stories with {share:.0%} copy drills, {n:,} chars, seed "
                       "{seed}", share=drills, n=n_chars, seed=seed)
    return message("corpus.builtin", "built-in stories, {n:,} chars, seed {seed}", n=n_chars, seed=seed)
