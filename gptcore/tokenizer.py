"""Tokenizers: the tutorial's characters, a byte-level BPE (the GPT-2 recipe) trained on the training split, or the
tokenizer an imported model came with (any Hugging Face `tokenizers` JSON, gptcore.hub).

All offer the same interface: encode, decode, vocab_size, unknown (what encode drops), token_bytes, and the
readable forms every page and command shows a token in:
  piece(id)    the token's text as it sits in running text; bytes that are not a whole UTF-8 character
               (a BPE token can hold half of 你) show as ⟨e4 bd⟩
  display(id)  the piece with visible whitespace: ␣ for a space, ⏎ for a newline, ⇥ for a tab
A tokenizer is stored as plain JSON (to_dict) and rebuilt by `tokenizer_from_dict` without executing code.
"""
from __future__ import annotations

import codecs
import re
from collections import Counter
from collections.abc import Iterable, Iterator

from .errors import Message, UserError, message

KINDS = ("char", "bpe")  # the tokenizers a run trains
STORED_KINDS = (*KINDS, "hf")  # and the one an imported model brings
VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥"}
END_OF_TEXT = "<|endoftext|>"  # TinyStories' story separator, and our built-in corpus's: one token in a BPE
BPE_MIN_VOCAB = 257  # the 256 bytes and the end-of-text token, before any merge
BPE_MAX_VOCAB = 100_000  # the largest vocabulary a BPE is trained to here


class TokenizerError(UserError, ValueError):
    """A tokenizer that cannot be built or read back as described (the checkpoint loader passes its message on
    as a CheckpointError)."""


def readable(data: bytes) -> str:
    """UTF-8 bytes as text, with each run of bytes that are not whole characters shown as ⟨e4 bd⟩."""
    out, stray = [], []
    for c in data.decode("utf-8", "surrogateescape"):
        if 0xDC80 <= ord(c) <= 0xDCFF:  # surrogateescape's stand-in for an undecodable byte
            stray.append(f"{ord(c) - 0xDC00:02x}")
            continue
        if stray:
            out.append(f"⟨{' '.join(stray)}⟩")
            stray = []
        out.append(c)
    if stray:
        out.append(f"⟨{' '.join(stray)}⟩")
    return "".join(out)


def visible(text: str) -> str:
    return "".join(VISIBLE.get(c, c) for c in text)


class Tokenizer:
    """What both tokenizers share: the readable forms of tokens, derived from their bytes."""

    kind = ""
    unit = "token"  # what one id stands for, in messages

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def token_bytes(self, token_id: int) -> bytes:
        raise NotImplementedError

    def decode(self, ids) -> str:
        return b"".join(self.token_bytes(int(i)) for i in ids).decode("utf-8", "replace")

    def unknown(self, text: str) -> Counter:
        """Characters encode would drop (none for a byte-level BPE)."""
        return Counter()

    def piece(self, token_id: int) -> str:
        return readable(self.token_bytes(int(token_id)))

    def display(self, token_id: int) -> str:
        return visible(self.piece(token_id))

    def pieces(self, ids) -> list[str]:
        return [self.piece(i) for i in ids]

    def labels(self, ids) -> list[str]:
        return [self.display(i) for i in ids]

    def is_whole(self, token_id: int) -> bool:
        """Does the token decode to whole characters on its own?"""
        try:
            self.token_bytes(int(token_id)).decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False

    def stream(self, ids: Iterable[int]) -> Iterator[str]:
        """Text as the ids arrive, holding back the bytes of a character split over two tokens."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for i in ids:
            if text := decoder.decode(self.token_bytes(int(i))):
                yield text
        if text := decoder.decode(b"", final=True):
            yield text

    def describe(self) -> Message:
        """'74 characters' or 'byte-level BPE of 4,096 tokens'."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return isinstance(other, Tokenizer) and self.to_dict() == other.to_dict()

    __hash__ = None


