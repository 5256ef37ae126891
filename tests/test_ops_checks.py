"""Operand checks (autograd_lite/ops/checks.py): axis normalization against numpy, and the
dtype rules against numpy's own promotion."""
import itertools
import re

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.core.dtypes import check_same_float_dtype, dtype_of
from autograd_lite.ops.checks import normalize_axes
from autograd_lite.ops.reductions import keepdims_shape
from helpers.op_cases import assert_raises, each_error


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


# What numpy's functions take: lists, tuples and numbers

ROW, MATRIX = [0.5, -1.0, 2.0], ((0.5, -1.0, 2.0), (1.5, 0.25, -3.0))
UNARY = {  # every unary op against numpy's function (None: the op on the arguments as arrays)
    "neg": np.negative, "exp": np.exp, "log": None, "sqrt": None, "tanh": np.tanh,
    "relu": None, "gelu": None, "abs": np.abs, "sin": np.sin, "cos": np.cos, "log1p": None,
    "expm1": np.expm1, "softplus": None, "silu": None, "square": np.square,
    "sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod, "var": np.var,
    "cumsum": np.cumsum, "sort": np.sort, "norm": np.linalg.norm, "transpose": np.transpose,
    "squeeze": np.squeeze,
}
POSITIVE = {"log", "sqrt", "log1p"}  # their domain
TAKES = [  # (name, ours, numpy's or None, arguments)
    *[(f"{name}(list)", getattr(ag, name), numpy, ([abs(v) for v in ROW] if name in POSITIVE
                                                  else ROW,)) for name, numpy in UNARY.items()],
    *[(f"{name}(2.0)", getattr(ag, name), numpy, (2.0,)) for name, numpy in UNARY.items()
      if name != "sort"],
    *[(f"{name}(list, tuple)", getattr(ag, name), getattr(np, numpy), (ROW, MATRIX))
      for name, numpy in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                          ("div", "divide"), ("maximum", "maximum"), ("minimum", "minimum")]],
    ("pow(list, 2.0)", ag.pow, np.power, ([0.5, 1.0, 2.0], 2.0)),
    ("where(list, list, 0.0)", ag.where, np.where, ([True, False, True], ROW, 0.0)),
    ("clip(list, list, 1.0)", ag.clip, np.clip, (MATRIX, [0.0, -2.0, 0.5], 1.0)),
    ("clip(2.0, 0.0, 1.0)", ag.clip, np.clip, (2.0, 0.0, 1.0)),
    ("reshape(tuple)", ag.reshape, np.reshape, (MATRIX, (3, 2))),
    ("swapaxes(tuple)", ag.swapaxes, np.swapaxes, (MATRIX, 0, 1)),
    ("expand_dims(list)", ag.expand_dims, np.expand_dims, (ROW, 0)),
    ("broadcast_to(list)", ag.broadcast_to, np.broadcast_to, (ROW, (2, 3))),
    ("broadcast_to(2.0)", ag.broadcast_to, np.broadcast_to, (2.0, (2, 3))),
    ("concatenate(lists)", ag.concatenate, np.concatenate, ([ROW, [1.0]],)),
    ("concatenate(axis=None)", lambda xs: ag.concatenate(xs, axis=None),
     lambda xs: np.concatenate(xs, axis=None), ([MATRIX, ROW],)),
    ("stack(lists)", ag.stack, np.stack, ([ROW, ROW],)),
    ("split(list)", lambda x: ag.split(x, 3)[1], None, (ROW,)),  # np.split refuses a list
    ("getitem(tuple)", ag.getitem, lambda x, i: np.asarray(x)[i], (MATRIX, (1, 2))),
    ("gather(list)", ag.gather, lambda t, i: np.take(t, i, axis=0), (ROW, np.array([2, 0]))),
    ("scatter_add(list)", ag.scatter_add, None, (ROW, np.array([1, 1, 0]), 2)),
    ("add_at(list)", ag.add_at, None, (ROW, np.array([1, 1, 0]), (2,))),
    ("matmul(list, tuple)", ag.matmul, np.matmul, (ROW, MATRIX[::-1] + ((1.0, 0.0, 1.0),))),
    ("dot(list, list)", ag.dot, np.dot, (ROW, ROW)),
    ("dot(2.0, list)", ag.dot, np.dot, (2.0, ROW)),
    ("outer(list, 2.0)", ag.outer, np.outer, (ROW, 2.0)),
    ("einsum(list, tuple)", ag.einsum, np.einsum, ("i,ji->j", ROW, MATRIX)),
    ("take_along_axis(list)", ag.take_along_axis, None, (ROW, np.array([2, 2, 0]), 0)),
    *[(f"{name}(list)", getattr(ag, name), None, (MATRIX,))
      for name in ("sigmoid", "softmax", "log_softmax", "logsumexp")],
    ("layer_norm(lists)", ag.layer_norm, None, (MATRIX, [1.0, 2.0, 0.5], (0.0, 1.0, 0.0))),
    ("cross_entropy(lists)", ag.cross_entropy, None, (MATRIX, [2, 0])),
    ("dropout(list, 0.0)", ag.dropout, None, (ROW, 0.0, None)),
]


