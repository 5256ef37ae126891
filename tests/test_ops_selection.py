"""Selections (autograd_lite/ops/selection.py) beyond the op table: ties of maximum and
minimum, clip at its bounds (ties, equal and crossed bounds), and the errors of where and
clip. Away from ties the ops are held against torch; at a tie, where the derivative is
one-sided, against the library's own convention as selection.py states it (derived from
central differences with clip's bounds moved apart), never against a torch release's
choice, which has changed between releases."""
import numpy as np
import pytest

import autograd_lite as ag
from helpers.op_cases import assert_raises, each_error
from helpers.references import DTYPES, central_jacobian, compare_with_torch
from helpers.op_table import BY_NAME


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_ties_split_the_gradient_evenly_and_agree_with_torch_elsewhere(name, dtype, torch):
    a = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]], dtype=dtype)
    b = np.array([1.0, 1.0, 5.0], dtype=dtype)  # ties at (0, 0) and (1, 2)
    op = BY_NAME[name].ours
    untied = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 4.0]], dtype=dtype), \
        np.array([1.5, 1.0, 5.0], dtype=dtype)
    compare_with_torch(torch, op, BY_NAME[name].theirs, *untied)
    ga, gb = ag.gradient(lambda a, b: ag.sum(op(a, b)), a, b)
    assert ga[0, 0] == 0.5 and ga[1, 2] == 0.5  # the convention: half to each side
    assert gb[0] == 0.5 + (name == "maximum")  # for maximum b also wins at (1, 0)


# x against [a_min, a_max], one column per situation at a bound
X = [-1.0, -0.5, 0.25, 0.75, 2.0, 0.5, 0.5, 0.0, -1.0, 3.0, 0.5]
A_MIN = [-0.5, -0.5, -0.5, -0.5, -0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0]
A_MAX = [0.75, 0.75, 0.75, 0.75, 0.75, 0.5, 1.0, 0.5, 0.0, 0.0, 0.0]
# columns: below, =min, inside, =max, above; =min=max, =min<max, <min=max; crossed bounds:
# below both, above both, between
TIES = [1, 3, 5, 6, 7]  # a tie of x with a bound, or of the two bounds


def clip_routes_by_differences(x, low, high, h=1e-3):
    """(d/dx, d/da_min, d/da_max) of the sum of clip, by central differences in float64 with
    the bounds moved apart by h where they are not crossed (a tie is then inside, or below
    or above both), at the point itself where they are."""
    x, low, high = (np.asarray(v, np.float64) for v in (x, low, high))
    crossed = high < low
    low, high = np.where(crossed, low, low - h), np.where(crossed, high, high + h)

    def total(x, low, high):
        return np.sum(np.clip(x, low, high))
    return (central_jacobian(lambda v: total(v, low, high), x, h / 10),
            central_jacobian(lambda v: total(x, v, high), low, h / 10),
            central_jacobian(lambda v: total(x, low, v), high, h / 10))


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_at_its_bounds_routes_the_gradient_by_the_libraries_convention(dtype, torch):
    x, low, high = (np.array(v, dtype) for v in (X, A_MIN, A_MAX))
    np.testing.assert_array_equal(ag.clip(x, low, high), np.clip(x, low, high))
    away = [i for i in range(len(X)) if i not in TIES]
    compare_with_torch(torch, ag.clip, lambda x, low, high: torch.clamp(x, low, high),
                       x[away], low[away], high[away])
    gx, g_low, g_high = ag.gradient(lambda x, a, b: ag.sum(ag.clip(x, a, b)), x, low, high)
    # A tie with a bound is inside (x's); below equal bounds a_min's, above them a_max's;
    # crossed bounds give a_max all (the output is a_max)
    np.testing.assert_array_equal(gx, [0, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(g_low, [1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(g_high, [0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1])
    for ours, differences in zip((gx, g_low, g_high), clip_routes_by_differences(X, A_MIN, A_MAX)):
        np.testing.assert_allclose(ours, differences, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_ties_with_number_bounds_are_x_s(dtype, torch):
    x = np.array([-1.0, -0.5, 0.0, 0.75, 2.0], dtype)
    away = x[[0, 2, 4]]
    compare_with_torch(torch, lambda x: ag.clip(x, -0.5, 0.75), lambda t: t.clamp(-0.5, 0.75),
                       away)
    compare_with_torch(torch, lambda x: ag.clip(x, -0.5, None), lambda t: t.clamp(min=-0.5), away)
    compare_with_torch(torch, lambda x: ag.clip(x, None, 0.75), lambda t: t.clamp(max=0.75), away)
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.clip(x, -0.5, 0.75)))(x),
                                  [0, 1, 1, 1, 0])
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.clip(x, -0.5, None)))(x),
                                  [0, 1, 1, 1, 1])
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.clip(x, None, 0.75)))(x),
                                  [1, 1, 1, 1, 0])


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