class CharTokenizer(Tokenizer):
    """One id per distinct character, sorted, as in the tutorial.

    Characters outside the vocabulary are dropped from the input (there is no <unk> id in a char
    vocabulary); `unknown` reports them so the UI and CLI can warn.
    """

    kind, unit = "char", "character"

    def __init__(self, chars: list[str]):
        if len(set(chars)) != len(chars) or any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise TokenizerError("tokenizer.char_vocab", "a character vocabulary must be distinct single characters")
        self.chars = list(chars)
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def unknown(self, text: str) -> Counter:
        return Counter(c for c in text if c not in self.stoi)

    def encode(self, text: str) -> list[int]:
        return [self.stoi[c] for c in text if c in self.stoi]

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def token_bytes(self, token_id: int) -> bytes:
        return self.chars[token_id].encode("utf-8", "surrogatepass")

    def piece(self, token_id: int) -> str:
        return self.chars[int(token_id)]

    def stream(self, ids: Iterable[int]) -> Iterator[str]:
        return (self.chars[int(i)] for i in ids)

    def describe(self) -> Message:
        return message("tokenizer.chars", "{n:,} characters", n=self.vocab_size)

    def to_dict(self) -> dict:
        return {"type": "char", "chars": self.chars}

    @classmethod
    def from_dict(cls, data: dict) -> CharTokenizer:
        if not isinstance(data, dict) or data.get("type") != "char" or not isinstance(data.get("chars"), list):
            raise TokenizerError("tokenizer.char_format", "a stored character tokenizer needs the type 'char' and "
                                 "its list of characters")
        return cls(data["chars"])


def byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet, read backwards: printable stand-in character -> byte value.

    Byte-level BPE writes every byte as a printable character (a space is Ġ, a newline Ċ), so merges and
    vocabularies are plain strings; this undoes it.
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in keep]
    table = {chr(b): b for b in keep}
    table.update({chr(256 + n): b for n, b in enumerate(shifted)})
    return table


class BPETokenizer(Tokenizer):
    """Byte-level BPE with Hugging Face `tokenizers`: any text encodes (no unknown characters), and a frequent
    word becomes one token. A token is a byte string, which need not be whole characters."""

    kind = "bpe"

    def __init__(self, hf):
        self.hf = hf
        alphabet = byte_alphabet()
        specials = {t.content for t in hf.get_added_tokens_decoder().values()}
        self._bytes = []
        for i in range(hf.get_vocab_size()):
            token = hf.id_to_token(i)
            if token is None:
                raise TokenizerError("tokenizer.bpe_gap", "the BPE vocabulary has no token with id {id}", id=i)
            if token in specials:
                self._bytes.append(token.encode("utf-8"))
            elif all(c in alphabet for c in token):
                self._bytes.append(bytes(alphabet[c] for c in token))
            else:
                raise TokenizerError("tokenizer.bpe_alphabet", "BPE token {id} ({token!r}) is not written in the "
                                     "byte-level alphabet", id=i, token=token)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        """Learn up to vocab_size tokens (the 256 bytes, <|endoftext|>, then merges) from texts, locally."""
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers, trainers

        check_bpe_vocab(vocab_size)
        hf = HFTokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[END_OF_TEXT], show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        hf.train_from_iterator(texts, trainer)
        return cls(hf)

    @property
    def vocab_size(self) -> int:
        return len(self._bytes)

    def encode(self, text: str) -> list[int]:
        """The ids of text; a long text is encoded in blocks on every core (the same ids as in one piece)."""
        if len(text) <= 1 << 16:
            return self.hf.encode(text, add_special_tokens=False).ids
        return [i for ids in self.encode_batch(list(text_blocks(text))) for i in ids]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """encode of each text, on every core."""
        return [e.ids for e in self.hf.encode_batch(texts, add_special_tokens=False)]

    def token_bytes(self, token_id: int) -> bytes:
        return self._bytes[token_id]

    def describe(self) -> Message:
        return message("tokenizer.bpe", "byte-level BPE of {n:,} tokens", n=self.vocab_size)

    def to_dict(self) -> dict:
        return {"type": "bpe", "json": self.hf.to_str()}

    @classmethod
    def from_dict(cls, data: dict) -> BPETokenizer:
        from tokenizers import Tokenizer as HFTokenizer

        if not isinstance(data, dict) or data.get("type") != "bpe" or not isinstance(data.get("json"), str):
            raise TokenizerError("tokenizer.bpe_format", "a stored BPE tokenizer needs the type 'bpe' and its "
                                 "tokenizers JSON")
        try:
            hf = HFTokenizer.from_str(data["json"])  # parses JSON: no code runs
        except Exception as e:  # tokenizers raises a bare Exception for malformed JSON
            raise TokenizerError("tokenizer.bpe_json", "the BPE tokenizer's JSON cannot be read ({error})",
                                 error=str(e)) from None
        if type(hf.model).__name__ != "BPE" or type(hf.pre_tokenizer).__name__ != "ByteLevel":
            raise TokenizerError("tokenizer.bpe_kind", "only byte-level BPE tokenizers are supported")
        return cls(hf)


