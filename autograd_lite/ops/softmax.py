"""The softmax family: softmax (with an optional mask), log_softmax, logsumexp.

Each is one fused rule: one pass forward, one backward, where their compositions would
record a handful of ops. exp is taken shifted by a row maximum where it could overflow,
and unshifted where it provably cannot (attention scores: the common, faster case).
"""
import numbers

import numpy as np

from ..tracer import primal, primitive
from .checks import normalize_axes
from .reductions import keepdims_shape, sum_keepdims


def _shifted(x, axis):
    """x minus its (constant) maximum along `axis`, so that exp cannot overflow."""
    return x - primal(x).max(axis=axis, keepdims=True)


def _exp_needs_no_shift(x):
    """True when every entry of the plain array x lies within ±½·log(largest float): then
    exp(x) and sums of up to ~10^19 such terms are normal numbers, as exact as exp(x - max).
    Two global reductions cost a tenth of a row maximum over short rows (attention scores)."""
    if type(x) is not np.ndarray or x.size == 0:
        return False
    bound = 0.5 * np.log(np.finfo(x.dtype).max)  # 44.4 in float32, 354.9 in float64
    return bool(-bound <= x.min() and x.max() <= bound)  # False for NaN


def _one_axis(op, axis, ndim):
    if not isinstance(axis, numbers.Integral):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    return normalize_axes(op, axis, ndim)[0]


def softmax_backward(g, y, axis):
    """∇softmax: dx = y ⊙ (g - Σ_axis g ⊙ y), from the output y alone."""
    return y * (g - sum_keepdims(g * y, axis))


def _check_mask(op, mask, shape):
    if getattr(mask, "dtype", None) != np.bool_:
        raise TypeError(f"{op}: mask must be a bool array (True = keep), got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)}")
    try:
        fits = np.broadcast_shapes(mask.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{op}: mask {mask.shape} does not broadcast to the scores {shape}")


@primitive
def softmax(x, axis=-1, mask=None):
    """y = exp(x) / Σ_axis exp(x) over the entries where `mask` is True (bool, broadcastable to x).

    Masked entries get 0; a row with every entry masked is all zeros, not NaN.
    """
    axis = _one_axis("softmax", axis, x.ndim)
    no_shift = _exp_needs_no_shift(x)
    if mask is None:
        e = np.exp(x if no_shift else _shifted(x, axis))
        y = e / sum_keepdims(e, axis)
    else:
        _check_mask("softmax", mask, x.shape)
        mask = mask.reshape((1,) * (x.ndim - mask.ndim) + mask.shape)  # same rank as x
        if no_shift:
            e = np.exp(x)
            np.multiply(e, mask, out=e)  # masked entries: exactly 0
        else:
            # A huge finite negative where masked (not -inf: reducing over infinities is
            # ~2x slower): its exponential is exactly 0 beside any kept entry.
            x = x + np.where(mask, 0, np.finfo(x.dtype).min / 2).astype(x.dtype)
            e = np.exp(_shifted(x, axis))
        total = sum_keepdims(e, axis)
        # A row with nothing kept is all zeros: divide it by infinity.
        y = e / np.where(mask.any(axis=axis, keepdims=True), total, np.inf)

    def softmax_pullback(g):
        return softmax_backward(g, y, axis), None, None
    return y, softmax_pullback


@primitive
def log_softmax(x, axis=-1):
    """x - logsumexp(x) along `axis`; stable for any finite x. dx = g - softmax(x) Σ_axis g."""
    axis = _one_axis("log_softmax", axis, x.ndim)
    shifted = x if _exp_needs_no_shift(x) else _shifted(x, axis)
    y = shifted - np.log(sum_keepdims(np.exp(shifted), axis))

    def log_softmax_pullback(g):
        return g - np.exp(y) * sum_keepdims(g, axis), None
    return y, log_softmax_pullback


@primitive
def logsumexp(x, axis=-1, keepdims=False):
    """log Σ_axis exp(x), stable for any finite x; d/dx = softmax(x)."""
    axes = normalize_axes("logsumexp", axis, x.ndim)
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"logsumexp: cannot reduce an empty axis of {x.shape}")
    peak = primal(x).max(axis=axes, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)  # a row of -inf: log Σ e^x = log 0 = -inf
    with np.errstate(divide="ignore"):
        kept = np.log(np.exp(x - peak).sum(axis=axes, keepdims=True)) + peak
    out = kept if keepdims else kept.reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))

    def logsumexp_pullback(g):
        return g.reshape(keepdims_shape(x.shape, axes)) * np.exp(x - kept), None, None
    return out, logsumexp_pullback
