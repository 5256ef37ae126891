"""Layers as (parameters, function) pairs: dense, layer norm (and the post-LN blocks' Add &
Norm), embedding, position encoding, position-wise feed-forward. add_and_norm and
feed_forward are fusable: the fast rules of models/fast stand in for them on plain arrays.

Axis convention: batch first, row major. Tokens (B, T), activations (B, T, D).
Parameters are NamedTuples; `*_init(rng, ...)` builds them with Glorot-uniform
weights and zero biases, from an explicit np.random.Generator.
"""
import functools
import math
from typing import NamedTuple

import numpy as np

import autograd_lite as ag


class Dense(NamedTuple):
    w: np.ndarray  # (d_in, d_out)
    b: np.ndarray  # (d_out,)


def glorot_uniform(rng, d_in, d_out, dtype=np.float32):
    """U(-a, a) with a = √(6 / (d_in + d_out)) (Glorot & Bengio 2010)."""
    limit = math.sqrt(6.0 / (d_in + d_out))
    return rng.uniform(-limit, limit, size=(d_in, d_out)).astype(dtype)


def dense_init(rng, d_in, d_out, dtype=np.float32):
    return Dense(glorot_uniform(rng, d_in, d_out, dtype), np.zeros(d_out, dtype=dtype))


def dense(p, x):
    """x W + b.  x: (..., d_in) -> (..., d_out)"""
    return ag.linear(x, p.w, p.b)


class LayerNorm(NamedTuple):
    scale: np.ndarray  # (D,)
    bias: np.ndarray  # (D,)


def layer_norm_init(d, dtype=np.float32):
    return LayerNorm(np.ones(d, dtype=dtype), np.zeros(d, dtype=dtype))


def layer_norm(p, x, eps=1e-5):
    """Normalize the last axis, then scale and shift.  x: (..., D) -> (..., D)"""
    return ag.layer_norm(x, p.scale, p.bias, eps)


@ag.fusable
def add_and_norm(p, x, y, eps=1e-5):
    """A post-LN block's Add & Norm (§3.1): LayerNorm(x + y), y the sublayer's output.
    x, y: (..., D) -> (..., D)"""
    return layer_norm(p, x + y, eps)


class Embedding(NamedTuple):
    table: np.ndarray  # (V, D)


def embedding_init(rng, vocab_size, d, dtype=np.float32):
    return Embedding(glorot_uniform(rng, vocab_size, d, dtype))


def embed(p, ids):
    """Rows of the table.  ids: (B, T) ints -> (B, T, D)"""
    return ag.gather(p.table, ids)


