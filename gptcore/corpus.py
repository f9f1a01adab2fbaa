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

Only `random.Random` is used, so generating text never touches torch's RNG.
"""

import random
import re
import string
import tomllib
from collections import Counter
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
_ECHO_ROUNDS = _PLOT_PARTS["echo_rounds"]
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
    """Holds one story's cast and fills sentence templates from `ctx`."""

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

    def add(self, *templates):
        self.cur.append(_cap(self.pick(templates).format_map(self.ctx)))

    def maybe(self, p, *templates):
        if self.rng.random() < p:
            self.add(*templates)

    def say(self, who, *lines, reply=False):
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


# --- story parts ---------------------------------------------------------------

def _intro(b: _Builder, role: str):
    b.add("Once upon a time, there was {a_kind} named {H}.",
          "Once upon a time, there was {a_kind} named {H} who lived {home}.",
          "There was once {a_kind} named {H}.",
          "Long ago, {home}, there lived {a_kind} named {H}.",
          "Once there was {a_kind} named {H}.",
          "There was {a_kind} named {H} who lived {home}.")
    if b.hero_kind == "kid":
        b.maybe(0.15, "{H} was {age} years old.", "{he} was only {age} years old.")
    b.add("{he} was {trait} and loved to {hobby}.",
          "{H} was a very {trait} {noun_kind}.",
          "{he} loved to {hobby} more than anything.",
          "Every day, {H} liked to {hobby}.")
    b.add("{he} had {a_obj}.", "{H} had {a_obj}.",
          "{H}'s grandma had given {him} {a_obj}.", "{H} had {a_obj} that {he} loved.",
          "One day, {H} found {a_obj} under {his} bed.",
          "For {his} birthday, {H} got {a_obj}.")
    b.maybe(0.7, "{he} loved {o_it} very much.", "{he} liked to {use} {o_it} every day.",
            "{H} took {o_it} everywhere {he} went.",
            "{H} thought {o_sub} {o_was} just perfect.")
    _companion_intro(b, role)
    b.add("{H} liked to {use} {his} {noun} {at_place}.",
          "Every day, {H} went {to_place} with {his} {obj}.",
          "{H}'s favorite place was {place}.",
          "Near {his} home was {place}.")
    b.maybe(0.6, "It was a nice place with {feat} and {feat2}.",
            "{place} had {feat} and {feat2}.")
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
    b.add('{H} had a silly song that {he} liked to sing: "{song}"',
          '{H} and {C} made up a silly song together: "{song}"')
    b.add('{H} sang it again and again: "{song}"', 'Then they sang it once more: "{song}"')


def _password(b: _Builder):
    """A hideout whose password, a string of random letters and digits, is said three times in a row."""
    b.ctx["password"] = _invent_code(b.rng, b.rng.randint(5, 9))
    b.invented.append(b.ctx["password"])
    b.add('{H} had a secret hideout, and its password was "{password}!"',
          'To get into {H}\'s secret hideout, you had to say the password: "{password}!"')
    b.add('{C} knocked and said, "{password}!"', '"{password}!" said {C} at the door.')
    b.add('"{password}!" {H} said back, and {he} let {C} in.',
          '{H} smiled and said, "{password}!" Then {he} opened the door.')


def _note(b: _Builder):
    """A secret message of random letters and digits in small groups, read out three times: nothing but copying
    predicts its second and third readings."""
    groups = [_invent_code(b.rng, b.rng.randint(3, 5)) for _ in range(b.rng.randint(3, 5))]
    b.ctx["note"] = " ".join(groups)
    b.invented.append(b.ctx["note"])
    b.add('{H} kept a note with a secret message on it: "{note}."',
          '{C} gave {H} a note with a secret message: "{note}."')
    b.add('Every night, {H} read it out loud: "{note}."', '{H} read the message again, slowly: "{note}."')
    b.add('Then {he} whispered it once more: "{note}."', '"{note}," {H} said to {himself}.')


