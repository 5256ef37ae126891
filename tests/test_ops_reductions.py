"""Reductions (autograd_lite/ops/reductions.py) beyond the op table: ties of max like torch's
amax, empty axes and bad axes, keepdims_shape, and the fast last-axis sum of integers."""
import re

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.ops.reductions import keepdims_shape, sum_last
from helpers.op_cases import dims
from helpers.references import DTYPES, compare_with_torch


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_max_splits_ties_evenly_like_torch_amax(axis, dtype, torch):
    x = np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0], [-1.0, 0.0, 3.0]], dtype=dtype)
    compare_with_torch(torch, lambda x: ag.max(x, axis=axis),
                       lambda t: t.amax(dim=dims(axis, 2)), x)
    g = ag.grad(lambda x: ag.sum(ag.max(x, axis=axis)))(x)
    assert g.sum() == {None: 1, 0: 3, 1: 3}[axis]  # every output sends exactly its cotangent


@pytest.mark.parametrize("op", [ag.sum, ag.mean, ag.max, ag.var], ids=lambda op: op.__name__)
def test_bad_axes_are_named_by_the_reduction(op):
    """Each reduction hands its axis to normalize_axes under its own name (whose messages
    test_ops_checks.py tests)."""
    with pytest.raises(ValueError, match=re.escape(f"{op.__name__}: axis -3 is out of range")):
        op(np.ones((2, 3)), axis=(0, -3))


def test_max_of_empty_axis():
    with pytest.raises(ValueError, match=re.escape("max: cannot reduce an empty axis of (0, 3)")):
        ag.max(np.ones((0, 3)), axis=0)


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