SPIECE_SPACE = "▁"  # how a sentencepiece vocabulary writes a space
SPIECE_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # its byte-fallback tokens, one per byte


class HFTokenizer(Tokenizer):
    """The tokenizer a real model ships (gptcore.hub imports it): any Hugging Face `tokenizers` JSON, a byte-level
    BPE (GPT-2, Llama 3, SmolLM2, Qwen) or a sentencepiece-style BPE that writes a space as ▁ and falls back to byte
    tokens <0xNN> (Llama 2, TinyLlama). Each id's bytes come from its spelling, so piece() and display() show the
    text it stands for; special tokens (<|im_end|>) show as written.

    The model's vocabulary may be larger than the tokenizer's (its rows padded to a round number): those ids stand
    for nothing, and their piece is empty. encode adds no BOS: a caller that wants one puts `bos_id` first.
    """

    kind = "hf"

    def __init__(self, hf, vocab_size: int | None = None, bos_id: int | None = None, eos_id: int | None = None,
                 add_bos: bool = False, chat_template: str | None = None):
        self.hf = hf
        # (a component's repr names those inside it: Sequence(pretokenizers=[Digits(...), ByteLevel(...)]))
        self.byte_level = "ByteLevel(" in f"{hf.pre_tokenizer!r} {hf.decoder!r}"
        vocab = hf.get_vocab(with_added_tokens=True)
        added = hf.get_added_tokens_decoder()
        self.own_size = max(vocab.values(), default=-1) + 1  # ids the tokenizer itself spells
        self._vocab_size = self.own_size if vocab_size is None else vocab_size
        if self._vocab_size < self.own_size:
            raise TokenizerError("tokenizer.hf_too_many", "the tokenizer spells {own:,} tokens but the model has "
                                 "only {vocab:,} rows", own=self.own_size, vocab=self._vocab_size)
        self.specials = frozenset(i for i, token in added.items() if token.special)
        self._bytes = [b""] * self.own_size
        alphabet = byte_alphabet()
        for token, i in vocab.items():
            self._bytes[i] = added[i].content.encode("utf-8") if i in added else self._spelled(token, alphabet)
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
            if value is not None and not (isinstance(value, int) and 0 <= value < self._vocab_size):
                raise TokenizerError("tokenizer.hf_special", "{name} must be a token id below {vocab:,}, got "
                                     "{value!r}", name=name, vocab=self._vocab_size, value=value)
        self.bos_id, self.eos_id, self.add_bos, self.chat_template = bos_id, eos_id, bool(add_bos), chat_template

    def _spelled(self, token: str, alphabet: dict[str, int]) -> bytes:
        """The bytes a vocabulary entry stands for, read from how the tokenizer spells it."""
        if self.byte_level:
            if all(c in alphabet for c in token):
                return bytes(alphabet[c] for c in token)
            return token.encode("utf-8")  # a token outside the byte alphabet matches its own text
        if match := SPIECE_BYTE.fullmatch(token):
            return bytes([int(match.group(1), 16)])
        return token.replace(SPIECE_SPACE, " ").encode("utf-8")

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self.hf.decode([int(i) for i in ids if int(i) < self.own_size], skip_special_tokens=False)

    def token_bytes(self, token_id: int) -> bytes:
        return self._bytes[token_id] if token_id < self.own_size else b""

    def ordinary_ids(self) -> list[int]:
        """The ids that stand for text: neither special tokens nor padded rows."""
        return [i for i in range(self.own_size) if i not in self.specials and self._bytes[i]]

    def describe(self) -> Message:
        if self.byte_level:
            return message("tokenizer.hf_bytes", "the model's byte-level BPE of {n:,} tokens", n=self.own_size)
        return message("tokenizer.hf_spiece", "the model's sentencepiece-style BPE of {n:,} tokens", n=self.own_size)

    def to_dict(self) -> dict:
        return {"type": "hf", "json": self.hf.to_str(), "vocab_size": self._vocab_size, "bos_id": self.bos_id,
                "eos_id": self.eos_id, "add_bos": self.add_bos, "chat_template": self.chat_template}

    @classmethod
    def from_dict(cls, data: dict) -> HFTokenizer:
        from tokenizers import Tokenizer as HFTokenizerJSON

        if not isinstance(data, dict) or data.get("type") != "hf" or not isinstance(data.get("json"), str) \
                or not isinstance(data.get("vocab_size"), int) or not isinstance(data.get("add_bos", False), bool) \
                or not isinstance(data.get("chat_template") or "", str):
            raise TokenizerError("tokenizer.hf_format", "a stored model tokenizer needs the type 'hf', its "
                                 "tokenizers JSON and the model's vocabulary size")
        try:
            hf = HFTokenizerJSON.from_str(data["json"])  # parses JSON: no code runs
        except Exception as e:  # tokenizers raises a bare Exception for malformed JSON
            raise TokenizerError("tokenizer.hf_json", "the model tokenizer's JSON cannot be read ({error})",
                                 error=str(e)) from None
        return cls(hf, data["vocab_size"], data.get("bos_id"), data.get("eos_id"), data.get("add_bos", False),
                   data.get("chat_template"))


