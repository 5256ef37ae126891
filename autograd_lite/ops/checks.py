"""Checks an op makes on its operands before computing (dtypes: core/dtypes.py); each error
names the op, the operands and what was expected."""
import numbers

import numpy as np

from ..core.devices import device_of_type
from ..core.batched import Batched
from ..core import tracer
from ..core.tracer import Box, is_array
from ..core.tree import is_python_number


def as_array(op, x, name="x"):
    """`x` as numpy's function would take it: arrays (traced, batched, a device's) as they
    are; a list, a number or anything with `__array__` through np.asarray, or stacked
    (ops/shape.array) where it holds arrays numpy refuses. Anything else is refused."""
    if type(x) is np.ndarray or type(x) is Box or type(x) is Batched or \
            isinstance(x, np.ndarray) or device_of_type(type(x)) is not None:  # CuPy's, say
        return x
    array_like = isinstance(x, (list, tuple, numbers.Number, np.generic))
    if not array_like and not hasattr(x, "__array__"):
        raise TypeError(f"{op}: {name} must be an array, a list or a number, got "
                        f"{type(x).__name__}")
    if isinstance(x, (list, tuple)) and _holds_arrays_numpy_refuses(x):  # traced, mapped or
        return tracer.array_of_list(x)  # a device's: stacked, as numpy stacks a list of its own
    try:
        array = np.asarray(x)
    except TypeError:  # a traced value nested deeper refuses to become a plain array
        raise TypeError(f"{op}: {name} is a {type(x).__name__} holding traced values; make them "
                        "one array first (ag.array)") from None
    except ValueError as error:  # a ragged list
        raise ValueError(f"{op}: {name} ({type(x).__name__}) does not make an array: "
                         f"{error}") from None
    if array.dtype.kind not in "biufc":
        raise TypeError(f"{op}: {name} must hold numbers, got a {type(x).__name__} of "
                        f"{array.dtype}")
    return array


def _holds_arrays_numpy_refuses(values):
    """Whether a list or tuple holds (nested too) a traced, mapped or device's array."""
    return any(_holds_arrays_numpy_refuses(v) if isinstance(v, (list, tuple))
               else is_array(v) and type(v) is not np.ndarray for v in values)


def as_operand(op, x, name):
    """An operand of an arithmetic op: a Python number stays as it is (weak in numpy's
    promotion, NEP 50: it takes the other operand's dtype); anything else as `as_array`."""
    if type(x) is np.ndarray or type(x) is Box or type(x) is Batched or is_python_number(x):
        return x
    return as_array(op, x, name)


_READY = frozenset({np.ndarray, Box, Batched, float, int})  # operand types taken as they are


def as_operands(op, a, b, names=("a", "b")):
    """Both operands of a binary op as `as_operand` takes them (one look in the common case)."""
    if type(a) in _READY and type(b) in _READY:
        return a, b
    return as_operand(op, a, names[0]), as_operand(op, b, names[1])


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
