"""The kernels of the models' fast rules (models/fast/attention.py and layers.py) on plain
arrays, forward and backward, written once for both kernel backends: BLAS through numpy's @,
and the kernels in use (ag.kernels: numba's or numpy's) for the softmax, the biases and the
relu.

Multi-head attention: the projections packed into one product where they share an input,
the heads as views, the scores' softmax, and the output projection:

    q = x_q W_q + b_q,  k = x_kv W_k + b_k,  v = x_kv W_v + b_v        (N, D), split into H heads
    P = softmax(q kᵀ / √d_head, mask),  o = dropout(P) v,  out = merge(o) W_o + b_o

With x_q and x_kv one object (self-attention: one traced value, see the forward) the three
projections are one product with [W_q W_k W_v] (D, 3D) and their backward one product each
way; otherwise (cross-attention) W_k and W_v are packed. 1/√d_head is folded into W_q and
b_q (a (D, D) multiply, not a pass over the queries), and the per-head products write
straight into the packed layouts the projections read (`np.matmul(..., out=view)`: no copy
of the heads either way). Shapes: x_q (B, T_q, D), x_kv (B, T_k, D), weights (D, D),
biases (D,), mask bool, broadcastable to (B, H, T_q, T_k) and of that rank, or None.

The feed-forward network: out = dropout(max(x W1 + b1, 0)) W2 + b2, the bias and relu one
pass after the first product, and in the backward pass relu's mask and b1's sum one pass;
or GPT-2's, gelu in relu's place (ag.kernels' gelu forward and backward after the bias).
Dropout (attention's on P, the feed-forward's on the hidden layer) multiplies by the mask
that ag.dropout would draw, `keep` (0 or 1/(1 - rate)), which the rules draw from the same
generator in the same order as the functions do.
x (B, T, D), W1 (D, d_ff), W2 (d_ff, D).

The core (scores, softmax, dropout, the product with V; and its backward) runs in shares of
the B·H heads where ag.kernels.parallel.split_rows splits, the dropout mask drawn whole
before it: the same bits at any thread count.

Decoding's two: a projection split into heads, x W + b -> (B, H, T, d_head) as a view of the
product's rows; and attention over keys and values already in heads (a cache, or the
memory's), the query's projection, the scores' softmax and the output projection as above.
"""
import math

import numpy as np

import autograd_lite as ag

column_sums = ag.kernels.numpy_kernels.column_sums
split_rows = ag.kernels.parallel.split_rows


def _heads(y, batch, length, parts, n_heads):
    """Packed projections y (B·T, parts·D) -> views (parts, B, H, T, d_head)."""
    d_head = y.shape[1] // (parts * n_heads)
    return y.reshape(batch, length, parts, n_heads, d_head).transpose(2, 0, 3, 1, 4)


def _packed_buffer(parts, batch, length, n_heads, d_head, dtype):
    """A fresh (B·T, parts·D) array and its per-head views (parts, B, H, T, d_head), for
    products to write into as `_heads` lays them out (no copy of the heads afterwards)."""
    rows = np.empty((batch * length, parts * n_heads * d_head), dtype)
    return rows, _heads(rows, batch, length, parts, n_heads)


def _project(x_rows, w, b):
    """x W + b, the bias added in place."""
    return ag.kernels.add_bias(x_rows @ w, b)


