"""Layers as (parameters, function) pairs: dense, layer norm, embedding, position encoding,
position-wise feed-forward.

Axis convention: batch first, row major. Tokens (B, T), activations (B, T, D).
Parameters are NamedTuples; `*_init(rng, ...)` builds them with Glorot-uniform
weights and zero biases, from an explicit np.random.Generator.
"""
import functools
import math
from typing import NamedTuple

import numpy as np

import autograd_lite as ag
from autograd_lite.ops.nn import layer_norm_composed_cotangents


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
    """x W + b.  x: (..., d_in) -> (..., d_out)

    One fused op, ag.linear (its reference: ag.matmul, then +), on plain arrays too, so that
    inference refuses what training refuses (a float64 x with float32 weights, a wrong d_in)
    with the same message."""
    return ag.linear(x, p.w, p.b)


class LayerNorm(NamedTuple):
    scale: np.ndarray  # (D,)
    bias: np.ndarray  # (D,)


def layer_norm_init(d, dtype=np.float32):
    return LayerNorm(np.ones(d, dtype=dtype), np.zeros(d, dtype=dtype))


def layer_norm(p, x, eps=1e-5):
    """Normalize the last axis, then scale and shift.  x: (..., D) -> (..., D)"""
    return ag.layer_norm(x, p.scale, p.bias, eps)


@ag.viz.transparent  # pictures show the sum and the layer_norm scope, as written out
def residual_layer_norm(p, x, y, eps=1e-5):
    """layer_norm(p, x + y): a post-LN block's residual sum and its norm. One fused op
    (fused_residual_layer_norm) where x and y have one shape and one float32 or float64
    dtype with p; otherwise the sum, then the norm.  x, y: (..., D) -> (..., D)"""
    if _residual_fusable(p, x, y):
        return fused_residual_layer_norm(x, y, p.scale, p.bias, eps)
    return layer_norm(p, x + y, eps)


def _residual_fusable(p, x, y):
    d = x.shape[-1] if x.ndim else None
    return (x.shape == y.shape and x.size > 0 and p.scale.shape == (d,)
            and p.bias.shape == (d,) and one_fused_dtype(x, y, p.scale, p.bias))


def _residual_layer_norm_reference(x, y, scale, bias, eps=1e-5):
    """fused_residual_layer_norm composed of the library's ops (what higher order and
    pictures record)."""
    return layer_norm(LayerNorm(scale, bias), x + y, eps)


@ag.primitive(name="residual_layer_norm", reference=_residual_layer_norm_reference,
              pictured_as_reference=True)
def fused_residual_layer_norm(x, y, scale, bias, eps=1e-5):
    """layer_norm(x + y) as one op (ag.kernels.residual_layer_norm_forward: the sum read in
    the norm's first pass, not written out first); x and y get the same cotangent, the
    norm's, and eps ag.layer_norm's (computed only where eps is traced)."""
    out, saved = ag.kernels.residual_layer_norm_forward(x, y, scale, bias, eps)
    shape, eps_shape = x.shape, np.shape(eps)  # the pullbacks keep x̂ and 1/σ, not x and y

    def residual_layer_norm_pullback(g):
        dx, d_scale, d_bias = ag.kernels.layer_norm_backward(g, saved, scale)
        d_eps = lambda: ag.kernels.layer_norm_eps_cotangent(g, saved, scale).reshape(eps_shape)
        return dx, dx, d_scale, d_bias, d_eps

    def residual_layer_norm_composed_pullback(g):  # a traced cotangent: layer norm's rule
        dx, d_scale, d_bias, d_eps = layer_norm_composed_cotangents(g, saved, scale, shape,
                                                                    eps_shape)
        return dx, dx, d_scale, d_bias, d_eps
    return out, residual_layer_norm_pullback, residual_layer_norm_composed_pullback


class Embedding(NamedTuple):
    table: np.ndarray  # (V, D)


def embedding_init(rng, vocab_size, d, dtype=np.float32):
    return Embedding(glorot_uniform(rng, vocab_size, d, dtype))


def embed(p, ids):
    """Rows of the table.  ids: (B, T) ints -> (B, T, D)"""
    return ag.gather(p.table, ids)


