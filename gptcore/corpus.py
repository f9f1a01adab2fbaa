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
from dataclasses import dataclass

from .errors import InputError, Message, message

BUILTIN_DEFAULT_CHARS = 1_000_000
SEPARATOR = "\n<|endoftext|>\n"
SONG_CHANCE = 0.3  # share of stories whose hero has a silly song
PASSWORD_CHANCE = 0.8  # share of stories with a secret hideout and its password
NOTE_CHANCE = 0.9  # share of stories with a secret message of random letters, read out three times
ECHO_CHANCE = 0.8  # share of stories that are a game of echo: a made-up word said, then said right back
MAX_DRILLS = 0.9  # the largest share of copy drills: the rest are stories
DRILL_LENGTHS = (8, 64)  # characters in one drill's line, at least and at most

# subject, object, possessive, reflexive, past tense of "to be"
_PRONOUNS = {
    "she": ("she", "her", "her", "herself", "was"),
    "he": ("he", "him", "his", "himself", "was"),
    "it": ("it", "it", "its", "itself", "was"),
    "they": ("they", "them", "their", "themselves", "were"),
}

# --- vocabulary ------------------------------------------------------------

# Names are invented per story from syllables, so no amount of memorising predicts them: a model can only
# get "Tavina" right the second time by copying it from where the story first said it.
_ONSETS = "b br d dr f fl g gl h j k kl l m n p pl r s sk sl sn st t tr v w z ch sh".split()
_VOWELS = "a e i o u a e i o u ee oo ai".split()
_MIDDLES = "b d f g k l m n p r s t v z".split()
_NAME_ENDS = {"she": "a a i ie ette elle ina ly", "he": "o o an en ick us ot um", "it": "ix ax ob ip oz"}
_NAME_ENDS = {pron: ends.split() for pron, ends in _NAME_ENDS.items()}
_CODE_CHARS = string.ascii_uppercase + string.ascii_lowercase + string.digits
_GIBBERISH_CHARS = _CODE_CHARS + "  ,;:'-"  # (spaces twice: gibberish has words in it)
# every character the stories and their separator use: a drill may hold any of them, as a model's vocabulary does
DRILL_CHARS = "\n !\"',-.:;<>?|" + _CODE_CHARS

_KID_ADJS = "little young small happy kind sweet curious cheerful brave".split()
_ANIMALS = """cat dog bird mouse rabbit bunny duck bear fox frog squirrel puppy
kitten elephant fish owl turtle pig lamb goat pony hamster parrot""".split()
_GROUPS = "ducks bunnies birds squirrels frogs geese".split()
_TRAITS = """kind happy curious shy brave funny playful gentle cheerful clever silly
friendly busy sweet smart quiet helpful polite""".split()
_HOBBIES = [
    "play outside", "sing songs", "draw pictures", "dance", "read books",
    "build things", "help others", "explore", "pick flowers", "splash in puddles",
    "climb trees", "look at the stars", "make new friends", "run fast",
    "bake cookies", "tell jokes", "play games", "watch the clouds",
    "collect shells", "hum little tunes",
]
_HOMES = [
    "in a little house", "near a big forest", "in a small town", "by the sea",
    "on a quiet street", "in a cozy home", "near a green hill", "on a busy farm",
]
_TIMES = [
    "sunny morning", "warm afternoon", "bright day", "cool morning",
    "lovely day", "quiet evening", "sunny day", "breezy afternoon",
]

_OBJ_ADJS = """big small little shiny old new pretty tiny special fancy bright
lovely beautiful sparkly nice""".split()
_COLOURS = "red blue green yellow pink purple orange white black brown gold silver".split()

