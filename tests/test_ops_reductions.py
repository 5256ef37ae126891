"""Reductions (autograd_lite/ops/reductions.py): sum, mean, max, var over axis None / int /
tuple with and without keepdims, against central differences and PyTorch; keepdims_shape
against numpy; the fast last-axis sums against a plain Python sum."""
import re

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.ops.reductions import keepdims_shape, mean_last, sum_keepdims, sum_last
from torch_reference import DTYPES, check_first_order, check_second_order, compare_with_torch


def torch_dims(axis, ndim):
    return tuple(range(ndim)) if axis is None else axis


# name: (ag op, torch op taking (t, dims, keepdim))
REDUCTIONS = {
    "sum": (ag.sum, lambda t, dims, keep: t.sum(dim=dims, keepdim=keep)),
    "mean": (ag.mean, lambda t, dims, keep: t.mean(dim=dims, keepdim=keep)),
    "max": (ag.max, lambda t, dims, keep: t.amax(dim=dims, keepdim=keep)),
    "var": (ag.var, lambda t, dims, keep: t.var(dim=dims, keepdim=keep, correction=0)),
}
AXES = [None, 0, -1, 1, (0, 2), (-1, 0, 1)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_first_order(name, axis, keepdims, rng):
    op = REDUCTIONS[name][0]
    check_first_order(lambda x: op(x, axis=axis, keepdims=keepdims), rng.standard_normal((2, 3, 4)))


@pytest.mark.parametrize("name", REDUCTIONS)
def test_one_dimensional_and_keyword_free(name, rng):
    op = REDUCTIONS[name][0]
    check_first_order(lambda x: op(x), rng.standard_normal(5))
    check_first_order(lambda x: op(x, 0, True), rng.standard_normal((4, 2)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_matches_torch(name, axis, keepdims, dtype, rng, torch):
    op, torch_op = REDUCTIONS[name]
    x = rng.standard_normal((2, 3, 4)).astype(dtype)
    compare_with_torch(torch, lambda x: op(x, axis=axis, keepdims=keepdims),
                       lambda t: torch_op(t, torch_dims(axis, 3), keepdims), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [None, 1, (0, 1)])
@pytest.mark.parametrize("ddof", [1, 2])
def test_var_ddof_matches_torch(ddof, axis, dtype, rng, torch):
    x = rng.standard_normal((4, 5)).astype(dtype)
    compare_with_torch(torch, lambda x: ag.var(x, axis=axis, ddof=ddof),
                       lambda t: t.var(dim=torch_dims(axis, 2), correction=ddof), x)
    check_first_order(lambda x: ag.var(x, axis, ddof=ddof), x.astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_max_splits_ties_evenly_like_torch_amax(axis, dtype, torch):
    x = np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0], [-1.0, 0.0, 3.0]], dtype=dtype)
    compare_with_torch(torch, lambda x: ag.max(x, axis=axis),
                       lambda t: t.amax(dim=torch_dims(axis, 2)), x)
    g = ag.grad(lambda x: ag.sum(ag.max(x, axis=axis)))(x)
    assert g.sum() == {None: 1, 0: 3, 1: 3}[axis]  # every output sends exactly its cotangent


def test_var_second_order_and_analytic_hessian(rng):
    x = rng.standard_normal((3, 4))
    check_second_order(lambda x: ag.sum(ag.var(x, axis=1) ** 2), x)
    # var over n entries: H = (2/n)(I - 11ᵀ/n), so H v = (2/n)(v - mean v)
    v = rng.standard_normal(6)
    hv = ag.grad(lambda y: ag.sum(ag.grad(ag.var)(y) * v))(rng.standard_normal(6))
    np.testing.assert_allclose(hv, (2 / 6) * (v - v.mean()), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_second_order_through_the_pullback(name, rng):
    """The pullbacks are recorded under an outer trace (grad of grad)."""
    op = REDUCTIONS[name][0]
    check_second_order(lambda x: ag.sum(ag.tanh(op(ag.tanh(x), axis=1, keepdims=True) * x)),
                       rng.standard_normal((3, 4)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_untraced_results_are_plain_arrays(dtype, rng):
    x = rng.standard_normal((2, 3)).astype(dtype)
    outs = [op(x, axis=axis, keepdims=k) for op, _ in REDUCTIONS.values()
            for axis in (None, 1) for k in (False, True)]
    outs += [ag.var(x, ddof=1), ag.var(x, axis=0, ddof=1)]
    for out in outs:
        assert type(out) is np.ndarray and out.dtype == dtype, (type(out), out.dtype)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_bad_axes(name):
    op = REDUCTIONS[name][0]
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match=re.escape(f"{name}: axis 2 is out of range for an "
                                                   "array of 2 dimensions")):
        op(x, axis=2)
    with pytest.raises(ValueError, match=re.escape(f"{name}: axis -3 is out of range")):
        op(x, axis=(0, -3))
    with pytest.raises(ValueError, match=re.escape(f"{name}: repeated axis in (1, -1)")):
        op(x, axis=(1, -1))


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


# Fast sums over the last axis

SUM_SHAPES = [(5,), (3, 4), (2, 3, 7), (2, 1, 1)]


@pytest.mark.parametrize("shape", SUM_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_last_and_mean_last_on_arrays(shape, dtype, rng):
    x = rng.standard_normal(shape).astype(dtype)
    x64 = x.astype(np.float64)
    want_sum = np.zeros(shape[:-1] + (1,))
    for index in np.ndindex(*shape[:-1]):
        want_sum[index] = [sum(float(v) for v in x64[index])]
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for got, want in [(sum_last(x), want_sum), (mean_last(x), want_sum / shape[-1])]:
        assert type(got) is np.ndarray and got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_sum_last_of_integers(rng):
    x = rng.integers(-5, 5, (3, 4))
    np.testing.assert_array_equal(sum_last(x), x.sum(-1, keepdims=True))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_sum_keepdims(axis, rng):
    x = rng.standard_normal((2, 3, 4))
    got = sum_keepdims(x, axis)
    want = np.add.reduce(x, axis=axis, keepdims=True)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_last_axis_sums_on_traced_values(rng, torch):
    x = rng.standard_normal((2, 3, 4))
    for f in (sum_last, mean_last, lambda x: sum_keepdims(x, 1), lambda x: sum_keepdims(x, 2)):
        check_first_order(f, x)
    check_second_order(lambda x: ag.sum(ag.tanh(mean_last(x)) ** 2), x)
    w = rng.standard_normal((2, 3, 1))
    (g,) = ag.gradient(lambda x: ag.sum(mean_last(x) * w), x)
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    (t.mean(-1, keepdim=True) * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mean_last_keeps_float32_under_tracing(dtype, rng):
    x = rng.standard_normal((3, 4)).astype(dtype)
    out, pullback = ag.vjp(mean_last, x)
    assert out.dtype == dtype
    (g,) = pullback(np.ones((3, 1), dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, np.full((3, 4), 0.25), rtol=1e-7)
