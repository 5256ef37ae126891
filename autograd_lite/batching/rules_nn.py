"""Batching rules of the fused neural-network ops: softmax and layer norm make one call of
the op on every example (its fast rule runs where it applies); with a scale, bias or eps per
example layer norm runs its plain definition op by op. cross_entropy has no rule: it is a
mean over each example's labels, so its plain definition runs (log_softmax once, then the
per-example mean)."""
from ..core.batching import BATCHING_RULES
from ..ops import nn
from ..ops.softmax import softmax
from .axes import front_or_broadcast, length_of, ndim_of, padded, shifted_axis, static, to_front


def softmax_rule(values, bdims):
    static("softmax", bdims, ("axis",), start=1)
    x, axis, mask = values
    bx, _, bm = bdims
    ndim = ndim_of(x) - (bx is not None)
    x = front_or_broadcast(x, bx, length_of(values, bdims))
    if bm is not None:
        mask = padded(mask, bm, ndim)
    return softmax(x, shifted_axis("softmax", axis, ndim), mask), 0


def layer_norm_rule(values, bdims):
    x, scale, bias, eps = values
    if any(b is not None for b in bdims[1:]):
        return NotImplemented
    return nn.layer_norm(to_front(x, bdims[0]), scale, bias, eps), 0


BATCHING_RULES.update({softmax: softmax_rule, nn.layer_norm: layer_norm_rule})
