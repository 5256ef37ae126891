"""What the op families share (autograd_lite/ops/common.py): unbroadcast against PyTorch and an
independent scatter-sum, Python-number detection, lazy pullback entries, axis normalization,
dtype rules against numpy's own promotion, broadcasting errors, and the fast last-axis sums."""
import fractions
import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import broadcastable_shapes, mutually_broadcastable_shapes

import autograd_lite as ag
from autograd_lite.ops.common import (broadcast_binary, check_same_float_dtype, dtype_of,
                                      is_number, keepdims_shape, lazy, mean_last, normalize_axes,
                                      shape_of, sum_keepdims, sum_last, unbroadcast)
from torch_reference import DTYPES, check_first_order, check_second_order


def scatter_sum_reference(g, shape):
    """The adjoint of np.broadcast_to(·, g.shape), element by element: every element of the
    operand receives the sum of the cotangent over the positions it was copied to."""
    owner = np.broadcast_to(np.arange(int(np.prod(shape))).reshape(shape), g.shape)
    sums = np.bincount(owner.ravel(), weights=g.ravel().astype(np.float64),
                       minlength=int(np.prod(shape)))
    return sums.reshape(shape)


def torch_broadcast_add_grad(torch, g, shape, other_shape):
    """∂/∂a Σ (a + b) ⊙ g for a of `shape` and b of `other_shape`, by torch.autograd."""
    a = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(other_shape, dtype=torch.float64)
    ((a + b) * torch.from_numpy(g)).sum().backward()
    return a.grad.numpy()


# unbroadcast

@settings(derandomize=True, deadline=None, max_examples=60)
@given(mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3), st.integers(0, 2**32 - 1))
def test_unbroadcast_is_the_gradient_of_a_broadcast_add(shapes, seed):
    shape, out_shape = shapes.input_shapes[0], shapes.result_shape
    g = np.random.default_rng(seed).standard_normal(out_shape)
    got = unbroadcast(g, shape)
    assert np.shape(got) == shape
    np.testing.assert_allclose(got, scatter_sum_reference(g, shape), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, other", [((3, 4), (3, 4)), ((4,), (2, 3, 4)), ((2, 1, 4), (3, 1)),
                                          ((), (2, 3)), ((5, 1), (1, 5)), ((1, 1), (3,)),
                                          ((1, 3, 1), (2, 1, 3, 4)), ((2, 1), (2, 0))])
def test_unbroadcast_matches_torch(shape, other, rng, torch):
    out_shape = np.broadcast_shapes(shape, other)
    g = rng.standard_normal(out_shape)
    got = unbroadcast(g, shape)
    assert np.shape(got) == shape
    np.testing.assert_allclose(got, torch_broadcast_add_grad(torch, g, shape, other),
                               rtol=1e-12, atol=1e-12)


@settings(derandomize=True, deadline=None, max_examples=30)
@given(shape=broadcastable_shapes(shape=(2, 3, 4), min_dims=0, max_dims=5, max_side=4),
       seed=st.integers(0, 2**32 - 1))
def test_unbroadcast_against_torch_random_shapes(shape, seed, torch):
    out_shape = np.broadcast_shapes(shape, (2, 3, 4))
    g = np.random.default_rng(seed).standard_normal(out_shape)
    np.testing.assert_allclose(unbroadcast(g, shape),
                               torch_broadcast_add_grad(torch, g, shape, (2, 3, 4)),
                               rtol=1e-12, atol=1e-12)


def test_unbroadcast_same_shape_returns_the_cotangent_itself(rng):
    g = rng.standard_normal((2, 3))
    assert unbroadcast(g, (2, 3)) is g


@pytest.mark.parametrize("dtype", DTYPES)
def test_unbroadcast_keeps_the_dtype(dtype, rng):
    g = rng.standard_normal((2, 3, 4)).astype(dtype)
    for shape in [(4,), (3, 1), (1, 1, 1), (2, 1, 4), ()]:
        got = unbroadcast(g, shape)
        assert got.dtype == dtype and np.shape(got) == shape
        np.testing.assert_allclose(got, scatter_sum_reference(g, shape),
                                   rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-5)


def test_unbroadcast_known_values():
    g = np.arange(6.0).reshape(2, 3)  # [[0 1 2] [3 4 5]]
    np.testing.assert_array_equal(unbroadcast(g, (3,)), [3, 5, 7])
    np.testing.assert_array_equal(unbroadcast(g, (2, 1)), [[3], [12]])
    np.testing.assert_array_equal(unbroadcast(g, (1, 3)), [[3, 5, 7]])
    np.testing.assert_array_equal(unbroadcast(g, ()), 15)


def test_unbroadcast_to_the_empty_shape_is_a_0d_array():
    got = unbroadcast(np.arange(6.0).reshape(2, 3), ())
    assert type(got) is np.ndarray and got.shape == () and got == 15


@pytest.mark.parametrize("g_shape, shape", [((3, 2), (2, 3)), ((6,), (2, 3)), ((2, 3), (4, 2, 3)),
                                            ((4, 3), (2, 3))])
def test_unbroadcast_refuses_a_shape_that_does_not_broadcast_to_the_cotangent(g_shape, shape):
    """Same size or not, a shape numpy could not have broadcast to g.shape is an error,
    never a silent reshape."""
    with pytest.raises(ValueError, match=re.escape(
            f"unbroadcast: {shape} does not broadcast to the cotangent's {g_shape}")):
        unbroadcast(np.ones(g_shape), shape)


