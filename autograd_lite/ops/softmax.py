"""The softmax family: softmax (with an optional mask), log_softmax, logsumexp.

Each is one fused rule: one pass forward, one backward, where their compositions would
record a handful of ops. exp is taken unshifted where that is provably as exact as exp
shifted by a row maximum (attention scores, logits: the common, faster case), which the
sums of the exponentials show: every one in [1, ∞). Otherwise softmax shifts the rows that
need it and log_softmax every row.
float16 is computed in float32 (precision.py). An empty axis gives the empty result
(logsumexp: log 0 = -inf), as in torch.
"""
import numbers

import numpy as np

from ..core.tracer import primal, primitive
from .broadcasting import in_place
from .checks import as_array, normalize_axes
from .precision import computed_in_float32
from .reductions import keepdims_shape, sum_keepdims


def _shifted(x, axis):
    """x minus its (constant) maximum along `axis`, so that exp cannot overflow."""
    return x - primal(x).max(axis=axis, keepdims=True)


def _sums_are_exact(sums):
    """Rows whose sum of unshifted exponentials lies in [1, ∞): there exp(x) is as exact as
    exp(x - max). Elsewhere the sum overflowed, is NaN, is 0 (nothing kept) or is small
    enough that some exponential may have left the normal range (with a sum >= 1, a term
    below the smallest normal changes neither the sum nor a softmax output above it)."""
    return (sums >= 1) & (sums < np.inf)


def _one_axis(op, axis, ndim):
    if not isinstance(axis, numbers.Integral):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    return normalize_axes(op, axis, ndim)[0]


def _empty_like(x):
    """The result of a softmax over no entries: the same empty shape and dtype (as torch)."""
    return np.zeros(x.shape, dtype=x.dtype)


def softmax_backward(g, y, axis):
    """∇softmax: dx = y ⊙ (g - Σ_axis g ⊙ y), from the output y alone. Plain arrays along
    the last axis: np.einsum sums the products without making g ⊙ y, and dx is made once."""
    if type(g) is np.ndarray and type(y) is np.ndarray and axis == y.ndim - 1:
        dx = g - np.einsum("...i,...i->...", g, y)[..., None]
        dx *= y
        return dx
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


def _normalized(e, mask, axis):
    """e / Σ_axis e; a row with nothing kept is all zeros: it is divided by infinity."""
    sums = np.where(mask.any(axis=axis, keepdims=True), sum_keepdims(e, axis), np.inf)
    return in_place(np.divide, e, sums)  # e: fresh


def _masked_softmax_shifted(x, mask, axis):
    """The masked softmax of any x, exp shifted by the largest kept entry of each row; and
    whether every row had a finite one (then the result is exactly 0 at masked entries).
    Masked entries, whatever they hold (NaN, ±inf, huge), reach neither that maximum nor
    the sums. A kept NaN or +inf makes its row NaN, and so do kept entries that are all -inf
    (0/0), as in torch's masked_fill(-inf)."""
    minus_inf = x.dtype.type(-np.inf)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, 0/0: NaN rows; -max - max
        kept = x + np.where(mask, x.dtype.type(0), minus_inf)  # a fill of the mask's shape: fast
        peak = primal(kept).max(axis=axis, keepdims=True)
        if np.isnan(peak).any():  # a NaN, or a masked +inf (inf - inf): select instead (slower)
            kept = np.where(mask, x, minus_inf)
            peak = primal(kept).max(axis=axis, keepdims=True)
        finite_rows = bool(np.isfinite(peak).all())
        peak[peak == -np.inf] = 0  # nothing kept, or only -inf: exp(-inf - 0) = 0
        return _normalized(np.exp(kept - peak), mask, axis), finite_rows


