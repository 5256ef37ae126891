"""Neural-network ops: layer_norm and cross_entropy, each a composition of the library's ops
(what higher order and `ag.fast_rules(False)` run) with a fast rule beside it over the
kernels; their float hyperparameters (eps, label_smoothing) are differentiable. And dropout.
"""
import numbers

import numpy as np

from .. import kernels
from ..core.devices import has_kernels, kernels_of
from ..core.placement import array_module
from ..core.dtypes import (check_same_float_dtype, computed_in_float32, defined_in_float32,
                           settles_weak_floats)
from ..core.randomness import draw_under_vmap, generator_to_draw_from
from ..core.rules import fast_rule, fusable, is_recorded
from ..core.tracer import every_value, is_traced, primal
from .broadcasting import sum_rows, unbroadcast
from .checks import as_array
from .elementwise import mul
from .reductions import mean_last, mean_of_products_last
from .softmax import log_softmax


def layer_norm_backward(g, x_hat, inv_std, scale):
    """The three-term layer norm derivative over the last axis (D entries), for any values:

        ĝ = g ⊙ scale
        dx = inv_std ⊙ (ĝ - mean(ĝ) - x̂ ⊙ mean(ĝ ⊙ x̂))
    """
    g_hat = g * scale
    return inv_std * (g_hat - mean_last(g_hat) - x_hat * mean_of_products_last(g_hat, x_hat))


def _checked_layer_norm_operands(x, scale, bias, eps):
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
    return x, scale, bias


@fusable(drawn_as_op=True)
@defined_in_float32
def layer_norm(x, scale, bias, eps=1e-5):
    """scale ⊙ (x - μ) / √(σ² + eps) + bias over the last axis, σ² the biased variance
    (torch's layer_norm): x (..., D), scale and bias (D,), eps a scalar, differentiable:
    ∂out/∂eps = -½ scale ⊙ x̂ / (σ² + eps). D = 0: the empty result."""
    x, scale, bias = _checked_layer_norm_operands(x, scale, bias, eps)
    if x.size == 0:
        return array_module(x).zeros(x.shape, dtype=x.dtype)
    centered = x - mean_last(x)
    inv_std = 1 / np.sqrt(mean_of_products_last(centered, centered) + eps)
    return centered * inv_std * scale + bias


@fast_rule(layer_norm, applies=has_kernels, takes_traced=True)
@settles_weak_floats
@computed_in_float32
def layer_norm_rule(x, scale, bias, eps):
    """layer_norm by the kernels: the pullbacks keep x̂ and 1/σ, not x."""
    x, scale, bias = _checked_layer_norm_operands(x, scale, bias, eps)
    xp = array_module(x)
    if x.size == 0:
        def empty_pullback(g):
            return (xp.zeros(g.shape, g.dtype), np.zeros_like(scale), np.zeros_like(bias),
                    lambda: xp.zeros(np.shape(eps), dtype=g.dtype))
        return xp.zeros(x.shape, dtype=x.dtype), empty_pullback
    ks = kernels.of(kernels_of((x, scale, bias, eps)))
    out, saved = ks.layer_norm_forward(x, scale, bias, eps)
    x_shape, eps_shape = x.shape, np.shape(eps)  # the pullback keeps no reference to x

    def layer_norm_pullback(g):
        if is_recorded(g):
            return layer_norm_composed_cotangents(g, saved, scale, x_shape, eps_shape, ks)
        dx, d_scale, d_bias = ks.layer_norm_backward(g, saved, scale)
        d_eps = lambda: ks.layer_norm_eps_cotangent(g, saved, scale).reshape(eps_shape)
        return dx, d_scale, d_bias, d_eps  # d_eps lazy: called only when eps is traced
    return out, layer_norm_pullback


def layer_norm_composed_cotangents(g, saved, scale, x_shape, eps_shape=(), ks=kernels):
    """layer_norm's cotangents (dx, dscale, dbias, d_eps lazily) for a traced g (jvp's double
    vjp), with the library's ops over what the kernels `ks` saved (x̂ and 1/σ)."""
    x_hat, inv_std = ks.layer_norm_normalized(saved)
    x_hat, inv_std = x_hat.reshape(x_shape), inv_std.reshape(x_shape[:-1] + (1,))
    return (layer_norm_backward(g, x_hat, inv_std, scale), sum_rows(g * x_hat), sum_rows(g),
            lambda: unbroadcast(-0.5 * (g * scale) * x_hat * (inv_std * inv_std), eps_shape))