@pytest.mark.parametrize("name, ours, numpy, args", TAKES, ids=[t[0] for t in TAKES])
def test_ops_take_lists_tuples_and_numbers_as_numpy_does(name, ours, numpy, args):
    got = ours(*args)
    if numpy is None:  # no numpy function: the op on the same arguments made arrays
        numpy = ours
        args = [np.asarray(a) if isinstance(a, (list, tuple, float)) else a for a in args]
    want = np.asarray(numpy(*args))
    assert type(got) is np.ndarray and got.dtype == want.dtype, (type(got), got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_a_list_beside_a_traced_value_is_a_constant():
    x = np.array([1.0, 2.0, 3.0])
    (g,) = ag.gradient(lambda x: ag.sum(ag.mul(x, [1.0, 2.0, 3.0])) + ag.dot([2.0, 0.0, 1.0], x), x)
    np.testing.assert_array_equal(g, [3.0, 2.0, 4.0])


REFUSALS = [
    (lambda: ag.sum({"a": 1.0}), TypeError,
     "sum: x must be an array, a list or a number, got dict"),
    (lambda: ag.exp("2.0"), TypeError, "exp: x must be an array, a list or a number, got str"),
    (lambda: ag.mul(np.ones(2), None), TypeError,
     "mul: b must be an array, a list or a number, got NoneType"),
    (lambda: ag.sum(["a", "b"]), TypeError, "sum: x must hold numbers, got a list of <U1"),
    (lambda: ag.mean([[1.0, 2.0], [3.0]]), ValueError, "mean: x (list) does not make an array: "),
    (lambda: ag.matmul(2.0, [1.0, 2.0]), ValueError, "matmul: () @ (2,): operands need at least"),
    (lambda: ag.concatenate([np.ones(2), "ab"]), TypeError,
     "concatenate: xs[1] must be an array, a list or a number, got str"),
]


@each_error(REFUSALS)
def test_what_numpy_would_not_take_is_refused_naming_the_argument(make, error, message):
    assert_raises(make, error, message)


def test_a_list_of_traced_values_is_one_array_as_numpy_makes_one(rng):
    """ag.mean([x, x + 2]) and ag.norm((x, y)) as of ag.array([...]), nested lists too, for an
    op (a primitive) and for a function of ops, traced or under vmap."""
    x = rng.standard_normal(3)
    for f, g in [(lambda x: ag.sum([x[0], 2 * x[1]]), [1, 2, 0]),
                 (lambda x: ag.sum([[x[0]], [3 * x[1]]]), [1, 3, 0]),
                 (lambda x: ag.std((x[0], x[0] + 2)), [0, 0, 0]),
                 (lambda x: ag.norm([x[2], x[2]]) * np.sign(x[2]), [0, 0, np.sqrt(2)])]:
        np.testing.assert_allclose(ag.grad(f)(x), g, atol=1e-12)
    batch = rng.standard_normal((4, 3))
    np.testing.assert_allclose(ag.vmap(lambda x: ag.mean([x[0], x[1] * 2]))(batch),
                               (batch[:, 0] + 2 * batch[:, 1]) / 2)
