"""From raw text to token ids and back: the cleaning and word splitting of the Julia posts'
seed (`simplify`, `words`), a vocabulary chosen by document frequency, and two tokenizers,
`IndexTokenizer` over words (the review classifier) and `CharTokenizer` over characters
(the language model).

    documents = [text.words(t) for t in texts]
    tok = text.IndexTokenizer(text.select_vocabulary(documents, min_document_frequency=5))
    ids = tok.encode_batch(documents, max_len=50)      # (B, 50) int64, what classifier.apply takes

Both tokenizers put their special tokens first, in the order pad, unk, bos, eos (those
given), and the vocabulary after them in its order: with the defaults of IndexTokenizer,
[PAD] is id 0 and [UNK] id 1. `save` writes every token in id order, one a line, so that
id i is on line i + 1; `load` checks the special tokens are where they were saved.
"""
import numbers
import re
import unicodedata
from collections import Counter

import numpy as np

from autograd_lite.io.atomic import write_atomically

WORD = re.compile(r"\w\w+")
APOSTROPHES = str.maketrans("", "", "'`\u2019\u02bc")  # ' ` ’ ʼ are removed: "don't" -> "dont"
NOT_WORD = re.compile(r"[^\w ]|_")  # punctuation, symbols, newlines, tabs: each becomes a space
SPECIAL_ROLES = ("pad", "unk", "bos", "eos")


def simplify(s):
    """Lowercase; Unicode NFD with the combining marks removed ("café" -> "cafe"); apostrophes
    removed ("Don't" -> "dont"); every other character that is neither a letter, a digit nor a
    space becomes a space (one for one: runs of spaces are left for `words` to skip)."""
    if not isinstance(s, str):
        raise TypeError(f"simplify: expected a string, got {type(s).__name__}")
    s = s.lower()
    if not s.isascii():  # ASCII has no combining marks: skip the per-character pass
        s = "".join(c for c in unicodedata.normalize("NFD", s)
                    if not unicodedata.category(c).startswith("M"))
    return NOT_WORD.sub(" ", s.translate(APOSTROPHES))


def words(s):
    """The words of simplify(s): runs of two or more letters or digits (the pattern \\w\\w+),
    so one-letter words such as "a" and "I" are left out."""
    return WORD.findall(simplify(s))


def check_count(caller, name, value, least, optional=False):
    """A ValueError naming the caller and the argument unless value is an int >= least (or
    None, when optional)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise ValueError(f"{caller}: {name} must be {'None or ' if optional else ''}an int >= "
                         f"{least}, got {value!r}")


def select_vocabulary(documents, min_document_frequency=1, max_size=None):
    """The words found in at least `min_document_frequency` of `documents` (lists of words),
    most frequent first, ties in alphabetical order; the first `max_size` of them if given.
    A word counts once per document however often it appears there."""
    check_count("select_vocabulary", "min_document_frequency", min_document_frequency, 1)
    check_count("select_vocabulary", "max_size", max_size, 0, optional=True)
    frequency = Counter()
    for i, document in enumerate(documents):
        if isinstance(document, str):
            raise TypeError(f"select_vocabulary: document {i} is a string ({document[:40]!r}); "
                            f"pass lists of words, e.g. [text.words(d) for d in texts]")
        frequency.update(set(document))
    kept = [w for w, n in frequency.items() if n >= min_document_frequency]
    return sorted(kept, key=lambda w: (-frequency[w], w))[:max_size]


def pad_sequences(sequences, pad_id, length=None):
    """Rows of ids (B, T) int64 from B sequences of ids: T = `length` if given (longer
    sequences are cut to their first T ids), else the longest; shorter rows end in pad_id."""
    rows = [np.asarray(s) for s in sequences]
    for i, r in enumerate(rows):
        if r.ndim != 1 or (r.size and r.dtype.kind not in "iu"):
            raise ValueError(f"pad_sequences: sequence {i} must be integer ids (N,), got "
                             f"{r.dtype} with shape {r.shape}")
    check_count("pad_sequences", "length", length, 0, optional=True)
    if length is None:
        length = max((len(r) for r in rows), default=0)
    short = [i for i, r in enumerate(rows) if len(r) < length]
    if short and pad_id is None:
        raise ValueError(f"pad_sequences: sequence {short[0]} has {len(rows[short[0]])} ids, "
                         f"fewer than {length}, and there is no pad id to fill it")
    out = np.full((len(rows), length), 0 if pad_id is None else pad_id, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, :min(len(r), length)] = r[:length]
    return out


def split_lines(s):
    """The lines of s, split on "\\n" only (str.splitlines also breaks at U+0085, U+2028, ...);
    the newline that ends the last line does not start another."""
    lines = s.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def escape_line(token):
    """A token on one line of a saved vocabulary: backslash -> \\\\, newline -> \\n."""
    return token.replace("\\", "\\\\").replace("\n", "\\n")


def unescape_line(line, where):
    """escape_line's inverse; `where` names the file and line in the error."""
    if re.search(r"\\([^\\n]|$)", line.replace("\\\\", "")):
        raise ValueError(f"{where}: {line!r} holds a backslash that is neither \\\\ nor \\n")
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else "\\", line)