def _companion_intro(b: _Builder, role: str):
    if role in _ADULTS:
        b.add("{H} lived with {his} {c_kind}, who loved {him} very much.",
              "{his} {c_kind} always took good care of {him}.",
              "{H} loved to spend time with {his} {c_kind}.")
    elif role == "group":
        b.add("A family of {c_kind} lived near {H}'s home.",
              "{H} had some friends who were {c_kind}.",
              "Not far away lived a family of {c_kind}, and they were {H}'s friends.")
    elif role == "pet":
        b.add("{H} had a pet {c_kind} named {C}.",
              "{H} lived with {his} {c_kind}, {C}.",
              "{H} had a {trait} little {c_kind} named {C}.")
    else:
        b.add("{H} had a best friend named {C}.",
              "{his} best friend was {c_a_kind} named {C}.",
              "Next door lived {c_a_kind} named {C}, and they were good friends.",
              "{H} often played with {his} friend {C}.")


def _plot_lost(b: _Builder):
    b.ctx.update(spot=b.pick(_SPOTS), spot2=b.pick(_SPOTS), spot3=b.pick(_SPOTS),
                 distraction=b.pick(_DISTRACTIONS), time=b.pick(_TIMES))
    b.add("One {time}, {H} took {his} {obj} {to_place}.",
          "One day, {H} went {to_place} with {his} {obj}.",
          "One {time}, {H} and {C} went {to_place} to play.")
    b.add("{he} had so much fun {using} {his} {noun}.", "{H} played for a long time.",
          "{H} was having a great time.")
    b.add("Then {H} put {his} {obj} down to look at {distraction}.",
          "Then {H} saw {distraction} and ran to see it.")
    b.add("When {he} came back, the {noun} {o_was} gone!",
          "When {he} turned around, {his} {obj} {o_was} gone!")
    b.say("H", "Oh no! Where is my {noun}?", "My {obj} {o_is} gone!",
          "Where did my {noun} go?")
    b.maybe(0.6, "{H} felt very sad.", "{he} began to cry.", "{H} was very worried.")
    b.para()
    b.add("{C} saw that {H} was sad and came to help.",
          "{C} heard {H} and came over.", "{C} saw {H} crying.")
    b.say("C", "Don't worry, {call}. We will find {o_it} together.",
          "Let us look for {o_it} together.", "Do not be sad, {call}. I will help you.")
    b.add("They looked {spot} and {spot2}.", "They looked everywhere.",
          "{H} and {C} looked {spot}, but {o_it} {o_was} not there.")
    if b.rng.random() < 0.5:
        b.add("At last, {C} found the {obj} {spot3}.")
        b.say("H", "You found {o_it}! Thank you, {c_call}!")
    else:
        b.add("Then {H} saw something {o_col} {spot3}. It was {his} {obj}!",
              "Then {H} looked {spot3}, and there {o_was} the {noun}!")
        b.say("H", "My {noun}! I am so happy!", "Thank you for helping me, {c_call}!")
    b.maybe(0.5, "{H} gave {C} a big hug.", "{H} held the {noun} tight.")
    b.para()
    b.add("From that day on, {H} always kept {his} {obj} close.",
          "{H} learned to take good care of {his} things, and {he} never lost {his} {noun} again.",
          "{H} was happy to have {his} {obj} back, and even happier to have {C} by {his} side.",
          "That day, {H} learned that it is easier to find lost things when someone helps you.")


def _plot_sharing(b: _Builder):
    b.ctx["time"] = b.pick(_TIMES)
    b.add("One day, {C} came to play with {H} {at_place}.",
          "One {time}, {H} and {C} went {to_place}.",
          "One {time}, {H} was {using} {his} {obj} {at_place} when {C} came by.")
    b.add("{C} saw the {obj} and wanted to {use} {o_it} too.",
          "{C} looked at the {noun} and wanted a turn.")
    b.say("C", "Can I {use} your {noun}, please?", "May I have a turn, {call}?",
          "Can I try your {obj}?")
    b.say("H", "No, {o_itis} mine!", "No! I want to {use} {o_it} by myself!", reply=True)
    b.add("{C} felt sad and walked away.", "{C} {c_was} sad, so {c_he} sat down alone.",
          "{C} did not say anything, but {c_he} looked very sad.")
    b.para()
    b.add("{H} {used} {his} {noun} alone, but it was not fun anymore.",
          "{H} played by {himself} for a while, but {he} did not feel happy.")
    b.add("{he} thought about how {C} felt.", "{he} looked over at {C} and felt bad.")
    b.say("H", "I am sorry, {c_call}. Let us {use} my {noun} together.",
          "I am sorry. You can have a turn, {c_call}.",
          "{c_call}, I want to share my {noun} with you.")
    b.add("{C} smiled, and they took turns {using} the {obj}.",
          "{C} smiled a big smile, and they took turns {using} the {noun}.")
    b.maybe(0.6, "They laughed and had fun all day.", "Sharing made them both happy.")
    b.para()
    b.add("{H} learned that sharing is caring.",
          "From that day on, {H} always shared {his} {obj} with {C}.",
          "{H} learned that playing together is more fun than playing alone.",
          "After that, {H} and {C} shared everything, even the {obj}.")


