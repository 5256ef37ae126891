"""Batches of reviews of similar length, for the classify demo. Reviews differ in length
(Amazon's: a median of 82 words, a tail past 1,000), and a batch costs what its longest
row costs: grouping rows of similar length leaves little padding to compute, and
pool="mean" leaves padding out of every result.

    batches = length_bucketed_batches(sequences, labels, 32, pad, rng)   # data.Batches
    probs = probabilities(params, sequences, pad)                         # (N, C)
"""
import numpy as np

import autograd_lite as ag
from models import classifier, data, text

BATCHES_PER_POOL = 50  # rows are sorted by length within pools of this many batches


def length_bucketed_batches(sequences, labels, batch_size, pad, rng, length=None):
    """One epoch's (ids (B, T), labels (B,)) batches: the rows shuffled by rng (in order when
    rng is None), cut into pools of BATCHES_PER_POOL batches, each pool sorted by length and
    cut into batches, and the batches shuffled (a row's batch mates are drawn from its pool,
    so they change every epoch). Each batch is padded with `pad` to its longest row, or to
    exactly `length` when given (pool="flatten" needs max_len)."""
    labels = np.asarray(labels)
    lengths = np.array([len(s) for s in sequences])  # (N,)
    order = np.arange(len(sequences)) if rng is None else rng.permutation(len(sequences))
    pool = batch_size * BATCHES_PER_POOL
    groups = []
    for start in range(0, len(order), pool):
        rows = order[start:start + pool]
        rows = rows[np.argsort(lengths[rows], kind="stable")]
        groups += [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]
    if rng is not None:
        groups = [groups[i] for i in rng.permutation(len(groups))]
    return data.Batches(groups, lambda rows: (padded(sequences, rows, pad, length),
                                              labels[rows]))


def padded(sequences, rows, pad, length=None):
    """The rows' sequences as ids (B, T): T = length, else the longest (at least 1, so that
    a batch of empty reviews is a row of padding, which the classifier reads as nothing)."""
    chosen = [sequences[i] for i in rows]
    return text.pad_sequences(chosen, pad, length or max([len(s) for s in chosen] + [1]))


def fixed_length(params):
    """The length every batch must have for the classifier `params`: max_len for
    pool="flatten", None (each batch its longest) for pool="mean"."""
    return params.max_len if params.pool == "flatten" else None


def probabilities(params, sequences, pad, batch_size=256):
    """Class probabilities (N, C) of the classifier on id sequences, batched by length."""
    length = fixed_length(params)
    order = np.argsort([len(s) for s in sequences], kind="stable")
    out = np.zeros((len(sequences), params.head.b.shape[0]), dtype=params.head.b.dtype)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        ids = padded(sequences, rows, pad, length)  # (B, T)
        out[rows] = ag.softmax(classifier.apply(params, ids), axis=-1)  # (B, C)
    return out
