"""Weak floats: the value a differentiated Python float is traced as. In numpy (NEP 50) and
JAX a Python float is weakly typed: with float arrays it takes their dtype (`x * 2.0` is
float32 for a float32 x). `gradient` boxes a Python float argument as a `WeakFloat`, a
float64 array that numpy's ufuncs treat the same way, so the traced call computes in the
dtypes of the untraced one. A ufunc over weak values and Python numbers only gives a weak
value (`t * 2.0`, `exp(t)`, `np.sum(t)`); an explicit cast (`t.astype(np.float32)`) gives
an ordinary array. The ops with several operands cast a weak operand before they compute
and give its cotangent back as a weak float64 (ops/weak.py); the rest of the engine sees
an array.
"""
import numpy as np

from .tracer import Box, every_value

_F64 = np.dtype(np.float64)


class WeakFloat(np.ndarray):
    """A float64 array that promotes as a Python float does (module docstring)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(hasattr(x, "__array_ufunc__") and not isinstance(x, np.ndarray) for x in inputs):
            return NotImplemented  # a traced value among the inputs: its rule runs
        dtype = strong_float_dtype(inputs)
        plain = [settled(x, dtype) for x in inputs]
        outs = kwargs.get("out")
        if outs is not None:  # written into (numpy's mean divides its weak sum in place)
            kwargs["out"] = tuple(settled(x, x.dtype) for x in outs)
        out = getattr(ufunc, method)(*plain, **kwargs)
        if outs is not None:
            return outs[0] if len(outs) == 1 else outs
        if dtype is None and "out" not in kwargs and getattr(out, "dtype", None) == _F64:
            return weak_float(out)  # over weak values and Python numbers only: weak
        return out

    def astype(self, dtype, *args, **kwargs):
        """An explicit cast: an ordinary array, whatever the dtype."""
        return np.asarray(self).astype(dtype, *args, **kwargs)


def weak_float(x):
    """x (a Python float, or a float64 array) as a WeakFloat."""
    return np.asarray(x, dtype=_F64).view(WeakFloat)


def strong(x):
    """x, a weak float (of many examples: vmap's output) as an ordinary float64 array, as
    numpy stacks Python floats; anything else as it is."""
    return np.asarray(x) if type(x) is WeakFloat else x


def is_weak(x):
    """Whether x is a weak value: a WeakFloat, or a traced or batched value whose value is one."""
    return type(every_value(x)) is WeakFloat


def strong_float_dtype(operands):
    """The common dtype of the operands that are float arrays and not weak (numpy float
    scalars count; Python numbers do not), or None if there are none."""
    dtypes = []
    for x in operands:
        kind = type(x)
        if kind is WeakFloat or kind is float or kind is int:
            continue
        dtype = getattr(x, "dtype", None)
        if isinstance(dtype, np.dtype) and dtype.kind == "f" and not (kind is Box and is_weak(x)):
            dtypes.append(dtype)
    if not dtypes:
        return None
    return dtypes[0] if len(dtypes) == 1 else np.result_type(*dtypes)


def settled(x, dtype):
    """An operand as numpy should see it next to float arrays of `dtype` (None: there are
    none): a weak value as an ordinary array of that dtype (float64 without one)."""
    if type(x) is not WeakFloat:
        return x
    return np.asarray(x, dtype=dtype or _F64)