def _plot_fear(b: _Builder):
    b.ctx.update(zip(("fear", "challenge", "challenged", "to_fear"), b.pick(_FEARS)))
    b.ctx["magic"] = _invent_magic_word(b.rng)
    b.invented.append(b.ctx["magic"])
    b.add("One day, {H} went {to_fear} with {C}.",
          "One day, {C} took {H} {to_fear}.",
          "One afternoon, {H} and {C} went {to_fear}.")
    b.add("There, {H} saw {fear}.", "{H} looked up at {fear}.")
    b.add("{H} was scared of {fear}.", "{he} felt very small and scared.")
    b.say("C", "Do you want to {challenge}?", "Come on, {call}! Let us {challenge}!")
    b.say("H", "No, I am too scared.", "I can't. What if I get hurt?", reply=True)
    b.para()
    b.add("{C} sat down next to {H}.", "{C} smiled at {H}.", "{C} held {H}'s hand.")
    b.say("C", "It is okay to be scared. I will be right here with you.",
          "You are braver than you think, {call}.",
          "Just try it once. I will be right here.")
    b.add('{C} taught {H} a magic word for brave days: "{magic}!"',
          'Then {C} told {H} a secret magic word: "{magic}!"')
    b.add("{H} took a deep breath.", "{H} held {his} {obj} tight.")
    b.add('{H} said the magic word, "{magic}!"', '{H} whispered, "{magic}!"')
    b.add("Then {he} {challenged}.", "Slowly, {he} {challenged}.")
    b.add("It was not scary at all. It was fun!", "It was a lot of fun!")
    b.say("H", "I did it! I really did it!", "Can we do it again?")
    b.para()
    b.add("From that day on, {H} was not scared of {fear} anymore.",
          "{H} learned that being brave means trying even when you are scared.",
          "{H} was still {trait}, but now {he} was brave too.",
          "That night, {H} went to sleep with a smile, because {he} had been so brave.",
          "The next day, {H} told everyone {at_place} how brave {he} had been.",
          'Now, when {H} feels scared, {he} just says, "{magic}!"')


def _plot_code(b: _Builder):
    b.ctx.update(code=_invent_code(b.rng, b.rng.randint(4, 6)), spot=b.pick(_SPOTS), treasure=b.pick(_TREASURES))
    b.invented.append(b.ctx["code"])
    b.add("One day, {H} found an old box {spot} {at_place}.",
          "One day, {H} and {C} went {to_place}, and {H} found an old box {spot}.")
    b.add("The box had a little lock with letters and numbers on it.", "The box was shut with a code lock.")
    b.add("On the lid, someone had written {code}.", "Next to the box was a note that said {code}.")
    b.say("H", "Look, {c_call}! It says {code}!", "What does {code} mean?")
    b.say("C", "Maybe {code} is the code for the lock.", "Try {code} on the lock, {call}.", reply=True)
    b.para()
    b.add("{H} turned the little wheels to {code}, one by one.", "Slowly, {H} set the lock to {code}.")
    b.add("Click! The box opened.", "With a soft click, the lock opened.")
    b.add("Inside was {treasure}.", "Inside the box, {H} found {treasure}.")
    b.say("H", "Wow! A real treasure!", "We found a treasure!", "I can't believe it!")
    b.maybe(0.6, "{C} laughed and gave {H} a hug.", "{H} showed {C} the treasure.")
    b.para()
    b.add("{H} kept the note with {code} on it, so {he} would never forget the day {he} found a treasure.",
          "{H} shared the treasure with {C}, and they put the box back for someone else to find.",
          "{H} learned that the best surprises can hide in the smallest places.")