# Nouns grouped by what a child does with them, so "she liked to fly her kite"
# and "she wore her hat" come out right. '_' joins words, '*' marks plurals.
# Columns: verb, past, -ing, how it breaks, what fixes it, nouns.
_OBJECT_GROUPS = [
    ("play with", "played with", "playing with", "broke", "some glue",
     "ball toy_car toy_train toy_truck puzzle yo-yo robot_toy whistle bell "
     "marbles* jack-in-the-box music_box dollhouse toy_dinosaur"),
    ("throw", "threw", "throwing", "cracked", "some tape", "frisbee beanbag ball"),
    ("fly", "flew", "flying", "tore", "some tape", "kite paper_plane toy_plane toy_rocket"),
    ("hug", "hugged", "hugging", "ripped", "a needle and thread",
     "doll teddy_bear stuffed_bunny toy_lion puppet blanket pillow "
     "toy_elephant rag_doll stuffed_dog"),
    ("wear", "wore", "wearing", "tore", "a needle and thread",
     "hat scarf coat dress cape sweater bow ribbon boots* shoes* mittens* socks* gloves*"),
    ("wear", "wore", "wearing", "broke", "some glue", "crown necklace bracelet ring watch"),
    ("read", "read", "reading", "tore", "some tape",
     "book map storybook picture_book letter comic_book"),
    ("ride", "rode", "riding", "broke", "some tools",
     "bike scooter wagon sled skateboard tricycle rocking_horse"),
    ("sail", "sailed", "sailing", "cracked", "some glue", "boat toy_boat toy_ship"),
    ("draw with", "drew with", "drawing with", "snapped", "some tape",
     "crayons* pencils* markers* paintbrush"),
    ("carry", "carried", "carrying", "cracked", "some glue",
     "basket bucket box bag backpack jar lunchbox cup lantern shell"),
    ("build with", "built with", "building with", "broke", "some glue", "blocks* bricks*"),
    ("play", "played", "playing", "broke", "some glue",
     "flute guitar trumpet drum xylophone harmonica horn tambourine violin"),
    ("wave", "waved", "waving", "broke", "some tape", "wand flag"),
    ("spin", "spun", "spinning", "broke", "some glue", "top pinwheel"),
]
_OBJECTS = [(g[:5], noun) for g in _OBJECT_GROUPS for noun in g[5].split()]

# plural or uncountable, so "some {food}" and "the {food}" both read well
_FOODS = """cookies apples berries grapes muffins cupcakes carrots cherries sandwiches
pancakes crackers nuts plums peaches strawberries pretzels buns donuts bananas oranges
cake pie soup bread honey cheese jam pizza popcorn toast lemonade milk juice candy
ice_cream""".split()
_FOOD_ADJS = "yummy sweet fresh warm tasty juicy".split()

# name | preposition for "where" | features for "a nice place with X and Y"
_PLACES = [line.split("|") for line in """\
the park|at|tall trees;a big slide;green grass;a little pond;red swings
the beach|at|soft sand;big waves;pretty shells;a tall lighthouse
the forest|in|tall trees;soft moss;singing birds;a little stream
the garden|in|pretty flowers;a small pond;green bushes;busy bees
the meadow|in|tall grass;yellow flowers;busy bees;a big old oak
the farm|on|a big red barn;cows and pigs;a tall windmill;fields of corn
the lake|at|clear water;little fish;a wooden dock;white ducks
the river|by|fast water;smooth stones;a small bridge;green frogs
the pond|by|lily pads;green frogs;quiet ducks;tall reeds
the hill|on|soft grass;a lone tree;a great view;wild flowers
the playground|at|a tall slide;a sandbox;a merry-go-round;monkey bars
the zoo|at|big lions;tall giraffes;funny monkeys;a baby elephant
the library|at|many books;big soft chairs;a quiet corner;a friendly librarian
the school|at|a big yard;bright classrooms;a tall flagpole;a garden
the market|at|fresh fruit;busy stalls;friendly sellers;sweet smells
the bakery|at|warm bread;sweet cakes;a big oven;tasty cookies
the toy store|at|shiny toys;tall shelves;a toy train;colorful balls
the castle|at|tall towers;a big gate;a long hall;a deep moat
the cave|in|dark corners;cool rocks;quiet echoes;sparkly stones
the jungle|in|tall trees;loud parrots;long vines;big leaves
the backyard|in|a little swing;a green lawn;a tall fence;a vegetable patch
the kitchen|in|a big table;a warm oven;a bowl of fruit;shiny pots
the attic|in|old boxes;a dusty trunk;a small window;old toys
the barn|in|soft hay;sleepy cows;a big door;a friendly horse
the town|in|busy streets;small shops;a big clock;a pretty fountain
the village|in|little houses;a small well;a stone bridge;friendly people
the mountain|on|big rocks;cold wind;a snowy top;tall pine trees
the field|in|tall grass;wild flowers;buzzing bees;a wooden fence
the woods|in|tall trees;a narrow path;soft leaves;a hollow log
the orchard|in|apple trees;sweet pears;busy bees;long rows of trees
the island|on|white sand;palm trees;a hidden cove;bright shells
the harbor|at|big boats;loud gulls;a long pier;fishing nets
the campsite|at|a big tent;a warm fire;tall pines;a starry sky
the fair|at|a big wheel;yummy snacks;fun games;a merry-go-round
the circus|at|funny clowns;a big tent;dancing bears;bright lights
the museum|at|old bones;shiny gems;big paintings;a dinosaur
the pool|at|cool water;a diving board;bright floats;a little slide
the bridge|on|a great view;a wooden rail;the river below;passing boats
the valley|in|green hills;a small creek;grazing sheep;wild flowers
the ice rink|at|smooth ice;bright lights;happy skaters;warm cocoa
the treehouse|in|a rope ladder;a tiny window;a secret door;wooden walls
the lighthouse|at|a tall tower;a bright light;a winding stair;a view of the sea
the train station|at|big trains;a loud whistle;a busy platform;a big clock
Grandma's house|at|a cozy porch;a warm fireplace;a big garden;a sleepy cat
the swamp|in|muddy water;tall reeds;green frogs;old logs
the pumpkin patch|in|big orange pumpkins;twisty vines;a scarecrow;hay bales
the flower shop|at|pretty roses;sweet smells;colorful pots;tall sunflowers
the sandbox|in|soft sand;little shovels;sand castles;toy buckets
the clearing|in|soft grass;bright sunshine;a ring of trees;wild berries
the aquarium|at|colorful fish;a big shark;slow turtles;a glass tunnel
the playroom|in|soft rugs;many toys;a toy box;a little table
the living room|in|a soft couch;a warm rug;a big window;a cozy fireplace
the porch|on|a rocking chair;a wind chime;a little step;potted plants
the fire station|at|a big red truck;shiny helmets;a tall ladder;friendly firefighters
the post office|at|many letters;a big counter;tall shelves;a friendly clerk
the snowy hill|on|soft snow;a steep slope;tall pine trees;cold air
the greenhouse|in|warm air;green plants;tiny seedlings;bright flowers""".splitlines()]

