"""Scaled dot-product and multi-head attention (§3.2), with boolean masks (True = may
attend). The decoder's attention over the encoder's output has the paper's own name,
cross_attention (@ag.viz.alias: pictures and ag.viz.capture(scope="cross_attention") show
its call by it). For decoding one token at a time, keys_and_values computes keys and
values once, attention_over attends to them, and cached_self_attention appends new rows to
a cache. multihead_attention and attention_over share one body, multihead: the heads'
attention, merged and projected by W_O. Activations (B, T, D); per-head arrays
(B, H, T, d_head) with D = H · d_head. Masks broadcast to the scores (B, H, T_q, T_k): a
padding mask is (B, 1, 1, T_k), a causal mask (1, 1, T_q, T_k). multihead_attention,
attention_over and projected_heads are fusable: the fast rules of models/fast stand in for
them on plain arrays.
"""
import math
from typing import NamedTuple

import numpy as np

import autograd_lite as ag

from .layers import Dense, dense, dense_init


def scaled_dot_product_attention(q, k, v, mask=None, rate=0.0, rng=None):
    """softmax(q kᵀ / √d_k) v, with dropout on the weights.

    q: (B, H, T_q, d_k), k: (B, H, T_k, d_k), v: (B, H, T_k, d_v), mask: bool,
    broadcastable to (B, H, T_q, T_k). Returns (out (B, H, T_q, d_v), weights (B, H, T_q, T_k)).
    A query with every key masked attends to nothing: its row of weights is zero.
    """
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ ag.swapaxes(k, -1, -2)  # (B, H, T_q, T_k)
    weights = ag.softmax(scores, axis=-1, mask=mask)  # (B, H, T_q, T_k)
    return ag.dropout(weights, rate, rng) @ v, weights  # (B, H, T_q, d_v)


class MultiHeadAttention(NamedTuple):
    wq: Dense  # (D, D)
    wk: Dense  # (D, D)
    wv: Dense  # (D, D)
    wo: Dense  # (D, D)
    n_heads: int


def multihead_attention_init(rng, d_model, n_heads, dtype=np.float32):
    if d_model % n_heads:
        raise ValueError(f"multi-head attention: d_model={d_model} is not divisible by "
                         f"n_heads={n_heads}")
    wq, wk, wv, wo = (dense_init(rng, d_model, d_model, dtype) for _ in range(4))
    return MultiHeadAttention(wq, wk, wv, wo, n_heads)


