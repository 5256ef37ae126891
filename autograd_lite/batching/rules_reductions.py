"""Batching rules of the reductions and of the ops along one axis: examples to the front,
the op's axes one further on (None: every axis of one example)."""
from ..core.batched import BATCHING_RULES, Batched
from ..core.tracer import stop_gradient
from ..ops import linalg, reductions as red, sorting
from ..ops.softmax import log_softmax, logsumexp
from .axes import (examples_first, front_or_broadcast, ndim_of, reshape, shape_of, shifted_axes,
                   shifted_axis, static, to_front)


@examples_first(red.sum, red.mean, red.max, red.min, red.prod, logsumexp)
def reduction_rule(op, x, axis, keepdims):
    return op(x, shifted_axes(op.op_name, axis, ndim_of(x) - 1), keepdims)


@examples_first(red.cumsum, log_softmax, sorting.sort)
def axis_rule(op, x, axis):
    """op(x, axis) along one axis of each example; axis None: the flattened example."""
    if axis is None:
        return op(reshape(x, (shape_of(x)[0], -1)), 1)
    return op(x, shifted_axis(op.op_name, axis, ndim_of(x) - 1))


@examples_first(linalg.norm)
def norm_rule(op, x, ord, axis, keepdims):
    """norm of each example; axis None: the whole example (flattened where ord allows it)."""
    shape = shape_of(x)
    ndim = len(shape) - 1
    if axis is None and (ord is None or ndim == 1 or (ord == "fro" and ndim == 2)):
        out = op(reshape(x, (shape[0], -1)), None if ord == "fro" else ord, 1)
        return reshape(out, (shape[0],) + (1,) * ndim) if keepdims else out
    if axis is None:
        axis = tuple(range(ndim))
    return op(x, ord, shifted_axes("norm", axis, ndim), keepdims)


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
    axis = shifted_axis("take_along_axis", axis, ndim_of(x) - 1)
    return sorting.take_along_axis(x, indices, axis), 0


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


BATCHING_RULES[sorting.take_along_axis] = take_along_axis_rule
