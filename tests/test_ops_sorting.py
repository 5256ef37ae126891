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


CONSTANTS = {  # name: (ours, numpy's) of a (3, 4) array
    "argsort": (lambda x: ag.argsort(x, 0), lambda x: np.argsort(x, 0)),
    "np.argsort": (lambda x: np.argsort(x, axis=None), lambda x: np.argsort(x, axis=None)),
    "x.argsort": (lambda x: x.argsort(), lambda x: x.argsort()),
    "argmax": (lambda x: ag.argmax(x, 1), lambda x: np.argmax(x, 1)),
    "argmin": (lambda x: ag.argmin(x), lambda x: np.argmin(x)),
    "round": (lambda x: ag.round(x * 10), lambda x: np.round(x * 10)),
    "np.round": (lambda x: np.round(x, 2), lambda x: np.round(x, 2)),
    "x.round": (lambda x: x.round(1), lambda x: x.round(1)),
}


@pytest.mark.parametrize("name", CONSTANTS)
def test_integers_and_rounding_of_traced_values_are_plain_arrays(name, rng):
    """As numpy's of the plain values, a plain array (no derivative: the gradient through
    them is 0), traced or under vmap (each example's)."""
    ours, numpys = CONSTANTS[name]
    x = rng.standard_normal((3, 4))

    def f(x):
        got = ours(x)
        assert isinstance(got, (np.ndarray, np.generic))  # numpy's scalar where numpy gives one
        np.testing.assert_array_equal(got, numpys(ag.stop_gradient(x)))
        return ag.sum(x * 0) + ag.sum(np.asarray(got, float) * 0 + 1)
    assert not ag.grad(f)(x).any()
    batch = rng.standard_normal((2, 3, 4))
    np.testing.assert_array_equal(ag.vmap(ours)(batch), np.stack([numpys(b) for b in batch]))


def test_allclose_of_traced_values():
    x = np.array([1.0, 2.0])

    def f(x):
        assert ag.allclose(x, x + 1e-9) and not ag.allclose(x, 2 * x)
        assert np.allclose(x, [1.0, 2.0])
        return ag.sum(x)
    np.testing.assert_array_equal(ag.grad(f)(x), [1.0, 1.0])
