"""matmul, dot, outer and linear (autograd_lite/ops/matmul.py) beyond the op table: errors
naming the shapes, operands of random ranks (vectors included) and broadcast batch axes
against PyTorch, and linear against its composed reference."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import autograd_lite as ag
from helpers.fused import assert_fused_matches_composed, rules_off
from helpers.references import DTYPES, compare_with_torch

ERRORS = [
    ((32, 50, 32), (64, 32), ValueError,
     "matmul: (32, 50, 32) @ (64, 32): inner dimensions 32 != 64"),
    ((3, 4), (5, 4), ValueError, "matmul: (3, 4) @ (5, 4): inner dimensions 4 != 5"),
    ((4,), (5, 6), ValueError, "matmul: (4,) @ (5, 6): inner dimensions 4 != 5"),
    ((3, 4), (5,), ValueError, "matmul: (3, 4) @ (5,): inner dimensions 4 != 5"),
    ((4,), (3,), ValueError, "matmul: (4,) @ (3,): inner dimensions 4 != 3"),
    ((), (3,), ValueError, "matmul: () @ (3,): operands need at least 1 dimension (numpy's @ "
                           "refuses scalars; multiply with * instead)"),
    ((2, 3, 4), (5, 4, 6), ValueError,
     "matmul: (2, 3, 4) @ (5, 4, 6): batch dimensions (2,) and (5,) do not broadcast"),
]


@pytest.mark.parametrize("a_shape, b_shape, error, message", ERRORS, ids=[e[3] for e in ERRORS])
def test_errors_name_the_shapes(a_shape, b_shape, error, message):
    with pytest.raises(error, match=re.escape(message)):
        ag.matmul(np.ones(a_shape), np.ones(b_shape))


def test_mixed_dtypes_raise():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4))
    with pytest.raises(TypeError, match=re.escape("matmul: operands float32 (2, 3) and float64 "
                                                  "(3, 4) have different dtypes")):
        ag.matmul(a, b)


def test_dot_errors_name_the_shapes():
    with pytest.raises(ValueError, match=re.escape(
            "dot: (2, 3, 4) · (5, 3, 2): the last axis of a (4) and the second to last of b (3) "
            "differ")):
        ag.dot(np.ones((2, 3, 4)), np.ones((5, 3, 2)))
    with pytest.raises(ValueError, match=re.escape("matmul: (3, 4) @ (3, 2): inner dimensions")):
        ag.dot(np.ones((3, 4)), np.ones((3, 2)))


@st.composite
def matmul_shapes(draw):
    """Operands of rank 1 to 4 whose batch axes broadcast: (a shape, b shape); a vector
    has only its inner axis."""
    batch = draw(mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3))
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    a = (k,) if draw(st.integers(0, 3)) == 0 else batch.input_shapes[0] + (m, k)
    b = (k,) if draw(st.integers(0, 3)) == 0 else batch.input_shapes[1] + (k, n)
    return a, b


@settings(max_examples=40, deadline=None, derandomize=True)
@given(shapes=matmul_shapes(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_random_shapes_match_torch(torch, shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1]).astype(dtype)
    compare_with_torch(torch, ag.matmul, torch.matmul, a, b)


@pytest.mark.parametrize("d_out", [3, 1])
@pytest.mark.parametrize("x_shape", [(4,), (5, 4), (2, 3, 4)])
def test_linear_is_matmul_then_add(x_shape, d_out, rng):
    """The fast rule against the plain function, to second order (the op table checks it
    against torch's F.linear and central differences)."""
    x, w, b = (rng.standard_normal(x_shape), rng.standard_normal((4, d_out)),
               rng.standard_normal(d_out))
    assert_fused_matches_composed(ag.linear, rules_off(ag.linear), x, w, b)


@pytest.mark.parametrize("x_shape, w_shape, b_shape, message", [
    ((2, 5), (4, 3), (3,), "linear: x (2, 5) @ w (4, 3): inner dimensions 5 != 4"),
    ((2, 4), (4, 3, 1), (3,), "linear: x (2, 4) @ w (4, 3, 1): x needs at least 1 dimension "
                              "and w must be a matrix (d_in, d_out)"),
    ((2, 4), (4, 3), (1,), "linear: b (1,) must have shape (3,), the columns of w (4, 3)"),
])
def test_linear_errors_name_the_shapes(x_shape, w_shape, b_shape, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ag.linear(np.ones(x_shape), np.ones(w_shape), np.ones(b_shape))
    with pytest.raises(TypeError, match=re.escape("linear: operands float64 (3, 3) and "
                                                  "float32 (3,) have different dtypes")):
        ag.linear(np.ones((2, 3)), np.ones((3, 3)), np.ones(3, np.float32))


ZERO_SIZE = [  # (a, b): operands with an empty axis, inner, outer or batch
    ((2, 3, 4), (4, 0)), ((2, 3, 1, 0), (0, 3)), ((3, 0), (0, 2)), ((0, 3), (3, 2)),
    ((0,), (0, 3)), ((4, 0), (0,)), ((0, 2, 3), (3, 5)), ((2, 0, 3), (2, 3, 4)),
]


@pytest.mark.parametrize("a_shape, b_shape", ZERO_SIZE)
def test_matmul_of_zero_size_operands_matches_numpy_and_torch(a_shape, b_shape, rng, torch):
    """An empty axis anywhere (where a reshape(-1, 0) would be refused by numpy): the product
    is numpy's (zeros where the inner axis is empty), the gradients PyTorch's: zeros of each
    operand's shape."""
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    np.testing.assert_array_equal(ag.matmul(a, b), a @ b)
    w = rng.standard_normal((a @ b).shape)
    da, db = ag.gradient(lambda a, b: ag.sum((a @ b) * w), a, b)
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (a, b))
    ((ta @ tb) * torch.tensor(w)).sum().backward()
    assert da.shape == a_shape and db.shape == b_shape
    np.testing.assert_array_equal(da, ta.grad.numpy())
    np.testing.assert_array_equal(db, tb.grad.numpy())


@pytest.mark.parametrize("x_shape, d_out", [((3, 0), 2), ((2, 3, 0), 4), ((0, 3), 2),
                                            ((2, 0, 3), 4), ((3, 4), 0)])
def test_linear_of_zero_size_operands_matches_numpy_and_torch(x_shape, d_out, rng, torch):
    x = rng.standard_normal(x_shape)
    w, b = rng.standard_normal((x_shape[-1], d_out)), rng.standard_normal(d_out)
    np.testing.assert_array_equal(ag.linear(x, w, b), x @ w + b)
    weights = rng.standard_normal((x @ w).shape)
    grads = ag.gradient(lambda x, w, b: ag.sum(ag.linear(x, w, b) * weights), x, w, b)
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    (torch.nn.functional.linear(tx, tw.T, tb) * torch.tensor(weights)).sum().backward()
    for got, want in zip(grads, (tx, tw, tb)):
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got, want.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("axes, message", [
    (3, "tensordot: axes=3 for (2, 3) and (3, 4): at most 2 axes can be paired"),
    (([1], [1]), "tensordot: axes ([1], [1]) must pair axes of equal lengths of (2, 3) and (3, 4)"),
    (([0, 1], [0]), "tensordot: axes ([0, 1], [0]) must pair axes of equal lengths"),
])
def test_tensordot_errors_name_the_axes_and_shapes(axes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ag.tensordot(np.ones((2, 3)), np.ones((3, 4)), axes)