class Tokenizer:
    """Tokens and their ids, shared by IndexTokenizer and CharTokenizer: special tokens first
    (pad, unk, bos, eos: those not None), then `vocab` in its order; a special token inside
    `vocab` is an error. `pad_id`, `unk_id`, `bos_id`, `eos_id` are None for a role without
    a token."""

    def __init__(self, vocab, pad, unk, bos, eos):
        name = type(self).__name__
        roles = {role: t for role, t in zip(SPECIAL_ROLES, (pad, unk, bos, eos)) if t is not None}
        self.tokens = tuple(roles.values()) + tuple(vocab)
        self.ids = {}
        for i, token in enumerate(self.tokens):
            if not isinstance(token, str) or token == "":
                raise ValueError(f"{name}: token {i} must be a non-empty string, got {token!r}")
            if token in self.ids:
                raise ValueError(f"{name}: token {token!r} appears twice (ids {self.ids[token]} "
                                 f"and {i}); special tokens are {roles}")
            self.ids[token] = i
        for role in SPECIAL_ROLES:
            setattr(self, f"{role}_id", self.ids[roles[role]] if role in roles else None)

    def __len__(self):
        return len(self.tokens)

    def __repr__(self):
        specials = ", ".join(f"{role}={self.tokens[i]!r}" for role in SPECIAL_ROLES
                             if (i := getattr(self, f"{role}_id")) is not None)
        return f"{type(self).__name__}({len(self)} tokens, {specials})"

    def lookup(self, tokens, kind):
        """Ids (N,) int64 of `tokens`; one not in the vocabulary gets unk_id, or, without an
        unk token, an error naming it and its position (`kind` names what a token is)."""
        ids = [self.ids.get(t, self.unk_id) for t in tokens]
        if self.unk_id is None and None in ids:
            i = ids.index(None)
            raise ValueError(f"{type(self).__name__}.encode: {kind} {tokens[i]!r} at position "
                             f"{i} is not in the vocabulary of {len(self)} tokens and there is "
                             f"no unk token (build the tokenizer with unk=... to map it there)")
        return np.array(ids, dtype=np.int64)

    def encode_batch(self, batch, max_len=None):
        """Ids (B, T) int64 of B inputs to `encode`, padded with pad_id to the longest, or to
        exactly max_len, cutting longer ones to their first max_len tokens (as the seed does)."""
        name = f"{type(self).__name__}.encode_batch"
        if self.pad_id is None:
            raise ValueError(f"{name}: this tokenizer has no pad token (pad=None)")
        check_count(name, "max_len", max_len, 1, optional=True)
        return pad_sequences([self.encode(x) for x in batch], self.pad_id, max_len)

    def tokens_of(self, ids):
        """The tokens of ids (N,), pads left out."""
        name = f"{type(self).__name__}.decode"
        ids = np.asarray(ids)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise ValueError(f"{name}: expected integer ids (N,) or (B, N), got {ids.dtype} "
                             f"with shape {ids.shape}")
        outside = (ids < 0) | (ids >= len(self))
        if outside.any():
            raise ValueError(f"{name}: id {ids[outside][0]} is outside the vocabulary "
                             f"0..{len(self) - 1}")
        return [self.tokens[i] for i in ids.tolist() if i != self.pad_id]

    def decode(self, ids):
        """ids (N,) -> one decoded sequence (what the subclass's `join` makes of its tokens: a
        list of words, a string); ids (B, N) -> a list of B of them. Pads dropped."""
        ids = np.asarray(ids)
        if ids.ndim == 2:
            return [self.join(self.tokens_of(row)) for row in ids]
        return self.join(self.tokens_of(ids))

    def save(self, path):
        """A text file (UTF-8) with every token in id order, one a line; a backslash or a
        newline inside a token is written as \\\\ or \\n."""
        write_atomically(path, lambda f: f.write("".join(escape_line(t) + "\n"
                                                         for t in self.tokens)),
                         mode="w", caller=f"{type(self).__name__}.save", encoding="utf-8",
                         newline="")

    @classmethod
    def load(cls, path, **specials):
        """The tokenizer `save` wrote; pass the special tokens it was built with if they are
        not the defaults."""
        name = f"{cls.__name__}.load"
        with open(path, encoding="utf-8", newline="") as f:
            lines = split_lines(f.read())
        if not lines:
            raise ValueError(f"{name}: {path} is empty")
        tokens = [unescape_line(line, f"{name}: {path}, line {n}")
                  for n, line in enumerate(lines, 1)]
        expected = list(cls([], **specials).tokens)  # the special tokens alone, in id order
        if tokens[:len(expected)] != expected:
            raise ValueError(f"{name}: {path} starts with {tokens[:len(expected)]}, not with "
                             f"the special tokens {expected}; pass the pad=, unk=, bos=, eos= "
                             f"it was saved with")
        return cls(tokens[len(expected):], **specials)


