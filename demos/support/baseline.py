"""The classify demo's baseline: logistic regression on TF-IDF features of words and word
pairs, the usual strong baseline for review classification (scikit-learn's
TfidfVectorizer(ngram_range=(1, 2)) then LogisticRegression), written with the engine.

Features (as scikit-learn's defaults, over the n-grams kept in the vocabulary):

    x_f = tf_f · idf_f / ‖tf · idf‖₂       tf_f: how often n-gram f is in the review
    idf_f = ln((1 + N) / (1 + df_f)) + 1    df_f: how many of the N training reviews hold f

The model is logits = x W + b, W (F, C). A review's x is sparse, so x W is the sum of the
rows of W its n-grams pick, each weighted by its x_f: ag.gather, whose adjoint adds the
gradient into just those rows. It is trained by Adam on the mean cross-entropy plus an L2
penalty (Adam's weight_decay), through models.train.fit.

    features = baseline.fit_features(train_documents)          # lists of words
    params = baseline.train(features, train_documents, labels, n_labels=2, seed=0)
    probabilities = baseline.predict(params, features, test_documents)   # (N, C)
"""
import math
from collections import Counter
from typing import NamedTuple

import numpy as np

import autograd_lite as ag
from models import data, text, train as training

MIN_DOCUMENT_FREQUENCY = 2  # an n-gram in one review only says nothing about others
MAX_FEATURES = 50_000  # the most frequent n-grams; on 14,400 Amazon reviews 142,000 pass 2
EPOCHS, BATCH_SIZE, LEARNING_RATE, WEIGHT_DECAY = 6, 64, 0.01, 1e-5
# The transformer's rule (classify.MIN_STEPS): at least this many updates, so that a small
# file is not undertrained (400 reviews: 30 steps gave 83.8%, 300 gave 97.5%).
MIN_STEPS = 1_000


class Features(NamedTuple):
    index: dict  # n-gram -> feature id
    idf: np.ndarray  # (F,) float32


class LogisticRegression(NamedTuple):
    w: np.ndarray  # (F, C)
    b: np.ndarray  # (C,)


class SparseRows(NamedTuple):
    """A batch of sparse feature rows, padded: feature ids and their values (0 on padding)."""
    ids: np.ndarray  # (B, K) int64
    values: np.ndarray  # (B, K) float32


def ngrams(words):
    """The words, then every pair of neighbouring words ("not good")."""
    return list(words) + [f"{a} {b}" for a, b in zip(words, words[1:])]


def fit_features(documents, min_document_frequency=MIN_DOCUMENT_FREQUENCY,
                 max_features=MAX_FEATURES):
    """The n-grams of the training documents (lists of words) in at least
    min_document_frequency of them, the max_features most frequent, and their idf. No n-gram
    that frequent is an error: the model would have no feature to weigh."""
    grams = [ngrams(d) for d in documents]
    kept = text.select_vocabulary(grams, min_document_frequency, max_features)
    if not kept:
        raise ValueError(f"baseline.fit_features: no word or word pair is in at least "
                         f"min_document_frequency={min_document_frequency} of the "
                         f"{len(documents)} training reviews, so the baseline has no feature")
    frequency = Counter(g for document in grams for g in set(document))
    df = np.array([frequency[g] for g in kept], dtype=np.float64)  # (F,)
    idf = np.log((1 + len(documents)) / (1 + df)) + 1
    return Features({g: i for i, g in enumerate(kept)}, idf.astype(np.float32))


def sparse_row(features, words):
    """(ids (K,), values (K,)) of one review's TF-IDF row, L2-normalised (all zero when
    none of its n-grams is a feature)."""
    counts = Counter(features.index[g] for g in ngrams(words) if g in features.index)
    ids = np.array(sorted(counts), dtype=np.int64)  # (K,)
    values = np.array([counts[i] for i in ids], dtype=np.float32) * features.idf[ids]  # (K,)
    norm = np.linalg.norm(values)
    return ids, values / norm if norm > 0 else values


def stack_rows(rows):
    """SparseRows of a batch of (ids, values) rows, padded to the longest with feature 0 at
    value 0 (which adds nothing to the logits and nothing to W's gradient)."""
    width = max([len(ids) for ids, _ in rows] + [1])
    ids = np.zeros((len(rows), width), dtype=np.int64)  # (B, K)
    values = np.zeros((len(rows), width), dtype=np.float32)  # (B, K)
    for i, (row_ids, row_values) in enumerate(rows):
        ids[i, :len(row_ids)], values[i, :len(row_values)] = row_ids, row_values
    return SparseRows(ids, values)


def logits(p, x):
    """x W + b from sparse rows: Σ_k x.values[:, k] · W[x.ids[:, k]] + b.  -> (B, C)"""
    picked = ag.gather(p.w, x.ids)  # (B, K, C)
    return ag.sum(picked * x.values[:, :, None], axis=1) + p.b  # (B, C)


def loss_fn(p, batch, rng):
    x, labels = batch
    scores = logits(p, x)  # (B, C)
    accuracy = np.mean(np.argmax(ag.stop_gradient(scores), axis=-1) == labels)
    return ag.cross_entropy(scores, labels), {"accuracy": accuracy}


def epochs_for(n_documents, batch_size=BATCH_SIZE):
    """EPOCHS, or as many as make MIN_STEPS updates of batch_size documents when more."""
    return max(EPOCHS, math.ceil(MIN_STEPS / math.ceil(n_documents / batch_size)))


def train(features, documents, labels, n_labels, seed, epochs=None, batch_size=BATCH_SIZE,
          lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY):
    """Logistic regression on the documents' TF-IDF rows: -> LogisticRegression (zeros at
    the start, as the loss is convex; the batches are shuffled from `seed`). epochs None:
    epochs_for the documents."""
    epochs = epochs_for(len(documents), batch_size) if epochs is None else epochs
    rows = [sparse_row(features, d) for d in documents]
    labels = np.asarray(labels)
    params = LogisticRegression(np.zeros((len(features.idf), n_labels), np.float32),
                                np.zeros(n_labels, np.float32))

    def batches(epoch):
        groups = data.epoch_groups("baseline.train", len(rows), batch_size,
                                   np.random.default_rng([seed, epoch]), drop_last=False)
        return data.Batches(groups, lambda g: (stack_rows([rows[i] for i in g]), labels[g]))
    params, _ = training.fit(loss_fn, params, ag.optim.adam(lr, weight_decay=weight_decay),
                             batches, epochs, seed=seed, progress=False)
    return params


def predict(params, features, documents, batch_size=256):
    """Class probabilities (N, C) of the documents (lists of words)."""
    out = []
    for start in range(0, len(documents), batch_size):
        x = stack_rows([sparse_row(features, d) for d in documents[start:start + batch_size]])
        out.append(ag.softmax(logits(params, x), axis=-1))
    return np.concatenate(out) if out else np.zeros((0, params.b.shape[0]), np.float32)
