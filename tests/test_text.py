"""models.text: the seed's cleaning and word examples, vocabulary selection worked by hand,
both tokenizers (ids, padding, decoding, unknown tokens, special tokens), save / load round
trips byte for byte, and every error."""
import unicodedata

import numpy as np
import pytest

from models import classifier, text


@pytest.mark.parametrize("raw, simple", [
    ("Don't", "dont"),
    ("café", "cafe"),
    ("cafe\u0301", "cafe"),  # already decomposed: e + combining acute
    ("NAÏVE Señor", "naive senor"),
    ("it’s `quoted`", "its quoted"),
    ("end.\nNext,line", "end  next line"),  # one space per character replaced
    ("a\tb_c-d", "a b c d"),
    ("2 × 3 = 6!", "2   3   6 "),
])
def test_simplify_examples(raw, simple):
    assert text.simplify(raw) == simple


def test_simplify_leaves_only_letters_digits_and_spaces():
    raw = "Ünïcödé — “quotes”, ½ dash-ed & 7€\u0085next\u2028line"
    simple = text.simplify(raw)
    assert simple == "unicode    quotes   ½ dash ed   7  next line"  # ½ is a \w digit
    assert all(c == " " or c.isalnum() for c in simple)
    assert not any(unicodedata.combining(c) for c in simple)


def test_words_of_the_seed_example():
    assert text.words("This coffee from Kenya is really good.") == [
        "this", "coffee", "from", "kenya", "is", "really", "good"]


def test_words_skip_one_letter_words_and_keep_numbers():
    assert text.words("I bought a 2nd one in 2019, it's OK.") == [
        "bought", "2nd", "one", "in", "2019", "its", "ok"]


def test_simplify_refuses_a_non_string():
    with pytest.raises(TypeError, match=r"simplify: expected a string, got bytes"):
        text.simplify(b"coffee")


DOCUMENTS = [["good", "coffee", "good"], ["bad", "coffee"], ["good", "tea"], ["coffee", "tea"]]
# document frequencies: coffee 3, good 2, tea 2, bad 1 (good counts once in document 0)


def test_vocabulary_by_document_frequency_ties_alphabetical():
    assert text.select_vocabulary(DOCUMENTS) == ["coffee", "good", "tea", "bad"]
    assert text.select_vocabulary(DOCUMENTS, min_document_frequency=2) == ["coffee", "good", "tea"]
    assert text.select_vocabulary(DOCUMENTS, min_document_frequency=4) == []
    assert text.select_vocabulary(DOCUMENTS, max_size=2) == ["coffee", "good"]
    assert text.select_vocabulary(DOCUMENTS[::-1]) == ["coffee", "good", "tea", "bad"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(min_document_frequency=0), r"min_document_frequency must be an int >= 1, got 0"),
    (dict(min_document_frequency=1.5), r"min_document_frequency must be an int >= 1, got 1.5"),
    (dict(max_size=-1), r"max_size must be None or an int >= 0, got -1"),
])
def test_vocabulary_settings_checked(kwargs, message):
    with pytest.raises(ValueError, match=rf"select_vocabulary: {message}"):
        text.select_vocabulary(DOCUMENTS, **kwargs)


def test_vocabulary_refuses_strings_for_documents():
    with pytest.raises(TypeError, match=r"select_vocabulary: document 1 is a string \('bad "
                                        r"coffee'\); pass lists of words"):
        text.select_vocabulary([["good"], "bad coffee"])


# --- IndexTokenizer -----------------------------------------------------------------------------

def test_index_tokenizer_ids_pad_and_unk_first():
    tok = text.IndexTokenizer(["coffee", "good", "tea"])
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (0, 1, None, None)
    assert len(tok) == 5 and tok.tokens == ("[PAD]", "[UNK]", "coffee", "good", "tea")
    ids = tok.encode(["good", "coffee", "milk", "tea"])
    assert ids.dtype == np.int64 and ids.tolist() == [3, 2, 1, 4]
    assert tok.encode([]).tolist() == []
    assert repr(tok) == "IndexTokenizer(5 tokens, pad='[PAD]', unk='[UNK]')"


