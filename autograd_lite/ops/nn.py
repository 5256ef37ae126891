"""Fused neural-network primitives: softmax, log_softmax, logsumexp, layer_norm,
cross_entropy; and dropout, a one-liner over `mul`.

Each fused rule costs one pass forward and one backward, instead of the handful
of recorded ops their compositions would take. The gradient maths of each sits
in a named helper with its equation, so that other rules can reuse it.
"""
import numbers

import numpy as np

from ..tracer import is_traced, primal, primitive
from .broadcasting import unbroadcast
from .checks import check_same_float_dtype, normalize_axes
from .elementwise import mul
from .reductions import keepdims_shape, mean_last, sum_keepdims


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


def layer_norm_backward(g, x_hat, inv_std, scale):
    """The three-term layer norm derivative over the last axis (D entries):

        ĝ = g ⊙ scale
        dx = inv_std ⊙ (ĝ - mean(ĝ) - x̂ ⊙ mean(ĝ ⊙ x̂))
    """
    g_hat = g * scale
    return inv_std * (g_hat - mean_last(g_hat) - x_hat * mean_last(g_hat * x_hat))


@primitive
def layer_norm(x, scale, bias, eps=1e-5):
    """scale ⊙ (x - μ) / √(σ² + eps) + bias over the last axis, σ² the biased variance
    (as torch.nn.functional.layer_norm). scale, bias: (D,) for x of shape (..., D)."""
    d = x.shape[-1] if x.ndim else None
    if x.ndim < 1 or scale.shape != (d,) or bias.shape != (d,):
        raise ValueError(f"layer_norm: scale {scale.shape} and bias {bias.shape} must have "
                         f"shape ({d},), the last axis of x {x.shape}")
    check_same_float_dtype("layer_norm", x, scale)
    check_same_float_dtype("layer_norm", x, bias)
    centered = x - mean_last(x)
    inv_std = 1 / np.sqrt(mean_last(centered * centered) + eps)
    x_hat = centered * inv_std
    out = x_hat * scale + bias
    d_shape = scale.shape  # scale and bias are broadcast over the leading axes of x

    def layer_norm_pullback(g):
        return (layer_norm_backward(g, x_hat, inv_std, scale),
                unbroadcast(g * x_hat, d_shape), unbroadcast(g, d_shape), None)
    return out, layer_norm_pullback


def _check_labels(logits, labels, ignore_index):
    dtype = getattr(labels, "dtype", None)
    if dtype is None or dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: labels must be an integer array, got "
                        f"{dtype if dtype is not None else type(labels).__name__}")
    if logits.ndim < 1 or labels.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: labels {labels.shape} must have the shape "
                         f"{logits.shape[:-1]} of logits {logits.shape} without the class axis")
    counted = labels if ignore_index is None else labels[labels != ignore_index]
    n_classes = logits.shape[-1]
    if counted.size and (counted.min() < 0 or counted.max() >= n_classes):
        raise IndexError(f"cross_entropy: labels must lie in [0, {n_classes}) "
                         f"(or equal ignore_index={ignore_index}), got values from "
                         f"{counted.min()} to {counted.max()}")


def softmax_minus_target(p, labels, smoothing):
    """∂ loss / ∂ logits for one row: p - target, target = (1 - ε) onehot(label) + ε / C.

    p: (N, C) probabilities, labels: (N,). A plain array p is overwritten (pass a fresh
    one): no one-hot of the class axis is ever built (except under higher order).
    """
    rows = np.arange(len(labels))
    n_classes = p.shape[-1]
    if is_traced(p):
        target = np.zeros(p.shape, dtype=p.dtype)
        target[rows, labels] = 1 - smoothing
        return p - (target + smoothing / n_classes)
    if smoothing:
        p -= smoothing / n_classes
    p[rows, labels] -= 1 - smoothing
    return p


@primitive
def cross_entropy(logits, labels, ignore_index=None, label_smoothing=0.0):
    """Mean over counted positions of -Σ_c target_c log softmax(logits)_c,
    target = (1 - ε) onehot(label) + ε / C (torch.nn.functional.cross_entropy).

    logits: (..., C); labels: integers of shape logits.shape[:-1]. Positions whose
    label equals `ignore_index` are not counted; if none is counted the loss is NaN
    and its gradient zero (as in torch: an all-padding batch moves no parameter).
    """
    _check_labels(logits, labels, ignore_index)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must lie in [0, 1], got {label_smoothing}")
    n_classes = logits.shape[-1]
    flat_logits = logits.reshape(-1, n_classes)  # (N, C)
    flat_labels = labels.reshape(-1)  # (N,)
    counted = None if ignore_index is None else flat_labels != ignore_index
    if counted is not None:
        flat_labels = np.where(counted, flat_labels, 0)
    n_counted = flat_labels.size if counted is None else int(counted.sum())
    inv_count = 1.0 / n_counted if n_counted else float("nan")

    log_p = log_softmax(flat_logits, -1)  # (N, C)
    per_row = -log_p[np.arange(flat_labels.size), flat_labels]  # (N,)
    if label_smoothing:
        per_row = (1 - label_smoothing) * per_row - label_smoothing * log_p.mean(axis=-1)
    if counted is not None:
        per_row = per_row * counted
    loss = per_row.sum() * inv_count
    logits_shape = logits.shape

    def cross_entropy_pullback(g):
        if not n_counted:  # 0 · NaN would be NaN: nothing counted, nothing to move
            return np.zeros(logits_shape, dtype=log_p.dtype), None, None, None
        row_weight = g * inv_count if counted is None else (g * inv_count) * counted
        d = softmax_minus_target(np.exp(log_p), flat_labels, label_smoothing)  # (N, C), fresh
        if not is_traced(d) and not is_traced(row_weight):
            d *= row_weight.reshape(-1, 1)  # in place: one (N, C) array in all
        else:  # higher order: traced values
            d = d * row_weight.reshape(-1, 1)
        return d.reshape(logits_shape), None, None, None
    return loss, cross_entropy_pullback


def dropout(x, rate, rng):
    """Inverted dropout: each entry kept with probability 1 - rate and scaled by 1/(1 - rate).
    The identity when rate is 0 or rng is None (inference)."""
    if rate == 0 or rng is None:
        return x
    if not 0 <= rate < 1:
        raise ValueError(f"dropout: rate must lie in [0, 1), got {rate}")
    keep = rng.random(x.shape, dtype=np.float32) >= rate
    return mul(x, keep * np.asarray(1 / (1 - rate), dtype=x.dtype))
