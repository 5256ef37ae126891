"""Operand checks (autograd_lite/ops/checks.py): axis normalization against numpy, and the
dtype rules against numpy's own promotion."""
import itertools
import re

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.ops.checks import check_same_float_dtype, dtype_of, normalize_axes
from autograd_lite.ops.reductions import keepdims_shape


# Axes

@pytest.mark.parametrize("axis, ndim, want", [
    (None, 3, (0, 1, 2)), (None, 0, ()), (0, 1, (0,)), (-1, 3, (2,)), ((2, 0), 3, (0, 2)),
    ((-1, -3), 3, (0, 2)), ([1], 2, (1,)), (np.int64(-2), 4, (2,)), ((), 2, ())])
def test_normalize_axes(axis, ndim, want):
    got = normalize_axes("sum", axis, ndim)
    assert got == want and type(got) is tuple
    # The same axes numpy reduces over: keepdims shapes agree.
    x = np.ones((2, 3, 4, 5)[:ndim])
    numpy_axis = axis if axis is None or isinstance(axis, tuple) else tuple(np.atleast_1d(axis))
    assert keepdims_shape(x.shape, got) == x.sum(axis=numpy_axis, keepdims=True).shape


@pytest.mark.parametrize("axis, ndim, message", [
    (3, 3, "mean: axis 3 is out of range for an array of 3 dimensions"),
    (-4, 3, "mean: axis -4 is out of range for an array of 3 dimensions"),
    (0, 0, "mean: axis 0 is out of range for an array of 0 dimensions"),
    ((0, 5), 2, "mean: axis 5 is out of range for an array of 2 dimensions"),
    ((1, -1), 2, "mean: repeated axis in (1, -1)"),
    ((0, 0), 1, "mean: repeated axis in (0, 0)")])
def test_normalize_axes_errors(axis, ndim, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        normalize_axes("mean", axis, ndim)


def test_normalize_axes_errors_agree_with_numpy():
    x = np.ones((2, 3))
    for axis in [2, -3, (0, 0), (1, -1)]:
        with pytest.raises((ValueError, np.exceptions.AxisError)):
            x.sum(axis=axis)
        with pytest.raises(ValueError):
            normalize_axes("sum", axis, 2)


# Dtype rules

def test_dtype_of_arrays_and_refusal_of_other_operands():
    assert dtype_of("add", np.ones(2, np.float32)) == np.float32
    assert dtype_of("add", np.float64(1.0)) == np.float64
    with pytest.raises(TypeError, match=re.escape(
            "add: operands must be arrays or Python numbers, got list (use np.asarray)")):
        dtype_of("add", [1.0, 2.0])
    with pytest.raises(TypeError, match=r"mul: .* got tuple"):
        check_same_float_dtype("mul", np.ones(2), (1.0, 2.0))


DTYPE_NAMES = ["float16", "float32", "float64", "complex64", "complex128", "int8", "int32",
               "int64", "uint8", "bool"]


@pytest.mark.parametrize("da, db", list(itertools.product(DTYPE_NAMES, repeat=2)))
def test_check_same_float_dtype_refuses_exactly_what_numpy_would_promote(da, db):
    """Independent rule, from numpy's actual result: refused iff the result of a + b has a
    dtype other than that of one of its float (or complex) operands."""
    a, b = np.ones((2, 1), dtype=da), np.ones(3, dtype=db)
    result = (a + b).dtype
    changes_a_float = any(x.dtype.kind in "fc" and x.dtype != result for x in (a, b))
    if changes_a_float:
        with pytest.raises(TypeError) as info:
            check_same_float_dtype("add", a, b)
        message = str(info.value)
        assert message.startswith(f"add: operands {a.dtype} (2, 1) and {b.dtype} (3,) have "
                                  "different dtypes")
        assert "astype" in message
    else:
        check_same_float_dtype("add", a, b)


@pytest.mark.parametrize("number", [2, 2.5, True, 1j])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_python_numbers_never_trigger_the_dtype_check(number, dtype):
    check_same_float_dtype("mul", number, np.ones(2, dtype))
    check_same_float_dtype("mul", np.ones(2, dtype), number)


def test_dtype_check_sees_through_traced_values():
    x32 = np.ones(2, np.float32)
    with pytest.raises(TypeError, match=r"add: operands float32 \(2,\) and float64 \(2,\)"):
        ag.gradient(lambda x: ag.sum(x + np.ones(2)), x32)
    ag.gradient(lambda x: check_same_float_dtype("add", x, np.ones(2, np.float32)) or ag.sum(x),
                x32)
