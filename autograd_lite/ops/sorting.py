"""Reordering along an axis: take_along_axis, and sort by the sorting permutation.

    take_along_axis(x, indices, axis)  <->  add_at of the cotangent at those positions
    sort(x, axis)                      <->  the cotangent taken back by the inverse permutation
"""
import numpy as np

from ..core.tracer import primal, primitive
from .checks import as_array, normalize_axes
from .indexing import add_at


def _check_indices_along(x, indices, axis):
    dtype = getattr(indices, "dtype", None)
    if dtype is None or dtype.kind not in "iu":
        raise TypeError(f"take_along_axis: indices must be an integer array, got "
                        f"{dtype if dtype is not None else type(indices).__name__}")
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices {indices.shape} must have as many "
                         f"dimensions as x {x.shape}")
    n = x.shape[axis]
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise IndexError(f"take_along_axis: indices must lie in [-{n}, {n}) for axis {axis} of "
                         f"{x.shape}, got values from {indices.min()} to {indices.max()}")


def along_axis_index(x_shape, indices, axis):
    """The index with x[index] == np.take_along_axis(x, indices, axis): `indices` on `axis`,
    and on every other axis each position itself (0 where x has length 1 and broadcasts)."""
    index = []
    for d, n in enumerate(x_shape):
        if d == axis:
            index.append(indices)
            continue
        length = n if n != 1 else indices.shape[d]
        positions = np.arange(length) if n != 1 else np.zeros(length, dtype=np.intp)
        index.append(positions.reshape((1,) * d + (length,) + (1,) * (len(x_shape) - d - 1)))
    return tuple(index)


@primitive
def take_along_axis(x, indices, axis=-1):
    """np.take_along_axis; a position taken several times sums its cotangents."""
    x = as_array("take_along_axis", x)
    x_shape = x.shape
    x, axis = (x.reshape(-1), 0) if axis is None else (x, axis)  # numpy's convention
    (axis,) = normalize_axes("take_along_axis", axis, x.ndim)
    _check_indices_along(x, indices, axis)
    try:
        out = np.take_along_axis(x, indices, axis)
    except (ValueError, IndexError):
        raise ValueError(f"take_along_axis: indices {indices.shape} do not broadcast against "
                         f"x {x.shape} off axis {axis}") from None
    index = along_axis_index(x.shape, indices, axis)
    taken_from_shape = x.shape

    def take_along_axis_pullback(g):
        return add_at(g, index, taken_from_shape).reshape(x_shape), None, None
    return out, take_along_axis_pullback


@primitive
def sort(x, axis=-1):
    """np.sort, stable; dx = take_along_axis(g, inverse permutation)."""
    x = as_array("sort", x)
    x_shape = x.shape
    x, axis = (x.reshape(-1), 0) if axis is None else (x, axis)  # numpy's convention
    (axis,) = normalize_axes("sort", axis, x.ndim)
    order = np.argsort(primal(x), axis=axis, kind="stable")
    out = np.take_along_axis(x, order, axis)

    def sort_pullback(g):
        back = np.argsort(order, axis=axis)  # where each entry of x went
        return take_along_axis(g, back, axis).reshape(x_shape), None
    return out, sort_pullback


def partition(x, kth, axis=-1):
    """np.partition: x sorted along `axis`, a partition at every kth (numpy's own order within
    each side may differ)."""
    return sort(x, axis)


# ---- no derivative: numpy's function, which ops/operators.py computes on the plain values ----

def argsort(x, axis=-1):
    return np.argsort(as_array("argsort", x), axis=axis)


def argmax(x, axis=None, keepdims=False):
    return np.argmax(as_array("argmax", x), axis=axis, keepdims=keepdims)


def argmin(x, axis=None, keepdims=False):
    return np.argmin(as_array("argmin", x), axis=axis, keepdims=keepdims)


def round(x, decimals=0):
    """np.round: half to even; a constant (derivative 0)."""
    return np.round(as_array("round", x), decimals)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(np.allclose(as_array("allclose", a, "a"), as_array("allclose", b, "b"),
                            rtol, atol, equal_nan))
