"""models.decoding, the model-free searches, over a step function whose logits are a fixed
table lookup of the whole prefix: greedy against the argmax of each prefix, beam search
against exhaustive search and a plain reference search, sampling against exact
frequencies; sample_next on fixed logits. The models' steps are tested with their models
(test_transformer_decoding.py, test_lm.py)."""
import itertools
from typing import NamedTuple

import numpy as np
import pytest

from models import decoding
from helpers.search import (assert_only_eos_after_eos, exhaustive_search,
                            reference_beam_search, repeats_an_ngram, score)

V, EOS, MAX_LEN = 5, 2, 8
_table_rng = np.random.default_rng(11)  # greedy's rows end after 4 tokens, 1, and never
LAST = 1.5 * _table_rng.standard_normal((V, V))  # logits by the prefix's last token
HISTORY = 1.5 * _table_rng.standard_normal((V, V))  # by the sum of all its tokens, mod V
POSITION = 0.5 * _table_rng.standard_normal((MAX_LEN + 1, V))  # by the prefix's length
PREFIXES = np.array([[0, 3], [4, 4], [1, 0]])  # (N, T_0)
EVERY_PAIR = np.array(list(itertools.product(range(V), repeat=2)))  # (V², 2) prefixes


def table_logits(prefixes):
    """The next-token logits of each whole prefix: a state that lost a token of its history
    gives other logits.  (N, T) -> (N, V)"""
    history = prefixes.sum(axis=1) % V  # (N,)
    return LAST[prefixes[:, -1]] + HISTORY[history] + POSITION[prefixes.shape[1]]


def table_step(seen, tokens):
    """A step function: the state is the tokens seen so far, (N, T)."""
    seen = np.concatenate([seen, tokens], axis=1)  # (N, T + t)
    return table_logits(seen), seen


def empty_state(n_rows):
    return np.zeros((n_rows, 0), dtype=np.int64)


def next_log_probs(tokens):
    """The reference searches' view: log softmax of the table, written out in numpy."""
    z = table_logits(np.array([tokens]))[0]  # (V,)
    return z - z.max() - np.log(np.exp(z - z.max()).sum())


def test_greedy_picks_the_argmax_of_each_whole_prefix():
    for eos in (EOS, None):
        ids = decoding.greedy(table_step, empty_state(3), PREFIXES, MAX_LEN, eos)
        for row in ids:
            tokens = list(row[:2])
            while len(tokens) < MAX_LEN and eos not in tokens[2:]:
                tokens.append(int(np.argmax(next_log_probs(tokens))))
            n = len(tokens)
            assert row[:n].tolist() == tokens and (row[n:] == eos).all()
        assert ids.dtype == np.int64 and ids.shape[1] <= MAX_LEN
        assert ids.shape[1] == MAX_LEN or (ids[:, 2:] == eos).any(axis=1).all()
    assert ids.shape == (3, MAX_LEN)  # without eos every row runs to max_len


@pytest.mark.parametrize("eos", [EOS, None])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_search_with_a_wide_beam_is_the_exact_optimum(alpha, eos):
    """A beam as wide as the number of paths (V^3 for three new tokens) prunes nothing, and
    the early stop must not cut off anything better: the result is the best of every
    complete continuation, enumerated."""
    max_len = 5
    ids, scores = decoding.beam_search(table_step, decoding.take_rows, empty_state(V * V),
                                       EVERY_PAIR, max_len, V ** 3, alpha, eos)
    for row, got, prefix in zip(ids, scores, EVERY_PAIR):
        tokens, want = exhaustive_search(next_log_probs, prefix, eos, max_len, alpha)
        n = len(tokens)
        assert row[:n].tolist() == list(tokens) and (row[n:] == eos).all()
        assert abs(got - want) < 1e-12


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_search_equals_the_plain_reference_search(alpha):
    ends = set()
    for eos, k in [(EOS, 2), (EOS, 3), (1, 2), (3, 3)]:
        ids, scores = decoding.beam_search(table_step, decoding.take_rows, empty_state(V * V),
                                           EVERY_PAIR, 7, k, alpha, eos)
        assert_only_eos_after_eos(ids, eos, start=2)
        for row, got, prefix in zip(ids, scores, EVERY_PAIR):
            tokens, want = reference_beam_search(next_log_probs, prefix, eos, 7, k, alpha)
            n = len(tokens)
            assert row[:n].tolist() == tokens and (row[n:] == eos).all()
            assert abs(got - want) < 1e-12
            ends.add(n)
    assert len(ends) >= 3  # the table does make hypotheses of different lengths win


def test_beam_size_one_is_greedy_with_its_score():
    ids, scores = decoding.beam_search(table_step, decoding.take_rows, empty_state(3), PREFIXES,
                                       MAX_LEN, 1, 0.6, EOS)
    np.testing.assert_array_equal(ids, decoding.greedy(table_step, empty_state(3), PREFIXES,
                                                       MAX_LEN, EOS))
    for row, got in zip(ids, scores):
        n = len(row) if EOS not in row[2:] else 3 + list(row[2:]).index(EOS)
        log_p = sum(next_log_probs(list(row[:t]))[row[t]] for t in range(2, n))
        assert abs(got - score(log_p, n - 2, 0.6)) < 1e-12


