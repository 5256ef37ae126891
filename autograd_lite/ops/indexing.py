"""Indexing primitives, in adjoint pairs.

    getitem(x, index)          <->  add_at(values, index, shape)
    gather(table, indices)     <->  scatter_add(values, indices, n)

`gather` is the embedding lookup: rows of `table` along axis 0. Its adjoint sums
the cotangent rows that share an index; that is done by sorting the indices, copying the
rows of indices met once and summing the runs of the others (`np.add.reduceat`), several
times faster than `np.add.at`.
"""
import numbers

import numpy as np

from ..core.tracer import is_traced, primitive
from .checks import as_array


def _selects_each_element_once(index):
    """Slices, ints, None, Ellipsis and bool masks: no element can be selected twice."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (slice, numbers.Integral))
               or getattr(p, "dtype", None) == np.bool_ for p in parts)


def _check_index(index):
    parts = index if isinstance(index, tuple) else (index,)
    for p in parts:
        # a traced index of the same trace arrives here unboxed: refuse float arrays too
        if is_traced(p) or getattr(getattr(p, "dtype", None), "kind", None) == "f":
            raise TypeError("getitem: an index cannot be a traced (float) value; "
                            "indices must be integers, slices or bool masks")


@primitive
def getitem(x, index):
    """x[index] with basic slicing or integer/bool arrays; repeated indices accumulate."""
    x = as_array("getitem", x)
    _check_index(index)
    out = x[index]
    x_shape = x.shape

    def getitem_pullback(g):
        return add_at(g, index, x_shape), None
    return out, getitem_pullback


@primitive
def add_at(values, index, shape):
    """zeros(shape) with `values` added at x[index] (numpy's np.add.at); getitem's adjoint."""
    values = as_array("add_at", values, "values")
    if is_traced(values):  # differentiating a pullback: record this op on the enclosing trace
        out = add_at(values, index, shape)
    else:
        out = np.zeros(shape, dtype=values.dtype)
        if _selects_each_element_once(index):
            out[index] = values
        else:
            np.add.at(out, index, values)

    def add_at_pullback(g):
        return g[index], None, None
    return out, add_at_pullback


def _check_indices(op, indices, n):
    dtype = getattr(indices, "dtype", None)
    if dtype is None or dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be an integer array, got "
                        f"{dtype if dtype is not None else type(indices).__name__}")
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        raise IndexError(f"{op}: indices must lie in [0, {n}), got values from "
                         f"{indices.min()} to {indices.max()}")


@primitive
def gather(table, indices):
    """Rows of `table` at `indices`: out[i...] = table[indices[i...]], shape indices.shape + table.shape[1:]."""
    table = as_array("gather", table, "table")
    if table.ndim < 1:
        raise ValueError(f"gather: table must have at least one axis, got {table.shape}")
    _check_indices("gather", indices, table.shape[0])
    out = np.take(table, indices, axis=0)
    n = table.shape[0]

    def gather_pullback(g):
        return scatter_add(g, indices, n), None
    return out, gather_pullback


def _run_bounds(sorted_indices):
    """(starts, ends): where each run of equal entries of a sorted 1-D array begins and ends."""
    starts = np.empty(sorted_indices.size, dtype=bool)
    starts[0] = True
    np.not_equal(sorted_indices[1:], sorted_indices[:-1], out=starts[1:])
    ends = np.empty_like(starts)
    ends[-1] = True
    ends[:-1] = starts[1:]
    return starts, ends


def segment_sum(values, indices, n):
    """Σ of the rows of `values` (shape indices.shape + row) that share an index, into n rows.

    Sort the flat indices (stably). An index met once has its row copied; the runs of an
    index met more than once are summed with np.add.reduceat, over those rows only (in a
    batch of text most tokens occur once, and that copy costs a fraction of the sum).
    """
    row_shape = values.shape[indices.ndim:]
    out = np.zeros((n,) + row_shape, dtype=values.dtype)
    flat = indices.reshape(-1)
    if flat.size == 0:
        return out
    rows = values.reshape((flat.size,) + row_shape)
    order = np.argsort(flat, kind="stable")
    sorted_indices = flat[order]
    starts, ends = _run_bounds(sorted_indices)
    once = starts & ends
    out[sorted_indices[once]] = rows[order[once]]
    repeated = ~once
    if repeated.any():
        run_starts = np.flatnonzero(starts[repeated])
        out[sorted_indices[repeated][run_starts]] = np.add.reduceat(rows[order[repeated]],
                                                                    run_starts, axis=0)
    return out


@primitive
def scatter_add(values, indices, n):
    """out[k] = Σ_{i : indices[i] = k} values[i], for k < n; gather's adjoint."""
    values = as_array("scatter_add", values, "values")
    _check_indices("scatter_add", indices, n)
    if values.shape[:indices.ndim] != indices.shape:
        raise ValueError(f"scatter_add: values {values.shape} must start with the shape of "
                         f"indices {indices.shape}")
    if is_traced(values):  # differentiating a pullback: record this op on the enclosing trace
        out = scatter_add(values, indices, n)
    else:
        out = segment_sum(values, indices, n)

    def scatter_add_pullback(g):
        return gather(g, indices), None, None
    return out, scatter_add_pullback
