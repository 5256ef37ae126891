"""Numpy broadcasting and its adjoint, `unbroadcast`, the one place that knows how it is
undone: the cotangent summed over the axes that broadcasting added or stretched."""
import numpy as np

from ..core.tracer import plain, primitive
from ..core.dtypes import check_same_float_dtype, wide_sum
from .checks import as_array


def unbroadcast(g, shape):
    """Sum `g` down to `shape`, the shape of an operand that numpy broadcast to g.shape."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, g.shape[lead:])):
        raise ValueError(f"unbroadcast: {shape} does not broadcast to the cotangent's {g.shape}")
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return wide_sum(g, axes, keepdims=True).reshape(shape)  # keepdims: an array even for ()


def sum_rows(g):
    """Σ over every axis but the last, (..., n) -> (n,): a bias's cotangent. A plain float32 or
    float64 g as one matrix-vector product (BLAS: faster than np.sum over many rows)."""
    if plain(g) and g.dtype in _BLAS_FLOATS and g.ndim > 1 and g.size:
        rows = g.reshape(-1, g.shape[-1])
        return np.ones(rows.shape[0], dtype=g.dtype) @ rows
    return unbroadcast(g, g.shape[-1:])


_BLAS_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@primitive
def broadcast_to(x, shape):
    """x broadcast to `shape` (a read-only view); its adjoint is `unbroadcast`."""
    x = as_array("broadcast_to", x)
    shape = tuple(shape)
    try:
        out = np.broadcast_to(x, shape, subok=True) if isinstance(x, np.ndarray) \
            else np.broadcast_to(x, shape)  # a weak float (core/dtypes.py) stays weak
    except ValueError:
        raise ValueError(f"broadcast_to: {x.shape} does not broadcast to {shape}") from None
    x_shape = x.shape

    def broadcast_to_pullback(g):
        return unbroadcast(g, x_shape), None
    return out, broadcast_to_pullback


def shape_of(operand):
    """An operand's shape, () for a Python number (np.shape, without its cost): a pullback
    keeps this, not the operand, whose memory is freed before the backward pass."""
    return getattr(operand, "shape", ())


def broadcast_binary(op, ufunc, a, b):
    """`ufunc(a, b)` with numpy broadcasting; an error names the op and both shapes."""
    check_same_float_dtype(op, a, b)
    try:
        return ufunc(a, b)
    except ValueError:
        raise ValueError(f"{op}: shapes {shape_of(a)} and {shape_of(b)} do not broadcast "
                         "together") from None
