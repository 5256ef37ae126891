"""Shape primitives: reshape, transpose, swapaxes, expand_dims, squeeze, concatenate, stack; split.

All of them move elements without changing them, so each pullback is the
inverse movement applied to the cotangent.
"""
import numbers

import numpy as np

from ..core.tracer import primitive
from ..core.dtypes import check_same_float_dtype
from .checks import as_array, normalize_axes


@primitive
def reshape(x, shape):
    """x with a new shape of the same size (one entry may be -1)."""
    x = as_array("reshape", x)
    try:
        out = x.reshape(shape)
    except ValueError:
        target = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        raise ValueError(f"reshape: cannot reshape {x.shape} (size {x.size}) into {target}") from None
    x_shape = x.shape

    def reshape_pullback(g):
        return g.reshape(x_shape), None
    return out, reshape_pullback


@primitive
def transpose(x, axes=None):
    """Permute the axes (reverse them when `axes` is None)."""
    x = as_array("transpose", x)
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    axes = tuple(axes)
    if sorted(a % x.ndim if -x.ndim <= a < x.ndim else a for a in axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of the {x.ndim} axes of {x.shape}")
    out = np.transpose(x, axes)
    inverse = tuple(np.argsort([a % x.ndim for a in axes]))

    def transpose_pullback(g):
        return np.transpose(g, inverse), None
    return out, transpose_pullback


@primitive
def swapaxes(x, axis1, axis2):
    """Exchange two axes."""
    x = as_array("swapaxes", x)
    normalize_axes("swapaxes", (axis1,), x.ndim)
    normalize_axes("swapaxes", (axis2,), x.ndim)
    out = np.swapaxes(x, axis1, axis2)

    def swapaxes_pullback(g):
        return np.swapaxes(g, axis1, axis2), None, None
    return out, swapaxes_pullback


@primitive
def expand_dims(x, axis):
    """Insert a length-1 axis at `axis` (an int or a tuple, as np.expand_dims)."""
    x = as_array("expand_dims", x)
    axes = axis if isinstance(axis, tuple) else (axis,)
    if not all(-x.ndim - len(axes) <= a < x.ndim + len(axes) for a in axes):
        raise ValueError(f"expand_dims: axis {axis} is out of range for {x.shape}")
    out = np.expand_dims(x, axis)
    x_shape = x.shape

    def expand_dims_pullback(g):
        return g.reshape(x_shape), None
    return out, expand_dims_pullback


@primitive
def squeeze(x, axis=None):
    """Remove length-1 axes (all of them, or those named by `axis`)."""
    x = as_array("squeeze", x)
    axes = normalize_axes("squeeze", axis, x.ndim) if axis is not None else None
    if axes is not None and any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"squeeze: axis {axis} of {x.shape} does not have length 1")
    out = np.squeeze(x, axes)
    x_shape = x.shape

    def squeeze_pullback(g):
        return g.reshape(x_shape), None
    return out, squeeze_pullback


def _check_same_shapes_but(op, shapes, axis, ndim):
    for s in shapes:
        if len(s) != ndim or any(n != m for i, (n, m) in enumerate(zip(s, shapes[0])) if i != axis):
            raise ValueError(f"{op}: shapes {shapes} must agree on every axis but {axis}")


@primitive(name="concatenate")
def concatenate_arrays(axis, *xs):
    """Join arrays along an existing axis; the pullback slices the cotangent back apart."""
    if not xs:
        raise ValueError("concatenate: needs at least one array")
    xs = [as_array("concatenate", x, f"xs[{i}]") for i, x in enumerate(xs)]
    ndim = xs[0].ndim
    (axis,) = normalize_axes("concatenate", axis, ndim)
    shapes = [x.shape for x in xs]
    _check_same_shapes_but("concatenate", shapes, axis, ndim)
    for x in xs[1:]:
        check_same_float_dtype("concatenate", xs[0], x)
    out = np.concatenate(xs, axis)
    ends = np.cumsum([s[axis] for s in shapes])

    def concatenate_pullback(g):
        starts = [0, *ends[:-1]]
        lead = (slice(None),) * axis
        return (None, *(g[lead + (slice(int(a), int(b)),)] for a, b in zip(starts, ends)))
    return out, concatenate_pullback


def concatenate(xs, axis=0):
    """np.concatenate(xs, axis) for traced or plain arrays; axis None joins them flattened."""
    if axis is None:
        return concatenate_arrays(0, *(reshape(x, -1) for x in xs))
    return concatenate_arrays(axis, *xs)


@primitive(name="stack")
def stack_arrays(axis, *xs):
    """Join equal-shape arrays along a new axis; the pullback takes each slice back out."""
    if not xs:
        raise ValueError("stack: needs at least one array")
    xs = [as_array("stack", x, f"xs[{i}]") for i, x in enumerate(xs)]
    shapes = [x.shape for x in xs]
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"stack: all arrays must have the same shape, got {shapes}")
    for x in xs[1:]:
        check_same_float_dtype("stack", xs[0], x)
    ndim = xs[0].ndim + 1
    if not -ndim <= axis < ndim:
        raise ValueError(f"stack: axis {axis} is out of range for {ndim} dimensions")
    axis %= ndim
    out = np.stack(xs, axis)
    lead = (slice(None),) * axis

    def stack_pullback(g):
        return (None, *(g[lead + (i,)] for i in range(len(xs))))
    return out, stack_pullback


def stack(xs, axis=0):
    """np.stack(xs, axis) for traced or plain arrays."""
    return stack_arrays(axis, *xs)


def split(x, indices_or_sections, axis=0):
    """np.split: a list of slices of x along `axis` (equal sections, or cut at the given indices)."""
    x = as_array("split", x)
    (axis,) = normalize_axes("split", axis, x.ndim)
    length = x.shape[axis]
    if isinstance(indices_or_sections, numbers.Integral):
        sections = int(indices_or_sections)
        if sections <= 0 or length % sections:
            raise ValueError(f"split: axis {axis} of {x.shape} (length {length}) does not "
                             f"divide into {sections} equal sections")
        cuts = [length // sections * i for i in range(1, sections)]
    else:
        cuts = [int(c) for c in indices_or_sections]
    lead = (slice(None),) * axis
    bounds = zip([0, *cuts], [*cuts, length])
    return [x[lead + (slice(a, b),)] for a, b in bounds]
