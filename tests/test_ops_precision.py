"""float16 (autograd_lite/core/dtypes.py): every op of the op table that torch has, in
float16, against torch in float64 on the same numbers; long sums, which numpy would run in
float16 (a sum, the gradient of a broadcast bias); and `computed_in_float32` itself."""
import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.core.dtypes import computed_in_float32, wide_sum
from helpers.references import compare_with_torch
from helpers.op_table import CASES

TORCH_CASES = [c for c in CASES if c.theirs is not None]
INEXACT_IN_FLOAT16 = {  # rows whose function adds a constant float16 cannot hold exactly
    c.name for c in CASES if c.name.endswith("beyond the bound")}


@pytest.mark.parametrize("case", [c for c in TORCH_CASES if c.name not in INEXACT_IN_FLOAT16],
                         ids=lambda c: c.name)
def test_every_op_in_float16_matches_torch_in_float64(case, rng, torch):
    """Values and gradients keep float16 and are exact to float16's rounding (tests/helpers:
    RTOL), as torch's CPU kernels, which accumulate float16 in float32."""
    compare_with_torch(torch, case.ours, case.theirs, *case.arguments(rng, np.float16),
                       torch_dtype=np.float64)


def test_long_sums_in_float16_are_accumulated_in_float32(rng, torch):
    """numpy adds float16 along any axis but the last in float16: past 2048 a running sum of
    values near 1 stops growing. Sums, means and a bias gradient over 20,000 rows."""
    x = (rng.random((20000, 4)) + 0.5).astype(np.float16)
    compare_with_torch(torch, lambda x: ag.sum(x, axis=0), lambda t: t.sum(0), x,
                       torch_dtype=np.float64)
    compare_with_torch(torch, lambda x: ag.mean(x, axis=0), lambda t: t.mean(0), x,
                       torch_dtype=np.float64)
    compare_with_torch(torch, lambda x, b: (x + b) * x, lambda x, b: (x + b) * x,
                       x, np.zeros(4, np.float16), torch_dtype=np.float64)


def test_wide_sum_changes_only_float16(rng):
    x = rng.random((3000, 3))
    for dtype in (np.float64, np.float32):
        a = x.astype(dtype)
        np.testing.assert_array_equal(wide_sum(a, (0,), False), a.sum(axis=0))
    half = (x + 2).astype(np.float16)  # column sums near 7,500: float16 alone stalls at 4,096
    got = wide_sum(half, (0,), True)
    assert got.dtype == np.float16 and got.shape == (1, 3)
    np.testing.assert_allclose(got, half.astype(np.float64).sum(axis=0, keepdims=True), rtol=1e-3)


@ag.primitive
@computed_in_float32
def scaled(x, factor):
    """x · factor, recording the dtypes its body saw; the factor's cotangent lazy."""
    SEEN.append((x.dtype, getattr(factor, "dtype", None)))

    def scaled_pullback(g):
        return g * factor, lambda: (g * x).sum()
    return x * factor, scaled_pullback


SEEN = []


def test_computed_in_float32_converts_float16_operands_and_rounds_back():
    SEEN.clear()
    x, f = np.array([1.5, -2.0], np.float16), np.asarray(3.0, np.float16)
    out, (gx, gf) = ag.value_and_gradient(lambda x, f: ag.sum(scaled(x, f)), x, f)
    assert SEEN == [(np.float32, np.float32)]
    assert out.dtype == gx.dtype == gf.dtype == np.float16
    np.testing.assert_array_equal(gx, [3, 3])
    assert gf == -0.5
    SEEN.clear()
    scaled(x.astype(np.float32), f)  # mixed dtypes reach the body unchanged
    scaled(x, 2.0)  # a Python number stays one
    assert SEEN == [(np.float32, np.float16), (np.float32, None)]


SECOND_ORDER = {  # the rules computed in float32, each as a scalar of x (and its parameters)
    "softmax": lambda x: ag.sum(ag.softmax(x) * x),
    "softmax mask": lambda x: ag.sum(ag.softmax(x, mask=x > -0.5) * x),
    "log_softmax": lambda x: ag.sum(ag.log_softmax(x, 0) ** 2),
    "logsumexp": lambda x: ag.sum(ag.logsumexp(x) ** 2),
    "layer_norm": lambda x: ag.sum(ag.layer_norm(x, x[0], x[1], 0.5) ** 3),
    "cross_entropy": lambda x: ag.cross_entropy(x, np.array([0, 3, 1, 4]), None, 0.1),
}


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_order_in_float16_is_the_float64_one_rounded(name, rng):
    """∇⟨∇f(x), v⟩ through the float32 computation of float16 operands: the conversions
    are recorded, so it is float64's, to float16's precision."""
    f = SECOND_ORDER[name]
    x, v = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    x = x.astype(np.float16).astype(np.float64)  # the same numbers in both dtypes

    def hessian_times_v(x):
        return ag.sum(ag.grad(f)(x) * v.astype(x.dtype))
    want = ag.grad(hessian_times_v)(x)
    got = ag.grad(hessian_times_v)(x.astype(np.float16))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())