def _query_scale(weights, n_heads):
    """1 / √d_head in the weights' dtype."""
    return weights[0].dtype.type(1 / math.sqrt(weights[0].shape[1] // n_heads))


def head_blocks(start, stop, n_heads):
    """The (batch slice, head slice) blocks that cover the (batch, head) pairs start ..
    stop - 1 of the (B, H) grid taken row by row: the last heads of a first batch, whole
    batches, the first heads of a last batch (those that are there)."""
    blocks = []
    while start < stop:
        b, h = divmod(start, n_heads)
        if h or stop - start < n_heads:  # a part of batch b
            end = min(stop, (b + 1) * n_heads)
            blocks.append((slice(b, b + 1), slice(h, end - b * n_heads)))
        else:  # whole batches
            end = stop // n_heads * n_heads
            blocks.append((slice(b, end // n_heads), slice(None)))
        start = end
    return blocks


def _of_block(a, block):
    """a's part for a block of (batch, head) pairs; a mask's axes of size 1 broadcast, whole."""
    if a is None:
        return None
    return a[tuple(part if size > 1 else slice(None) for part, size in zip(block, a.shape))]


def _attend_block(block, q, k, v, mask, keep, heads):
    """The attention core on one block of heads (views of the whole's arrays), A v written
    into `heads`, the block's part of the merged rows. -> (block, A, the softmax's saved)"""
    scores = q @ np.swapaxes(k, -1, -2)  # (b, h, T_q, T_k)
    probabilities, softmax_saved = ag.kernels.softmax_forward(scores, mask)
    attended = probabilities.reshape(scores.shape)
    if keep is not None:
        attended = attended * keep
    np.matmul(attended, v, out=heads)  # (b, h, T_q, d_head)
    return block, attended, softmax_saved


def _attend(q, k, v, mask, keep=None):
    """The attention core: P = softmax(q kᵀ, mask) (q already scaled by 1/√d_head), its
    dropout A = P ⊙ keep (A = P without one), and A v, written into the rows the output
    projection reads; in shares of the B·H heads (split_rows), each share its blocks of
    heads (head_blocks) with keep's and the mask's parts: the same bits at any share count.
    q (B, H, T_q, d_head), k and v (B, H, T_k, d_head), keep: dropout's scaled mask
    (B, H, T_q, T_k), drawn whole beforehand, or None.
    -> (merged (B·T_q, D), per share the list of its blocks' (block, A, softmax's saved))"""
    batch, n_heads, t_q, d_head = q.shape

    def attend_share(start, stop):
        return [_attend_block(block, q[block], k[block], v[block], _of_block(mask, block),
                              _of_block(keep, block), heads[block])
                for block in head_blocks(start, stop, n_heads)]
    merged, (heads,) = _packed_buffer(1, batch, t_q, n_heads, d_head, q.dtype)
    shares = split_rows(attend_share, batch * n_heads, row_size=t_q * k.shape[2])
    return merged, shares


def _attend_backward(g_rows, wo, merged, q, k, v, shares, keep, d_q, d_k, d_v):
    """The output projection's and the core's backward: from g_rows (B·T_q, D), the
    cotangents of q, k and v written into d_q, d_k, d_v (arrays or views of q's, k's and v's
    shape), in the forward's shares; shares and keep as _attend gave and took them.
    -> (d_wo, d_bo)"""
    batch, n_heads, t_q, _ = q.shape
    d_heads = _heads(g_rows @ wo.T, batch, t_q, 1, n_heads)[0]  # (B, H, T_q, d_head)

    def backward_share(start, stop):
        for share in shares[start:stop]:
            for block, attended, softmax_saved in share:
                _attend_block_backward(d_heads[block], q[block], k[block], v[block], attended,
                                       _of_block(keep, block), softmax_saved, d_q[block],
                                       d_k[block], d_v[block])
    heads_per_share = batch * n_heads // len(shares)
    split_rows(backward_share, len(shares), row_size=heads_per_share * t_q * k.shape[2])
    return merged.T @ g_rows, column_sums(g_rows)


def _attend_block_backward(d_heads, q, k, v, attended, keep, softmax_saved, d_q, d_k, d_v):
    """One block's core backward: d_q, d_k and d_v (views) written from d_heads."""
    d_attended = d_heads @ np.swapaxes(v, -1, -2)  # (b, h, T_q, T_k)
    d_probabilities = d_attended if keep is None else d_attended * keep
    d_scores = ag.kernels.softmax_backward(d_probabilities, softmax_saved)
    d_scores = d_scores.reshape(attended.shape)  # (b, h, T_q, T_k)
    np.matmul(d_scores, k, out=d_q)  # the cotangent of the scaled query
    np.matmul(np.swapaxes(d_scores, -1, -2), q, out=d_k)
    np.matmul(np.swapaxes(attended, -1, -2), d_heads, out=d_v)


def multihead_attention_forward(x_q, x_kv, weights, n_heads, mask, keep=None):
    """-> (out (B, T_q, D), saved). weights: (wq, bq, wk, bk, wv, bv, wo, bo); keep: the
    dropout mask of the attention weights (B, H, T_q, T_k), scaled, or None. The scores'
    1/√d_head is folded into the query's projection (q' = x_q (W_q/√d) + b_q/√d), one
    (D, D) multiply instead of a pass over every query."""
    wq, bq, wk, bk, wv, bv, wo, bo = weights
    batch, t_q, d = x_q.shape
    t_k = x_kv.shape[1]
    scale = _query_scale(weights, n_heads)
    q_rows = x_q.reshape(-1, d)
    # One object is one traced value: the engine hands a fused body two different arguments
    # as two objects even where they share data (core/tracer.py), so a constant or a second
    # differentiated copy of the queries goes the cross-attention way, with its own cotangent.
    self_attention = x_q is x_kv
    if self_attention:  # one product for the three projections
        packed_w = np.concatenate([wq * scale, wk, wv], axis=1)  # (D, 3D)
        projected = _project(q_rows, packed_w, np.concatenate([bq * scale, bk, bv]))
        q, k, v = _heads(projected, batch, t_q, 3, n_heads)
    else:  # cross-attention: the query's product, then one for the keys and values
        packed_w = np.concatenate([wq * scale, wk, wv], axis=1)  # (D, 3D), split below
        (q,) = _heads(_project(q_rows, packed_w[:, :d], bq * scale), batch, t_q, 1, n_heads)
        k, v = _heads(_project(x_kv.reshape(-1, d), packed_w[:, d:], np.concatenate([bk, bv])),
                      batch, t_k, 2, n_heads)
    merged, shares = _attend(q, k, v, mask, keep)
    out = _project(merged, wo, bo).reshape(batch, t_q, d)
    saved = (x_q, x_kv, self_attention, wo, packed_w, scale, n_heads, q, k, v, shares, keep,
             merged)
    return out, saved


def multihead_attention_backward(g, saved):
    """-> the cotangents of (x_q, x_kv, wq, bq, wk, bk, wv, bv, wo, bo); x_kv's is None in
    self-attention (x_q's then holds both). q is the scaled query q', so the cotangents of
    W_q and b_q are those of its scaled copy times 1/√d_head."""
    (x_q, x_kv, self_attention, wo, packed_w, scale, n_heads, q, k, v, shares, keep,
     merged) = saved
    batch, t_q, d = x_q.shape
    t_k, d_head = x_kv.shape[1], q.shape[-1]
    if self_attention:
        d_rows, (d_q, d_k, d_v) = _packed_buffer(3, batch, t_q, n_heads, d_head, g.dtype)
    else:
        d_q_rows, (d_q,) = _packed_buffer(1, batch, t_q, n_heads, d_head, g.dtype)
        d_kv_rows, (d_k, d_v) = _packed_buffer(2, batch, t_k, n_heads, d_head, g.dtype)
    d_wo, d_bo = _attend_backward(g.reshape(-1, d), wo, merged, q, k, v, shares, keep, d_q,
                                  d_k, d_v)
    if self_attention:
        d_w, d_b = x_q.reshape(-1, d).T @ d_rows, column_sums(d_rows)
        d_x = (d_rows @ packed_w.T).reshape(x_q.shape)
        return (d_x, None, d_w[:, :d] * scale, d_b[:d] * scale, d_w[:, d:2 * d], d_b[d:2 * d],
                d_w[:, 2 * d:], d_b[2 * d:], d_wo, d_bo)
    d_wkv, d_bkv = x_kv.reshape(-1, d).T @ d_kv_rows, column_sums(d_kv_rows)
    return ((d_q_rows @ packed_w[:, :d].T).reshape(x_q.shape),
            (d_kv_rows @ packed_w[:, d:].T).reshape(x_kv.shape),
            (x_q.reshape(-1, d).T @ d_q_rows) * scale, column_sums(d_q_rows) * scale,
            d_wkv[:, :d], d_bkv[:d], d_wkv[:, d:], d_bkv[d:], d_wo, d_bo)


def feed_forward_forward(x, w1, b1, w2, b2, keep=None, gelu=False):
    """-> (out (B, T, D), saved). keep: the dropout mask of the hidden layer (B, T, d_ff),
    scaled, or None. gelu: GELU's tanh form (ag.kernels.gelu_forward) after the bias, where
    relu is the default."""
    x_rows = x.reshape(-1, x.shape[-1])
    if gelu:
        hidden, activation_saved = ag.kernels.gelu_forward(_project(x_rows, w1, b1))
    else:
        hidden = activation_saved = ag.kernels.bias_relu_forward(x_rows @ w1, b1)  # (N, d_ff)
    keep = None if keep is None else keep.reshape(hidden.shape)
    dropped = hidden if keep is None else hidden * keep  # (N, d_ff)
    out = _project(dropped, w2, b2).reshape(x.shape[:-1] + w2.shape[1:])
    return out, (x_rows, w1, w2, activation_saved, gelu, dropped, keep, x.shape)


def feed_forward_backward(g, saved):
    """-> the cotangents of (x, w1, b1, w2, b2)."""
    x_rows, w1, w2, activation_saved, gelu, dropped, keep, x_shape = saved
    g_rows = g.reshape(-1, g.shape[-1])
    d_w2, d_b2 = dropped.T @ g_rows, column_sums(g_rows)
    d_dropped = g_rows @ w2.T  # (N, d_ff)
    d_hidden = d_dropped if keep is None else d_dropped * keep
    if gelu:
        d_z = ag.kernels.gelu_backward(d_hidden, activation_saved)  # (N, d_ff)
        d_b1 = column_sums(d_z)
    else:  # activation_saved is relu's output
        d_z, d_b1 = ag.kernels.bias_relu_backward(d_hidden, activation_saved)
    return (d_z @ w1.T).reshape(x_shape), x_rows.T @ d_z, d_b1, d_w2, d_b2


def heads_projection_forward(x, w, b, n_heads):
    """x W + b split into heads: x (B, T, D) -> ((B, H, T, d_head), a view of the (B·T, D)
    product; saved)."""
    batch, length, d = x.shape
    x_rows = x.reshape(-1, d)
    (heads,) = _heads(_project(x_rows, w, b), batch, length, 1, n_heads)
    return heads, (x_rows, w, x.shape)


def _merged_rows(heads):
    """(B, H, T, d_head) -> its rows (B·T, H·d_head), a fresh C-contiguous array."""
    batch, n_heads, length, d_head = heads.shape
    rows, (view,) = _packed_buffer(1, batch, length, n_heads, d_head, heads.dtype)
    view[...] = heads
    return rows


def heads_projection_backward(g, saved):
    """-> the cotangents of (x, w, b) from g (B, H, T, d_head)."""
    x_rows, w, x_shape = saved
    g_rows = _merged_rows(g)
    return (g_rows @ w.T).reshape(x_shape), x_rows.T @ g_rows, column_sums(g_rows)


def attention_over_forward(x_q, k, v, wq, bq, wo, bo, mask):
    """Multi-head attention of x_q (B, T_q, D) over keys and values already split into heads,
    k and v (B, H, T_k, d_head): q = x_q W_q + b_q (1/√d_head folded in), P = softmax(q kᵀ,
    mask), out = merge(P v) W_o + b_o. -> (out (B, T_q, D), saved)"""
    batch, t_q, d = x_q.shape
    n_heads, d_head = k.shape[1], k.shape[3]
    scale = wq.dtype.type(1 / math.sqrt(d_head))
    x_rows, scaled_wq = x_q.reshape(-1, d), wq * scale
    (q,) = _heads(_project(x_rows, scaled_wq, bq * scale), batch, t_q, 1, n_heads)
    merged, shares = _attend(q, k, v, mask)
    out = _project(merged, wo, bo).reshape(batch, t_q, d)
    return out, (x_rows, scaled_wq, wo, scale, q, k, v, shares, merged)


def attention_over_backward(g, saved):
    """-> the cotangents of (x_q, k, v, wq, bq, wo, bo)."""
    x_rows, scaled_wq, wo, scale, q, k, v, shares, merged = saved
    batch, n_heads, t_q, d_head = q.shape
    d_q_rows, (d_q,) = _packed_buffer(1, batch, t_q, n_heads, d_head, g.dtype)
    d_k, d_v = np.empty(k.shape, g.dtype), np.empty(v.shape, g.dtype)
    d_wo, d_bo = _attend_backward(g.reshape(-1, g.shape[-1]), wo, merged, q, k, v, shares,
                                  None, d_q, d_k, d_v)
    d_x = (d_q_rows @ scaled_wq.T).reshape(g.shape[:-1] + (scaled_wq.shape[0],))
    return (d_x, d_k, d_v, (x_rows.T @ d_q_rows) * scale, column_sums(d_q_rows) * scale,
            d_wo, d_bo)
