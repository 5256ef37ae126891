"""GPT-2's byte-level BPE (models/inputs/bpe.py) against transformers' GPT2Tokenizer, both
loaded from one tiny vocab.json and merges.txt written here (the 256 byte symbols, merges
learnt from a small text by counting pairs, "<|endoftext|>"): the same ids on a text with
unicode, runs of spaces, newlines, numbers and contractions, and decoding back to the text."""
import collections
import json

import pytest

from conftest import missing

TEXT = ("Hello world! It's the   end\n\nof the line, isn't it?\tNaïve café: 日本語 😀 costs "
        "€12.50 -- they'll say 'hello' again.\r\n  Spaces  and\n  the end. ")
CORPUS = "the end of the line: hello hello world, the cat's hat. " * 3 + TEXT


@pytest.fixture(scope="module")
def bpe():
    try:
        import regex  # noqa: F401
    except ImportError:
        missing("TRANSFORMERS", "regex is not installed (the gpt2 extra)")
    from models.inputs import bpe as module
    return module


def learnt_merges(bpe, corpus, n):
    """n merges learnt as BPE learns them: in each pre-token's symbols, the most frequent
    adjacent pair (ties: the first seen) is joined, n times."""
    import regex
    table = bpe.byte_characters()
    words = collections.Counter(tuple(table[b] for b in piece.encode("utf-8"))
                                for piece in regex.findall(bpe.PATTERN, corpus))
    merges = []
    for _ in range(n):
        pairs = collections.Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=pairs.__getitem__)
        merges.append(best)
        words = collections.Counter({tuple(bpe.merged(word, {best: 0})): count
                                     for word, count in words.items()})
    return merges


@pytest.fixture(scope="module")
def files(bpe, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    merges = learnt_merges(bpe, CORPUS, 40)
    symbols = list(bpe.byte_characters().values()) + [a + b for a, b in merges]
    vocab = {s: i for i, s in enumerate(dict.fromkeys(symbols))}
    vocab[bpe.END_OF_TEXT] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(f"{a} {b}" for a, b
                                                                      in merges) + "\n",
                                       encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def reference(files):
    try:
        import transformers
    except ImportError:
        missing("TRANSFORMERS", "transformers is not installed (pip install transformers)")
    return transformers.GPT2Tokenizer.from_pretrained(files)


def test_encoding_equals_gpt2_tokenizer_and_decoding_gives_the_text(bpe, files, reference):
    ours = bpe.GPT2Tokenizer.load(files)
    ids = ours.encode(TEXT)
    assert ids == reference.encode(TEXT)
    assert len(ids) < len(TEXT.encode("utf-8"))  # merges were applied
    assert ours.decode(ids) == TEXT == reference.decode(ids)
    assert len(ours) == len(reference)


def test_end_of_text_is_one_id_and_decodes_back(bpe, files, reference):
    ours = bpe.GPT2Tokenizer.load(files)
    text = "the end<|endoftext|>hello"
    ids = ours.encode(text)
    assert ids.count(ours.end_of_text) == 1
    assert ids == reference.encode(text)
    assert ours.decode(ids) == text


def test_a_cut_character_decodes_to_the_replacement_character(bpe, files):
    ours = bpe.GPT2Tokenizer.load(files)
    ids = ours.encode("日")
    assert len(ids) == 3 and ours.decode(ids[:2]) == "\ufffd"


def test_merges_are_applied_lowest_rank_first(bpe):
    ranks = {("b", "c"): 0, ("a", "b"): 1, ("a", "bc"): 2}
    assert bpe.merged(list("abcab"), ranks) == ["abc", "ab"]
    assert bpe.merged(list("aaaa"), {("a", "a"): 0}) == ["aa", "aa"]