def test_unbroadcast_on_traced_cotangents(rng):
    """Pullbacks call it on traced values under higher order: the sum is recorded, and its
    derivative broadcasts back."""
    w = rng.standard_normal((2, 3))
    check_first_order(lambda g: unbroadcast(g, (2, 1, 3)), rng.standard_normal((4, 2, 5, 3)))
    check_second_order(lambda g: ag.sum(ag.tanh(unbroadcast(g, (1, 3))) * w[:1]),
                       rng.standard_normal((2, 3)))
    (got,) = ag.gradient(lambda g: ag.sum(unbroadcast(g, (2, 1)) ** 2), np.ones((2, 3)))
    np.testing.assert_array_equal(got, np.full((2, 3), 6.0))  # d/dg (Σ_j g_ij)² = 2·3


# Python numbers and lazy pullback entries

def test_lazy_is_none_for_numbers_and_the_function_otherwise():
    def compute():
        raise AssertionError("lazy must not call compute")
    assert lazy(3.0, compute) is None and lazy(2, compute) is None
    assert lazy(np.ones(2), compute) is compute
    assert lazy(np.float64(1.0), compute) is compute  # a numpy scalar has a dtype: an operand


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


def test_keepdims_shape():
    assert keepdims_shape((2, 3, 4), (0, 2)) == (1, 3, 1)
    assert keepdims_shape((2, 3, 4), ()) == (2, 3, 4)
    assert keepdims_shape((), ()) == ()
    x = np.ones((2, 3, 4))
    assert keepdims_shape(x.shape, (1,)) == x.sum(axis=1, keepdims=True).shape


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


# Broadcasting errors

def test_broadcast_binary_computes_the_ufunc(rng):
    a, b = rng.standard_normal((2, 1, 3)), rng.standard_normal((4, 1))
    np.testing.assert_array_equal(broadcast_binary("mul", np.multiply, a, b), a * b)
    np.testing.assert_array_equal(broadcast_binary("add", np.add, 2.0, b), 2.0 + b)


@pytest.mark.parametrize("a, b, message", [
    (np.ones((2, 3)), np.ones((4,)), "add: shapes (2, 3) and (4,) do not broadcast together"),
    (np.ones((2, 3, 4)), np.ones((3, 1, 2)),
     "add: shapes (2, 3, 4) and (3, 1, 2) do not broadcast together"),
    (np.ones(0), np.ones(2), "add: shapes (0,) and (2,) do not broadcast together")])
def test_broadcast_binary_names_both_shapes(a, b, message):
    with pytest.raises(ValueError):  # numpy agrees that these do not broadcast
        np.broadcast_shapes(a.shape, b.shape)
    with pytest.raises(ValueError, match=re.escape(message)):
        broadcast_binary("add", np.add, a, b)


def test_broadcast_binary_refuses_mixed_float_dtypes_before_computing():
    with pytest.raises(TypeError, match=r"sub: operands float32 \(2,\) and float64 \(3,\)"):
        broadcast_binary("sub", np.subtract, np.ones(2, np.float32), np.ones(3))


def test_broadcast_error_through_an_op_on_traced_values():
    with pytest.raises(ValueError, match=re.escape("mul: shapes (2, 3) and (2,) do not broadcast")):
        ag.gradient(lambda x: ag.sum(x * np.ones(2)), np.ones((2, 3)))


# Fast sums over the last axis

SUM_SHAPES = [(5,), (3, 4), (2, 3, 7), (2, 1, 1)]


@pytest.mark.parametrize("shape", SUM_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_last_and_mean_last_on_arrays(shape, dtype, rng):
    x = rng.standard_normal(shape).astype(dtype)
    x64 = x.astype(np.float64)
    want_sum = np.zeros(shape[:-1] + (1,))
    for index in np.ndindex(*shape[:-1]):
        want_sum[index] = [sum(float(v) for v in x64[index])]
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for got, want in [(sum_last(x), want_sum), (mean_last(x), want_sum / shape[-1])]:
        assert type(got) is np.ndarray and got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_sum_last_of_integers(rng):
    x = rng.integers(-5, 5, (3, 4))
    np.testing.assert_array_equal(sum_last(x), x.sum(-1, keepdims=True))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_sum_keepdims(axis, rng):
    x = rng.standard_normal((2, 3, 4))
    got = sum_keepdims(x, axis)
    want = np.add.reduce(x, axis=axis, keepdims=True)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_last_axis_sums_on_traced_values(rng, torch):
    x = rng.standard_normal((2, 3, 4))
    for f in (sum_last, mean_last, lambda x: sum_keepdims(x, 1), lambda x: sum_keepdims(x, 2)):
        check_first_order(f, x)
    check_second_order(lambda x: ag.sum(ag.tanh(mean_last(x)) ** 2), x)
    w = rng.standard_normal((2, 3, 1))
    (g,) = ag.gradient(lambda x: ag.sum(mean_last(x) * w), x)
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    (t.mean(-1, keepdim=True) * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mean_last_keeps_float32_under_tracing(dtype, rng):
    x = rng.standard_normal((3, 4)).astype(dtype)
    out, pullback = ag.vjp(mean_last, x)
    assert out.dtype == dtype
    (g,) = pullback(np.ones((3, 1), dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, np.full((3, 4), 0.25), rtol=1e-7)


def test_shape_of_is_the_shape_or_none_for_a_number():
    assert shape_of(np.zeros((2, 3))) == (2, 3) and shape_of(np.float32(1)) == ()
    assert shape_of(ag.Hyper(0.1)) is None and shape_of(2) is None and shape_of(1.5) is None


def test_lazy_entries_are_none_for_numbers_and_their_shape_of():
    compute = lambda: 1  # noqa: E731
    assert lazy(2.0, compute) is None and lazy(shape_of(2.0), compute) is None
    assert lazy(np.ones(2), compute) is compute and lazy(shape_of(np.ones(2)), compute) is compute
    assert lazy(shape_of(np.float64(3.0)), compute) is compute  # a 0-d shape () is not a number