def test_encode_batch_pads_to_the_longest_or_to_max_len():
    tok = text.IndexTokenizer(["coffee", "good", "tea"])
    batch = [["good", "tea"], ["coffee"], ["tea", "good", "coffee", "milk"]]
    assert tok.encode_batch(batch).tolist() == [[3, 4, 0, 0], [2, 0, 0, 0], [4, 3, 2, 1]]
    assert tok.encode_batch(batch, max_len=3).tolist() == [[3, 4, 0], [2, 0, 0], [4, 3, 2]]
    assert tok.encode_batch(batch, max_len=6)[2].tolist() == [4, 3, 2, 1, 0, 0]
    assert tok.encode_batch([], max_len=3).shape == (0, 3)


def test_encode_batch_is_what_the_classifier_takes():
    """max_len=50 fits pool='flatten'; with pool='mean' the pad id is left out of the mean,
    so a review's logits do not depend on how much padding follows it."""
    documents = [text.words(s) for s in ["Really good coffee.", "Bad tea, bad milk, bad."]]
    tok = text.IndexTokenizer(text.select_vocabulary(documents))
    rng = np.random.default_rng(0)
    flat = classifier.init(rng, len(tok), 2, d_model=8, n_heads=2, d_ff=16, max_len=50)
    assert classifier.apply(flat, tok.encode_batch(documents, max_len=50)).shape == (2, 2)
    mean = classifier.init(rng, len(tok), 2, d_model=8, n_heads=2, d_ff=16, max_len=50,
                           pool="mean", pad=tok.pad_id)
    padded = classifier.apply(mean, tok.encode_batch(documents, max_len=9))  # (2, 2)
    alone = classifier.apply(mean, tok.encode_batch(documents[:1]))  # (1, 2), 3 tokens, no pad
    np.testing.assert_allclose(padded[0], alone[0], rtol=1e-5)


def test_decode_drops_pads_and_maps_back():
    tok = text.IndexTokenizer(["coffee", "good", "tea"])
    assert tok.decode([3, 1, 2, 0, 0]) == ["good", "[UNK]", "coffee"]
    assert tok.decode(np.array([[3, 4, 0], [2, 0, 0]])) == [["good", "tea"], ["coffee"]]


def test_bos_and_eos_for_sequence_to_sequence():
    tok = text.IndexTokenizer(["hallo", "welt"], bos="[BOS]", eos="[EOS]")
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (0, 1, 2, 3)
    assert tok.encode(["welt", "[EOS]"]).tolist() == [5, 3]
    assert tok.decode([2, 4, 5, 3, 0]) == ["[BOS]", "hallo", "welt", "[EOS]"]


def test_without_unk_an_unknown_word_is_an_error():
    tok = text.IndexTokenizer(["coffee"], unk=None)
    assert tok.unk_id is None and tok.tokens == ("[PAD]", "coffee")
    with pytest.raises(ValueError, match=r"IndexTokenizer.encode: word 'tea' at position 1 is "
                                         r"not in the vocabulary of 2 tokens and there is no unk"):
        tok.encode(["coffee", "tea"])


@pytest.mark.parametrize("vocab, kwargs, message", [
    (["good", "tea", "good"], {}, r"token 'good' appears twice \(ids 2 and 4\)"),
    (["good", "[UNK]"], {}, r"token '\[UNK\]' appears twice \(ids 1 and 3\)"),
    (["good", ""], {}, r"token 3 must be a non-empty string, got ''"),
    (["good", 7], {}, r"token 3 must be a non-empty string, got 7"),
    (["good"], dict(pad="[X]", unk="[X]"), r"token '\[X\]' appears twice \(ids 0 and 1\)"),
])
def test_index_tokenizer_refuses_bad_vocabularies(vocab, kwargs, message):
    with pytest.raises(ValueError, match=rf"IndexTokenizer: {message}"):
        text.IndexTokenizer(vocab, **kwargs)