def _plot_helping(b: _Builder):
    who, the, pron, problem, fix = b.pick(_HELPEES)
    b.ctx.update(x_a=who, x_the=the, x_problem=problem, x_fix=fix)
    b.char("X", "x_", the, pron, the.split()[-1])
    b.add("One day, {H} was {using} {his} {obj} {at_place}.",
          "One morning, {H} went {to_place} with {C}.")
    b.add("Suddenly, {H} saw {x_a}.", "Then {H} heard a small sound and saw {x_a}.")
    b.add("{x_the} {x_problem}.")
    b.say("H", "Don't worry! I will help you!", "Are you okay? Let me help you.")
    b.para()
    b.add("{H} put down {his} {noun}. Then {he} {x_fix}.", "{H} {x_fix}.")
    b.add("{x_the} was so happy.", "{x_the} looked very thankful.")
    b.maybe(0.5, "{H} felt happy too.", "{H} smiled a big smile.")
    b.add("{C} saw what {H} did.", "{C} came over to {H}.")
    b.say("C", "You are very kind, {call}.", "That was so kind of you, {call}!",
          "I am proud of you, {call}.")
    b.para()
    b.add("{H} learned that helping others makes everyone happy.",
          "{H} went home with {his} {obj} and a warm feeling inside.",
          "From that day on, {H} always looked for ways to help.",
          "{H} never forgot {x_the}, and {he} was proud that {he} had been so kind.")


def _plot_trip(b: _Builder):
    _place(b, "t_", avoid=b.ctx["place"])
    _food(b)
    b.ctx["ride"] = b.pick(("drove there in the car", "took a big bus",
                            "rode on a train", "walked there together"))
    b.add("One morning, {C} had a surprise for {H}.", "One day, {C} woke {H} up early.")
    b.say("C", "Today we are going {t_to_place}!", "Get ready, {call}! We are going {t_to_place}.")
    b.say("H", "Yay! Can I bring my {noun}?", "Hooray! I love trips!")
    b.add("{H} packed {his} {obj} and some {food}.", "{H} took {his} {obj} along.",
          "{H} packed {his} bag: {his} {obj}, some {food} and a water bottle.")
    b.add("They {ride}.")
    b.para()
    b.add("{t_place} was a nice place with {t_feat} and {t_feat2}.",
          "{t_place} had {t_feat} and {t_feat2}.")
    b.add("{H} had never seen anything like it.", "{H}'s eyes went wide.")
    b.add("{H} {used} {his} {noun} and looked at everything.",
          "{H} and {C} played all day.")
    b.add("Later, they sat down and ate the {food}.", "At lunch, they shared the {food}.")
    b.say("H", "This is the best day ever!", "I love it here!")
    b.para()
    b.add("When they got home, {H} was tired but happy.",
          "That night, {H} fell asleep holding {his} {obj}.")
    b.add("{he} dreamed about {t_place}.", "{he} could not wait to go back {t_to_place}.",
          "It was even more fun than playing {at_place}.")


def _plot_surprise(b: _Builder):
    b.ctx.update(zip(("make", "gift"), b.pick(_GIFTS)))
    b.add("One day, {H} found out it was {c_poss} birthday.",
          "It was {c_poss} birthday soon, and {H} had an idea.")
    b.say("H", "I will make a surprise!", "I want to make something special.")
    b.add("{H} worked hard all morning.", "{H} worked all day {at_place}.")
    b.add("{he} {make} {C}.")
    b.maybe(0.5, "{H} hummed a happy tune while {he} worked.",
            "It was not easy, but {H} did not give up.")
    b.para()
    b.add("When {C} saw the {gift}, {c_he} smiled a big smile.",
          "{H} gave {C} the {gift}, and {C} was so surprised.")
    b.say("C", "Thank you, {call}! This is the best gift ever!",
          "You made this for me? I love it!", "Oh, {call}, it is wonderful!")
    b.add("{C} gave {H} a big hug.", "{H} felt warm and happy inside.")
    b.para()
    b.add("{H} learned that the best gifts come from the heart.",
          "{C} kept the {gift} forever, and {H} kept {his} {obj} close by.",
          "It was the best birthday {C} ever had, and {H} was very proud.")


