"""matmul (autograd_lite/ops/matmul.py): 2-D, 3-D and 4-D operands with broadcast batch axes,
against central differences and PyTorch, second order, dtypes, errors, and a property test."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import autograd_lite as ag
from torch_reference import DTYPES, check_first_order, check_second_order, compare_with_torch

SHAPES = [
    ((3, 4), (4, 5)),              # 2-D
    ((1, 4), (4, 1)),              # row times column
    ((2, 3, 4), (2, 4, 5)),        # batched
    ((2, 3, 4), (4, 5)),           # (B, T, D) @ (D, F): a weight shared across the batch
    ((3, 4), (2, 4, 5)),           # a matrix shared across b's batch
    ((2, 1, 3, 4), (5, 4, 6)),     # 4-D with broadcast batch axes
    ((2, 2, 3, 4), (2, 2, 4, 3)),  # (B, H, T, d) @ (B, H, d, T): attention scores
    ((1, 3, 4), (2, 1, 4, 2)),     # batch axes broadcast on both sides
    ((2, 3, 3, 4), (4, 2)),        # 4-D times a weight
]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_first_order(shapes, rng):
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    check_first_order(ag.matmul, a, b)
    check_first_order(lambda a, b: a @ b, a, b)  # the operator reaches the same op


@pytest.mark.parametrize("shapes", SHAPES[::2], ids=str)
def test_second_order(shapes, rng):
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    check_second_order(lambda a, b: ag.sum(ag.tanh(ag.matmul(a, b))), a, b)


def test_second_order_of_a_quadratic_form_is_analytic(rng):
    """f(x) = Σ (x @ W) ⊙ x has Hessian W + Wᵀ per row of x: H v = v @ (W + Wᵀ)."""
    x, w, v = (rng.standard_normal(s) for s in [(3, 4), (4, 4), (3, 4)])
    hv = ag.grad(lambda x: ag.sum(ag.grad(lambda x: ag.sum(ag.matmul(x, w) * x))(x) * v))(x)
    np.testing.assert_allclose(hv, v @ (w + w.T), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_matches_torch(shapes, dtype, rng, torch):
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1]).astype(dtype)
    out = compare_with_torch(torch, ag.matmul, torch.matmul, a, b)
    assert out.shape == np.broadcast_shapes(shapes[0][:-2], shapes[1][:-2]) + (
        shapes[0][-2], shapes[1][-1])


def test_transposed_operands(rng, torch):
    """Non-contiguous stacks (after a transpose) give the same numbers."""
    q, k = rng.standard_normal((2, 3, 5, 4)), rng.standard_normal((2, 5, 3, 4))
    compare_with_torch(torch, lambda q, k: ag.matmul(q, ag.transpose(ag.swapaxes(k, 1, 2),
                                                                     (0, 1, 3, 2))),
                       lambda q, k: q @ k.transpose(1, 2).transpose(-1, -2), q, k)


@pytest.mark.parametrize("dtype", DTYPES)
def test_untraced_result_is_a_plain_array(dtype, rng):
    for shapes in SHAPES:
        a = rng.standard_normal(shapes[0]).astype(dtype)
        b = rng.standard_normal(shapes[1]).astype(dtype)
        out = ag.matmul(a, b)
        assert type(out) is np.ndarray and out.dtype == dtype


ERRORS = [
    ((32, 50, 32), (64, 32), ValueError,
     "matmul: (32, 50, 32) @ (64, 32): inner dimensions 32 != 64"),
    ((3, 4), (5, 4), ValueError, "matmul: (3, 4) @ (5, 4): inner dimensions 4 != 5"),
    ((4,), (4, 5), ValueError,
     "matmul: (4,) @ (4, 5): both operands need at least 2 dimensions"),
    ((3, 4), (4,), ValueError,
     "matmul: (3, 4) @ (4,): both operands need at least 2 dimensions"),
    ((2, 3, 4), (5, 4, 6), ValueError,
     "matmul: (2, 3, 4) @ (5, 4, 6): batch dimensions (2,) and (5,) do not broadcast"),
]


@pytest.mark.parametrize("a_shape, b_shape, error, message", ERRORS, ids=[e[3] for e in ERRORS])
def test_errors_name_the_shapes(a_shape, b_shape, error, message):
    with pytest.raises(error, match=re.escape(message)):
        ag.matmul(np.ones(a_shape), np.ones(b_shape))
    with pytest.raises(error, match=re.escape(message)):
        ag.gradient(lambda a, b: ag.sum(a @ b), np.ones(a_shape), np.ones(b_shape))


def test_mixed_dtypes_raise():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4))
    with pytest.raises(TypeError, match=re.escape("matmul: operands float32 (2, 3) and float64 "
                                                  "(3, 4) have different dtypes")):
        ag.matmul(a, b)
    with pytest.raises(TypeError, match="matmul: operands float32"):
        ag.gradient(lambda a, b: ag.sum(a @ b), a, b)


@st.composite
def matmul_shapes(draw):
    """Operands of rank 2 to 4 whose batch axes broadcast: (a shape, b shape)."""
    batch = draw(mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3))
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    return batch.input_shapes[0] + (m, k), batch.input_shapes[1] + (k, n)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(shapes=matmul_shapes(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_random_shapes_match_torch(torch, shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1]).astype(dtype)
    compare_with_torch(torch, ag.matmul, torch.matmul, a, b)
