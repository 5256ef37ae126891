"""Batching rules of the shape ops: examples to the front, the op's axes and shapes one
further on."""
from ..core.batched import BATCHING_RULES
from ..ops import broadcasting, shape as sh
from ..ops.checks import normalize_axes
from .axes import front_or_broadcast, length_of, ndim_of, padded, shape_of, static, to_front


def _axis(op, a, ndim):
    (a,) = normalize_axes(op, (a,), ndim)
    return a


def reshape_rule(values, bdims):
    static("reshape", bdims, ("shape",), start=1)
    x, shape = values
    x = to_front(x, bdims[0])
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return sh.reshape(x, (shape_of(x)[0],) + shape), 0


def transpose_rule(values, bdims):
    static("transpose", bdims, ("axes",), start=1)
    x, axes = values
    x = to_front(x, bdims[0])
    ndim = ndim_of(x) - 1
    axes = range(ndim - 1, -1, -1) if axes is None else [_axis("transpose", a, ndim) for a in axes]
    return sh.transpose(x, (0,) + tuple(a + 1 for a in axes)), 0


def swapaxes_rule(values, bdims):
    static("swapaxes", bdims, ("axis1", "axis2"), start=1)
    x, a1, a2 = values
    x = to_front(x, bdims[0])
    ndim = ndim_of(x) - 1
    return sh.swapaxes(x, _axis("swapaxes", a1, ndim) + 1, _axis("swapaxes", a2, ndim) + 1), 0


def expand_dims_rule(values, bdims):
    static("expand_dims", bdims, ("axis",), start=1)
    x, axis = values
    x = to_front(x, bdims[0])
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out_ndim = ndim_of(x) - 1 + len(axes)
    return sh.expand_dims(x, tuple(_axis("expand_dims", a, out_ndim) + 1 for a in axes)), 0


def squeeze_rule(values, bdims):
    static("squeeze", bdims, ("axis",), start=1)
    x, axis = values
    x = to_front(x, bdims[0])
    example = shape_of(x)[1:]
    if axis is None:
        axes = tuple(i for i, n in enumerate(example) if n == 1)
    else:
        axes = normalize_axes("squeeze", axis, len(example))
    return sh.squeeze(x, tuple(a + 1 for a in axes)), 0


def concatenate_rule(values, bdims):
    static("concatenate", bdims, ("axis",), start=0)
    axis, *xs = values
    length = length_of(xs, bdims[1:])
    xs = [front_or_broadcast(x, b, length) for x, b in zip(xs, bdims[1:])]
    return sh.concatenate_arrays(_axis("concatenate", axis, ndim_of(xs[0]) - 1) + 1, *xs), 0


def stack_rule(values, bdims):
    static("stack", bdims, ("axis",), start=0)
    axis, *xs = values
    length = length_of(xs, bdims[1:])
    xs = [front_or_broadcast(x, b, length) for x, b in zip(xs, bdims[1:])]
    return sh.stack_arrays(_axis("stack", axis, ndim_of(xs[0])) + 1, *xs), 0


def broadcast_to_rule(values, bdims):
    static("broadcast_to", bdims, ("shape",), start=1)
    x, shape = values
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    x = padded(x, bdims[0], len(shape))
    return broadcasting.broadcast_to(x, shape_of(x)[:1] + shape), 0


BATCHING_RULES.update({
    sh.reshape: reshape_rule, sh.transpose: transpose_rule, sh.swapaxes: swapaxes_rule,
    sh.expand_dims: expand_dims_rule, sh.squeeze: squeeze_rule,
    sh.concatenate_arrays: concatenate_rule, sh.stack_arrays: stack_rule,
    broadcasting.broadcast_to: broadcast_to_rule,
})