def _plot_lesson(b: _Builder):
    warning, oops = b.pick(_WARNINGS)
    b.ctx["warning"] = warning
    b.ctx["oops"] = oops.format_map(b.ctx)
    b.add("One day, {H} and {C} went {to_place}.", "One day, {C} took {H} {to_place}.")
    b.say("C", "{warning}, {call}.", "{call}, listen to me. {warning}.")
    b.add("But {H} did not listen.", "{H} nodded, but {he} did not really listen.")
    b.add("Soon, {oops}.")
    b.say("H", "Oh no!", "Help! I am sorry!")
    b.para()
    b.add("{C} came right away.", "{C} ran over to {H}.")
    b.add("{C} helped {H} and made everything better.", "{C} held {H} close.")
    sorry, answer = b.pick((("I am sorry. I should have listened.",
                             "It is okay. Everyone makes mistakes."),
                            ("I will listen next time.", "I know you will, {call}.")))
    b.say("H", sorry)
    b.say("C", answer, reply=True)
    b.para()
    b.add("From that day on, {H} always listened to {C}.",
          "{H} learned that it is important to listen.",
          "{H} learned {his} lesson, and {he} was more careful with {his} {obj} after that.")


def _plot_broken(b: _Builder):
    b.add("One day, {H} was {using} {his} {obj} too hard.",
          "One day, {H} was {using} {his} {obj} {at_place} and was not careful.")
    b.add("Suddenly, the {noun} {breaks}!", "Then, with a loud sound, {his} {obj} {breaks}.")
    b.say("H", "Oh no! My {noun} {o_is} broken!", "My {obj}! What will I do now?")
    b.add("{H} began to cry.", "{H} felt very sad.")
    b.para()
    b.add("{C} came to see what was wrong.", "{C} heard {H} and came to help.")
    b.say("C", "Let me see. I think we can fix {o_it}.", "Do not cry, {call}. We can fix {o_it}.")
    b.add("{C} got {tool}.", "{C} went to find {tool}.")
    b.add("They worked together, slowly and carefully.", "{H} helped as much as {he} could.")
    b.add("Soon the {obj} looked almost like new.", "At last, the {noun} {o_was} fixed!")
    b.say("H", "Thank you, {c_call}! You are the best!", "{o_itis} as good as new! Thank you!")
    b.para()
    b.add("From then on, {H} was gentle with {his} {obj}.",
          "{H} learned that broken things can often be fixed with a little help.",
          "{H} still {used} {his} {noun} every day, but now {he} was very careful.")


def _plot_new_friend(b: _Builder):
    name, pron, noun = _named_friend(b, None if b.hero_kind == "kid" else _ANIMALS)
    b.ctx["x_a"] = _a(noun)
    b.char("X", "x_", name, pron)
    b.add("One day, {H} was {at_place} with {his} {obj}.", "One day, {H} went {to_place}.")
    b.add("There, {H} saw {x_a} sitting all alone.", "{H} saw {x_a} who looked lonely.")
    b.say("H", "Hi! My name is {H}. Do you want to play?", "Hello! Do you want to play with me?")
    b.say("X", "Yes, please! My name is {X}.", "I would love to! I am {X}.", reply=True)
    b.para()
    b.add("{H} and {X} took turns {using} the {obj}.", "{H} showed {X} {his} {obj}.")
    b.add("{X} laughed and laughed.", "{X} was very happy.")
    b.maybe(0.6, "{C} smiled when {c_he} saw {H} with a new friend.",
            "Later, {H} told {C} all about {X}.")
    b.para()
    b.add("From that day on, {H} and {X} were best friends.",
          "{H} was glad {he} said hello, because now {he} had a new friend.",
          "{H} learned that a friendly hello can make a new friend.")


