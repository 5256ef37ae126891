"""Checks an op makes on its operands before computing: dtypes that numpy would promote
silently, and axis arguments. Each error names the op, the operands and what was expected."""
import numbers

import numpy as np

from ..tracer import Box
from ..tree import is_python_number


def dtype_of(op, x):
    """The dtype of an array operand; anything else (a list, say) is refused by name."""
    try:
        return x.dtype
    except AttributeError:
        raise TypeError(f"{op}: operands must be arrays or Python numbers, got "
                        f"{type(x).__name__} (use np.asarray)") from None


def is_weak(x):
    """A Python number, or a value traced from one (a weak scalar of an enclosing trace):
    weak in numpy's promotion (NEP 50), it takes the other operand's dtype."""
    return is_python_number(x) or (type(x) is Box and x.node.weak)


def check_same_float_dtype(op, a, b):
    """Refuse operands that numpy would silently promote: two float dtypes, or a float with
    an integer array that changes it (float32 with int64). Python numbers are weak in
    numpy's promotion (NEP 50) and never change a dtype."""
    ta, tb = type(a), type(b)
    if (ta is np.ndarray and tb is float) or (ta is float and tb is np.ndarray):
        return  # the common case (x * 0.5), answered first
    da = None if is_weak(a) else dtype_of(op, a)  # dtype_of refuses a list by name
    db = None if is_weak(b) else dtype_of(op, b)
    if da is None or db is None:
        return
    floats = [d for d in (da, db) if d.kind in "fc"]
    if da == db or not floats:
        return
    if len(floats) == 2 or np.result_type(da, db) != floats[0]:  # float64 with int64 is fine
        raise TypeError(
            f"{op}: operands {da} {tuple(a.shape)} and {db} {tuple(b.shape)} have different "
            f"dtypes; numpy would promote them silently. Cast one explicitly (x.astype(...)).")


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
