"""Indexing ops (autograd_lite/ops/indexing.py): getitem and its adjoint add_at, gather and its
adjoint scatter_add, against central differences and PyTorch; repeated indices; errors."""
import re

import numpy as np
import pytest

import autograd_lite as ag
from torch_reference import DTYPES, check_first_order, check_second_order, compare_with_torch


def torch_index(torch, index):
    """The same index for a torch tensor (integer arrays as int64 tensors, bool masks as bool)."""
    if isinstance(index, tuple):
        return tuple(torch_index(torch, i) for i in index)
    if isinstance(index, np.ndarray):
        return torch.from_numpy(index if index.dtype == np.bool_ else index.astype(np.int64))
    return index


MASK = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, True]])
# id: index into a (3, 4) array
INDICES = {
    "int": 1, "negative-int": -1, "scalar": (2, 3), "slice": slice(1, 3),
    "step": (slice(None), slice(None, None, 2)), "column": (slice(None), 2),
    "ellipsis-none": (Ellipsis, None, 1), "bool-mask": MASK,
    "bool-rows": np.array([True, False, True]),
    "repeats": np.array([0, 0, 2]), "list-repeats": [0, 0, 2],
    "2d-array": np.array([[0, 1], [1, 1]]), "pairs": (np.array([0, 1, 1]), np.array([2, 0, 2])),
    "slice-and-array": (slice(None), np.array([3, 3, 0])),
}