def test_index_tokenizer_errors():
    tok = text.IndexTokenizer(["coffee"])
    with pytest.raises(TypeError, match=r"IndexTokenizer.encode: got a string \('good coffee'\); "
                                        r"pass its words, e.g. text.words\(s\)"):
        tok.encode("good coffee")
    with pytest.raises(ValueError, match=r"IndexTokenizer.decode: id 3 is outside the "
                                         r"vocabulary 0..2"):
        tok.decode([2, 3])
    with pytest.raises(ValueError, match=r"IndexTokenizer.decode: id -1 is outside"):
        tok.decode([-1])
    with pytest.raises(ValueError, match=r"IndexTokenizer.decode: expected integer ids \(N,\) "
                                         r"or \(B, N\), got float64 with shape \(2,\)"):
        tok.decode([2.0, 1.0])
    with pytest.raises(ValueError, match=r"IndexTokenizer.encode_batch: max_len must be None or "
                                         r"an int >= 1, got 0"):
        tok.encode_batch([["coffee"]], max_len=0)
    with pytest.raises(ValueError, match=r"IndexTokenizer.encode_batch: this tokenizer has no "
                                         r"pad token"):
        text.IndexTokenizer(["coffee"], pad=None).encode_batch([["coffee"]])


def test_split_lines_breaks_at_newlines_only():
    assert text.split_lines("a\u0085b\u2028c\r\nd\n\ne\n") == ["a\u0085b\u2028c\r", "d", "", "e"]
    assert text.split_lines("no newline") == ["no newline"] and text.split_lines("") == []


def test_pad_sequences_and_its_errors():
    assert text.pad_sequences([[5, 6, 7], [8]], 0).tolist() == [[5, 6, 7], [8, 0, 0]]
    assert text.pad_sequences([[5, 6, 7], [8, 9, 9]], None, 2).tolist() == [[5, 6], [8, 9]]
    with pytest.raises(ValueError, match=r"pad_sequences: sequence 1 has 1 ids, fewer than 3, "
                                         r"and there is no pad id"):
        text.pad_sequences([[5, 6, 7], [8]], None)
    with pytest.raises(ValueError, match=r"pad_sequences: sequence 0 must be integer ids \(N,\), "
                                         r"got float64 with shape \(2,\)"):
        text.pad_sequences([[5.0, 6.5]], 0)


# --- save and load ------------------------------------------------------------------------------

def test_save_writes_one_token_per_line_and_load_restores_it(tmp_path):
    tok = text.IndexTokenizer(["coffee", "café", "a\u0085b"], bos="[BOS]")
    tok.save(tmp_path / "vocab.txt")
    raw = (tmp_path / "vocab.txt").read_bytes().decode("utf-8")
    assert raw == "[PAD]\n[UNK]\n[BOS]\ncoffee\ncafé\na\u0085b\n"
    loaded = text.IndexTokenizer.load(tmp_path / "vocab.txt", bos="[BOS]")
    assert loaded.tokens == tok.tokens and loaded.bos_id == 2
    words = ["café", "tea", "a\u0085b"]
    assert loaded.encode(words).tolist() == tok.encode(words).tolist() == [4, 1, 5]


def test_a_plain_word_list_loads_with_the_specials_it_starts_with(tmp_path):
    (tmp_path / "vocab.txt").write_text("<pad>\n<unk>\nthe\nand\n", encoding="utf-8")
    tok = text.IndexTokenizer.load(tmp_path / "vocab.txt", unk="<unk>", pad="<pad>")
    assert tok.tokens == ("<pad>", "<unk>", "the", "and") and tok.unk_id == 1


def test_load_refuses_a_file_without_the_special_tokens_asked_for(tmp_path):
    text.IndexTokenizer(["coffee"], unk="<unk>", pad="<pad>").save(tmp_path / "vocab.txt")
    with pytest.raises(ValueError, match=r"IndexTokenizer.load: .*vocab.txt starts with "
                                         r"\['<pad>', '<unk>'\], not with the special tokens "
                                         r"\['\[PAD\]', '\[UNK\]'\]; pass the pad=, unk="):
        text.IndexTokenizer.load(tmp_path / "vocab.txt")


