"""Reductions over an axis (int, tuple or None), with keepdims: sum, mean, max, var; and
the fast sums over one axis that the fused rules use.

A reduction's pullback reshapes the cotangent to the keepdims shape and lets it
broadcast back over the reduced axes.
"""
import math

import numpy as np

from ..tracer import primal, primitive
from .broadcasting import broadcast_to
from .checks import normalize_axes
from .precision import wide_sum


def keepdims_shape(shape, axes):
    """`shape` with each reduced axis set to 1: where a reduction's cotangent is reshaped."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


@primitive
def sum(x, axis=None, keepdims=False):
    """Σ over `axis`; the cotangent is copied back to every summed element."""
    axes = normalize_axes("sum", axis, x.ndim)
    out = wide_sum(x, axes, keepdims)
    x_shape = x.shape

    def sum_pullback(g):
        return (broadcast_to(g.reshape(keepdims_shape(x_shape, axes)), x_shape), None, None)
    return out, sum_pullback


@primitive
def mean(x, axis=None, keepdims=False):
    """Σ over `axis` divided by the number of elements summed."""
    axes = normalize_axes("mean", axis, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    out = x.mean(axis=axes, keepdims=keepdims)
    x_shape = x.shape

    def mean_pullback(g):  # an empty reduction has an empty cotangent: any scale will do
        g = g.reshape(keepdims_shape(x_shape, axes)) * (1.0 / count if count else 0.0)
        return broadcast_to(g, x_shape), None, None
    return out, mean_pullback


@primitive
def max(x, axis=None, keepdims=False):
    """Largest element over `axis`; tied maxima share the cotangent equally (like torch.amax)."""
    axes = normalize_axes("max", axis, x.ndim)
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"max: cannot reduce an empty axis of {x.shape}")
    out = x.max(axis=axes, keepdims=keepdims)

    def max_pullback(g):
        kept = keepdims_shape(x.shape, axes)
        is_max = primal(x) == primal(out).reshape(kept)
        share = (is_max / is_max.sum(axis=axes, keepdims=True)).astype(x.dtype)
        return g.reshape(kept) * share, None, None
    return out, max_pullback


def var(x, axis=None, keepdims=False, ddof=0):
    """Variance over `axis`: mean of squared deviations, divided by (n - ddof) instead of n."""
    axes = normalize_axes("var", axis, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    if ddof and count - ddof <= 0:
        raise ValueError(f"var: ddof={ddof} leaves no degrees of freedom for {count} elements")
    centered = x - mean(x, axes, keepdims=True)
    squares = centered * centered
    if ddof:  # scale before the mean: a 0-d array times a number would be a numpy scalar
        squares = squares * (count / (count - ddof))
    return mean(squares, axes, keepdims)


def sum_last(x):
    """Σ over the last axis, keepdims. On plain arrays np.einsum does it ~4x faster than
    x.sum(-1) for short rows (attention scores, layer norm); traced values use the op."""
    if type(x) is np.ndarray:
        return np.einsum("...i->...", x)[..., None]
    return x.sum(axis=-1, keepdims=True)


def sum_keepdims(x, axis):
    """Σ over one axis, keepdims (the fast path when it is the last)."""
    return sum_last(x) if axis == x.ndim - 1 else x.sum(axis=axis, keepdims=True)


def mean_last(x):
    """Mean over the last axis, keepdims (see sum_last); NaN over an empty axis (as np.mean)."""
    return sum_last(x) * (1.0 / x.shape[-1] if x.shape[-1] else np.nan)
