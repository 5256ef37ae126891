"""Fused neural-network primitives: layer_norm and cross_entropy; and dropout, a one-liner
over `mul`. (The softmax family is in softmax.py.)

Each fused rule costs one pass forward and one backward, instead of the handful
of recorded ops their compositions would take. The gradient maths of each sits
in a named helper with its equation, so that other rules can reuse it. Their float
hyperparameters (eps, label_smoothing) are differentiable arguments like the others.
float16 is computed in float32 (precision.py).
"""
import numbers

import numpy as np

from ..core.tracer import is_traced, primal, primitive
from .broadcasting import in_place, sum_rows, unbroadcast
from .checks import as_array, check_same_float_dtype
from .elementwise import mul
from .precision import computed_in_float32
from .reductions import mean_last, mean_of_products_last
from .softmax import exp_and_sums, log_softmax
from .weak import settles_weak_floats


def layer_norm_backward(g, x_hat, inv_std, scale):
    """The three-term layer norm derivative over the last axis (D entries):

        ĝ = g ⊙ scale
        dx = inv_std ⊙ (ĝ - mean(ĝ) - x̂ ⊙ mean(ĝ ⊙ x̂))

    computed in ĝ's own array when the operands are plain (the same operations, in order).
    """
    g_hat = g * scale
    g_mean, projection = mean_last(g_hat), mean_of_products_last(g_hat, x_hat)
    dx = in_place(np.subtract, g_hat, g_mean)
    dx = in_place(np.subtract, dx, x_hat * projection)
    return in_place(np.multiply, dx, inv_std)


def _layer_norm_backward_plain(g, x_hat, inv_std, scale):
    """(dx, dscale, dbias) of layer norm for plain float32/float64 arrays: layer_norm_backward's
    dx and the parameters' Σ_rows g ⊙ x̂ and Σ_rows g, with every mean over the last axis a
    matrix-vector product over rows (N, D) and g ⊙ x̂ made once for both of its uses:

        mean(ĝ) = (g @ scale) / D,   mean(ĝ ⊙ x̂) = ((g ⊙ x̂) @ scale) / D
    """
    d = g.shape[-1]
    g_rows, x_hat_rows = g.reshape(-1, d), x_hat.reshape(-1, d)  # (N, D)
    g_x_hat = g_rows * x_hat_rows
    d_scale, d_bias = sum_rows(g_x_hat), sum_rows(g_rows)  # (D,)
    g_mean = (g_rows @ scale)[:, None] * (1.0 / d)  # (N, 1)
    projection = (g_x_hat @ scale)[:, None] * (1.0 / d)  # (N, 1)
    dx = g_rows * scale
    dx -= g_mean
    dx -= np.multiply(x_hat_rows, projection, out=g_x_hat)  # g ⊙ x̂ is no longer needed
    dx *= inv_std.reshape(-1, 1)
    return dx.reshape(g.shape), d_scale, d_bias


def _is_plain_blas_float(*arrays):
    """Plain float32 or float64 arrays of one dtype (what BLAS's products take)."""
    return (all(type(a) is np.ndarray for a in arrays)
            and arrays[0].dtype in (np.float32, np.float64)
            and all(a.dtype == arrays[0].dtype for a in arrays))


def _normalized(x, eps):
    """(x̂, inv_std) over the last axis: x̂ = (x - μ) ⊙ inv_std, inv_std = 1 / √(σ² + eps),
    σ² the biased variance; x̂ is made in the centered array when the operands are plain."""
    centered = x - mean_last(x)
    inv_std = 1 / np.sqrt(mean_of_products_last(centered, centered) + eps)
    return in_place(np.multiply, centered, inv_std), inv_std