# places where rain, mud, lost toys in the grass or stuck kittens make no sense
_WATER = {"the lake", "the river", "the pond", "the beach", "the harbor", "the pool"}
_INDOOR = {
    "the library", "the school", "the bakery", "the toy store", "the kitchen", "the attic",
    "the barn", "the museum", "the train station", "the aquarium", "the playroom",
    "the living room", "the fire station", "the post office", "the greenhouse",
    "Grandma's house", "the flower shop",
}

_SPOTS = [
    "under the bench", "behind a big rock", "in the tall grass", "under a tree",
    "behind the bushes", "next to the fence", "under some leaves", "near an old log",
    "by the flowers", "inside an old box", "under a pile of sand", "behind a door",
]
_DISTRACTIONS = [
    "a pretty butterfly", "a big bug", "a funny bird", "a baby rabbit", "a rolling acorn",
    "a little frog", "a busy ant", "a shiny stone", "a red leaf", "a fat caterpillar",
]
# what scares the hero: thing, challenge, challenge in the past tense, where it is
_FEARS = [
    ("the big slide", "go down the big slide", "went down the big slide", "to the playground"),
    ("the deep water", "swim in the deep water", "swam in the deep water", "to the lake"),
    ("the tall tree", "climb the tall tree", "climbed the tall tree", "to the woods"),
    ("the big waves", "jump over the waves", "jumped over the waves", "to the beach"),
    ("the high swing", "ride the high swing", "rode the high swing", "to the park"),
    ("the old bridge", "walk across the old bridge", "walked across the old bridge",
     "to the river"),
    ("the big stage", "sing on the big stage", "sang on the big stage", "to the school show"),
    ("the dark cave", "go into the dark cave", "went into the dark cave", "to the hills"),
    ("the tall horse", "ride the tall horse", "rode the tall horse", "to the farm"),
    ("the steep hill", "roll down the steep hill", "rolled down the steep hill",
     "to the meadow"),
    ("the loud drums", "march in the parade", "marched in the parade", "to the town parade"),
    ("the big wheel", "ride the big wheel", "rode the big wheel", "to the fair"),
    ("the diving board", "jump off the diving board", "jumped off the diving board",
     "to the pool"),
    ("the slippery ice", "skate on the ice", "skated on the ice", "to the ice rink"),
]
# someone in trouble: who, how they are named later, pronoun, problem, fix
_HELPEES = [
    ("a little bird", "the bird", "it", "was stuck in a thorny bush",
     "gently pulled the branches apart, and the bird flew free"),
    ("a tiny kitten", "the kitten", "it", "was stuck up in a tree",
     "climbed up slowly and carried the kitten down"),
    ("an old man", "the old man", "he", "had dropped all of his apples",
     "picked up every apple and put them back in the old man's bag"),
    ("an old woman", "the old woman", "she", "could not find her glasses",
     "looked all around and found the old woman's glasses on a bench"),
    ("a baby duck", "the duck", "it", "could not find its mother",
     "walked with the duck to the pond, where its mother was waiting"),
    ("a small puppy", "the puppy", "it", "was lost and scared",
     "read the name tag on the puppy's collar and took the puppy home"),
    ("a tiny ant", "the ant", "it", "was trying to carry a big crumb",
     "carried the crumb all the way to the ant hill"),
    ("a turtle", "the turtle", "it", "was stuck on its back",
     "carefully turned the turtle over"),
    ("a little boy", "the boy", "he", "had fallen and hurt his knee",
     "helped the boy up and found him a bandage"),
    ("a little girl", "the girl", "she", "had lost her way home",
     "walked with the girl until she saw her house"),
]
_GIFTS = [
    ("drew a picture of", "picture"), ("made a card for", "card"),
    ("picked flowers for", "flowers"), ("baked a little cake for", "cake"),
    ("made a paper crown for", "crown"), ("made a clay pot for", "pot"),
]
_TREASURES = [
    "a shiny gold coin", "a tiny silver key", "a pretty blue stone", "an old map", "a little music box",
    "a string of pearls", "a bag of marbles", "a green glass bird", "a small golden bell", "a toy ship",
]
# a silly song's parts; the song is sung twice, word for word
_SONG_VERBS = "hop skip clap spin jump tap swing twirl stomp wiggle march dance".split()
_SONG_GOALS = "moon sea hill tree river sky town sun bridge gate".split()
_SONGS = [
    "{V}, {v}, little {colour} {animal}, {v2} all the way to the {goal}!",
    "{W}, {w}! The {colour} {animal} likes to {v2}!",
    "{V} and {v2}, {v} and {v2}, {w} says the {animal}!",
    "{W}, {w}, {v} to the {goal}, {v2} with the {colour} {animal}!",
]
# sign, event, what it looks like after, what they do after
_WEATHER = [
    ("dark clouds filled the sky", "it began to rain", "a big rainbow was in the sky",
     "jumped in the puddles"),
    ("the air got very cold", "soft white snow began to fall", "everything was white",
     "built a big snowman"),
    ("the trees began to sway", "a strong wind began to blow",
     "red and yellow leaves were everywhere", "chased the leaves"),
]
# warning, what goes wrong
_WARNINGS = [
    ("Do not play near the mud", "{he} slipped, and {his} {obj} fell into the mud"),
    ("Do not go too close to the water", "{his} {obj} fell into the water"),
    ("Stay close to me", "{he} wandered off and could not find the way back"),
    ("Do not climb on the fence", "{he} fell off the fence and hurt {his} knee"),
    ("Do not run so fast", "{he} tripped on a rock and fell down"),
    ("Do not eat too much candy", "{he} ate too much candy and got a tummy ache"),
    ("Put on your coat, it is cold", "{he} got very cold and began to shiver"),
]