@pytest.mark.parametrize("name", [*INDICES, "negative-step"])
def test_getitem_first_and_second_order(name, rng):
    index = INDICES.get(name, (slice(None, None, -1), slice(3, 0, -2)))
    x = rng.standard_normal((3, 4))
    check_first_order(lambda x: ag.getitem(x, index), x)
    check_first_order(lambda x: x[index], x)  # the operator reaches the same op
    check_second_order(lambda x: ag.sum(ag.tanh(x[index]) ** 2), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", INDICES)
def test_getitem_matches_torch(name, dtype, rng, torch):
    index = INDICES[name]
    x = rng.standard_normal((3, 4)).astype(dtype)
    compare_with_torch(torch, lambda x: ag.getitem(x, index),
                       lambda t: t[torch_index(torch, index)], x)


def test_repeated_getitem_indices_accumulate(rng, torch):
    x = rng.standard_normal((4, 2))
    g = ag.grad(lambda x: ag.sum(x[[0, 0, 2]]))(x)
    np.testing.assert_array_equal(g, [[2, 2], [0, 0], [1, 1], [0, 0]])
    compare_with_torch(torch, lambda x: x[[0, 0, 2]] * x[np.array([2, 0])].sum(),
                       lambda t: t[[0, 0, 2]] * t[[2, 0]].sum(), x)


@pytest.mark.parametrize("name", INDICES)
def test_add_at_is_the_adjoint_of_getitem(name, rng):
    """⟨x[index], v⟩ = ⟨x, add_at(v, index, x.shape)⟩, and add_at's own derivatives."""
    index = INDICES[name]
    x = rng.standard_normal((3, 4))
    v = rng.standard_normal(x[index].shape)
    out = ag.add_at(v, index, x.shape)
    assert type(out) is np.ndarray and out.shape == x.shape
    np.testing.assert_allclose(np.sum(x[index] * v), np.sum(x * out), rtol=1e-12)
    check_first_order(lambda v: ag.add_at(v, index, x.shape), v)
    check_second_order(lambda v: ag.sum(ag.tanh(ag.add_at(v, index, x.shape)) ** 2), v)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_at_accumulates_like_torch_index_put(dtype, rng, torch):
    rows, cols = np.array([0, 2, 0, 0, 1]), np.array([1, 3, 1, 1, 0])
    v = rng.standard_normal(5).astype(dtype)
    compare_with_torch(
        torch, lambda v: ag.add_at(v, (rows, cols), (3, 4)),
        lambda v: torch.zeros((3, 4), dtype=v.dtype).index_put(
            torch_index(torch, (rows, cols)), v, accumulate=True), v)


# gather cases: (table shape, indices)
GATHERS = {
    "vector": ((5,), np.array([4, 0, 4, 1])),
    "embedding": ((6, 3), np.array([[0, 5, 2], [2, 2, 0]])),
    "rows-3d": ((4, 2, 3), np.array([3, 1, 1])),
    "scalar-index": ((5, 2), np.array(3)),
    "int32": ((5, 3), np.array([1, 4, 1], dtype=np.int32)),
    "uint8": ((5, 3), np.array([[1, 4], [1, 0]], dtype=np.uint8)),
    "empty": ((5, 3), np.zeros((0,), dtype=np.int64)),
}


def torch_gather(torch, table, indices):
    idx = torch.from_numpy(indices.astype(np.int64))
    if table.ndim == 2:
        return torch.nn.functional.embedding(idx, table)
    return table[idx]


def torch_scatter_add(torch, values, indices, n):
    rows = values.reshape((-1,) + tuple(values.shape[indices.ndim:]))
    out = torch.zeros((n,) + tuple(rows.shape[1:]), dtype=values.dtype)
    return out.index_add(0, torch.from_numpy(indices.reshape(-1).astype(np.int64)), rows)


@pytest.mark.parametrize("case", GATHERS)
def test_gather_and_scatter_add_first_and_second_order(case, rng):
    shape, indices = GATHERS[case]
    table = rng.standard_normal(shape)
    check_first_order(lambda t: ag.gather(t, indices), table)
    check_second_order(lambda t: ag.sum(ag.tanh(ag.gather(t, indices)) ** 2), table)
    values = rng.standard_normal(indices.shape + shape[1:])
    check_first_order(lambda v: ag.scatter_add(v, indices, shape[0]), values)
    check_second_order(lambda v: ag.sum(ag.tanh(ag.scatter_add(v, indices, shape[0])) ** 2), values)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", GATHERS)
def test_gather_and_scatter_add_match_torch(case, dtype, rng, torch):
    shape, indices = GATHERS[case]
    table = rng.standard_normal(shape).astype(dtype)
    compare_with_torch(torch, lambda t: ag.gather(t, indices),
                       lambda t: torch_gather(torch, t, indices), table)
    values = rng.standard_normal(indices.shape + shape[1:]).astype(dtype)
    compare_with_torch(torch, lambda v: ag.scatter_add(v, indices, shape[0]),
                       lambda v: torch_scatter_add(torch, v, indices, shape[0]), values)


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


def test_gather_and_np_take_reach_the_same_op(rng):
    table, indices = rng.standard_normal((5, 2)), np.array([4, 4, 1])
    g1 = ag.grad(lambda t: ag.sum(ag.gather(t, indices) ** 2))(table)
    g2 = ag.grad(lambda t: ag.sum(np.take(t, indices, axis=0) ** 2))(table)
    np.testing.assert_array_equal(g1, g2)
    check_first_order(lambda t: np.take(t, indices, axis=0), table)


@pytest.mark.parametrize("dtype", DTYPES)
def test_untraced_results_are_plain_arrays(dtype, rng):
    x = rng.standard_normal((3, 4)).astype(dtype)
    outs = [ag.getitem(x, (0, 1)), ag.getitem(x, 0), ag.getitem(x, MASK),
            ag.add_at(x[0], 1, (3, 4)), ag.gather(x, np.array([2, 2])),
            ag.scatter_add(x, np.array([0, 0, 1]), 2)]
    for out in outs:
        assert type(out) is np.ndarray and out.dtype == dtype


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


@pytest.mark.parametrize("make, error, message", ERRORS,
                         ids=[f"{m.split(':')[0]}{i}" for i, (_, _, m) in enumerate(ERRORS)])
def test_errors_name_the_op_and_shapes(make, error, message):
    with pytest.raises(error, match=re.escape(message)):
        make()


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
    """The issue's rule: sort + np.add.reduceat, not np.add.at (3x slower on the embedding
    table's 1,600 lookups). The sums are checked against a plain loop."""
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
