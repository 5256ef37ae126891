"""Reordering (autograd_lite/ops/sorting.py) beyond the op table: sort's ties like torch's
stable sort, take_along_axis's repeated indices summed by a plain loop, the index it builds,
and the errors."""
import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.ops.sorting import along_axis_index
from helpers.op_cases import assert_raises, each_error
from helpers.references import DTYPES, compare_with_torch


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_with_ties_is_stable_like_torch(axis, dtype, torch):
    """Equal entries keep their order, so each cotangent goes back where torch's stable sort
    sends it."""
    x = np.array([[2.0, 1.0, 2.0, 0.0], [1.0, 1.0, 3.0, 1.0], [2.0, 0.0, 2.0, 2.0]], dtype)
    w = np.arange(12, dtype=dtype).reshape(3, 4)  # tells the positions apart
    compare_with_torch(torch, lambda x: ag.sort(x, axis) * w,
                       lambda t: t.sort(dim=axis, stable=True).values * torch.from_numpy(w), x)


def test_take_along_axis_sums_repeated_indices_like_a_loop(rng):
    x = rng.standard_normal((3, 5))
    indices = np.array([[4, 4, 0, 4], [1, 2, 1, 1], [0, 0, 0, 0]])
    w = rng.standard_normal((3, 4))
    (g,) = ag.gradient(lambda x: ag.sum(ag.take_along_axis(x, indices, 1) * w), x)
    want = np.zeros_like(x)
    for (row, j), column in np.ndenumerate(indices):
        want[row, column] += w[row, j]
    np.testing.assert_allclose(g, want, rtol=1e-15)


@pytest.mark.parametrize("x_shape, indices_shape, axis", [
    ((3, 4), (3, 2), 1), ((3, 4), (1, 6), 1), ((1, 4), (3, 2), 1), ((2, 3, 4), (2, 1, 5), 2),
    ((2, 3, 4), (1, 3, 1), 0)])
def test_along_axis_index_selects_what_numpy_takes(x_shape, indices_shape, axis, rng):
    x = rng.standard_normal(x_shape)
    indices = rng.integers(0, x_shape[axis], indices_shape)
    np.testing.assert_array_equal(x[along_axis_index(x.shape, indices, axis)],
                                  np.take_along_axis(x, indices, axis))


ERRORS = [
    (lambda: ag.take_along_axis(np.ones((2, 3)), np.ones((2, 3)), 1), TypeError,
     "take_along_axis: indices must be an integer array, got float64"),
    (lambda: ag.take_along_axis(np.ones((2, 3)), [[0, 1]], 1), TypeError,
     "take_along_axis: indices must be an integer array, got list"),
    (lambda: ag.take_along_axis(np.ones((2, 3)), np.array([0, 1]), 1), ValueError,
     "take_along_axis: indices (2,) must have as many dimensions as x (2, 3)"),
    (lambda: ag.take_along_axis(np.ones((2, 3)), np.array([[0, 3]]), 1), IndexError,
     "take_along_axis: indices must lie in [-3, 3) for axis 1 of (2, 3), got values from 0 to 3"),
    (lambda: ag.take_along_axis(np.ones((2, 3)), np.zeros((3, 1), int), 1), ValueError,
     "take_along_axis: indices (3, 1) do not broadcast against x (2, 3) off axis 1"),
    (lambda: ag.take_along_axis(np.ones((2, 3)), np.zeros((2, 1), int), 2), ValueError,
     "take_along_axis: axis 2 is out of range for an array of 2 dimensions"),
    (lambda: ag.sort(np.array(1.0)), ValueError,
     "sort: axis -1 is out of range for an array of 0 dimensions"),
]


@each_error(ERRORS)
def test_errors_name_the_op_and_shapes(make, error, message):
    assert_raises(make, error, message)
