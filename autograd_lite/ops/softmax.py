"""The softmax family: softmax (with an optional mask), log_softmax, logsumexp. softmax and
log_softmax are compositions of the library's ops with a fast rule beside each over the
kernels. An empty axis gives the empty result (logsumexp: log 0 = -inf), as in torch.
"""
import numbers

import numpy as np

from .. import kernels
from ..core.devices import has_kernels, kernels_of
from ..core.placement import array_module
from ..core.rules import fast_rule, fusable, is_recorded
from ..core.tracer import primal, primitive, stop_gradient
from .checks import as_array, normalize_axes
from ..core.dtypes import computed_in_float32
from .reductions import keepdims_shape, sum_keepdims


def _one_axis(op, axis, ndim):
    if not isinstance(axis, numbers.Integral):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    return normalize_axes(op, axis, ndim)[0]


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


def _checked_softmax_operands(x, axis, mask):
    """(x, axis, mask with x's rank), checked."""
    x = as_array("softmax", x)
    axis = _one_axis("softmax", axis, x.ndim)
    if mask is not None:
        _check_mask("softmax", mask, x.shape)
        mask = mask.reshape((1,) * (x.ndim - mask.ndim) + mask.shape)  # same rank as x
    return x, axis, mask


@fusable(drawn_as_op=True)
def softmax(x, axis=-1, mask=None):
    """y = exp(x) / Σ_axis exp(x) over the entries where `mask` is True (bool, broadcastable
    to x), as torch's x.masked_fill(~mask, -inf).softmax(axis).

    Masked entries get 0 and gradient 0, whatever their values; a row with every entry
    masked is all zeros (torch: NaN); a row that keeps a NaN or +inf, or only -inf, is NaN.
    Written out: exp shifted by the largest kept entry of each row (a constant; 0 where that
    is -inf), a row with nothing kept divided by infinity.
    """
    x, axis, mask = _checked_softmax_operands(x, axis, mask)
    if x.size == 0:
        return array_module(x).zeros(x.shape, dtype=x.dtype)
    kept = x if mask is None else np.where(mask, x, -np.inf)  # a Python float: x's dtype
    with np.errstate(invalid="ignore"):
        peak = stop_gradient(kept).max(axis=axis, keepdims=True)
    peak = np.where(peak == -np.inf, 0, peak)  # nothing kept, or only -inf
    e = np.exp(kept - peak)
    sums = sum_keepdims(e, axis)
    if mask is not None:
        sums = np.where(mask.any(axis=axis, keepdims=True), sums, np.inf)
    return e / sums


def _along_last(a, axis):
    """a with `axis` moved last (a view), for kernels that work along the last axis."""
    return a if a is None or axis == a.ndim - 1 else np.moveaxis(a, axis, -1)


@fast_rule(softmax, applies=has_kernels, takes_traced=True)
@computed_in_float32
def softmax_rule(x, axis, mask):
    x, axis, mask = _checked_softmax_operands(x, axis, mask)
    if x.size == 0:
        def empty_pullback(g):
            return array_module(g).zeros(g.shape, g.dtype), None, None
        return array_module(x).zeros(x.shape, dtype=x.dtype), empty_pullback
    ks = kernels.of(kernels_of((x, mask)))
    y, saved = ks.softmax_forward(_along_last(x, axis), _along_last(mask, axis))
    y = np.moveaxis(y, -1, axis)

    def softmax_pullback(g):
        if is_recorded(g):  # a traced g: dx = y ⊙ (g - Σ_axis g ⊙ y), masked entries 0
            dx = y * (g - sum_keepdims(g * y, axis))
            return (dx if mask is None else np.where(mask, dx, 0)), None, None
        dx = ks.softmax_backward(_along_last(g, axis), saved)
        return np.moveaxis(dx, -1, axis), None, None
    return y, softmax_pullback


@fusable(drawn_as_op=True)
def log_softmax(x, axis=-1):
    """x - logsumexp(x) along `axis`; stable for any finite x. dx = g - softmax(x) Σ_axis g.
    Written out: x - m - log Σ exp(x - m), m the row maximum (a constant)."""
    x = as_array("log_softmax", x)
    axis = _one_axis("log_softmax", axis, x.ndim)
    if x.size == 0:
        return array_module(x).zeros(x.shape, dtype=x.dtype)
    shifted = x - stop_gradient(x).max(axis=axis, keepdims=True)
    return shifted - np.log(sum_keepdims(np.exp(shifted), axis))


@fast_rule(log_softmax, applies=has_kernels, takes_traced=True)
@computed_in_float32
def log_softmax_rule(x, axis):
    x = as_array("log_softmax", x)
    axis = _one_axis("log_softmax", axis, x.ndim)
    if x.size == 0:
        def empty_pullback(g):
            return array_module(g).zeros(g.shape, g.dtype), None
        return array_module(x).zeros(x.shape, dtype=x.dtype), empty_pullback
    ks = kernels.of(kernels_of((x,)))
    y, saved = ks.log_softmax_forward(_along_last(x, axis))
    y = np.moveaxis(y, -1, axis)

    def log_softmax_pullback(g):
        if is_recorded(g):  # a traced g: dx = g - softmax(x) Σ_axis g
            return g - np.exp(y) * sum_keepdims(g, axis), None
        dx = ks.log_softmax_backward(_along_last(g, axis), saved)
        return np.moveaxis(dx, -1, axis), None
    return y, log_softmax_pullback


@primitive
@computed_in_float32
def logsumexp(x, axis=-1, keepdims=False):
    """log Σ_axis exp(x), stable for any finite x; d/dx = softmax(x). A row of -inf gives
    -inf (log 0), as in torch."""
    x = as_array("logsumexp", x)
    axes = normalize_axes("logsumexp", axis, x.ndim)
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"logsumexp: keepdims must be a bool, got {primal(keepdims)!r}")
    peak = primal(x).max(axis=axes, keepdims=True, initial=-np.inf)
    peak = np.where(np.isfinite(peak), peak, 0)  # a row of -inf: log Σ e^x = log 0 = -inf
    with np.errstate(divide="ignore"):
        kept = np.log(np.exp(x - peak).sum(axis=axes, keepdims=True)) + peak
    kept_shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    out = kept if keepdims else kept.reshape(kept_shape)

    def logsumexp_pullback(g):
        return g.reshape(keepdims_shape(x.shape, axes)) * np.exp(x - kept), None, None
    return out, logsumexp_pullback
