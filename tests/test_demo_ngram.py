"""demos/support/ngram.py, the character n-gram baseline with interpolated Kneser-Ney
smoothing: probabilities worked by hand, normalisation over the vocabulary, its errors, and on
Tiny Shakespeare the trigram figure the generate demo compares against."""
import numpy as np
import pytest
from helpers.data_folder import DATA, needs_data

from demos import generate
from demos.support import ngram
from models import text

SHAKESPEARE = DATA / "tinyshakespeare" / "input.txt"

# --- Kneser-Ney by hand --------------------------------------------------------------------

# "abaab" (a = 0, b = 1), worked by hand. Bigrams: ab twice, ba once, aa once, so the bigram
# discount is n1 / (n1 + 2 n2) = 2 / (2 + 2) = 1/2; after a: 3 bigrams of 2 kinds, after b: 1.
# Continuation counts (distinct characters before): a after {a, b}: 2, b after {a}: 1, total 3;
# the unigram discount is 1 / (1 + 2) = 1/3, and 2 kinds are seen.
UNIGRAM = {0: (2 - 1 / 3) / 3 + (1 / 3) * (2 / 3) / 2,  # 2/3
           1: (1 - 1 / 3) / 3 + (1 / 3) * (2 / 3) / 2}  # 1/3
BIGRAM = {(0, 1): (2 - 1 / 2) / 3 + (1 / 2) * (2 / 3) * UNIGRAM[1],  # 11/18
          (0, 0): (1 - 1 / 2) / 3 + (1 / 2) * (2 / 3) * UNIGRAM[0],  # 7/18
          (1, 0): (1 - 1 / 2) / 1 + (1 / 2) * (1 / 1) * UNIGRAM[0],  # 5/6
          (1, 1): 0 + (1 / 2) * (1 / 1) * UNIGRAM[1]}  # 1/6


def test_kneser_ney_bigram_probabilities_worked_by_hand():
    model = ngram.fit([0, 1, 0, 0, 1], order=2, vocab_size=2)
    assert [table.discount for table in model.orders] == [pytest.approx(1 / 3), 0.5]
    held_out = [0, 1, 1, 0, 0]  # predicts b after a, b after b, a after b, a after a
    expected = [BIGRAM[pair] for pair in zip(held_out, held_out[1:])]
    np.testing.assert_allclose(ngram.probabilities(model, held_out), expected, rtol=1e-12)
    bits = -np.mean(np.log2(expected))
    assert ngram.bits_per_character(model, held_out) == pytest.approx(bits, rel=1e-12)


def test_an_unseen_character_keeps_the_uniform_share_of_the_discount():
    model = ngram.fit([0, 0, 1], order=1, vocab_size=3)  # "aab": c (id 2) never seen
    # counts 2 and 1, so D = 1 / (1 + 2) = 1/3, and P(w) = max(c(w) - D, 0) / 3 + D · 2/3 · 1/V:
    # a gets 5/9 + 2/27, b gets 2/9 + 2/27 and c gets 2/27
    np.testing.assert_allclose(ngram.probabilities(model, [0, 2, 0, 1]),
                               [2 / 27, 17 / 27, 8 / 27], rtol=1e-12)


def test_without_a_count_of_one_the_discount_is_one_half():
    model = ngram.fit([0, 1, 0, 0, 1], order=1, vocab_size=3)  # counts 3 and 2: n1 = 0
    assert model.orders[0].discount == 0.5
    # P(c) = 1/2 · 2/5 · 1/3 = 1/15, P(a) = 2.5 / 5 + 1/15, P(b) = 1.5 / 5 + 1/15
    np.testing.assert_allclose(ngram.probabilities(model, [0, 2, 0, 1]),
                               [1 / 15, 17 / 30, 11 / 30], rtol=1e-12)


def test_a_short_first_context_uses_the_lower_orders():
    trigram = ngram.fit([0, 1, 0, 0, 1], order=3, vocab_size=2)
    # the first prediction has one character before it, so the trigram model answers with its
    # bigram level, which counts continuations: aba, baa, aab make ab, ba, aa once each, so
    # the discount is 1 and P(b | a) = 0 + 1 · 2 / 2 · P_1(b) = 1/3 (P_1 as in UNIGRAM)
    assert ngram.probabilities(trigram, [0, 1])[0] == pytest.approx(1 / 3, rel=1e-12)


@pytest.mark.parametrize("order", [1, 2, 4])
def test_probabilities_over_the_vocabulary_sum_to_one(order):
    rng = np.random.default_rng(order)
    vocab_size = 7
    train_ids = np.minimum(rng.geometric(0.35, size=3000) - 1, vocab_size - 2)  # id 6 unseen
    model = ngram.fit(train_ids, order, vocab_size)
    contexts = [train_ids[100:103], [6, 6, 6], [0, 5, 1], rng.integers(0, vocab_size, 3)]
    for context in contexts:
        rows = [np.append(context, w) for w in range(vocab_size)]
        total = sum(ngram.probabilities(model, row)[-1] for row in rows)
        assert total == pytest.approx(1.0, abs=1e-12), context


@pytest.mark.parametrize("call, message", [
    (lambda: ngram.fit([0, 1, 2], 2, 2), r"ngram.fit: id 2 is outside the vocabulary 0..1"),
    (lambda: ngram.fit([0, 1], 3, 2), r"ngram.fit: 2 ids hold no 3-gram"),
    (lambda: ngram.fit([0, 1], 0, 2), r"ngram.fit: order must be an int >= 1, got 0"),
    (lambda: ngram.fit([0, 1], 10, 100), r"ngram.fit: 10-grams over 100 characters do not fit"),
    (lambda: ngram.fit(np.zeros((2, 3), int), 1, 2), r"ngram.fit: ids must be one integer "
                                                     r"sequence \(N,\), got int64 with shape"),
    (lambda: ngram.bits_per_character(ngram.fit([0, 1], 1, 2), [1]),
     r"ngram.bits_per_character: 1 ids leave nothing to predict"),
])
def test_ngram_errors_name_the_function(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@needs_data
def test_kneser_ney_on_tiny_shakespeare_gives_the_known_trigram_figure():
    corpus = SHAKESPEARE.read_text(encoding="utf-8")
    tokenizer = text.CharTokenizer.from_text(corpus)
    train_ids, held_out_ids = generate.split_text(tokenizer.encode(corpus), 64)
    assert len(held_out_ids) == 111_539
    trigram = ngram.bits_per_character(ngram.fit(train_ids, 3, len(tokenizer)), held_out_ids)
    assert trigram == pytest.approx(2.95, abs=0.01)  # a smoothed trigram's ~2.95 on this split
    fourgram = ngram.bits_per_character(ngram.fit(train_ids, 4, len(tokenizer)), held_out_ids)
    assert fourgram < 2.57  # a simply smoothed 4-gram's ~2.57; Kneser-Ney does better