def _plot_weather(b: _Builder):
    b.ctx.update(zip(("sign", "event", "after", "fun"), b.pick(_WEATHER)))
    b.add("One day, {H} was {using} {his} {obj} {at_place} with {C}.",
          "One day, {H} and {C} were playing {at_place}.")
    b.add("Suddenly, {sign}.", "Then {sign}.")
    b.add("Soon {event}.")
    b.say("C", "Come on, {call}! Let us go inside.", "We need to go home now.")
    b.add("{H} was sad because {he} could not play anymore.",
          "{H} did not want to stop; {he} was having too much fun.")
    b.para()
    b.add("{H} and {C} waited by the window.", "{H} and {C} sat inside and waited.")
    b.say("H", "Will it ever stop?", "When can we go out again?")
    b.say("C", "Just wait and see.", "Be patient, {call}.", reply=True)
    b.add("After a while, it stopped, and {after}.", "At last it stopped, and {after}.")
    b.say("H", "Wow! Look at that!", "It is so pretty!")
    b.add("{H} and {C} ran outside and {fun}.")
    b.para()
    b.add("{H} learned that even a gray day can turn into a happy one.",
          "{H} learned to be patient, and {he} never forgot that day {at_place}.",
          "It was the most fun {H} ever had {at_place}.")


def _plot_echo(b: _Builder):
    """The echo game: one says a made-up word, the other says it right back twice, the words growing longer.

    Each word comes back a few characters after it was said, so copying the earlier mention is the only way to
    predict it: many short copies, which is where a model first learns to copy at all.
    """
    names = {"H": b.speakers["H"][0], "C": b.speakers["C"][0]}
    b.add("One day, {H} and {C} played the echo game {at_place}.", "{H} and {C} loved to play the echo game.")
    b.add("One of them says a funny word, and the other has to say it right back.",
          "In the echo game, you say a silly word, and your friend says it back to you.")
    b.para()
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
    b.add('Then {H} said the longest word of all: "{long_word}!"',
          'At the end, {H} made up a very long word: "{long_word}!"')
    b.add("{C} thought hard, took a deep breath, and said it back slowly.",
          "{C} closed {c_his} eyes, thought for a long time, and then tried.")
    b.say("C", "{long_word}!")
    b.add("At last the words were so long that they both fell down laughing.",
          "They played until the sun went down, and the words got longer and sillier.")
    b.add("{H} learned that the silliest games are the best ones to share.",
          "It was the most fun {H} had all week.")


# plot, companion roles it reads well with, whether the home place must be outdoors
_ANY = "mom dad grandma grandpa friend pet group"
_PLOTS = [
    (_plot_lost, _ANY, True),
    (_plot_sharing, "friend pet group", False),
    (_plot_fear, _ANY, False),
    (_plot_helping, _ANY, True),
    (_plot_trip, "mom dad grandma grandpa friend", False),
    (_plot_surprise, _ANY, False),
    (_plot_lesson, "mom dad grandma grandpa", True),
    (_plot_broken, "mom dad grandma grandpa friend", False),
    (_plot_new_friend, _ANY, False),
    (_plot_weather, _ANY, True),
    (_plot_code, _ANY, True),
]
_ROLES = "friend friend friend mom mom dad dad grandma grandpa pet pet group".split()
_ANIMAL_ROLES = [r if r != "pet" else "friend" for r in _ROLES]  # an animal's pet is odd


def generate_story(rng: random.Random) -> Story:
    """One story drawn from `rng`; also returns the hero and cast so tests can check it."""
    b = _Builder(rng)
    _hero(b)
    role = b.pick(_ANIMAL_ROLES if b.hero_kind == "animal" else _ROLES)
    _companion(b, role)
    _object(b)
    plot, _, outdoor = b.pick([p for p in _PLOTS if role in p[1].split()])
    if b.rng.random() < ECHO_CHANCE:
        plot = _plot_echo
    _place(b, "", outdoor=outdoor)
    _intro(b, role)
    plot(b)
    if "song" in b.ctx:
        b.maybe(0.7, 'That night, {H} sang {his} song one more time: "{song}"')
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