def _check_labels(logits, labels, ignore_index):
    dtype = getattr(labels, "dtype", None)
    if dtype is None or dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: labels must be an integer array, got "
                        f"{dtype if dtype is not None else type(labels).__name__}")
    if logits.ndim < 1 or labels.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: labels {labels.shape} must have the shape "
                         f"{logits.shape[:-1]} of logits {logits.shape} without the class axis")
    if ignore_index is not None and not isinstance(ignore_index, numbers.Integral):
        shown = primal(ignore_index)  # a differentiated float: an array (a weak one, plain)
        shown = np.asarray(shown) if isinstance(shown, np.ndarray) else shown
        raise TypeError(f"cross_entropy: ignore_index must be an int or None, got {shown!r}")
    values = every_value(labels)  # under vmap: every example's
    counted = values if ignore_index is None else values[values != ignore_index]
    n_classes = logits.shape[-1]
    if counted.size and (counted.min() < 0 or counted.max() >= n_classes):
        raise IndexError(f"cross_entropy: labels must lie in [0, {n_classes}) "
                         f"(or equal ignore_index={ignore_index}), got values from "
                         f"{counted.min()} to {counted.max()}")


def check_cross_entropy(logits, labels, ignore_index, label_smoothing):
    """cross_entropy's checks of its labels and smoothing (its batching rule's too)."""
    _check_labels(logits, labels, ignore_index)
    if np.ndim(label_smoothing) != 0:
        raise ValueError(f"cross_entropy: label_smoothing must be a scalar, got shape "
                         f"{np.shape(label_smoothing)}")
    check_same_float_dtype("cross_entropy", logits, label_smoothing)
    values = every_value(label_smoothing)
    if not np.all((0.0 <= values) & (values <= 1.0)):
        raise ValueError(f"cross_entropy: label_smoothing must lie in [0, 1], got {values}")


def _checked_cross_entropy_operands(logits, labels, ignore_index, label_smoothing):
    """(logits, flat labels with ignored ones 0, counted (N,) bool or None, count), checked."""
    logits = as_array("cross_entropy", logits, "logits")
    labels = as_array("cross_entropy", labels, "labels")
    check_cross_entropy(logits, labels, ignore_index, label_smoothing)
    flat_labels = labels.reshape(-1)
    if ignore_index is None:
        return logits, flat_labels, None, flat_labels.size
    counted = flat_labels != ignore_index
    return logits, np.where(counted, flat_labels, 0), counted, int(counted.sum())


@fusable(drawn_as_op=True)
@defined_in_float32
def cross_entropy(logits, labels, ignore_index=None, label_smoothing=0.0):
    """Mean over counted positions of -Σ_c target_c log softmax(logits)_c,
    target = (1 - ε) onehot(label) + ε / C (torch.nn.functional.cross_entropy).

    logits: (..., C); labels: integers of shape logits.shape[:-1]. Labels equal to
    `ignore_index` (an int) are not counted; with none counted the loss is NaN and its
    gradient zero whatever the cotangent, NaN included (an all-padding batch moves no
    parameter; torch does both).
    ε, a scalar in [0, 1], is differentiable: ∂/∂ε = log p_label - mean_c log p_c.
    """
    logits, flat_labels, counted, n_counted = _checked_cross_entropy_operands(
        logits, labels, ignore_index, label_smoothing)
    n_classes = logits.shape[-1]
    log_p = log_softmax(logits.reshape(-1, n_classes), -1)  # (N, C)
    xp = array_module(log_p)
    onehot = xp.zeros(log_p.shape, dtype=log_p.dtype)
    onehot[xp.arange(len(flat_labels)), flat_labels] = 1
    per_row = -((onehot * (1 - label_smoothing) + label_smoothing / n_classes) * log_p).sum(-1)
    if counted is not None:
        per_row = per_row * counted
    if not n_counted:  # a constant NaN: its gradient is 0 whatever the cotangent (NaN too)
        return xp.full((), np.nan, dtype=log_p.dtype)
    return per_row.sum() * (1.0 / n_counted)