@pytest.mark.parametrize("content, message", [
    ("", r"vocab.txt is empty"),
    ("[PAD]\n[UNK]\nbad\\tescape\n", r"vocab.txt, line 3: 'bad\\\\tescape' holds a backslash "
                                     r"that is neither"),
])
def test_load_names_the_file_and_line(tmp_path, content, message):
    (tmp_path / "vocab.txt").write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"IndexTokenizer.load: .*{message}"):
        text.IndexTokenizer.load(tmp_path / "vocab.txt")


# --- CharTokenizer ------------------------------------------------------------------------------

CORPUS = "First Citizen:\nBefore we proceed, hear me.\r\n\\o/"


def test_char_tokenizer_from_text_in_code_point_order():
    tok = text.CharTokenizer.from_text(CORPUS)
    assert tok.tokens == tuple(sorted(set(CORPUS))) and tok.tokens[:3] == ("\n", "\r", " ")
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (None, None, None, None)
    ids = tok.encode(CORPUS)
    assert ids.dtype == np.int64 and len(ids) == len(CORPUS)
    assert [tok.tokens[i] for i in ids] == list(CORPUS)
    assert tok.decode(ids) == CORPUS


def test_char_tokenizer_unseen_character_is_an_error_or_unk():
    with pytest.raises(ValueError, match=r"CharTokenizer.encode: character 'x' at position 2 is "
                                         r"not in the vocabulary of \d+ tokens and there is no "
                                         r"unk token \(build the tokenizer with unk=\.\.\."):
        text.CharTokenizer.from_text(CORPUS).encode("Fix")
    tok = text.CharTokenizer.from_text(CORPUS, unk="?")
    assert tok.unk_id == 0 and tok.encode("Fix").tolist() == [tok.ids["F"], tok.ids["i"], 0]


def test_char_tokenizer_special_tokens_for_sequence_to_sequence():
    tok = text.CharTokenizer.from_text("abc", pad="[PAD]", bos="[BOS]", eos="[EOS]")
    assert tok.tokens == ("[PAD]", "[BOS]", "[EOS]", "a", "b", "c")
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (0, None, 1, 2)
    assert tok.encode_batch(["cab", "a"]).tolist() == [[5, 3, 4], [3, 0, 0]]
    assert tok.decode([[1, 5, 3, 2], [1, 3, 0, 0]]) == ["[BOS]ca[EOS]", "[BOS]a"]


def test_char_tokenizer_save_escapes_newlines_and_backslashes(tmp_path):
    tok = text.CharTokenizer.from_text(CORPUS, eos="[EOS]")
    tok.save(tmp_path / "chars.txt")
    lines = (tmp_path / "chars.txt").read_bytes().decode("utf-8").split("\n")
    assert lines[:4] == ["[EOS]", "\\n", "\r", " "] and "\\\\" in lines and lines[-1] == ""
    loaded = text.CharTokenizer.load(tmp_path / "chars.txt", eos="[EOS]")
    assert loaded.tokens == tok.tokens
    assert loaded.decode(loaded.encode(CORPUS)) == CORPUS


@pytest.mark.parametrize("make, message", [
    (lambda: text.CharTokenizer.from_text("ab<", bos="<"), r"CharTokenizer: token '<' appears "
                                                           r"twice \(ids 0 and 1\)"),
    (lambda: text.CharTokenizer(["a", "bc"]), r"CharTokenizer: 'bc' is not one character "
                                              r"\(if it is a special token, pass it"),
    (lambda: text.CharTokenizer.from_text(""), r"CharTokenizer.from_text: expected a non-empty "
                                               r"string, got str of length 0"),
])
def test_char_tokenizer_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_char_tokenizer_encode_refuses_a_list():
    with pytest.raises(TypeError, match=r"CharTokenizer.encode: expected a string, got list"):
        text.CharTokenizer.from_text("ab").encode(["a", "b"])
