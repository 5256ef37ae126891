"""A character n-gram language model with interpolated Kneser-Ney smoothing: the baseline the
generate demo's transformer is measured against.

    model = ngram.fit(train_ids, order=4, vocab_size=len(tokenizer))
    bits = ngram.bits_per_character(model, held_out_ids)

The smoothing is interpolated Kneser-Ney (R. Kneser and H. Ney, "Improved backing-off for
m-gram language modeling", ICASSP 1995), in the form S. F. Chen and J. Goodman give it
("An empirical study of smoothing techniques for language modeling", 1998, eq. 26 with one
discount per order). For a context h of k - 1 characters and its shortening h' (the first
character dropped):

    P_k(w | h) = max(c_k(hw) - D_k, 0) / c_k(h·)  +  D_k · N_k(h·) / c_k(h·) · P_{k-1}(w | h')

c_k is the count of the k-gram in the training text at the highest order, and its
continuation count (the number of distinct characters seen just before it) at the lower
orders; c_k(h·) sums c_k(hw) over w, and N_k(h·) is the number of w with c_k(hw) > 0. A
context never seen (c_k(h·) = 0) leaves P_{k-1}(w | h') as it is. Below the unigrams sits the
uniform distribution 1/V, so a character never seen in training keeps a little probability.
The discount of each order is D_k = n_1 / (n_1 + 2 n_2), n_1 and n_2 being the numbers of
k-grams with c_k equal to 1 and to 2 (0.5 when n_1 = 0: see `discount`).

A k-gram is kept as one integer, its characters' ids as the digits of a base-V number
(V^order must fit in int64); every table is a sorted array of those codes, looked up with
np.searchsorted, so fitting a million characters and scoring a hundred thousand take a
fraction of a second.
"""
from typing import NamedTuple

import numpy as np

from models.inputs.text import check_count


class Order(NamedTuple):
    """The tables of one order k: the k-grams seen and their counts, and per context (the
    first k - 1 characters) the sum of those counts and how many k-grams share it."""
    codes: np.ndarray  # (G,) int64, sorted: the k-grams seen, as base-V numbers
    counts: np.ndarray  # (G,) int64: c_k of each (raw at the top order, continuation below)
    contexts: np.ndarray  # (H,) int64, sorted: the contexts seen (codes // V)
    context_totals: np.ndarray  # (H,) int64: c_k(h·)
    context_types: np.ndarray  # (H,) int64: N_k(h·)
    discount: float  # D_k


class NgramModel(NamedTuple):
    orders: tuple  # Order for k = 1 .. order
    vocab_size: int

    @property
    def order(self):
        return len(self.orders)


def check_ids(caller, ids, vocab_size):
    """ids as a 1-D int64 array of ids in 0 .. vocab_size - 1, or an error naming the caller."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"{caller}: ids must be one integer sequence (N,), got {ids.dtype} "
                         f"with shape {ids.shape}")
    outside = (ids < 0) | (ids >= vocab_size)
    if outside.any():
        raise ValueError(f"{caller}: id {ids[outside][0]} is outside the vocabulary "
                         f"0..{vocab_size - 1}")
    return ids.astype(np.int64)


def kgram_codes(ids, k, vocab_size):
    """The code of every k-gram ids[i:i + k], i = 0 .. N - k: (N - k + 1,) int64."""
    codes = np.zeros(max(len(ids) - k + 1, 0), dtype=np.int64)
    for j in range(k):
        codes = codes * vocab_size + ids[j:len(ids) - k + 1 + j]
    return codes


def discount(counts):
    """D = n_1 / (n_1 + 2 n_2) (Ney, Essen and Kneser 1994), in (0, 1]. Without a count of 1
    (a tiny or very repetitive text) that estimate is 0, which would leave a character never
    seen after a context no probability at all: D is then 0.5."""
    n1, n2 = np.sum(counts == 1), np.sum(counts == 2)
    return float(n1 / (n1 + 2 * n2)) if n1 else 0.5


def order_tables(codes, counts, vocab_size):
    """The Order of the k-grams `codes` (sorted, distinct) with counts c_k."""
    contexts, first = np.unique(codes // vocab_size, return_index=True)
    return Order(codes, counts, contexts, np.add.reduceat(counts, first),
                 np.diff(np.append(first, len(codes))), discount(counts))


def codes_fit(order, vocab_size):
    """Whether every `order`-gram over vocab_size characters has an int64 code."""
    return vocab_size ** order <= np.iinfo(np.int64).max


def fit(ids, order, vocab_size):
    """The interpolated Kneser-Ney model of orders 1 .. `order` of the training ids (N,)."""
    check_count("ngram.fit", "order", order, 1)
    check_count("ngram.fit", "vocab_size", vocab_size, 1)
    if not codes_fit(order, vocab_size):
        raise ValueError(f"ngram.fit: {order}-grams over {vocab_size} characters do not fit "
                         f"in int64 codes (vocab_size ** order = {vocab_size ** order})")
    ids = check_ids("ngram.fit", ids, vocab_size)
    if len(ids) < order:
        raise ValueError(f"ngram.fit: {len(ids)} ids hold no {order}-gram")
    top, top_counts = np.unique(kgram_codes(ids, order, vocab_size), return_counts=True)
    orders = [order_tables(top, top_counts, vocab_size)]
    for k in range(order - 1, 0, -1):  # continuation counts: distinct characters before
        longer = orders[0].codes  # the distinct (k + 1)-grams, x followed by the k-gram
        codes, counts = np.unique(longer % vocab_size ** k, return_counts=True)
        orders.insert(0, order_tables(codes, counts, vocab_size))
    return NgramModel(tuple(orders), vocab_size)


def lookup(table, keys, values):
    """values[i] where table[i] == key, for each of keys; 0 where the key is not in table."""
    at = np.minimum(np.searchsorted(table, keys), len(table) - 1)
    return np.where(table[at] == keys, values[at], 0)


def probabilities(model, ids):
    """P(ids[i] | up to order - 1 characters before it) for i = 1 .. N - 1: (N - 1,) float64.
    The first positions have shorter contexts; they use the orders those contexts reach."""
    ids = check_ids("ngram.probabilities", ids, model.vocab_size)
    targets = np.arange(1, len(ids))  # the positions predicted
    p = np.full(len(targets), 1.0 / model.vocab_size)
    for k, table in enumerate(model.orders, 1):
        reach = targets[targets >= k - 1]  # positions with k - 1 characters before them
        codes = kgram_codes(ids, k, model.vocab_size)[reach - (k - 1)]  # the k-gram ending there
        count = lookup(table.codes, codes, table.counts)
        context = codes // model.vocab_size
        total = lookup(table.contexts, context, table.context_totals)
        types = lookup(table.contexts, context, table.context_types)
        lower = p[reach - 1]
        seen = total > 0
        smoothed = (np.maximum(count - table.discount, 0) + table.discount * types * lower) / \
            np.where(seen, total, 1)
        p[reach - 1] = np.where(seen, smoothed, lower)
    return p


def bits_per_character(model, ids):
    """The mean of -log2 P over positions 1 .. N - 1 of ids (N,) (see `probabilities`)."""
    if len(ids) < 2:
        raise ValueError(f"ngram.bits_per_character: {len(ids)} ids leave nothing to predict")
    return float(-np.mean(np.log2(probabilities(model, ids))))