@pytest.mark.parametrize("n, eos", [(1, EOS), (1, None), (2, EOS), (2, None), (3, None)])
def test_beam_search_without_repeated_ngrams_is_the_exact_optimum_among_such_texts(n, eos):
    """no_repeat_ngram=n with a beam as wide as the number of paths: the best of every
    complete continuation in which no new token (eos included) completes n tokens in a row
    that the sequence, prefix included, already holds; enumerated one by one. (With eos,
    the table's best texts of 3 new tokens repeat no 3 tokens: n = 3 is tested without.)"""
    max_len, found_a_ban = 5, False
    ids, scores = decoding.beam_search(table_step, decoding.take_rows, empty_state(V * V),
                                       EVERY_PAIR, max_len, V ** 3, 0.6, eos, no_repeat_ngram=n)
    for row, got, prefix in zip(ids, scores, EVERY_PAIR):
        tokens, want = exhaustive_search(next_log_probs, prefix, eos, max_len, 0.6, n)
        free, _ = exhaustive_search(next_log_probs, prefix, eos, max_len, 0.6)
        found_a_ban |= tokens != free
        length = len(tokens)
        assert row[:length].tolist() == list(tokens) and (row[length:] == eos).all()
        assert abs(got - want) < 1e-12
    assert found_a_ban  # the unconstrained optimum repeats somewhere: the ban did something


@pytest.mark.parametrize("n", [1, 2])
def test_greedy_search_without_repeated_ngrams_takes_the_best_token_that_repeats_none(n):
    ids, _ = decoding.beam_search(table_step, decoding.take_rows, empty_state(3), PREFIXES,
                                  MAX_LEN, 1, 0.6, None, no_repeat_ngram=n)
    for row in ids:
        tokens = list(row[:2])
        while len(tokens) < MAX_LEN:
            order = np.argsort(-next_log_probs(tokens), kind="stable")
            allowed = [v for v in order if not repeats_an_ngram(tokens, v, n)]
            tokens.append(int((allowed or order)[0]))
        assert row.tolist() == tokens


def test_repeated_ngram_bans_are_the_tokens_that_would_repeat_one():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 4, (50, 9))
    for n in (1, 2, 3, 9, 10):
        banned = decoding.repeated_ngram_bans(ids, n, 4)
        want = [[repeats_an_ngram(list(row), v, n) for v in range(4)] for row in ids]
        np.testing.assert_array_equal(banned, want)
    with pytest.raises(ValueError, match=r"no_repeat_ngram must be None or an int >= 1, got 0"):
        decoding.beam_search(table_step, decoding.take_rows, empty_state(3), PREFIXES, 6,
                             no_repeat_ngram=0)


def test_each_search_feeds_the_prefix_once_then_one_token_per_step():
    fed = []

    def recording_step(seen, tokens):
        fed.append(tokens.shape)
        return table_step(seen, tokens)
    for search in (lambda: decoding.greedy(recording_step, empty_state(3), PREFIXES, 6),
                   lambda: decoding.sample(recording_step, empty_state(3), PREFIXES, 6,
                                           rng=np.random.default_rng(0)),
                   lambda: decoding.beam_search(recording_step, decoding.take_rows,
                                                empty_state(3), PREFIXES, 6, beam_size=2)):
        del fed[:]
        search()
        n_rows = fed[0][0]
        assert fed == [(n_rows, 2)] + [(n_rows, 1)] * 3, fed


def tempered(logits, temperature, top_k):
    """softmax(logits / temperature) over the top_k largest (no ties in the table)."""
    keep = np.argsort(logits)[-top_k:]
    z = np.full(len(logits), -np.inf)
    z[keep] = logits[keep] / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


def test_two_sampled_tokens_follow_the_chained_conditionals():
    """40,000 copies of one prefix, two tokens each: the frequency of every pair (y1, y2) is
    P(y1 | prefix) P(y2 | prefix, y1) of the tempered top-3 table (a 5-sigma band)."""
    n, prefix = 40000, [0, 3]
    ids = decoding.sample(table_step, empty_state(n), np.tile(prefix, (n, 1)), 4,
                          temperature=0.8, top_k=3, rng=np.random.default_rng(1))
    first = tempered(table_logits(np.array([prefix]))[0], 0.8, 3)  # (V,)
    want = np.array([first[a] * tempered(table_logits(np.array([prefix + [a]]))[0], 0.8, 3)
                     for a in range(V)])  # (V, V)
    counts = np.zeros((V, V))
    np.add.at(counts, (ids[:, 2], ids[:, 3]), 1)
    band = 5 * np.sqrt(want * (1 - want) / n) + 1e-12
    assert (np.abs(counts / n - want) <= band).all()
    assert (want > 0.01).sum() >= 5  # the check covers several likely pairs


