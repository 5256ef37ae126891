"""Fast rules for models/attention.py: multi-head attention (self- and cross-attention) and
decoding's attention over cached keys and values and its projection into heads, each
forward and backward by the kernels of sublayers.py, for calls in one float dtype, with a
mask of the scores' rank or none."""
import numpy as np

import autograd_lite as ag

from .. import attention
from ..attention import MultiHeadAttention
from ..layers import Dense
from . import sublayers
from .conditions import dropout_fits, dropout_keep, mask_fits, none_empty, one_float_dtype


def _weights(p):
    """(wq, bq, wk, bk, wv, bv, wo, bo): the kernels' order."""
    return (*p.wq, *p.wk, *p.wv, *p.wo)


def _attention_cotangent(wq, wk, wv, wo):
    """A MultiHeadAttention of cotangents from (d_w, d_b) pairs; None for n_heads."""
    return MultiHeadAttention(*(Dense(*d) for d in (wq, wk, wv, wo)), None)


def _zeros_of(dense):
    """Zero cotangents of a projection that a call does not use, made only where it is
    traced."""
    return lambda: np.zeros_like(dense.w), lambda: np.zeros_like(dense.b)


def multihead_attention_applies(p, x_q, x_kv, mask, rate, rng):
    attention.check_activations(p, x_q, x_kv)  # refused as the function refuses it
    scores = (x_q.shape[0], p.n_heads, x_q.shape[1], x_kv.shape[1])
    return (dropout_fits(rate, rng) and one_float_dtype(x_q, x_kv, p)
            and none_empty(x_q, x_kv) and mask_fits(mask, scores))


@ag.fast_rule(attention.multihead_attention, applies=multihead_attention_applies)
def multihead_attention_rule(p, x_q, x_kv, mask, rate, rng):
    """The projections that share an input in one product, the heads as views, the softmax
    kernel (sublayers.multihead_attention_forward); x_q is x_kv means self-attention, one
    traced value (core/rules.py keeps two values two objects). Dropout on the weights P
    draws the mask the function's ag.dropout would."""
    scores = (x_q.shape[0], p.n_heads, x_q.shape[1], x_kv.shape[1])  # (B, H, T_q, T_k)
    keep = dropout_keep(scores, x_q.dtype, rate, rng)
    out, saved = sublayers.multihead_attention_forward(x_q, x_kv, _weights(p), p.n_heads, mask,
                                                       keep)

    def multihead_attention_pullback(g):
        d_x_q, d_x_kv, *d = sublayers.multihead_attention_backward(g, saved)
        return (_attention_cotangent(d[0:2], d[2:4], d[4:6], d[6:8]), d_x_q, d_x_kv, None,
                None, None)
    return out, multihead_attention_pullback


def attention_over_applies(p, x_q, kv, mask):
    keys, values = kv
    scores = (x_q.shape[0], p.n_heads, x_q.shape[1], keys.shape[2])
    return (one_float_dtype(x_q, keys, values, p.wq, p.wo) and none_empty(x_q, keys)
            and mask_fits(mask, scores))


@ag.fast_rule(attention.attention_over, applies=attention_over_applies)
def attention_over_rule(p, x_q, kv, mask):
    """The query's product with 1/√d_head folded in, the softmax kernel, the heads written
    into the output product's rows (sublayers.attention_over_forward)."""
    out, saved = sublayers.attention_over_forward(x_q, *kv, *p.wq, *p.wo, mask)

    def attention_over_pullback(g):
        d_x_q, d_keys, d_values, d_wq, d_bq, d_wo, d_bo = sublayers.attention_over_backward(
            g, saved)
        return (_attention_cotangent((d_wq, d_bq), _zeros_of(p.wk), _zeros_of(p.wv),
                                     (d_wo, d_bo)),  # W_K, W_V unused: keys, values cached
                d_x_q, (d_keys, d_values), None)
    return out, attention_over_pullback


def projected_heads_applies(p, x, n_heads):
    return x.ndim == 3 and one_float_dtype(x, p) and none_empty(x)


@ag.fast_rule(attention.projected_heads, applies=projected_heads_applies)
def projected_heads_rule(p, x, n_heads):
    """x W + b split into heads as a view of the product's rows
    (sublayers.heads_projection_forward)."""
    out, saved = sublayers.heads_projection_forward(x, *p, n_heads)

    def projected_heads_pullback(g):
        d_x, d_w, d_b = sublayers.heads_projection_backward(g, saved)
        return Dense(d_w, d_b), d_x, None
    return out, projected_heads_pullback