@fast_rule(cross_entropy, applies=has_kernels, takes_traced=True)
@settles_weak_floats
@computed_in_float32
def cross_entropy_rule(logits, labels, ignore_index, label_smoothing):
    ks = kernels.of(kernels_of((logits, labels, label_smoothing)))
    logits, flat_labels, counted, n_counted = _checked_cross_entropy_operands(
        logits, labels, ignore_index, label_smoothing)
    xp = array_module(logits)
    n_classes = logits.shape[-1]
    inv_count = 1.0 / n_counted if n_counted else float("nan")
    at_labels, mean_log_p, saved = ks.cross_entropy_forward(
        logits.reshape(-1, n_classes), flat_labels)  # (N,), (N,)
    per_row = -at_labels
    if label_smoothing:
        per_row = (1 - label_smoothing) * per_row - label_smoothing * mean_log_p
    if counted is not None:
        per_row = per_row * counted
    loss = xp.asarray(per_row.sum() * inv_count, dtype=logits.dtype)
    logits_shape, smoothing_shape, dtype = logits.shape, np.shape(label_smoothing), logits.dtype

    def cross_entropy_pullback(g):
        if not n_counted:  # 0 · NaN would be NaN: nothing counted, nothing to move
            return (xp.zeros(logits_shape, dtype=dtype), None, None,
                    lambda: xp.zeros(smoothing_shape, dtype=dtype))
        row_weight = g * inv_count if counted is None else (g * inv_count) * counted  # (N,)
        if is_recorded(g):  # a traced g: the probabilities (plain) less the targets, by it
            p = ks.cross_entropy_probabilities(saved)  # (N, C)
            p[xp.arange(len(flat_labels)), flat_labels] -= 1 - label_smoothing
            d = (p - label_smoothing / n_classes) * np.reshape(row_weight, (-1, 1))
            return (d.reshape(logits_shape), None, None,
                    lambda: unbroadcast(row_weight * (at_labels - mean_log_p), smoothing_shape))
        row_weight = np.broadcast_to(xp.asarray(row_weight, dtype=dtype), flat_labels.shape)

        def d_smoothing():  # lazy: called only when label_smoothing is traced
            return unbroadcast(row_weight * (at_labels - mean_log_p), smoothing_shape)
        d = ks.cross_entropy_backward(saved, flat_labels, label_smoothing, row_weight)
        return d.reshape(logits_shape), None, None, d_smoothing
    return loss, cross_entropy_pullback


def dropout(x, rate, rng):
    """Inverted dropout: each entry kept with probability 1 - rate, scaled by 1/(1 - rate);
    the identity when rate is 0 or rng is None. Under vmap, as its `randomness` says."""
    x = as_array("dropout", x)
    if is_traced(rate):
        raise TypeError("dropout: rate is a traced value, but dropout has no derivative in its "
                        "rate; pass a number (in parameters, an ag.Hyper)")
    if rate == 0 or rng is None:
        return x
    if not 0 <= rate < 1:
        raise ValueError(f"dropout: rate must lie in [0, 1), got {rate}")
    if not callable(getattr(rng, "random", None)) or isinstance(rng, np.random.RandomState):
        raise TypeError(f"dropout: rng must be a numpy Generator (np.random.default_rng(seed)), "
                        f"one with its random(shape, dtype=) method, or None; got "
                        f"{type(rng).__name__}")
    if x.dtype.kind != "f":
        raise TypeError(f"dropout: x must be a float array (its kept entries are scaled by "
                        f"1/(1 - rate)), got {x.dtype} {x.shape}")
    xp, dtype = array_module(x), x.dtype
    rng = generator_to_draw_from(rng)  # inside a checkpointed function, maybe a stand-in

    def mask(shape, source):  # drawn on the host: same bits
        keep = kernels.dropout_mask(shape, rate, source, dtype)
        return keep if xp is np else xp.asarray(keep)
    return mul(x, draw_under_vmap("dropout", mask, x.shape, rng))