@primitive
@settles_weak_floats
@computed_in_float32
def layer_norm(x, scale, bias, eps=1e-5):
    """scale ⊙ (x - μ) / √(σ² + eps) + bias over the last axis, σ² the biased variance
    (as torch.nn.functional.layer_norm). scale, bias: (D,) for x of shape (..., D); eps a
    scalar, differentiable: ∂out/∂eps = -½ scale ⊙ x̂ / (σ² + eps). D = 0: the empty
    result."""
    x = as_array("layer_norm", x)
    scale = as_array("layer_norm", scale, "scale")
    bias = as_array("layer_norm", bias, "bias")
    d = x.shape[-1] if x.ndim else None
    if x.ndim < 1 or scale.shape != (d,) or bias.shape != (d,):
        raise ValueError(f"layer_norm: scale {scale.shape} and bias {bias.shape} must have "
                         f"shape ({d},), the last axis of x {x.shape}")
    if np.ndim(eps) != 0:
        raise ValueError(f"layer_norm: eps must be a scalar, got shape {np.shape(eps)}")
    for operand in (scale, bias, eps):
        check_same_float_dtype("layer_norm", x, operand)
    x_hat, inv_std = _normalized(x, eps)
    out = in_place(np.add, x_hat * scale, bias)
    d_shape, eps_shape = scale.shape, np.shape(eps)  # scale and bias are broadcast over x

    def d_eps(g):  # lazy: called only when eps is traced
        return lambda: unbroadcast(-0.5 * (g * scale) * x_hat * (inv_std * inv_std), eps_shape)

    def layer_norm_pullback(g):
        if _is_plain_blas_float(g, x_hat, inv_std, scale) and g.size:
            return (*_layer_norm_backward_plain(g, x_hat, inv_std, scale), d_eps(g))
        return (layer_norm_backward(g, x_hat, inv_std, scale),
                sum_rows(g * x_hat).reshape(d_shape), sum_rows(g).reshape(d_shape), d_eps(g))
    return out, layer_norm_pullback


def _check_labels(logits, labels, ignore_index):
    dtype = getattr(labels, "dtype", None)
    if dtype is None or dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: labels must be an integer array, got "
                        f"{dtype if dtype is not None else type(labels).__name__}")
    if logits.ndim < 1 or labels.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: labels {labels.shape} must have the shape "
                         f"{logits.shape[:-1]} of logits {logits.shape} without the class axis")
    if ignore_index is not None and not isinstance(ignore_index, numbers.Integral):
        raise TypeError(f"cross_entropy: ignore_index must be an int or None, "
                        f"got {primal(ignore_index)!r}")
    counted = labels if ignore_index is None else labels[labels != ignore_index]
    n_classes = logits.shape[-1]
    if counted.size and (counted.min() < 0 or counted.max() >= n_classes):
        raise IndexError(f"cross_entropy: labels must lie in [0, {n_classes}) "
                         f"(or equal ignore_index={ignore_index}), got values from "
                         f"{counted.min()} to {counted.max()}")


def _check_smoothing(logits, smoothing):
    if np.ndim(smoothing) != 0:
        raise ValueError(f"cross_entropy: label_smoothing must be a scalar, got shape "
                         f"{np.shape(smoothing)}")
    check_same_float_dtype("cross_entropy", logits, smoothing)
    if not 0.0 <= float(primal(smoothing)) <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must lie in [0, 1], "
                         f"got {primal(smoothing)}")


def softmax_minus_target(p, labels, smoothing):
    """∂ loss / ∂ logits for one row: p - target, target = (1 - ε) onehot(label) + ε / C.

    p: (N, C) probabilities, labels: (N,). A plain array p is overwritten (pass a fresh
    one): no one-hot of the class axis is ever built (except under higher order).
    """
    rows = np.arange(len(labels))
    n_classes = p.shape[-1]
    if is_traced(p) or is_traced(smoothing):  # higher order: the target of traced ops
        onehot = np.zeros(p.shape, dtype=p.dtype)
        onehot[rows, labels] = 1
        return p - (onehot * (1 - smoothing) + smoothing / n_classes)
    if smoothing:
        p -= smoothing / n_classes
    p[rows, labels] -= 1 - smoothing
    return p


class _LogProbabilities:
    """log p = log softmax(logits) of logits (N, C) and labels (N,), kept in the form that is
    cheapest to use. For plain logits whose exp needs no shift (exp_and_sums): the
    exponentials and their row sums, so that the backward pass divides (e / Σe) instead of
    taking exp(log p) a second time, and the two per-row values the loss needs, from the
    logits (log p_label = x_label - log Σe, mean_c log p_c = mean_c x_c - log Σe); the logits
    themselves are not kept. Otherwise (traced logits, a row that needs the shift) the array
    log_softmax(logits)."""

    def __init__(self, logits, labels):
        rows = np.arange(len(labels))
        found = exp_and_sums(logits, -1) if type(logits) is np.ndarray and logits.size else None
        if found is None:
            self.log_p = log_softmax(logits, -1)
            self.at_labels = self.log_p[rows, labels]
            self._mean = None  # made on demand from log_p
        else:
            self.log_p = None
            self.exps, self.sums = found
            log_sums = np.log(self.sums[:, 0])
            self.at_labels = logits[rows, labels] - log_sums
            self._mean = mean_last(logits)[:, 0] - log_sums

    def mean(self):
        """mean_c log p[n, c] per row (N,)."""
        return self.log_p.mean(axis=-1) if self._mean is None else self._mean

    def smoothing_derivative(self):
        """∂ row loss / ∂ε = log p_label - mean_c log p_c, the row loss being
        (1 - ε)(-log p_label) + ε(-mean_c log p_c). -> (N,)"""
        return self.at_labels - self.mean()

    def probabilities(self):
        """p = softmax(logits) (N, C), a fresh array."""
        return np.exp(self.log_p) if self.log_p is not None else self.exps / self.sums


