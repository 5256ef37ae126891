"""The two sublayers of a Transformer block on plain arrays, forward and backward, for the
fused ops of models/ (attention.fused_multihead_attention, layers.fused_feed_forward).
Written once for both backends: BLAS through numpy's @, and the kernels in use (numba's or
numpy's) for the softmax, the biases and the relu.

Multi-head attention: the projections packed into one product where they share an input,
the heads as views, the scores' softmax, and the output projection:

    q = x_q W_q + b_q,  k = x_kv W_k + b_k,  v = x_kv W_v + b_v        (N, D), split into H heads
    P = softmax(q kᵀ / √d_head, mask),  o = P v,  out = merge(o) W_o + b_o

With x_q and x_kv one array (self-attention) the three projections are one product with
[W_q W_k W_v] (D, 3D) and their backward one product each way; otherwise (cross-attention)
W_k and W_v are packed. Shapes: x_q (B, T_q, D), x_kv (B, T_k, D), weights (D, D), biases
(D,), mask bool, broadcastable to (B, H, T_q, T_k) and of that rank, or None.

The feed-forward network: out = max(x W1 + b1, 0) W2 + b2, the bias and relu one pass
after the first product, and in the backward pass relu's mask and b1's sum one pass.
x (B, T, D), W1 (D, d_ff), W2 (d_ff, D).
"""
import math

import numpy as np

from .. import kernels
from .numpy_kernels import column_sums


def _heads(y, batch, length, parts, n_heads):
    """Packed projections y (B·T, parts·D) -> views (parts, B, H, T, d_head)."""
    d_head = y.shape[1] // (parts * n_heads)
    return y.reshape(batch, length, parts, n_heads, d_head).transpose(2, 0, 3, 1, 4)


def _packed_rows(parts, batch, length, n_heads):
    """Per-head cotangents, each (B, H, T, d_head) -> packed rows (B·T, parts·D), as
    _heads lays them out (one copy of each)."""
    d_head = parts[0].shape[-1]
    rows = np.empty((batch, length, len(parts), n_heads, d_head), parts[0].dtype)
    per_head = rows.transpose(2, 0, 3, 1, 4)
    for i, part in enumerate(parts):
        per_head[i] = part
    return rows.reshape(batch * length, len(parts) * n_heads * d_head)


def _project(x_rows, w, b):
    """x W + b, the bias added in place."""
    return kernels.add_bias(x_rows @ w, b)


def multihead_attention_forward(x_q, x_kv, weights, n_heads, mask):
    """-> (out (B, T_q, D), saved). weights: (wq, bq, wk, bk, wv, bv, wo, bo)."""
    wq, bq, wk, bk, wv, bv, wo, bo = weights
    batch, t_q, d = x_q.shape
    t_k = x_kv.shape[1]
    self_attention = x_q is x_kv
    q_rows = x_q.reshape(-1, d)
    if self_attention:
        packed_w = np.concatenate([wq, wk, wv], axis=1)  # (D, 3D)
        q, k, v = _heads(_project(q_rows, packed_w, np.concatenate([bq, bk, bv])), batch, t_q,
                         3, n_heads)
    else:
        packed_w = np.concatenate([wk, wv], axis=1)  # (D, 2D)
        (q,) = _heads(_project(q_rows, wq, bq), batch, t_q, 1, n_heads)
        k, v = _heads(_project(x_kv.reshape(-1, d), packed_w, np.concatenate([bk, bv])), batch,
                      t_k, 2, n_heads)
    scaled_q = q * x_q.dtype.type(1 / math.sqrt(q.shape[-1]))  # (B, H, T_q, d_head)
    scores = scaled_q @ np.swapaxes(k, -1, -2)  # (B, H, T_q, T_k)
    weights_, softmax_saved = kernels.softmax_forward(scores, mask)
    weights_ = weights_.reshape(scores.shape)
    heads = weights_ @ v  # (B, H, T_q, d_head)
    merged = np.ascontiguousarray(heads.transpose(0, 2, 1, 3)).reshape(-1, d)  # (B·T_q, D)
    out = _project(merged, wo, bo).reshape(batch, t_q, d)
    saved = (x_q, x_kv, wq, wo, packed_w, n_heads, scaled_q, k, v, weights_, softmax_saved,
             merged)
    return out, saved