@functools.lru_cache(maxsize=None)
def position_encoding(max_len, d_model, dtype=np.float32, xp=np):
    """The sinusoids of §3.5, positions from 0 (a read-only table, computed once per array
    module xp: numpy's, or a device's, where it is copied once):

        PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))

    -> (max_len, d_model)
    """
    if xp is not np:
        return xp.asarray(position_encoding(max_len, d_model, dtype))
    positions = np.arange(max_len, dtype=np.float64)[:, None]  # (max_len, 1)
    rates = 10000.0 ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)  # (ceil(d/2),)
    angles = positions * rates  # (max_len, ceil(d/2))
    table = np.empty((max_len, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    table = table.astype(dtype)
    table.flags.writeable = False
    return table


def position_rows(max_len, d_model, start, length, dtype=np.float32, xp=np):
    """PE[start : start + length] -> (length, d_model), an array of module xp; positions past
    the table are an error."""
    if start < 0 or length < 0:
        raise ValueError(f"position encoding: start={start} and length={length} must be >= 0")
    if start + length > max_len:
        raise ValueError(f"position encoding: positions {start}..{start + length - 1} need "
                         f"{start + length} positions but the table holds max_len={max_len}")
    return position_encoding(max_len, d_model, np.dtype(dtype).type, xp)[start:start + length]


def add_position_encoding(x, max_len, start=0):
    """x + PE[start : start + T] for x: (B, T, D) -> (B, T, D)"""
    return x + position_rows(max_len, x.shape[-1], start, x.shape[-2], x.dtype,
                             ag.array_module(x))


def embed_with_positions(p, ids, max_len, start=0):
    """E[ids] · √d_model + PE[start : start + T] (§3.4, §3.5).  ids: (B, T) -> (B, T, D)

    `start` offsets the positions, for feeding tokens after those already in a cache.
    """
    x = embed(p, ids)  # (B, T, D)
    return add_position_encoding(x * math.sqrt(x.shape[-1]), max_len, start)  # (B, T, D)


class FeedForward(NamedTuple):
    linear1: Dense  # (D, d_ff)
    linear2: Dense  # (d_ff, D)


class ActivatedFeedForward(NamedTuple):
    """A feed-forward network with another activation than the paper's relu (GPT-2's gelu),
    kept in the tree as a function leaf (ag.save stores its name; ag.load's like gives it
    back). The paper's network stays a FeedForward: its files keep their layout."""
    linear1: Dense  # (D, d_ff)
    linear2: Dense  # (d_ff, D)
    activation: object  # (..., d_ff) -> (..., d_ff), e.g. ag.gelu


def feed_forward_init(rng, d_model, d_ff, dtype=np.float32, activation=ag.relu):
    """A FeedForward for relu, an ActivatedFeedForward for any other activation."""
    linears = (dense_init(rng, d_model, d_ff, dtype), dense_init(rng, d_ff, d_model, dtype))
    if activation is ag.relu:
        return FeedForward(*linears)
    return ActivatedFeedForward(*linears, activation)


def activation_of(p):
    """The activation of a feed-forward network's parameters: relu for a FeedForward."""
    return getattr(p, "activation", ag.relu)


@ag.fusable
def feed_forward(p, x, rate=0.0, rng=None, activation=ag.relu):
    """Position-wise FFN (§3.3): W2 · dropout(relu(W1 x + b1)) + b2.  (B, T, D) -> (B, T, D)"""
    h = activation(dense(p.linear1, x))  # (B, T, d_ff)
    return dense(p.linear2, ag.dropout(h, rate, rng))  # (B, T, D)


def as_tokens(ids):
    """ids as an array: an array (numpy's or a device's) as it is, a nested list by np.asarray."""
    return ids if hasattr(ids, "dtype") else np.asarray(ids)


def check_tokens(caller, ids, vocab, max_len, name="ids", start=0):
    """Token ids for a model: an integer array (B, T) of ids in 0 .. vocab - 1, at positions
    start .. start + T - 1 that the position table of max_len rows holds. -> ids as an array.
    `caller` ("lm.apply") and `name` ("src") name the call and the argument in the error."""
    array = as_tokens(ids)
    if array.ndim != 2 or array.dtype.kind not in "iu":
        raise ValueError(f"{caller}: {name} must be integer tokens (B, T), got {array.dtype} "
                         f"{array.shape}")
    if start + array.shape[1] > max_len:
        raise ValueError(f"{caller}: {name} {array.shape} at positions {start}.."
                         f"{start + array.shape[1] - 1} run past the position table's "
                         f"max_len={max_len}")
    if array.size and (array.min() < 0 or array.max() >= vocab):
        outside = array[(array < 0) | (array >= vocab)][0]
        raise ValueError(f"{caller}: {name} {array.shape} holds id {outside}, outside the "
                         f"vocabulary 0..{vocab - 1}")
    return array


def check_dropout_rate(caller, rate):
    """A dropout rate in [0, 1); `caller` ("lm.init") names the call in the error."""
    if not 0 <= rate < 1:  # also refuses nan
        raise ValueError(f"{caller}: dropout must lie in [0, 1), got {float(rate)}")


def dropout_setting(caller, rate, training, rng):
    """(rate, rng) for a forward pass: (0.0, None) at inference; training needs an rng and a
    rate in [0, 1) (checked here too: a rate can be put into the tree after init).
    `caller` names the function in the error, e.g. "lm.apply"; `rate` is the model's p.dropout,
    which must be an ag.Hyper whether training or not."""
    check_rate_is_hyper(caller, rate)
    if not training:
        return 0.0, None
    if rng is None:
        raise ValueError(f"{caller}: training=True needs an rng for dropout")
    check_dropout_rate(caller, rate)  # a rate put into the tree by hand or read from a file
    return rate, rng


def check_rate_is_hyper(caller, rate):
    """Refuse a p.dropout that is not an ag.Hyper: a plain float in a parameter tree is a
    trainable leaf (ag.gradient traces it, an optimizer moves it), not a setting."""
    if isinstance(rate, ag.Hyper):
        return
    value = np.asarray(ag.stop_gradient(rate)).item()  # a traced float shows its value
    raise TypeError(f"{caller}: p.dropout is a plain {type(value).__name__} {value!r}; store "
                    f"settings as ag.Hyper({value!r}) (a plain float in a parameter tree is a "
                    f"trainable parameter)")
