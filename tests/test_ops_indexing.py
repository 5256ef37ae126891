"""Indexing ops (autograd_lite/ops/indexing.py) beyond the op table: add_at and scatter_add as
the adjoints of getitem and gather, repeated indices by hand, errors, traced indices, and
gather's pullback without np.add.at."""
import re

import numpy as np
import pytest

import autograd_lite as ag
from helpers.op_cases import assert_raises, each_error
from helpers.op_table import INDICES


@pytest.mark.parametrize("name", INDICES)
def test_add_at_is_the_adjoint_of_getitem(name, rng):
    """⟨x[index], v⟩ = ⟨x, add_at(v, index, x.shape)⟩."""
    index = INDICES[name]
    x = rng.standard_normal((3, 4))
    v = rng.standard_normal(x[index].shape)
    out = ag.add_at(v, index, x.shape)
    assert type(out) is np.ndarray and out.shape == x.shape
    np.testing.assert_allclose(np.sum(x[index] * v), np.sum(x * out), rtol=1e-12)


def test_repeated_gather_indices_accumulate():
    table = np.arange(12.0).reshape(4, 3)
    indices = np.array([[1, 3, 1], [1, 0, 3]])
    g = ag.grad(lambda t: ag.sum(ag.gather(t, indices)))(table)
    np.testing.assert_array_equal(g, np.array([1, 3, 0, 2])[:, None] * np.ones((1, 3)))
    s = ag.scatter_add(np.ones((2, 3, 2)), indices, 5)
    np.testing.assert_array_equal(s[:, 0], [1, 3, 0, 2, 0])


@pytest.mark.parametrize("seed", range(3))
def test_gather_and_scatter_add_are_adjoints(seed):
    """⟨gather(T, i), V⟩ = ⟨T, scatter_add(V, i, n)⟩: random T, V, indices with repeats."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    table = rng.standard_normal((n, 3, 2))
    indices = rng.integers(0, n, size=(4, 5))
    values = rng.standard_normal((4, 5, 3, 2))
    np.testing.assert_allclose(np.sum(ag.gather(table, indices) * values),
                               np.sum(table * ag.scatter_add(values, indices, n)), rtol=1e-12)


ERRORS = [
    (lambda: ag.gather(np.ones((5, 2)), np.array([0.0, 1.0])), TypeError,
     "gather: indices must be an integer array, got float64"),
    (lambda: ag.gather(np.ones((5, 2)), [0, 1]), TypeError,
     "gather: indices must be an integer array, got list"),
    (lambda: ag.gather(np.ones((5, 2)), np.array([0, 7, 2])), IndexError,
     "gather: indices must lie in [0, 5), got values from 0 to 7"),
    (lambda: ag.gather(np.ones((5, 2)), np.array([-1, 2])), IndexError,
     "gather: indices must lie in [0, 5), got values from -1 to 2"),
    (lambda: ag.gather(np.array(1.0), np.array([0])), ValueError,
     "gather: table must have at least one axis, got ()"),
    (lambda: ag.scatter_add(np.ones((3, 2)), np.array([0, 1, 2], dtype=np.float32), 3), TypeError,
     "scatter_add: indices must be an integer array, got float32"),
    (lambda: ag.scatter_add(np.ones((3, 2)), np.array([0, 1, 3]), 3), IndexError,
     "scatter_add: indices must lie in [0, 3), got values from 0 to 3"),
    (lambda: ag.scatter_add(np.ones((3, 2)), np.array([0, 1, 1, 2]), 3), ValueError,
     "scatter_add: values (3, 2) must start with the shape of indices (4,)"),
]


@each_error(ERRORS)
def test_errors_name_the_op_and_shapes(make, error, message):
    assert_raises(make, error, message)


@pytest.mark.parametrize("index", [lambda x: x, lambda x: (0, x), lambda x: (x[0] > 0, x[1])],
                         ids=["same-trace", "in-a-tuple", "float-in-a-tuple"])
def test_float_or_traced_index_is_refused(index):
    message = "getitem: an index cannot be a traced (float) value"
    with pytest.raises(TypeError, match=re.escape(message)):
        ag.gradient(lambda x: ag.sum(x[index(x)]), np.ones((3, 3)))
    with pytest.raises(TypeError, match=re.escape(message)):
        ag.getitem(np.ones((3, 3)), index(np.ones((3, 3))))


class _NumpyWithoutAddAt:
    """numpy, except that np.add.at raises: what gather's pullback must not use."""

    class _Add:
        def __getattr__(self, name):
            if name == "at":
                raise AssertionError("np.add.at was called")
            return getattr(np.add, name)

        def __call__(self, *args, **kwargs):
            return np.add(*args, **kwargs)

    add = _Add()

    def __getattr__(self, name):
        return getattr(np, name)


def test_gather_pullback_sums_repeated_rows_without_np_add_at(monkeypatch, rng):
    """Repeated rows summed by sort + np.add.reduceat, never np.add.at (the slow path on an
    embedding table's lookups). The sums are checked against a plain loop."""
    from autograd_lite.ops import indexing
    monkeypatch.setattr(indexing, "np", _NumpyWithoutAddAt())
    table = rng.standard_normal((50, 4))
    ids = rng.integers(0, 50, (8, 30))  # many repeats
    w = rng.standard_normal((8, 30, 4))
    (g,) = ag.gradient(lambda t: ag.sum(ag.gather(t, ids) * w), table)
    want = np.zeros_like(table)
    for i, row in np.ndenumerate(ids):
        want[row] += w[i]
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(AssertionError, match="np.add.at was called"):  # the proxy does bite
        indexing.np.add.at(np.zeros(3), [0, 0], 1.0)


def _sum_every_run(values, indices, n):
    """The embedding adjoint before indices met once were copied: np.add.reduceat over every
    sorted row, the sums whose bits segment_sum keeps."""
    flat = indices.reshape(-1)
    rows = values.reshape((flat.size,) + values.shape[indices.ndim:])
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    out = np.zeros((n,) + rows.shape[1:], dtype=values.dtype)
    out[ordered[starts]] = np.add.reduceat(rows[order], starts, axis=0)
    return out


@pytest.mark.parametrize("ids", [np.array([3, 1, 4, 0]), np.array([2, 2, 2, 2, 2]),
                                 np.array([[5, 0, 5, 1], [0, 5, 7, 5]]), np.array([6])],
                         ids=["once each", "one index", "mixed", "one row"])
@pytest.mark.parametrize("row_shape", [(), (3,), (2, 3)])
def test_segment_sum_copies_single_rows_and_sums_runs_with_the_same_bits(ids, row_shape, rng):
    from autograd_lite.kernels.numpy_kernels import segment_sum
    values = rng.standard_normal(ids.shape + row_shape).astype(np.float32)
    got = segment_sum(values, ids, 8)
    assert got.dtype == np.float32 and got.shape == (8,) + row_shape
    np.testing.assert_array_equal(got, _sum_every_run(values, ids, 8))
    want = np.zeros((8,) + row_shape)
    np.add.at(want, ids, values.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
