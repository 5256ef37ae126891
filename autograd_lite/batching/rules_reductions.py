"""Batching rules of the reductions and of the ops along one axis: examples to the front,
the op's axes one further on (None: every axis of one example)."""
from ..core.batched import BATCHING_RULES, Batched
from ..core.tracer import stop_gradient
from ..ops import linalg, reductions as red, sorting
from ..ops.softmax import log_softmax, logsumexp
from ..ops.checks import normalize_axes
from .axes import (front_or_broadcast, ndim_of, reshape, shape_of, shifted_axes, shifted_axis,
                   static, to_front)


def reduction_rule(op):
    """op(x, axis=None, keepdims=False) over each example's axes (sum, mean, max, min, prod,
    logsumexp)."""
    def rule(values, bdims):
        static(op.op_name, bdims, ("axis", "keepdims"), start=1)
        x, axis, keepdims = values
        ndim = ndim_of(x) - 1
        return op(to_front(x, bdims[0]), shifted_axes(op.op_name, axis, ndim), keepdims), 0
    rule.__name__ = f"{op.op_name}_batching_rule"
    return rule


def axis_rule(op):
    """op(x, axis) along one axis of each example; axis None: the flattened example (sort,
    cumsum); log_softmax."""
    def rule(values, bdims):
        static(op.op_name, bdims, ("axis",), start=1)
        x, axis = values
        x = to_front(x, bdims[0])
        if axis is None:
            return op(reshape(x, (shape_of(x)[0], -1)), 1), 0
        return op(x, shifted_axis(op.op_name, axis, ndim_of(x) - 1)), 0
    rule.__name__ = f"{op.op_name}_batching_rule"
    return rule


def norm_rule(values, bdims):
    """norm of each example; axis None: the whole example (flattened where ord allows it)."""
    static("norm", bdims, ("ord", "axis", "keepdims"), start=1)
    x, ord, axis, keepdims = values
    x = to_front(x, bdims[0])
    shape = shape_of(x)
    ndim = len(shape) - 1
    if axis is None and (ord is None or ndim == 1 or (ord == "fro" and ndim == 2)):
        out = linalg.norm(reshape(x, (shape[0], -1)), None if ord == "fro" else ord, 1)
        return (reshape(out, (shape[0],) + (1,) * ndim) if keepdims else out), 0
    if axis is None:
        axis = tuple(range(ndim))
    return linalg.norm(x, ord, shifted_axes("norm", axis, ndim), keepdims), 0


def take_along_axis_rule(values, bdims):
    """take_along_axis with x, the indices or both batched: both get the examples in front
    (broadcast where one is not batched: the op needs their ranks equal)."""
    static("take_along_axis", bdims, ("axis",), start=2)
    x, indices, axis = values
    bx, bi = bdims[:2]
    length = shape_of(x)[bx] if bx is not None else shape_of(indices)[bi]
    x, indices = front_or_broadcast(x, bx, length), front_or_broadcast(indices, bi, length)
    if axis is None:  # over the flattened example
        flat = (length, -1)
        return sorting.take_along_axis(reshape(x, flat), reshape(indices, flat), 1), 0
    (a,) = normalize_axes("take_along_axis", (axis,), ndim_of(x) - 1)
    return sorting.take_along_axis(x, indices, a + 1), 0


def constant_along(function, x, axis, keepdims):
    """function(x, axis, keepdims=...) without a derivative (np.argmax, np.argmin) of each
    example of a batched x: a batched integer array."""
    values = to_front(stop_gradient(x.value), x.bdim)
    shape = shape_of(values)
    if axis is None:  # over the flattened example
        out = function(reshape(values, (shape[0], -1)), axis=1)
        if keepdims:
            out = reshape(out, (shape[0],) + (1,) * (len(shape) - 1))
    else:
        out = function(values, axis=shifted_axis(function.__name__, axis, len(shape) - 1),
                       keepdims=keepdims)
    return Batched(out, x.level, 0)


for _op in (red.sum, red.mean, red.max, red.min, red.prod, logsumexp):
    BATCHING_RULES[_op] = reduction_rule(_op)
for _op in (red.cumsum, log_softmax, sorting.sort):
    BATCHING_RULES[_op] = axis_rule(_op)
BATCHING_RULES[sorting.take_along_axis] = take_along_axis_rule
BATCHING_RULES[linalg.norm] = norm_rule
