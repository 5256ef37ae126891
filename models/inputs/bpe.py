"""GPT-2's tokenizer: byte-level byte-pair encoding (Radford et al. 2019; BPE of Sennrich et
al. 2016) from the user's vocab.json and merges.txt, written out here rather than taken from
a library: the whole algorithm is this page, and a reader sees how GPT-2 turns text into ids.
It needs `regex` (the `gpt2` extra) for GPT-2's pre-tokenizing pattern, whose \\p{L} and
\\p{N} (any letter, any number) Python's `re` lacks.

    tok = bpe.GPT2Tokenizer.load("gpt2-folder")   # vocab.json, merges.txt
    ids = tok.encode("Hello world")               # [15496, 995] with GPT-2's files
    tok.decode(ids) == "Hello world"

Encoding, in three steps:
1. the text is split into pieces by PATTERN (contractions, a word with the space before it,
   a number, a run of punctuation, whitespace), so no merge crosses a word's edge;
2. each piece's UTF-8 bytes become printable characters, one per byte (byte_characters):
   every text is representable, with no unknown token;
3. in each piece, the adjacent pair of symbols ranked first in merges.txt is joined, wherever
   it occurs, until no pair of the piece is in merges.txt; each symbol left is a vocab entry.
Decoding joins the symbols' characters, maps them back to bytes and reads those as UTF-8.
The special token "<|endoftext|>" in a text is its own id, never split.
"""
import functools
import json
import os

PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"


@functools.lru_cache(maxsize=None)
def byte_characters():
    """GPT-2's map of the 256 byte values to printable characters: the printable ASCII and
    Latin-1 bytes stand for themselves, the others (control bytes, space, ...) take the
    characters from chr(256) on, in order (so a space is "Ġ", a newline "Ċ")."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    table = {b: chr(b) for b in printable}
    table.update({b: chr(256 + n) for n, b in enumerate(others)})
    return table


def merged(symbols, ranks):
    """Apply the merges to one piece's symbols, lowest rank first: the pair (a, b) ranked
    first among the adjacent pairs becomes ab at every place it occurs, until no adjacent
    pair has a rank. -> the symbols left"""
    symbols = list(symbols)
    while len(symbols) > 1:
        pairs = {(a, b) for a, b in zip(symbols, symbols[1:]) if (a, b) in ranks}
        if not pairs:
            return symbols
        first = min(pairs, key=ranks.__getitem__)
        joined, i = [], 0
        while i < len(symbols):
            if tuple(symbols[i:i + 2]) == first:
                joined.append(symbols[i] + symbols[i + 1])
                i += 2
            else:
                joined.append(symbols[i])
                i += 1
        symbols = joined
    return symbols


class GPT2Tokenizer:
    """Text <-> GPT-2 token ids, from vocab (symbol -> id) and merges ([(a, b), ...], in
    rank order)."""

    def __init__(self, vocab, merges):
        import regex  # the `gpt2` extra
        self.vocab = dict(vocab)
        self.symbols = {i: s for s, i in self.vocab.items()}
        self.ranks = {tuple(pair): rank for rank, pair in enumerate(merges)}
        self.pattern = regex.compile(PATTERN)
        self.bytes_of = {c: b for b, c in byte_characters().items()}
        self.cache = {}

    @classmethod
    def load(cls, directory):
        """From directory/vocab.json and directory/merges.txt (its '#version' line skipped)."""
        with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as fh:
            vocab = json.load(fh)
        with open(os.path.join(directory, "merges.txt"), encoding="utf-8") as fh:
            merges = [tuple(line.split()) for line in fh.read().split("\n")
                      if line and not line.startswith("#version")]
        return cls(vocab, merges)

    def __len__(self):
        return len(self.vocab)

    @property
    def end_of_text(self):
        """The id of "<|endoftext|>", or None where the vocabulary has none."""
        return self.vocab.get(END_OF_TEXT)

    def encode(self, text):
        """str -> list of ids."""
        ids = []
        for n, part in enumerate(text.split(END_OF_TEXT) if self.end_of_text is not None
                                 else [text]):
            if n:
                ids.append(self.end_of_text)
            for piece in self.pattern.findall(part):
                ids.extend(self.piece_ids(piece))
        return ids

    def piece_ids(self, piece):
        """The ids of one pre-token piece (cached: a text repeats its words)."""
        if piece not in self.cache:
            table = byte_characters()
            symbols = merged([table[b] for b in piece.encode("utf-8")], self.ranks)
            unknown = [s for s in symbols if s not in self.vocab]
            if unknown:
                raise ValueError(f"GPT2Tokenizer: merges.txt makes {unknown[0]!r}, which "
                                 f"vocab.json does not hold")
            self.cache[piece] = [self.vocab[s] for s in symbols]
        return self.cache[piece]

    def decode(self, ids):
        """list of ids -> str; bytes that are not UTF-8 (a cut character) read as U+FFFD."""
        characters = "".join(self.symbols[int(i)] for i in ids)
        special = characters.split(END_OF_TEXT)
        return END_OF_TEXT.join(bytes(self.bytes_of[c] for c in part).decode("utf-8", "replace")
                                for part in special)