@primitive
@settles_weak_floats
@computed_in_float32
def cross_entropy(logits, labels, ignore_index=None, label_smoothing=0.0):
    """Mean over counted positions of -Σ_c target_c log softmax(logits)_c,
    target = (1 - ε) onehot(label) + ε / C (torch.nn.functional.cross_entropy).

    logits: (..., C); labels: integers of shape logits.shape[:-1]. Positions whose
    label equals `ignore_index` (an int) are not counted; if none is counted the loss is
    NaN and its gradient zero (as in torch: an all-padding batch moves no parameter).
    label_smoothing ε, a scalar in [0, 1], is differentiable (_LogProbabilities.smoothing_derivative).
    """
    logits = as_array("cross_entropy", logits, "logits")
    labels = as_array("cross_entropy", labels, "labels")
    _check_labels(logits, labels, ignore_index)
    _check_smoothing(logits, label_smoothing)
    n_classes = logits.shape[-1]
    flat_logits = logits.reshape(-1, n_classes)  # (N, C)
    flat_labels = labels.reshape(-1)  # (N,)
    counted = None if ignore_index is None else flat_labels != ignore_index
    if counted is not None:
        flat_labels = np.where(counted, flat_labels, 0)
    n_counted = flat_labels.size if counted is None else int(counted.sum())
    inv_count = 1.0 / n_counted if n_counted else float("nan")

    log_p = _LogProbabilities(flat_logits, flat_labels)
    per_row = -log_p.at_labels  # (N,)
    if label_smoothing or is_traced(label_smoothing):  # traced: its derivative, even at 0
        per_row = (1 - label_smoothing) * per_row - label_smoothing * log_p.mean()
    if counted is not None:
        per_row = per_row * counted
    loss = per_row.sum() * inv_count
    logits_shape, smoothing_shape, dtype = logits.shape, np.shape(label_smoothing), flat_logits.dtype

    def cross_entropy_pullback(g):
        if not n_counted:  # 0 · NaN would be NaN: nothing counted, nothing to move
            return (np.zeros(logits_shape, dtype=dtype), None, None,
                    lambda: np.zeros(smoothing_shape, dtype=dtype))
        row_weight = g * inv_count if counted is None else (g * inv_count) * counted

        def d_smoothing():  # lazy: called only when label_smoothing is traced
            return unbroadcast(row_weight * log_p.smoothing_derivative(), smoothing_shape)
        d = softmax_minus_target(log_p.probabilities(), flat_labels, label_smoothing)  # fresh
        if not is_traced(d) and not is_traced(row_weight):
            d *= row_weight.reshape(-1, 1)  # in place: one (N, C) array in all
        else:  # higher order: traced values
            d = d * row_weight.reshape(-1, 1)
        return d.reshape(logits_shape), None, None, d_smoothing
    return loss, cross_entropy_pullback


def dropout(x, rate, rng):
    """Inverted dropout: each entry kept with probability 1 - rate and scaled by 1/(1 - rate).
    The identity when rate is 0 or rng is None (inference)."""
    x = as_array("dropout", x)
    if is_traced(rate):
        raise TypeError("dropout: rate is a traced value, but dropout has no derivative in its "
                        "rate; pass a number (in parameters, an ag.Hyper)")
    if rate == 0 or rng is None:
        return x
    if not 0 <= rate < 1:
        raise ValueError(f"dropout: rate must lie in [0, 1), got {rate}")
    keep = rng.random(x.shape, dtype=np.float32) >= rate
    return mul(x, keep * np.asarray(1 / (1 - rate), dtype=x.dtype))