class IndexTokenizer(Tokenizer):
    """Words to ids: [PAD] is 0, [UNK] is 1 (any word not in `vocab`), then `vocab`.
    bos and eos, if given, add the tokens that sequence-to-sequence targets start and end with."""

    def __init__(self, vocab, unk="[UNK]", pad="[PAD]", bos=None, eos=None):
        super().__init__(vocab, pad, unk, bos, eos)

    def encode(self, words):
        """Ids (N,) int64 of a list of N words (e.g. text.words(s))."""
        if isinstance(words, str):
            raise TypeError(f"IndexTokenizer.encode: got a string ({words[:40]!r}); pass its "
                            f"words, e.g. text.words(s)")
        return self.lookup(list(words), "word")

    @staticmethod
    def join(tokens):
        return tokens


class CharTokenizer(Tokenizer):
    """Characters to ids, for a character language model: special tokens (none by default)
    then the characters. A character not in the vocabulary is an error naming it, or, with
    unk=..., gets the unk id."""

    def __init__(self, chars, unk=None, pad=None, bos=None, eos=None):
        chars = list(chars)
        super().__init__(chars, pad, unk, bos, eos)
        long = [t for t in self.tokens[len(self) - len(chars):] if len(t) != 1]
        if long:
            raise ValueError(f"CharTokenizer: {long[0]!r} is not one character (if it is a "
                             f"special token, pass it as pad=, unk=, bos= or eos=)")

    @classmethod
    def from_text(cls, text, unk=None, pad=None, bos=None, eos=None):
        """The distinct characters of `text` in code-point order, after the special tokens."""
        if not isinstance(text, str) or not text:
            raise ValueError(f"CharTokenizer.from_text: expected a non-empty string, got "
                             f"{type(text).__name__} of length {len(text)}")
        return cls(sorted(set(text)), unk, pad, bos, eos)

    def encode(self, s):
        """Ids (N,) int64 of the N characters of the string s."""
        if not isinstance(s, str):
            raise TypeError(f"CharTokenizer.encode: expected a string, got {type(s).__name__}")
        return self.lookup(s, "character")

    @staticmethod
    def join(tokens):
        return "".join(tokens)