def test_sampling_is_seeded_and_ends_rows_at_eos():
    prefixes = np.repeat(PREFIXES, 4, axis=0)  # (12, 2)
    eos = 4  # half the rows of this table end
    runs = [decoding.sample(table_step, empty_state(12), prefixes, MAX_LEN, 1.5, None,
                            np.random.default_rng(seed), eos) for seed in (3, 3, 4)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])
    ended = (runs[0][:, 2:] == eos).any(axis=1)
    assert ended.any() and not ended.all()  # some rows end early, some run to max_len
    assert_only_eos_after_eos(runs[0], eos, start=2)


class State(NamedTuple):
    caches: tuple
    mask: np.ndarray
    length: int


def test_take_rows_indexes_every_array_along_its_first_axis():
    keys = np.arange(24).reshape(3, 2, 4)
    state = State((keys, keys + 100), None, 7)
    taken = decoding.take_rows(state, np.array([2, 2, 0]))
    np.testing.assert_array_equal(taken.caches[0], keys[[2, 2, 0]])
    np.testing.assert_array_equal(taken.caches[1], keys[[2, 2, 0]] + 100)
    assert taken.mask is None and taken.length == 7 and type(taken) is State


# --- sample_next on fixed logits ------------------------------------------------------------

def softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def test_sampling_frequencies_follow_temperature_and_top_k():
    """20,000 draws from one row of logits: with top_k=3 every token is among the 3 largest
    and the frequencies are softmax(logits / T) over those 3; without top_k, over all."""
    logits = np.array([1.0, -0.5, 2.0, 0.3, 1.7, -2.0, 0.9])
    rows = np.tile(logits, (20000, 1))  # (N, V)
    top3 = np.argsort(logits)[-3:]
    drawn = decoding.sample_next(rows, 0.5, 3, np.random.default_rng(8))
    assert set(np.unique(drawn)) <= set(top3)
    expected = np.zeros(7)
    expected[top3] = softmax(logits[top3] / 0.5)
    np.testing.assert_allclose(np.bincount(drawn, minlength=7) / 20000, expected, atol=0.012)
    drawn = decoding.sample_next(rows, 2.0, None, np.random.default_rng(9))
    np.testing.assert_allclose(np.bincount(drawn, minlength=7) / 20000, softmax(logits / 2.0),
                               atol=0.012)


def test_temperature_0_a_tiny_temperature_and_top_k_1_are_argmax():
    """logits / 1e-308 overflowed to inf, inf - inf = NaN, and token 0 came back."""
    logits = np.array([[1.0, 2.0, 0.5], [3.0, -1.0, 2.9]])
    for temperature, top_k in [(1e-308, None), (5e-324, None), (0.0, None), (1.0, 1)]:
        drawn = decoding.sample_next(logits, temperature, top_k, np.random.default_rng(0))
        assert drawn.tolist() == [1, 0]


def test_top_k_keeps_exactly_k_tokens_when_the_kth_value_is_tied():
    """logits (1, 1, 1, 0) with top_k=2: two of the three tied tokens, each drawn half the
    time (equal logits), never the third and never token 3."""
    rows = np.tile([1.0, 1.0, 1.0, 0.0], (20000, 1))
    drawn = decoding.sample_next(rows, 1.0, 2, np.random.default_rng(0))
    kept = np.unique(drawn)
    assert len(kept) == 2 and set(kept) <= {0, 1, 2}
    np.testing.assert_allclose(np.bincount(drawn, minlength=4)[kept] / 20000, [0.5, 0.5],
                               atol=0.012)


@pytest.mark.parametrize("temperature", [-0.5, -1e-12, -np.inf, np.nan])
def test_a_negative_or_nan_temperature_is_refused(temperature):
    logits = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])
    message = rf"decoding.sample_next: temperature must be >= 0, got {temperature}"
    with pytest.raises(ValueError, match=message):
        decoding.sample_next(logits, temperature, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):  # even with top_k=1
        decoding.sample_next(logits, temperature, top_k=1)


def test_check_sampling_names_the_caller_and_refuses_a_bad_top_k_or_a_missing_rng():
    rng = np.random.default_rng(0)
    for top_k in (0, 6):
        with pytest.raises(ValueError, match=rf"^f: top_k must lie in 1..5 \(the vocabulary\), "
                                             rf"got {top_k}$"):
            decoding.check_sampling("f", 1.0, top_k, 5, rng)
    with pytest.raises(ValueError, match=r"^f: sampling \(temperature > 0\) needs an rng$"):
        decoding.check_sampling("f", 1.0, None, 5, None)
    decoding.check_sampling("f", 0.0, None, 5, None)  # greedy choices need no rng
    decoding.check_sampling("f", 1.0, 1, 5, None)