def split_heads(x, n_heads):
    """(B, T, D) -> (B, H, T, D/H)"""
    b, t, d = x.shape
    return ag.transpose(ag.reshape(x, (b, t, n_heads, d // n_heads)), (0, 2, 1, 3))


def merge_heads(x):
    """(B, H, T, d_head) -> (B, T, H·d_head)"""
    b, h, t, d_head = x.shape
    return ag.reshape(ag.transpose(x, (0, 2, 1, 3)), (b, t, h * d_head))


def check_activations(p, x_q, x_kv):
    """x_q (B, T_q, D) and x_kv (B, T_k, D), with D the model width of the weights p."""
    d_model = p.wq.w.shape[0]
    for name, x in (("x_q", x_q), ("x_kv", x_kv)):
        if x.ndim != 3 or x.shape[2] != d_model:
            raise ValueError(f"multihead_attention: {name} {x.shape} must be (B, T, {d_model})")
    if x_q.shape[0] != x_kv.shape[0]:
        raise ValueError(f"multihead_attention: x_q {x_q.shape} and x_kv {x_kv.shape} have "
                         f"different batch sizes")


@ag.viz.transparent  # pictured as part of its caller: multihead_attention or attention_over
def multihead(p, q, k, v, mask=None, rate=0.0, rng=None):
    """Concat(head_1..head_H) W_O, head_i = Attention(q_i, k_i, v_i): the heads of queries,
    keys and values already projected, q (B, H, T_q, d_head), k and v (B, H, T_k, d_head).
    -> (B, T_q, D)"""
    heads, _ = scaled_dot_product_attention(q, k, v, mask, rate, rng)  # (B, H, T_q, d_head)
    return dense(p.wo, merge_heads(heads))  # (B, T_q, D)


@ag.fusable
def multihead_attention(p, x_q, x_kv, mask=None, rate=0.0, rng=None):
    """MultiHead(Q, K, V) = Concat(head_1..head_H) W_O, head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i).

    x_q: (B, T_q, D) the queries' source; x_kv: (B, T_k, D) the keys' and values' source.
    -> (B, T_q, D)
    """
    check_activations(p, x_q, x_kv)
    q = split_heads(dense(p.wq, x_q), p.n_heads)  # (B, H, T_q, d_head)
    k = split_heads(dense(p.wk, x_kv), p.n_heads)  # (B, H, T_k, d_head)
    v = split_heads(dense(p.wv, x_kv), p.n_heads)  # (B, H, T_k, d_head)
    return multihead(p, q, k, v, mask, rate, rng)  # (B, T_q, D)


@ag.viz.alias
def cross_attention(p, x, memory, memory_mask=None, rate=0.0, rng=None):
    """The decoder's attention over the encoder's output (§3.2.3): multihead_attention with
    queries from x (B, T, D), keys and values from memory (B, S, D); memory_mask (B, 1, 1, S).
    -> (B, T, D)"""
    return multihead_attention(p, x, memory, memory_mask, rate, rng)


def padding_mask(ids, pad):
    """True at the keys that are not padding: ids (B, T) -> (B, 1, 1, T); None when pad is None."""
    if pad is None:
        return None
    return (ids != pad)[:, None, None, :]


def causal_mask(length, offset=0, like=None):
    """True where query t (at position offset + t) may attend key s, i.e. s <= offset + t:
    -> (1, 1, T, offset + T), an array of like's module (numpy's, or a device's). offset
    counts the keys that come before the queries (a cache)."""
    xp = ag.array_module(like)
    return xp.tril(xp.ones((length, offset + length), dtype=bool), k=offset)[None, None]


def keys_and_values(p, x_kv):
    """The per-head keys and values of x_kv (B, T_k, D), computed once for attention_over
    (the memory's, in decoding). -> (keys, values), each (B, H, T_k, d_head)"""
    return projected_heads(p.wk, x_kv, p.n_heads), projected_heads(p.wv, x_kv, p.n_heads)


@ag.fusable
def projected_heads(p, x, n_heads):
    """dense(p, x) split into heads: (B, T, D) -> (B, H, T, d_head)"""
    return split_heads(dense(p, x), n_heads)  # (B, H, T, d_head)


@ag.fusable
def attention_over(p, x_q, kv, mask=None):
    """multihead_attention of x_q (B, T_q, D) over keys and values already computed:
    kv = (keys, values), each (B, H, T_k, d_head). -> (B, T_q, D)"""
    q = split_heads(dense(p.wq, x_q), p.n_heads)  # (B, H, T_q, d_head)
    return multihead(p, q, *kv, mask)  # (B, T_q, D)


def cached_self_attention(p, x, cache):
    """Self-attention of new rows x (B, t, D), which follow the s rows whose keys and values
    are in cache = (keys, values), each (B, H, s, d_head): new row i sees the s cached rows
    and new rows 0..i (the causal mask, offset by s).

    -> (out (B, t, D), (keys, values) each (B, H, s + t, d_head))
    """
    k, v = keys_and_values(p, x)  # (B, H, t, d_head) each
    kv = (ag.concatenate([cache[0], k], axis=2),  # (B, H, s + t, d_head)
          ag.concatenate([cache[1], v], axis=2))  # (B, H, s + t, d_head)
    seen, t = cache[0].shape[2], x.shape[1]
    mask = causal_mask(t, seen, x) if t > 1 else None  # (1, 1, t, s + t); one row sees every key
    return attention_over(p, x, kv, mask), kv  # (B, t, D)