def check_bpe_vocab(vocab_size) -> None:
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or \
            not BPE_MIN_VOCAB <= vocab_size <= BPE_MAX_VOCAB:
        raise TokenizerError("tokenizer.bpe_vocab", "a BPE vocabulary size must be a whole number from {low} (the "
                             "256 bytes and {special}) to {high:,}, got {value!r}", low=BPE_MIN_VOCAB,
                             special=END_OF_TEXT, high=BPE_MAX_VOCAB, value=vocab_size)


def tokenizer_from_dict(data) -> Tokenizer:
    """Rebuild a tokenizer from its to_dict(); TokenizerError when it cannot be used."""
    kind = data.get("type") if isinstance(data, dict) else None
    if kind == "char":
        return CharTokenizer.from_dict(data)
    if kind == "bpe":
        return BPETokenizer.from_dict(data)
    if kind == "hf":
        return HFTokenizer.from_dict(data)
    raise TokenizerError("tokenizer.unknown_type", "unknown tokenizer type {kind!r} (expected one of {kinds})",
                         kind=kind, kinds=", ".join(STORED_KINDS))


def make_tokenizer(kind: str, text: str, vocab_size: int | None = None) -> Tokenizer:
    """A tokenizer for a corpus: its characters, or a BPE of vocab_size tokens trained on text (pass the
    training split, so validation text stays unseen)."""
    if kind == "char":
        return CharTokenizer.from_text(text)
    if kind == "bpe":
        if vocab_size is None:
            raise TokenizerError("tokenizer.needs_vocab", "a BPE tokenizer needs a vocabulary size (--vocab-size)")
        check_bpe_vocab(vocab_size)
        return BPETokenizer.train(text_blocks(text, 1 << 20), vocab_size)
    raise TokenizerError("tokenizer.unknown_kind", "tokenizer must be one of {kinds}, got {kind!r}",
                         kinds=", ".join(KINDS), kind=kind)


# Where GPT-2's byte-level split always ends a pre-token, so that text cut there encodes to exactly the same
# tokens as the whole: after a newline that a non-space character follows, and before a space that follows a
# non-space character (a space starts the pre-token " word"; no pre-token runs from a non-space into a space).
CUT = re.compile(r"\n(?=\S)")


def last_cut(text: str, start: int, end: int) -> int | None:
    """The last place in text[start:end] where it can be cut without changing its tokens (see CUT): after a
    newline where there is one, else before a space; None when there is neither."""
    stop = end
    while (i := text.rfind("\n", max(0, start), stop)) >= 0:
        if CUT.match(text, i):
            return i + 1
        stop = i
    stop = end
    while (i := text.rfind(" ", max(1, start), stop)) >= 0:
        if not text[i - 1].isspace():
            return i
        stop = i
    return None


def text_blocks(text: str, size: int = 1 << 16) -> Iterator[str]:
    """text in consecutive pieces of about `size` characters, each cut where that changes no token (last_cut),
    so encoding the pieces gives the same tokens as the whole. Only a stretch of size / 2 characters without a
    line break or a space (one pre-token that long) is cut where it must."""
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            end = last_cut(text, start + size // 2, end) or end
        yield text[start:end]
        start = end
