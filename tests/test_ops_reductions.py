"""Reductions (autograd_lite/ops/reductions.py) beyond the op table: ties of max and min like
torch's amax and amin, products with zeros by hand, empty axes and bad axes, keepdims_shape,
cumsum's axes, and the fast last-axis sum of integers."""
import re

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.ops.reductions import keepdims_shape, sum_last
from helpers.op_cases import dims
from helpers.references import DTYPES, compare_with_torch


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("sign, ours, theirs", [(1, ag.max, "amax"), (-1, ag.min, "amin")],
                         ids=["max", "min"])
def test_ties_split_evenly_like_torch(sign, ours, theirs, axis, dtype, torch):
    x = sign * np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0], [-1.0, 0.0, 3.0]], dtype=dtype)
    compare_with_torch(torch, lambda x: ours(x, axis=axis),
                       lambda t: getattr(t, theirs)(dim=dims(axis, 2)), x)
    g = ag.grad(lambda x: ag.sum(ours(x, axis=axis)))(x)
    assert g.sum() == {None: 1, 0: 3, 1: 3}[axis]  # every output sends exactly its cotangent
    if axis == 1:
        np.testing.assert_array_equal(g, np.array([[0.5, 0, 0.5], [1 / 3] * 3, [0, 0, 1]], dtype))


def test_prod_gradient_with_zeros_by_hand():
    """d/dx_i Π x = Π_{j≠i} x_j: with one zero only the zero's entry is nonzero; with two,
    every entry is 0 (no 0/0)."""
    x = np.array([[2.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    g = ag.grad(lambda x: ag.sum(ag.prod(x, axis=1)))(x)
    np.testing.assert_array_equal(g, [[0, 24, 0, 0], [0, 0, 0, 0], [24, 12, 8, 6]])


@pytest.mark.parametrize("op", [ag.sum, ag.mean, ag.max, ag.min, ag.prod, ag.var],
                         ids=lambda op: op.__name__)
def test_bad_axes_are_named_by_the_reduction(op):
    """Each reduction hands its axis to normalize_axes under its own name (whose messages
    test_ops_checks.py tests)."""
    with pytest.raises(ValueError, match=re.escape(f"{op.__name__}: axis -3 is out of range")):
        op(np.ones((2, 3)), axis=(0, -3))


@pytest.mark.parametrize("op", [ag.max, ag.min], ids=lambda op: op.__name__)
def test_max_and_min_of_empty_axis(op):
    with pytest.raises(ValueError, match=re.escape(f"{op.__name__}: cannot reduce an empty axis "
                                                   "of (0, 3)")):
        op(np.ones((0, 3)), axis=0)


def test_prod_over_an_empty_axis_is_one_with_an_empty_gradient():  # as numpy's
    x = np.zeros((0, 3))
    np.testing.assert_array_equal(ag.prod(x, axis=0), np.ones(3))
    (g,) = ag.gradient(lambda x: ag.sum(ag.prod(x, axis=0)), x)
    assert g.shape == (0, 3)


def test_cumsum_axes():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ag.cumsum(np.array(2.0)), [2.0])  # axis None flattens, as numpy
    np.testing.assert_array_equal(ag.cumsum(x, -1), np.cumsum(x, -1))
    with pytest.raises(ValueError, match=re.escape("cumsum: axis 2 is out of range for an array "
                                                   "of 2 dimensions")):
        ag.cumsum(x, 2)
    with pytest.raises(ValueError, match=re.escape("cumsum: axis 0 is out of range for an array "
                                                   "of 0 dimensions")):
        ag.cumsum(np.array(1.0), 0)


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
def test_mean_over_an_empty_axis_has_an_empty_gradient():  # the value is NaN, as numpy's
    x = np.zeros((0, 3))
    (g,) = ag.gradient(lambda x: ag.sum(ag.mean(x, axis=0) * 0.0), x)
    assert g.shape == (0, 3)


def test_var_with_no_degrees_of_freedom_is_named():
    with pytest.raises(ValueError, match=r"var: ddof=3 leaves no degrees of freedom for 3"):
        ag.var(np.ones(3), ddof=3)


def test_keepdims_shape():
    assert keepdims_shape((2, 3, 4), (0, 2)) == (1, 3, 1)
    assert keepdims_shape((2, 3, 4), ()) == (2, 3, 4)
    assert keepdims_shape((), ()) == ()
    x = np.ones((2, 3, 4))
    assert keepdims_shape(x.shape, (1,)) == x.sum(axis=1, keepdims=True).shape


def test_sum_last_of_integers(rng):
    x = rng.integers(-5, 5, (3, 4))
    np.testing.assert_array_equal(sum_last(x), x.sum(-1, keepdims=True))
