"""The dtype policy, in one place: what dtype an op computes in and gives back.

- No silent promotion: two float dtypes, or a float and an integer array that would change
  it, meeting in one op are refused (`check_same_float_dtype`); Python numbers are weak in
  numpy's promotion (NEP 50) and take the other operand's dtype.
- Weak floats: a differentiated Python float is traced as a `WeakFloat`, a float64 array
  that numpy's ufuncs promote as a Python float (`x * t` is float32 for a float32 x). An op
  with several operands (`settles_weak_floats`, every fast rule) sees a weak operand cast to
  the dtype of its float array operands, and gives its cotangent back as a weak float64,
  the adjoint of that cast.
- float16 computed in float32: a running sum in float16 stalls (2048 + 1 = 2048) or
  overflows (65504), so, as torch's CPU kernels, the ops that sum accumulate float16 in
  float32 and round once: `wide_sum` for the plain sums, `computed_in_float32` for the fused
  rules and `defined_in_float32` for their plain definitions.
"""
import functools

import numpy as np

from .batched import Batched
from .tracer import Box, every_value, plain, primitive
from .tree import is_python_number

_F64 = np.dtype(np.float64)
HALF = np.dtype(np.float16)


# ---------------------------------------------------------------- no silent promotion

def dtype_of(op, x):
    """The dtype of an array operand; anything else (a list, say) is refused by name."""
    try:
        return x.dtype
    except AttributeError:
        raise TypeError(f"{op}: operands must be arrays or Python numbers, got "
                        f"{type(x).__name__} (use np.asarray)") from None


def is_weak(x):
    """A Python number or a weak float: it takes the other operand's dtype (NEP 50)."""
    return is_python_number(x) or is_weak_float(x)


def check_same_float_dtype(op, a, b):
    """Refuse operands that numpy would silently promote: two float dtypes, or a float with
    an integer array that changes it (float32 with int64)."""
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


# ---------------------------------------------------------------- weak floats

