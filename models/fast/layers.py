"""Fast rules for models/layers.py: the feed-forward network with relu or gelu (GPT-2's) and
the post-LN blocks' Add & Norm, forward and backward by the kernels of sublayers.py and
ag.kernels."""
import numpy as np

import autograd_lite as ag

from .. import layers
from ..layers import Dense, FeedForward, LayerNorm
from . import sublayers
from .conditions import dropout_fits, dropout_keep, one_float_dtype


def feed_forward_applies(p, x, rate, rng, activation):
    fields = getattr(p, "_fields", ())
    return ((activation is ag.relu or activation is ag.gelu)
            and fields[:2] == FeedForward._fields and fields[2:] in ((), ("activation",))
            and dropout_fits(rate, rng) and one_float_dtype(x, p.linear1, p.linear2))


@ag.fast_rule(layers.feed_forward, applies=feed_forward_applies)
def feed_forward_rule(p, x, rate, rng, activation):
    """max(x W1 + b1, 0) W2 + b2: bias and relu in one pass after the first product, and
    relu's mask with b1's sum in one pass backward (sublayers.feed_forward_forward); with
    gelu, its kernels after the bias. Dropout on the hidden layer draws the mask the
    function's ag.dropout would. p: a FeedForward, or an ActivatedFeedForward (whose
    activation gets no cotangent)."""
    hidden = x.shape[:-1] + p.linear1.w.shape[1:]  # (B, T, d_ff)
    keep = dropout_keep(hidden, x.dtype, rate, rng)
    out, saved = sublayers.feed_forward_forward(x, *p.linear1, *p.linear2, keep,
                                                gelu=activation is ag.gelu)

    def feed_forward_pullback(g):
        d_x, d_w1, d_b1, d_w2, d_b2 = sublayers.feed_forward_backward(g, saved)
        d_p = type(p)(Dense(d_w1, d_b1), Dense(d_w2, d_b2), *[None] * (len(p) - 2))
        return d_p, d_x, None, None, None
    return out, feed_forward_pullback


def add_and_norm_applies(p, x, y, eps):
    d = x.shape[-1] if x.ndim else None
    return (x.shape == y.shape and x.size > 0 and p.scale.shape == (d,)
            and p.bias.shape == (d,) and one_float_dtype(x, y, p))


@ag.fast_rule(layers.add_and_norm, applies=add_and_norm_applies, takes_traced=True)
def add_and_norm_rule(p, x, y, eps):
    """The sum read in the layer norm's first pass, not written out first
    (ag.kernels.residual_layer_norm_forward); x and y get the same cotangent, the norm's.
    The pullback keeps x̂ and 1/σ, not x and y. A traced cotangent takes the function's own
    vjp at x + y - μ (x̂ σ, from what was kept), where the norm sees the x̂ and σ it saw at
    x + y."""
    out, saved = ag.kernels.residual_layer_norm_forward(x, y, p.scale, p.bias, eps)
    shape, eps_shape = x.shape, np.shape(eps)

    def add_and_norm_pullback(g):
        if ag.is_recorded(g):
            x_hat, inv_std = ag.kernels.layer_norm_normalized(saved)
            centered = (x_hat / inv_std).reshape(shape)
            _, pullback = ag.vjp(lambda p, s, eps: layers.layer_norm(p, s, eps), p, centered, eps)
            d_p, d_sum, d_eps = pullback(g)
            return d_p, d_sum, d_sum, d_eps
        dx, d_scale, d_bias = ag.kernels.layer_norm_backward(g, saved, p.scale)
        d_eps = lambda: ag.kernels.layer_norm_eps_cotangent(g, saved, p.scale).reshape(eps_shape)
        return LayerNorm(d_scale, d_bias), dx, dx, d_eps
    return out, add_and_norm_pullback
