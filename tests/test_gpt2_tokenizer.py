"""GPT-2's byte-level BPE (models/inputs/bpe.py) against transformers' GPT2Tokenizer, both
loaded from one tiny vocab.json and merges.txt written here (the 256 byte symbols, merges
learnt from a small text by counting pairs, "<|endoftext|>"): the same ids on a text with
unicode, runs of spaces, newlines, numbers and contractions, and decoding back to the text."""
import pytest

from conftest import missing
from helpers.gpt2_files import write_bpe_files

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


@pytest.fixture(scope="module")
def files(bpe, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    write_bpe_files(folder, CORPUS, 40)
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