class WeakFloat(np.ndarray):
    """A float64 array that promotes as a Python float does (module docstring)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(hasattr(x, "__array_ufunc__") and not isinstance(x, np.ndarray) for x in inputs):
            return NotImplemented  # a traced value among the inputs: its rule runs
        dtype = strong_float_dtype(inputs)
        settled = [np.asarray(x, dtype=dtype or _F64) if type(x) is WeakFloat else x
                   for x in inputs]
        outs = kwargs.get("out")
        if outs is not None:  # written into (numpy's mean divides its weak sum in place):
            kwargs["out"] = tuple(np.asarray(x) for x in outs)  # through plain views
        out = getattr(ufunc, method)(*settled, **kwargs)
        if outs is not None:
            return outs[0] if len(outs) == 1 else outs
        if dtype is None and getattr(out, "dtype", None) == _F64:
            return weak_float(out)  # over weak values and Python numbers only: weak
        return out

    def astype(self, dtype, *args, **kwargs):
        """An explicit cast: an ordinary array, whatever the dtype."""
        return np.asarray(self).astype(dtype, *args, **kwargs)


def weak_float(x):
    """x (a Python float, or a float64 array) as a WeakFloat."""
    return np.asarray(x, dtype=_F64).view(WeakFloat)


def strong(x):
    """x, a weak float (vmap's output), as an ordinary float64 array; anything else as is."""
    return np.asarray(x) if type(x) is WeakFloat else x


def is_weak_float(x):
    """Whether x is a WeakFloat, or a traced or batched value whose value is one."""
    return type(every_value(x)) is WeakFloat


def strong_float_dtype(operands):
    """The common dtype of the operands that are float arrays (numpy float scalars too) and
    not weak, or None."""
    dtypes = []
    for x in operands:
        kind = type(x)
        if kind is WeakFloat or kind is float or kind is int:
            continue
        dtype = getattr(x, "dtype", None)
        if isinstance(dtype, np.dtype) and dtype.kind == "f" and \
                not (kind is Box and is_weak_float(x)):
            dtypes.append(dtype)
    if not dtypes:
        return None
    return dtypes[0] if len(dtypes) == 1 else np.result_type(*dtypes)


def settled_weak_floats(values):
    """(values, positions): the plain values with each WeakFloat cast to the dtype of the
    float arrays among them (if any), and the positions cast."""
    dtype = strong_float_dtype(values)
    if dtype is None:
        return values, ()
    positions = [i for i, v in enumerate(values) if type(v) is WeakFloat]
    values = list(values)
    for i in positions:
        values[i] = values[i].astype(dtype)
    return values, positions


def weak_cotangents(cotangents, positions):
    """The cotangents, those at `positions` (settled_weak_floats's) weak: the cast's adjoint."""
    cotangents = list(cotangents)
    for i in positions:
        cotangents[i] = _as_weak_cotangent(cotangents[i])
    return tuple(cotangents)


def settles_weak_floats(body):
    """`body(*operands) -> (out, pullback)` with each weak operand (traced or not) cast to
    the dtype of its float array operands and its cotangent returned as a weak float64; a
    traced one by a recorded `astype`, so that higher order sees both casts."""
    @functools.wraps(body)
    def settled_body(*args, **kwargs):
        weak = [i for i, a in enumerate(args) if type(a) is not np.ndarray and is_weak_float(a)]
        dtype = strong_float_dtype(args) if weak else None
        if dtype is None:
            return body(*args, **kwargs)
        args = list(args)
        for i in weak:
            args[i] = args[i].astype(dtype)
        out, pullback = body(*args, **kwargs)

        @functools.wraps(pullback)
        def weak_operands_pullback(g):
            return weak_cotangents(pullback(g), weak)
        return out, weak_operands_pullback
    return settled_body


def _as_weak_cotangent(g):
    """A weak operand's cotangent (None, an array, or a function computing it), weak."""
    if g is None:
        return None
    if callable(g):
        return lambda: _as_weak_cotangent(g())
    return weak_cotangent(g) if type(g) is Box or type(g) is Batched else weak_float(g)


@primitive(name="weak")
def weak_cotangent(g):
    """g as a weak float64 (recorded where g is traced); its adjoint casts back to g's dtype."""
    dtype = g.dtype

    def weak_pullback(c):
        return (c.astype(dtype),)
    return _as_weak_cotangent(g), weak_pullback


# ---------------------------------------------------------------- float16 in float32

def wide_sum(x, axis, keepdims):
    """x.sum(axis, keepdims=keepdims), a plain float16 x summed in float32 and rounded back
    (numpy adds float16 in float16 along every axis but the last)."""
    if plain(x) and x.dtype == HALF:
        return x.sum(axis=axis, keepdims=keepdims, dtype=np.float32).astype(HALF)
    return x.sum(axis=axis, keepdims=keepdims)


def _is_float_array(a):
    return getattr(getattr(a, "dtype", None), "kind", None) == "f"


def _all_half(args):
    """Whether the first argument is float16 and so is every float array among the rest."""
    if getattr(args[0], "dtype", None) != HALF:
        return False
    return not any(_is_float_array(a) and a.dtype != HALF for a in args)


def _to_half(cotangent):
    """A cotangent (None, an array or a function computing one) rounded to float16."""
    if cotangent is None:
        return None
    if callable(cotangent):
        return lambda: cotangent().astype(HALF)
    return cotangent.astype(HALF)


def defined_in_float32(function):
    """A plain definition `function(x, ...)` that computes in float32 when its float array
    operands are all float16, by the values' own (recorded) casts up and back."""
    @functools.wraps(function)
    def float32_definition(*args, **kwargs):
        if not _all_half(args):
            return function(*args, **kwargs)
        up = [a.astype(np.float32) if _is_float_array(a) else a for a in args]
        return function(*up, **kwargs).astype(HALF)
    return float32_definition


def computed_in_float32(body):
    """A primitive's or a rule's body `body(x, ...) -> (out, pullback)` that runs in float32
    when x and its other float operands are all float16, the output and every cotangent
    rounded back to float16 (as torch's CPU softmax, layer norm and cross entropy). Other
    dtypes, mixed ones too (the body's check names them), reach `body` as they are."""
    @functools.wraps(body)
    def in_float32(*args):
        if not _all_half(args):
            return body(*args)
        out, pullback = body(*(a.astype(np.float32) if _is_float_array(a) else a
                               for a in args))

        def pullback_in_float32(g):
            return tuple(_to_half(c) for c in pullback(g.astype(np.float32)))
        return out.astype(HALF), pullback_in_float32
    return in_float32
