"""Selections (autograd_lite/ops/selection.py) beyond the op table: ties of maximum and
minimum, clip at its bounds (ties, equal and crossed bounds) against torch.clamp, and the
errors of where and clip."""
import numpy as np
import pytest

import autograd_lite as ag
from helpers.op_cases import assert_raises, each_error
from helpers.references import DTYPES, compare_with_torch
from helpers.op_table import BY_NAME


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_ties_split_the_gradient_like_torch(name, dtype, torch):
    a = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]], dtype=dtype)
    b = np.array([1.0, 1.0, 5.0], dtype=dtype)  # ties at (0, 0) and (1, 2)
    op = BY_NAME[name].ours
    compare_with_torch(torch, op, BY_NAME[name].theirs, a, b)
    ga, gb = ag.gradient(lambda a, b: ag.sum(op(a, b)), a, b)
    assert ga[0, 0] == 0.5 and ga[1, 2] == 0.5
    assert gb[0] == 0.5 + (name == "maximum")  # for maximum b also wins at (1, 0)


# x against [a_min, a_max], one column per situation at a bound
X = [-1.0, -0.5, 0.25, 0.75, 2.0, 0.5, 0.5, 0.0, -1.0, 3.0, 0.5]
A_MIN = [-0.5, -0.5, -0.5, -0.5, -0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0]
A_MAX = [0.75, 0.75, 0.75, 0.75, 0.75, 0.5, 1.0, 0.5, 0.0, 0.0, 0.0]
# columns: below, =min, inside, =max, above; =min=max, =min<max, <min=max; crossed bounds:
# below both, above both, between


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_at_its_bounds_routes_the_gradient_like_torch_clamp(dtype, torch):
    x, low, high = (np.array(v, dtype) for v in (X, A_MIN, A_MAX))
    out = compare_with_torch(torch, ag.clip, lambda x, low, high: torch.clamp(x, low, high),
                             x, low, high)
    np.testing.assert_array_equal(out, np.clip(x, low, high))
    gx, g_low, g_high = ag.gradient(lambda x, a, b: ag.sum(ag.clip(x, a, b)), x, low, high)
    # A tie with a bound is inside (x's). Between equal bounds only a tie is x's: below them
    # the cotangent goes to no one (torch's convention). Crossed bounds give a_max all.
    np.testing.assert_array_equal(gx, [0, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(g_low, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(g_high, [0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_ties_with_number_bounds_like_torch(dtype, torch):
    x = np.array([-1.0, -0.5, 0.0, 0.75, 2.0], dtype)
    compare_with_torch(torch, lambda x: ag.clip(x, -0.5, 0.75), lambda t: t.clamp(-0.5, 0.75), x)
    compare_with_torch(torch, lambda x: ag.clip(x, -0.5, None), lambda t: t.clamp(min=-0.5), x)
    compare_with_torch(torch, lambda x: ag.clip(x, None, 0.75), lambda t: t.clamp(max=0.75), x)
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.clip(x, -0.5, 0.75)))(x),
                                  [0, 1, 1, 1, 0])


def test_clip_without_bounds_is_the_identity():
    x = np.array([-2.0, 0.0, 3.0])
    np.testing.assert_array_equal(ag.clip(x, None, None), x)
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.clip(x, None, None) * x))(x), 2 * x)


ERRORS = [
    (lambda: ag.where(np.ones((2, 3), dtype=np.int64), np.ones((2, 3)), 0.0), TypeError,
     "where: condition must be a bool array, got int64"),
    (lambda: ag.where(np.ones(4, bool), np.ones((2, 3)), np.ones((2, 3))), ValueError,
     "where: condition (4,), x (2, 3) and y (2, 3) do not broadcast together"),
    (lambda: ag.clip(np.ones((2, 3)), np.zeros(4), 1.0), ValueError,
     "clip: x (2, 3), a_min (4,) and a_max () do not broadcast together"),
    (lambda: ag.clip(np.ones(3), None, np.ones((2, 2))), ValueError,
     "clip: x (3,), a_min None and a_max (2, 2) do not broadcast together"),
    (lambda: ag.clip(np.ones(3, np.float32), np.zeros(3), 1.0), TypeError,
     "clip: operands float32 (3,) and float64 (3,) have different dtypes"),
    (lambda: ag.clip(np.ones(3), {"low": 0}, 1.0), TypeError,
     "clip: a_min must be an array, a list or a number, got dict"),
]


@each_error(ERRORS)
def test_errors_name_the_op_and_shapes(make, error, message):
    assert_raises(make, error, message)