def _softmax_unshifted(x, mask, axis):
    """The (masked) softmax of a plain x from exp(x), without row maxima, and the rows where
    that is as exact as with them (_sums_are_exact). -> (y, exact rows (keepdims))
    Checking the sums costs a fraction of the two global reductions over x it replaces."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.exp(x)
        if mask is not None:
            np.multiply(e, mask, out=e)  # masked entries: exactly 0
        sums = sum_keepdims(e, axis)
        return np.divide(e, sums, out=e), _sums_are_exact(sums)


def _softmax_shifted(x, mask, axis):
    """The (masked) softmax with exp shifted by row maxima, for any x; and whether it is
    exactly 0 at the masked entries (not in a NaN row: its gradient there is set to 0)."""
    if mask is not None:
        return _masked_softmax_shifted(x, mask, axis)
    e = np.exp(_shifted(x, axis))
    return in_place(np.divide, e, sum_keepdims(e, axis)), True  # e: fresh


@primitive
@computed_in_float32
def softmax(x, axis=-1, mask=None):
    """y = exp(x) / Σ_axis exp(x) over the entries where `mask` is True (bool, broadcastable
    to x), as torch's x.masked_fill(~mask, -inf).softmax(axis).

    Masked entries get 0 and have gradient 0, and their values (NaN and inf included) change
    nothing. A row with every entry masked is all zeros (torch: NaN), with gradient 0.
    """
    x = as_array("softmax", x)
    axis = _one_axis("softmax", axis, x.ndim)
    exact_zeros = True  # y is exactly 0 at masked entries, so is its gradient y ⊙ (...)
    if mask is not None:
        _check_mask("softmax", mask, x.shape)
        mask = mask.reshape((1,) * (x.ndim - mask.ndim) + mask.shape)  # same rank as x
    y, exact = _softmax_unshifted(x, mask, axis) if type(x) is np.ndarray else (None, None)
    if x.size == 0:
        y = _empty_like(x)
    elif y is None:  # traced values
        y, exact_zeros = _softmax_shifted(x, mask, axis)
    elif not exact.all() and axis == x.ndim - 1:  # a few rows (a causal mask's first ones)
        rows = ~exact[..., 0]
        y[rows], exact_zeros = _softmax_shifted(
            x[rows], None if mask is None else np.broadcast_to(mask, x.shape)[rows], -1)
    elif not exact.all():
        shifted, exact_zeros = _softmax_shifted(x, mask, axis)
        y = np.where(exact, y, shifted)

    def softmax_pullback(g):
        dx = softmax_backward(g, y, axis)
        return (dx if exact_zeros else np.where(mask, dx, 0)), None, None
    return y, softmax_pullback


def exp_and_sums(x, axis):
    """(exp(x), Σ_axis exp(x) keepdims) of a plain x without row maxima: softmax(x) = e / sums
    and log_softmax(x) = x - log(sums). None unless every row's sum is exact (_sums_are_exact)."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        sums = sum_keepdims(e, axis)
    return (e, sums) if _sums_are_exact(sums).all() else None


def _log_softmax_unshifted(x, axis):
    """x - log Σ exp(x) for a plain x, without row maxima; None unless every row's sum is
    exact (exp_and_sums)."""
    found = exp_and_sums(x, axis)
    return None if found is None else x - np.log(found[1])


@primitive
@computed_in_float32
def log_softmax(x, axis=-1):
    """x - logsumexp(x) along `axis`; stable for any finite x. dx = g - softmax(x) Σ_axis g."""
    x = as_array("log_softmax", x)
    axis = _one_axis("log_softmax", axis, x.ndim)
    if x.size == 0:
        y = _empty_like(x)
    else:
        y = _log_softmax_unshifted(x, axis) if type(x) is np.ndarray else None
        if y is None:  # traced values, or some row that needs the shift
            shifted = _shifted(x, axis)
            y = shifted - np.log(sum_keepdims(np.exp(shifted), axis))

    def log_softmax_pullback(g):
        return g - np.exp(y) * sum_keepdims(g, axis), None
    return y, log_softmax_pullback


@primitive
@computed_in_float32
def logsumexp(x, axis=-1, keepdims=False):
    """log Σ_axis exp(x), stable for any finite x; d/dx = softmax(x). Over an empty axis (or a
    row of -inf) log 0 = -inf, as in torch."""
    x = as_array("logsumexp", x)
    axes = normalize_axes("logsumexp", axis, x.ndim)
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"logsumexp: keepdims must be a bool, got {primal(keepdims)!r}")
    peak = primal(x).max(axis=axes, keepdims=True, initial=-np.inf)
    peak = np.where(np.isfinite(peak), peak, 0)  # a row of -inf: log Σ e^x = log 0 = -inf
    with np.errstate(divide="ignore"):
        kept = np.log(np.exp(x - peak).sum(axis=axes, keepdims=True)) + peak
    out = kept if keepdims else kept.reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))

    def logsumexp_pullback(g):
        return g.reshape(keepdims_shape(x.shape, axes)) * np.exp(x - kept), None, None
    return out, logsumexp_pullback