def multihead_attention_backward(g, saved):
    """-> the cotangents of (x_q, x_kv, wq, bq, wk, bk, wv, bv, wo, bo); x_kv's is None in
    self-attention (x_q's then holds both)."""
    (x_q, x_kv, wq, wo, packed_w, n_heads, scaled_q, k, v, weights_, softmax_saved,
     merged) = saved
    batch, t_q, d = x_q.shape
    g_rows = g.reshape(-1, d)
    d_wo, d_bo = merged.T @ g_rows, column_sums(g_rows)
    d_heads = (g_rows @ wo.T).reshape(batch, t_q, n_heads, -1).transpose(0, 2, 1, 3)
    d_v = np.swapaxes(weights_, -1, -2) @ d_heads  # (B, H, T_k, d_head)
    d_weights = d_heads @ np.swapaxes(v, -1, -2)  # (B, H, T_q, T_k)
    d_scores = kernels.softmax_backward(d_weights, softmax_saved).reshape(d_weights.shape)
    d_q = d_scores @ k
    d_q *= scaled_q.dtype.type(1 / math.sqrt(scaled_q.shape[-1]))
    d_k = np.swapaxes(d_scores, -1, -2) @ scaled_q
    if x_q is x_kv:
        d_rows = _packed_rows((d_q, d_k, d_v), batch, t_q, n_heads)  # (N, 3D)
        d_w, d_b = x_q.reshape(-1, d).T @ d_rows, column_sums(d_rows)
        d_x = (d_rows @ packed_w.T).reshape(x_q.shape)
        return (d_x, None, d_w[:, :d], d_b[:d], d_w[:, d:2 * d], d_b[d:2 * d], d_w[:, 2 * d:],
                d_b[2 * d:], d_wo, d_bo)
    d_q_rows = _packed_rows((d_q,), batch, t_q, n_heads)  # (B·T_q, D)
    d_kv_rows = _packed_rows((d_k, d_v), batch, x_kv.shape[1], n_heads)  # (B·T_k, 2D)
    d_wkv, d_bkv = x_kv.reshape(-1, d).T @ d_kv_rows, column_sums(d_kv_rows)
    return ((d_q_rows @ wq.T).reshape(x_q.shape), (d_kv_rows @ packed_w.T).reshape(x_kv.shape),
            x_q.reshape(-1, d).T @ d_q_rows, column_sums(d_q_rows), d_wkv[:, :d], d_bkv[:d],
            d_wkv[:, d:], d_bkv[d:], d_wo, d_bo)


def feed_forward_forward(x, w1, b1, w2, b2):
    """-> (out (B, T, D), saved)."""
    x_rows = x.reshape(-1, x.shape[-1])
    hidden = kernels.bias_relu_forward(x_rows @ w1, b1)  # (N, d_ff)
    out = _project(hidden, w2, b2).reshape(x.shape[:-1] + w2.shape[1:])
    return out, (x_rows, w1, w2, hidden, x.shape)


def feed_forward_backward(g, saved):
    """-> the cotangents of (x, w1, b1, w2, b2)."""
    x_rows, w1, w2, hidden, x_shape = saved
    g_rows = g.reshape(-1, g.shape[-1])
    d_w2, d_b2 = hidden.T @ g_rows, column_sums(g_rows)
    d_z, d_b1 = kernels.bias_relu_backward(g_rows @ w2.T, hidden)  # (N, d_ff), (d_ff,)
    return (d_z @ w1.T).reshape(x_shape), x_rows.T @ d_z, d_b1, d_w2, d_b2
