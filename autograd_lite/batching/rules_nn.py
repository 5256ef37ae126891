"""Batching rules of the fused neural-network ops, softmax, layer_norm and cross_entropy: one
call for every example where the op allows it."""
import numpy as np

from ..core.batched import BATCHING_RULES, Batched, peel, wrap
from ..core.placement import array_module
from ..core.tracer import every_value, is_traced
from ..ops import expand_dims, mean, nn, take_along_axis, where
from ..ops import sum as sum_
from ..ops.nn import check_cross_entropy
from ..ops.softmax import log_softmax, softmax
from .axes import (front_or_broadcast, length_of, merged_front, ndim_of, padded, reshape,
                   shape_of, shifted_axis, split_front, static, to_front)
from .shared_parameters import layer_norm_each


def softmax_rule(values, bdims):
    """softmax of each example along its axis; where that axis is not the example's first
    and the mask allows it, the examples' axis merged with the first (merged_front)."""
    static("softmax", bdims, ("axis",), start=1)
    x, axis, mask = values
    bx, _, bm = bdims
    ndim = ndim_of(x) - (bx is not None)
    length = length_of(values, bdims)
    x = front_or_broadcast(x, bx, length)
    shifted = shifted_axis("softmax", axis, ndim)
    if bm is not None:
        mask = padded(mask, bm, ndim)
    mask_rank = 0 if mask is None else ndim_of(mask) - (bm is not None)
    first_shared = mask is None or (bm is None and (mask_rank < ndim or shape_of(mask)[0] == 1))
    if ndim >= 2 and shifted != 1 and first_shared:
        return split_front(softmax(merged_front(x), shifted - 1, mask), length), 0
    return softmax(x, shifted, mask), 0


def layer_norm_rule(values, bdims):
    """layer_norm of every example in one call; a scale and bias per example (vmap(grad(f))'s
    parameters, an ensemble's): layer_norm_each; else (and under a second vmap, or with a
    traced or batched eps) the plain definition, op by op."""
    x, scale, bias, eps = values
    if bdims[1] is not None or bdims[2] is not None:
        if (bdims[3] is not None or is_traced(eps) or ndim_of(x) < 2
                or any(type(v) is Batched for v in values)):
            return NotImplemented
        length = length_of(values, bdims)
        x, scale, bias = (front_or_broadcast(v, b, length)
                          for v, b in zip(values[:3], bdims[:3]))
        return layer_norm_each(x, scale, bias, eps), 0
    if bdims[3] is not None:
        return NotImplemented
    x = to_front(x, bdims[0])
    if ndim_of(x) >= 3:
        return split_front(nn.layer_norm(merged_front(x), scale, bias, eps), shape_of(x)[0]), 0
    return nn.layer_norm(x, scale, bias, eps), 0


BATCHING_RULES.update({softmax: softmax_rule, nn.layer_norm: layer_norm_rule})


def cross_entropy_rule(values, bdims):
    """Each example's mean over its counted labels of -((1 - ε) log p_label + ε mean_c log p_c),
    p = softmax(logits): one log_softmax of every example, then a masked mean per example
    (NaN where an example counts no label, with a gradient of 0, as the op gives)."""
    logits, labels, ignore_index, smoothing = values
    bl, by, bi, bs = bdims
    static("cross_entropy", bdims, ("ignore_index",), start=2)
    length = length_of(values, bdims)
    logits = front_or_broadcast(logits, bl, length)  # (B, ..., C)
    labels = _beside(front_or_broadcast(labels, by, length), logits)  # (B, ...)
    ndim = ndim_of(labels) - 1
    check_cross_entropy(logits, labels, ignore_index, 0.0 if bs is not None else smoothing)
    if bs is not None:
        smoothing = padded(smoothing, bs, ndim)
        if not np.all((every_value(smoothing) >= 0) & (every_value(smoothing) <= 1)):
            raise ValueError(f"cross_entropy: label_smoothing must lie in [0, 1], got "
                             f"{every_value(smoothing).ravel()}")
    counted = None if ignore_index is None else labels != ignore_index
    if counted is not None:
        labels = where(counted, labels, 0)
    classes = shape_of(logits)[-1]
    log_p = log_softmax(reshape(logits, (-1, classes)), -1)
    log_p = reshape(log_p, shape_of(logits))  # (B, ..., C)
    picked = take_along_axis(log_p, expand_dims(labels, -1), -1)[..., 0]  # (B, ...)
    per_row = -((1 - smoothing) * picked + smoothing * mean(log_p, -1))  # (B, ...)
    axes = tuple(range(1, ndim + 1))
    if counted is None:
        return mean(per_row, axes), 0
    n = counted.sum(axis=axes)  # (B,) counted labels per example
    total = sum_(where(counted, per_row, 0.0), axes)
    inverse_count = (1.0 / np.maximum(n, 1)).astype(total.dtype)
    return where(n > 0, total * inverse_count, np.nan), 0


def _beside(labels, logits):
    """Labels on the host moved to the logits' device, where the rule computes with them."""
    xp = array_module(logits)
    if xp is np or array_module(labels) is not np:
        return labels
    core, layers = peel(labels)
    return wrap(xp.asarray(core), layers)


BATCHING_RULES[nn.cross_entropy] = cross_entropy_rule