@functools.lru_cache(maxsize=None)
def position_encoding(max_len, d_model, dtype=np.float32):
    """The sinusoids of §3.5, positions from 0 (a read-only table, computed once):

        PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))

    -> (max_len, d_model)
    """
    positions = np.arange(max_len, dtype=np.float64)[:, None]  # (max_len, 1)
    rates = 10000.0 ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)  # (ceil(d/2),)
    angles = positions * rates  # (max_len, ceil(d/2))
    table = np.empty((max_len, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    table = table.astype(dtype)
    table.flags.writeable = False
    return table


def position_rows(max_len, d_model, start, length, dtype=np.float32):
    """PE[start : start + length] -> (length, d_model); positions past the table are an error."""
    if start < 0 or length < 0:
        raise ValueError(f"position encoding: start={start} and length={length} must be >= 0")
    if start + length > max_len:
        raise ValueError(f"position encoding: positions {start}..{start + length - 1} need "
                         f"{start + length} positions but the table holds max_len={max_len}")
    return position_encoding(max_len, d_model, np.dtype(dtype).type)[start:start + length]


def add_position_encoding(x, max_len, start=0):
    """x + PE[start : start + T] for x: (B, T, D) -> (B, T, D)"""
    return x + position_rows(max_len, x.shape[-1], start, x.shape[-2], x.dtype)


def embed_with_positions(p, ids, max_len, start=0):
    """E[ids] · √d_model + PE[start : start + T] (§3.4, §3.5).  ids: (B, T) -> (B, T, D)

    `start` offsets the positions, for feeding tokens after those already in a cache.
    """
    x = embed(p, ids)  # (B, T, D)
    return add_position_encoding(x * math.sqrt(x.shape[-1]), max_len, start)  # (B, T, D)


class FeedForward(NamedTuple):
    linear1: Dense  # (D, d_ff)
    linear2: Dense  # (d_ff, D)


def feed_forward_init(rng, d_model, d_ff, dtype=np.float32):
    return FeedForward(dense_init(rng, d_model, d_ff, dtype), dense_init(rng, d_ff, d_model, dtype))


def feed_forward(p, x, rate=0.0, rng=None, activation=ag.relu):
    """Position-wise FFN (§3.3): W2 · dropout(relu(W1 x + b1)) + b2.  (B, T, D) -> (B, T, D)

    With relu and no dropout, one fused op (fused_feed_forward); otherwise op by op."""
    if activation is ag.relu and (rate == 0 or rng is None) and one_fused_dtype(x, *p.linear1,
                                                                               *p.linear2):
        return fused_feed_forward(x, *p.linear1, *p.linear2)  # (B, T, D)
    return _composed_feed_forward(p, x, rate, rng, activation)  # (B, T, D)


def _composed_feed_forward(p, x, rate, rng, activation):
    h = activation(dense(p.linear1, x))  # (B, T, d_ff)
    return dense(p.linear2, ag.dropout(h, rate, rng))  # (B, T, D)


FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def one_fused_dtype(*arrays):
    """Whether the arrays (plain or traced) share one dtype, float32 or float64: what the
    fused sublayer ops compute in (anything else goes op by op, whose ops check it)."""
    dtype = arrays[0].dtype
    return dtype in FUSED_DTYPES and all(a.dtype == dtype for a in arrays[1:])


def reference_pullback(reference, arrays, fixed=()):
    """A fused op's composed pullback (for a traced cotangent): the vjp of its reference at
    the plain arrays its body was given, the trailing arguments that are not arrays (`fixed`:
    a head count, a mask) held, and None as their cotangents."""
    def composed_pullback(g):
        _, pullback = ag.vjp(lambda *a: reference(*a, *fixed), *arrays)
        return (*pullback(g), *(None,) * len(fixed))
    return composed_pullback


def _feed_forward_reference(x, w1, b1, w2, b2):
    """fused_feed_forward composed of the library's ops (what higher order and pictures
    record)."""
    p = FeedForward(Dense(w1, b1), Dense(w2, b2))
    return _composed_feed_forward(p, x, 0.0, None, ag.relu)


@ag.primitive(name="feed_forward", reference=_feed_forward_reference,
              pictured_as_reference=True)
def fused_feed_forward(x, w1, b1, w2, b2):
    """max(x W1 + b1, 0) W2 + b2 as one op (ag.kernels.feed_forward_forward: bias and relu
    in one pass after the first product, and relu's mask with b1's sum in one pass
    backward). x (B, T, D) -> (B, T, D). Pictures show the composition."""
    out, saved = ag.kernels.feed_forward_forward(x, w1, b1, w2, b2)

    def feed_forward_pullback(g):
        return ag.kernels.feed_forward_backward(g, saved)

    return out, feed_forward_pullback, reference_pullback(_feed_forward_reference,
                                                          (x, w1, b1, w2, b2))


def check_tokens(caller, ids, vocab, max_len, name="ids", start=0):
    """Token ids for a model: an integer array (B, T) of ids in 0 .. vocab - 1, at positions
    start .. start + T - 1 that the position table of max_len rows holds. -> ids as an array.
    `caller` ("lm.apply") and `name` ("src") name the call and the argument in the error."""
    array = ids if hasattr(ids, "dtype") else np.asarray(ids)  # a nested list, say
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
