"""Batching rules of the shape ops: examples to the front, the op's axes and shapes one
further on."""
from ..core.batched import BATCHING_RULES
from ..ops import broadcasting, shape as sh
from .axes import (examples_first, front_or_broadcast, length_of, ndim_of, padded, shape_of,
                   shifted_axes, shifted_axis, static)


@examples_first(sh.reshape)
def reshape_rule(op, x, shape):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return op(x, (shape_of(x)[0],) + shape)


@examples_first(sh.transpose)
def transpose_rule(op, x, axes):
    ndim = ndim_of(x) - 1
    axes = range(ndim - 1, -1, -1) if axes is None else axes
    return op(x, (0,) + tuple(shifted_axis("transpose", a, ndim) for a in axes))


@examples_first(sh.swapaxes)
def swapaxes_rule(op, x, a1, a2):
    ndim = ndim_of(x) - 1
    return op(x, shifted_axis("swapaxes", a1, ndim), shifted_axis("swapaxes", a2, ndim))


@examples_first(sh.expand_dims)
def expand_dims_rule(op, x, axis):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out_ndim = ndim_of(x) - 1 + len(axes)
    return op(x, tuple(shifted_axis("expand_dims", a, out_ndim) for a in axes))


@examples_first(sh.squeeze)
def squeeze_rule(op, x, axis):
    example = shape_of(x)[1:]
    if axis is None:
        axis = tuple(i for i, n in enumerate(example) if n == 1)
    return op(x, shifted_axes("squeeze", axis, len(example)))


def concatenate_rule(values, bdims):
    static("concatenate", bdims, ("axis",), start=0)
    axis, *xs = values
    length = length_of(xs, bdims[1:])
    xs = [front_or_broadcast(x, b, length) for x, b in zip(xs, bdims[1:])]
    return sh.concatenate_arrays(shifted_axis("concatenate", axis, ndim_of(xs[0]) - 1), *xs), 0


def stack_rule(values, bdims):
    static("stack", bdims, ("axis",), start=0)
    axis, *xs = values
    length = length_of(xs, bdims[1:])
    xs = [front_or_broadcast(x, b, length) for x, b in zip(xs, bdims[1:])]
    return sh.stack_arrays(shifted_axis("stack", axis, ndim_of(xs[0])), *xs), 0


def broadcast_to_rule(values, bdims):
    static("broadcast_to", bdims, ("shape",), start=1)
    x, shape = values
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    x = padded(x, bdims[0], len(shape))
    return broadcasting.broadcast_to(x, shape_of(x)[:1] + shape), 0


BATCHING_RULES.update({sh.concatenate_arrays: concatenate_rule, sh.stack_arrays: stack_rule,
                       broadcasting.broadcast_to: broadcast_to_rule})
