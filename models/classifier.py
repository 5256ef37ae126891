"""The review classifier of TransformersLite.jl ("Transformers from first principles in
Julia", L. Sinai 2022): an encoder-only Transformer that maps a review to star-rating
logits, in the order of the posts' `TransformerClassifier` and checked against their code
(`src/classifier.jl`, `src/encoder.jl`, `src/Embed/*.jl`). As there, the token embedding is
drawn from N(0, 1) and added to the position encoding unscaled (Glorot-sized rows would be
drowned by the unit-amplitude sinusoids), and every attention projection carries a bias
(Flux's `Dense` default): the posts' model (V = 7455, D = 32, H = 4, d_ff = 128, one block,
max_len = 50, 5 labels) has 21 arrays and 251,552 parameters, 238,560 of them in the
embedding (test_classifier.py counts them by layer). Two deliberate differences: positions
count from 0 (Julia's table starts at pos = 1), and dropout also acts on the attention
weights and the feed-forward hidden layer (as in the paper and torch; TransformersLite drops
only each sublayer's output), which inference does not see. Tokens (B, T), activations
(B, T, D), masks True = may attend.

    p = classifier.init(rng, vocab_size=7455, n_labels=5)        # the posts' model
    logits = classifier.apply(p, ids)                             # ids (B, 50) -> (B, 5)

    x = E[ids] + PE[:T]                  token embeddings (N(0, 1) init, NOT scaled by √d_model)
    x = Dropout(x)
    x = EncoderBlock(x)  × n_layers      post-LN, relu feed-forward (blocks.py)
    pool="flatten":  s = x w_agg + b_agg  (B, T, 1) -> (B, T);  logits = s W + b, W (max_len, L)
    pool="mean":     m = Σ_t keep_t x_t / Σ_t keep_t  (B, D);  logits = m W + b, W (D, L)
"""
from typing import NamedTuple

import numpy as np

import autograd_lite as ag

from .attention import padding_mask
from .blocks import encoder_block, encoder_block_init
from .layers import (Dense, Embedding, add_position_encoding, check_dropout_rate, check_tokens,
                     dense, dense_init, dropout_setting, embed)
from .sizes import check_sizes

POOLS = ("flatten", "mean")


class Classifier(NamedTuple):
    embed: Embedding  # (V, D)
    encoder: tuple  # n_layers EncoderBlocks (post-LN)
    agg: Dense  # (D, 1) for pool="flatten"; None for pool="mean"
    head: Dense  # (max_len, n_labels) for "flatten"; (D, n_labels) for "mean"
    max_len: int
    pool: str
    pad: int  # the pad id, or None
    dropout: ag.Hyper  # the rate: a float setting, static in the tree (no gradient, no update)


def init(rng, vocab_size, n_labels, d_model=32, n_heads=4, d_ff=128, n_layers=1, max_len=50,
         pool="flatten", pad=None, dropout=0.1, dtype=np.float32):
    """Embedding ~ N(0, 1) (as TransformersLite's `Embed`); Glorot-uniform weights, zero
    biases and unit layer-norm scales elsewhere, all drawn from `rng`."""
    check_sizes("classifier.init", vocab_size=vocab_size, n_labels=n_labels, d_model=d_model,
                n_heads=n_heads, d_ff=d_ff, max_len=max_len)
    check_sizes("classifier.init", least=0, n_layers=n_layers)
    check_sizes("classifier.init", least=2, n_labels=n_labels)  # a choice needs two classes
    if pool not in POOLS:
        raise ValueError(f"classifier.init: pool must be one of {POOLS}, got {pool!r}")
    if pool == "mean" and pad is None:
        raise ValueError("classifier.init: pool='mean' needs the pad id (pad=...) to leave "
                         "padding out of the mean")
    check_dropout_rate("classifier.init", dropout)
    table = rng.standard_normal((vocab_size, d_model)).astype(dtype)  # (V, D)
    encoder = tuple(encoder_block_init(rng, d_model, n_heads, d_ff, dtype)
                    for _ in range(n_layers))
    if pool == "flatten":
        agg, head = dense_init(rng, d_model, 1, dtype), dense_init(rng, max_len, n_labels, dtype)
    else:
        agg, head = None, dense_init(rng, d_model, n_labels, dtype)
    return Classifier(Embedding(table), encoder, agg, head, max_len, pool, pad,
                      ag.Hyper(dropout))


def check_ids(p, ids):
    """Integer tokens (B, T) of the vocabulary, T <= max_len; with pool='flatten', T must be
    exactly max_len. -> ids as an array"""
    ids = check_tokens("classifier.apply", ids, p.embed.table.shape[0], p.max_len)
    if p.pool == "flatten" and ids.shape[1] != p.max_len:
        raise ValueError(f"classifier.apply: pool='flatten' needs sequences of exactly "
                         f"max_len={p.max_len} tokens, got ids {ids.shape} of length "
                         f"{ids.shape[1]}; pad or truncate them to {p.max_len}")
    return ids


def masked_mean(x, keep):
    """Σ_t keep_t x_t / Σ_t keep_t: x (B, T, D), keep (B, T) bool -> (B, D).
    A row with nothing kept gives zeros."""
    weights = keep.astype(x.dtype)  # (B, T)
    counts = np.maximum(weights.sum(axis=1, keepdims=True), 1)  # (B, 1)
    return ag.sum(x * (weights / counts)[:, :, None], axis=1)  # (B, D)


def encode(p, ids, rate=0.0, rng=None):
    """Embeddings + positions, dropout, the encoder blocks.  ids (B, T) -> (B, T, D)"""
    x = add_position_encoding(embed(p.embed, ids), p.max_len)  # (B, T, D)
    x = ag.dropout(x, rate, rng)  # (B, T, D)
    mask = padding_mask(ids, p.pad)  # (B, 1, 1, T) or None
    for block in p.encoder:
        x = encoder_block(block, x, mask, "post", rate, rng)  # (B, T, D)
    return x


def apply(p, ids, training=False, rng=None):
    """Logits (B, n_labels) for token ids (B, T). Dropout only when training (needs rng)."""
    ids = check_ids(p, ids)
    rate, rng = dropout_setting("classifier.apply", p.dropout, training, rng)
    x = encode(p, ids, rate, rng)  # (B, T, D)
    if p.pool == "mean":
        return dense(p.head, masked_mean(x, ids != p.pad))  # (B, n_labels)
    scores = ag.reshape(dense(p.agg, x), ids.shape)  # (B, T)
    return dense(p.head, scores)  # (B, n_labels)
