"""matmul (autograd_lite/ops/matmul.py) beyond the op table: errors naming the shapes, and
operands of random ranks and broadcast batch axes against PyTorch."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import autograd_lite as ag
from helpers.references import DTYPES, compare_with_torch

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


def test_mixed_dtypes_raise():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4))
    with pytest.raises(TypeError, match=re.escape("matmul: operands float32 (2, 3) and float64 "
                                                  "(3, 4) have different dtypes")):
        ag.matmul(a, b)


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
