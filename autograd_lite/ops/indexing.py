"""Indexing primitives, in adjoint pairs.

    getitem(x, index)          <->  add_at(values, index, shape)
    gather(table, indices)     <->  scatter_add(values, indices, n)

`gather` is the embedding lookup (rows of `table`). add_at, gather and scatter_add are
defined by compositions a trace records (a constant one-hot matrix and `matmul`, or
scatter_add over flat positions), each with a fast rule beside it for plain arrays
(kernels.segment_sum for the rows that share an index: np.add.at is slow on a hot path).
"""
import math
import numbers

import numpy as np

from .. import kernels
from ..core.devices import on_host
from ..core.placement import array_module
from ..core.rules import fast_rule, fusable
from ..core.tracer import every_value, is_traced, primitive
from .checks import as_array
from .matmul import matmul


def _selects_each_element_once(index):
    """Slices, ints, None, Ellipsis and bool masks: no element can be selected twice."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (slice, numbers.Integral))
               or getattr(p, "dtype", None) == np.bool_ for p in parts)


@primitive
def getitem(x, index):
    """x[index] with basic slicing or integer/bool arrays; repeated indices accumulate."""
    x = as_array("getitem", x)
    for p in index if isinstance(index, tuple) else (index,):
        # a traced index of the same trace arrives here unboxed: refuse float arrays too
        if is_traced(p) or getattr(getattr(p, "dtype", None), "kind", None) == "f":
            raise TypeError("getitem: an index cannot be a traced (float) value; "
                            "indices must be integers, slices or bool masks")
    out = x[index]
    x_shape = x.shape

    def getitem_pullback(g):
        return add_at(g, index, x_shape), None
    return out, getitem_pullback


@fusable(drawn_as_op=True)
def add_at(values, index, shape):
    """zeros(shape) with `values` added at x[index] (np.add.at); getitem's adjoint. Written
    out: scatter_add into the flat positions that `index` selects."""
    values = as_array("add_at", values, "values")
    positions = array_module(values).arange(math.prod(shape)).reshape(shape)[index]
    flat = scatter_add(values.reshape(-1), positions.reshape(-1), math.prod(shape))
    return flat.reshape(shape)


@fast_rule(add_at, applies=on_host, takes_traced=True)
def add_at_rule(values, index, shape):
    """add_at by numpy's indexing: an assignment where no element is selected twice."""
    values = as_array("add_at", values, "values")
    out = np.zeros(shape, dtype=values.dtype)
    if _selects_each_element_once(index):
        out[index] = values
    else:
        np.add.at(out, index, values)

    def add_at_pullback(g):  # the library's ops: a traced cotangent too
        return g[index], None, None
    return out, add_at_pullback


def check_indices(op, indices, n):
    """Refuse indices that are not integers in [0, n) (under vmap: any example's)."""
    dtype = getattr(indices, "dtype", None)
    if dtype is None or dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be an integer array, got "
                        f"{dtype if dtype is not None else type(indices).__name__}")
    values = every_value(indices)
    if values.size and (values.min() < 0 or values.max() >= n):
        raise IndexError(f"{op}: indices must lie in [0, {n}), got values from "
                         f"{int(values.min())} to {int(values.max())}")  # int(): a device's too


def _one_hot_rows(indices, n, dtype, xp):
    """(indices.size, n) with a 1 at (i, indices[i]), made by xp (the table's module)."""
    flat = indices.reshape(-1)
    onehot = xp.zeros((flat.size, n), dtype=dtype)
    onehot[xp.arange(flat.size), flat] = 1
    return onehot


def _checked_table(table, indices):
    table = as_array("gather", table, "table")
    if table.ndim < 1:
        raise ValueError(f"gather: table must have at least one axis, got {table.shape}")
    check_indices("gather", indices, table.shape[0])
    return table


@fusable(drawn_as_op=True)
def gather(table, indices):
    """out[i...] = table[indices[i...]]: (*indices.shape, *table.shape[1:]). Written out:
    onehot(indices) @ table, reshaped."""
    table = _checked_table(table, indices)
    rows = table.reshape(table.shape[0], math.prod(table.shape[1:]))  # (n, row)
    picked = matmul(_one_hot_rows(indices, table.shape[0], table.dtype, array_module(table)),
                    rows)
    return picked.reshape(indices.shape + table.shape[1:])


@fast_rule(gather, applies=on_host, takes_traced=True)
def gather_rule(table, indices):
    table = _checked_table(table, indices)
    out = kernels.gather_rows(table, indices)
    n = table.shape[0]

    def gather_pullback(g):  # the library's ops: a traced cotangent too
        return scatter_add(g, indices, n), None
    return out, gather_pullback


def _checked_values(values, indices, n):
    values = as_array("scatter_add", values, "values")
    check_indices("scatter_add", indices, n)
    if values.shape[:indices.ndim] != indices.shape:
        raise ValueError(f"scatter_add: values {values.shape} must start with the shape of "
                         f"indices {indices.shape}")
    return values


@fusable(drawn_as_op=True)
def scatter_add(values, indices, n):
    """out[k] = Σ_{i : indices[i] = k} values[i], for k < n; gather's adjoint.
    Written out: onehot(indices)ᵀ @ values, reshaped."""
    values = _checked_values(values, indices, n)
    row_shape = values.shape[indices.ndim:]
    rows = values.reshape(indices.size, math.prod(row_shape))  # (k, row)
    summed = matmul(_one_hot_rows(indices, n, values.dtype, array_module(values)).T,
                    rows)  # (n, row)
    return summed.reshape((n,) + row_shape)


@fast_rule(scatter_add, applies=on_host, takes_traced=True)
def scatter_add_rule(values, indices, n):
    values = _checked_values(values, indices, n)
    out = kernels.segment_sum(values, indices, n)

    def scatter_add_pullback(g):  # the library's ops: a traced cotangent too
        return gather(g, indices), None, None
    return out, scatter_add_pullback
