"""What the op families share: broadcasting and its adjoint, axes, dtype rules,
lazy pullback entries, and fast sums over the last axis.

`unbroadcast` is the one place that knows how numpy broadcasting is undone: the
cotangent of a broadcast operand is the cotangent of the result summed over
the axes that broadcasting added or stretched.
"""
import numbers

import numpy as np

from ..tree import is_python_number as is_number


def unbroadcast(g, shape):
    """Sum `g` down to `shape`, the shape of an operand that numpy broadcast to g.shape."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, g.shape[lead:])):
        raise ValueError(f"unbroadcast: {shape} does not broadcast to the cotangent's {g.shape}")
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)  # keepdims: an array even for ()


def lazy(operand, compute):
    """A pullback entry for `operand`: None for a Python number, else `compute` itself, a
    function of no arguments that the engine calls only if the operand is traced. `operand`
    may be given as its `shape_of` (None standing for a number)."""
    # a kept shape (a tuple) stands for an array: skip is_number's slower checks on it
    if operand is None or (type(operand) is not tuple and is_number(operand)):
        return None
    return compute


def shape_of(operand):
    """The operand's shape, or None for a Python number. A pullback that only needs the
    shape keeps this instead of the operand, so the operand's memory can be freed before
    the backward pass."""
    return None if is_number(operand) else operand.shape


def normalize_axes(op, axis, ndim):
    """`axis` (None, int or tuple) as a sorted tuple of non-negative axes, checked."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    normal = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a} is out of range for an array of {ndim} dimensions")
        normal.append(a % ndim)
    if len(set(normal)) != len(normal):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return tuple(sorted(normal))


def keepdims_shape(shape, axes):
    """`shape` with each reduced axis set to 1: where a reduction's cotangent is reshaped."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def dtype_of(op, x):
    """The dtype of an array operand; anything else (a list, say) is refused by name."""
    try:
        return x.dtype
    except AttributeError:
        raise TypeError(f"{op}: operands must be arrays or Python numbers, got "
                        f"{type(x).__name__} (use np.asarray)") from None


def check_same_float_dtype(op, a, b):
    """Refuse operands that numpy would silently promote: two float dtypes, or a float with
    an integer array that changes it (float32 with int64). Python numbers are weak in
    numpy's promotion (NEP 50) and never change a dtype."""
    ta, tb = type(a), type(b)
    if (ta is np.ndarray and tb is float) or (ta is float and tb is np.ndarray):
        return  # the common case (x * 0.5), answered first
    da = None if is_number(a) else dtype_of(op, a)  # dtype_of refuses a list by name
    db = None if is_number(b) else dtype_of(op, b)
    if da is None or db is None:
        return
    floats = [d for d in (da, db) if d.kind in "fc"]
    if da == db or not floats:
        return
    if len(floats) == 2 or np.result_type(da, db) != floats[0]:  # float64 with int64 is fine
        raise TypeError(
            f"{op}: operands {da} {tuple(a.shape)} and {db} {tuple(b.shape)} have different "
            f"dtypes; numpy would promote them silently. Cast one explicitly (x.astype(...)).")


def broadcast_binary(op, ufunc, a, b):
    """`ufunc(a, b)` with numpy broadcasting; an error names the op and both shapes."""
    check_same_float_dtype(op, a, b)
    try:
        return ufunc(a, b)
    except ValueError:
        raise ValueError(
            f"{op}: shapes {np.shape(a) if is_number(a) else a.shape} and "
            f"{np.shape(b) if is_number(b) else b.shape} do not broadcast together") from None


def sum_last(x):
    """Σ over the last axis, keepdims. On plain arrays np.einsum does it ~4x faster than
    x.sum(-1) for short rows (attention scores, layer norm); traced values use the op."""
    if type(x) is np.ndarray:
        return np.einsum("...i->...", x)[..., None]
    return x.sum(axis=-1, keepdims=True)


def sum_keepdims(x, axis):
    """Σ over one axis, keepdims (the fast path when it is the last)."""
    return sum_last(x) if axis == x.ndim - 1 else x.sum(axis=axis, keepdims=True)


def mean_last(x):
    """Mean over the last axis, keepdims (see sum_last)."""
    return sum_last(x) * (1.0 / x.shape[-1])