_TAGS = {
    "?": (("asked",), ("asked",)),
    "!": (("said", "shouted", "cried", "exclaimed", "yelled"),) * 2,
    ".": (("said", "said", "whispered"), ("replied", "said", "answered")),
}


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


_ADULTS = {"mom": ("Mom", "she"), "dad": ("Dad", "he"),
           "grandma": ("Grandma", "she"), "grandpa": ("Grandpa", "he")}


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


_ECHO_ROUNDS = [
    '{a} said, "{w}!" {B} said it right back, twice: "{w}! {w}!"',
    '"{w}!" called {a}. "{w}! {w}!" called {b}.',
    '{a} shouted, "{w}!" Then {b} shouted, "{w}, {w}!"',
    '"{w}!" said {a}, and {b} said, "{w}! {w}!"',
]


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


def check_drills(drills: float) -> None:
    if not 0 <= drills <= MAX_DRILLS:
        raise InputError("corpus.drills", "the share of copy drills must be from 0 to {limit}, got {drills}",
                         limit=MAX_DRILLS, drills=drills)


def generate_stories(n_chars: int, seed: int = 0, drills: float = 0.0) -> str:
    """Return exactly n_chars characters (truncate the last story) of stories,
    deterministic for (n_chars, seed, drills); the prefix for a smaller n_chars with the
    same seed and drills must equal the prefix of a larger one.

    drills: the share of the characters given to copy drills, placed between the stories. The drills draw from
    their own generator, so the stories are the same ones, in the same order, whatever the share."""
    if n_chars < 0:
        raise ValueError("n_chars must be >= 0")
    check_drills(drills)
    rng, drill_rng = random.Random(seed), random.Random(f"copy drills {seed}")
    parts, total, drilled = [], -len(SEPARATOR), 0
    while total < n_chars:
        if drilled < drills * max(total, 0):
            parts.append(copy_drill(drill_rng))
            drilled += len(parts[-1])
        else:
            parts.append(generate_story(rng).text)
        total += len(SEPARATOR) + len(parts[-1])
    return SEPARATOR.join(parts)[:n_chars]


def builtin_description(n_chars: int, seed: int, drills: float = 0.0) -> Message:
    if drills:
        return message("corpus.builtin_drills", "built-in stories with {share:.0%} copy drills, {n:,} chars, seed "
                       "{seed}", share=drills, n=n_chars, seed=seed)
    return message("corpus.builtin", "built-in stories, {n:,} chars, seed {seed}", n=n_chars, seed=seed)
