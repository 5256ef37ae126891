"""Broadcasting (autograd_lite/ops/broadcasting.py) beyond the op table: unbroadcast against
an independent scatter-sum for random shapes, its dtypes and refusals, and the errors of
broadcast_to and of binary ops whose operands do not broadcast."""
import re

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from hypothesis.extra.numpy import BroadcastableShapes, mutually_broadcastable_shapes

import autograd_lite as ag
from autograd_lite.ops.broadcasting import broadcast_binary, shape_of, unbroadcast
from helpers.references import DTYPES


def scatter_sum_reference(g, shape):
    """The adjoint of np.broadcast_to(·, g.shape), element by element: every element of the
    operand receives the sum of the cotangent over the positions it was copied to."""
    owner = np.broadcast_to(np.arange(int(np.prod(shape))).reshape(shape), g.shape)
    sums = np.bincount(owner.ravel(), weights=g.ravel().astype(np.float64),
                       minlength=int(np.prod(shape)))
    return sums.reshape(shape)


# unbroadcast

@settings(derandomize=True, deadline=None, max_examples=60)
@given(mutually_broadcastable_shapes(num_shapes=2, max_dims=4, min_side=0, max_side=3),
       st.integers(0, 2**32 - 1))
@example(BroadcastableShapes(((2, 1), (2, 0)), (2, 0)), 0)  # a size-1 axis broadcast to 0
@example(BroadcastableShapes(((1, 3, 1), (2, 1, 3, 4)), (2, 1, 3, 4)), 0)
def test_unbroadcast_is_the_gradient_of_a_broadcast_add(shapes, seed):
    shape, out_shape = shapes.input_shapes[0], shapes.result_shape
    g = np.random.default_rng(seed).standard_normal(out_shape)
    got = unbroadcast(g, shape)
    assert np.shape(got) == shape
    np.testing.assert_allclose(got, scatter_sum_reference(g, shape), rtol=1e-12, atol=1e-12)


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


def test_broadcast_to_names_both_shapes():
    with pytest.raises(ValueError,
                       match=re.escape("broadcast_to: (3,) does not broadcast to (2, 4)")):
        ag.broadcast_to(np.ones(3), (2, 4))


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


def test_shape_of_is_numpys_shape():
    for x in (np.zeros((2, 3)), np.float32(1), np.array(2.0), 2, 1.5, ag.Hyper(0.1), True):
        assert shape_of(x) == np.shape(x)
    seen = []
    ag.gradient(lambda x: seen.append(shape_of(x)) or ag.sum(x), np.ones((3, 1)))
    assert seen == [(3, 1)]


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3,), (0, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_sum_rows_sums_every_axis_but_the_last(shape, dtype, rng):
    from autograd_lite.ops.broadcasting import sum_rows
    g = rng.standard_normal(shape).astype(dtype)
    got = sum_rows(g)
    assert got.dtype == dtype and got.shape == shape[-1:]
    want = g.astype(np.float64).reshape(-1, shape[-1]).sum(axis=0)
    np.testing.assert_allclose(got, want, rtol={np.float64: 1e-14, np.float32: 1e-6,
                                                np.float16: 2e-3}[dtype], atol=1e-3)
    x = g.astype(np.float64)  # traced: the recorded sum, whose gradient is all ones
    (dx,) = ag.gradient(lambda x: ag.sum(sum_rows(x * 1.0) * np.arange(shape[-1])), x)
    np.testing.assert_array_equal(dx, np.broadcast_to(np.arange(shape[-1]), shape))
