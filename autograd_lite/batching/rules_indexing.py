"""Batching rules of indexing: getitem and add_at, gather and scatter_add.

A static index gets a full slice in front for the examples' axis; where numpy moves the
advanced indices' axes to the front (advanced indices not side by side), the examples' axis
follows them. Batched integer indices (an embedding lookup of each example's tokens) pick
each example's rows (shared.gather_each)."""
import numbers

import numpy as np

from ..core.batching import BATCHING_RULES
from ..ops import indexing as ix, reshape
from .axes import front_or_broadcast, length_of, moveaxis, ndim_of, shape_of, static, to_front
from .shared import gather_each


def _parts(index):
    return index if isinstance(index, tuple) else (index,)


def _is_array_index(p):
    return isinstance(p, (np.ndarray, list))


def examples_axis(index):
    """Where x[(slice(None),) + index] puts the examples' axis (x's axis 0)."""
    parts = _parts(index)
    arrays = [np.asarray(p) for p in parts if _is_array_index(p)]
    if not arrays:
        return 0
    advanced = [i for i, p in enumerate(parts)
                if _is_array_index(p) or isinstance(p, numbers.Integral)]
    if advanced == list(range(advanced[0], advanced[-1] + 1)):
        return 0  # side by side: numpy keeps their axes in place, after the examples'
    shapes = [(int(a.sum()),) if a.dtype == np.bool_ else a.shape for a in arrays]
    return len(np.broadcast_shapes(*shapes))


def _example_numbers(length, ndim):
    """0..length-1 shaped (length, 1, ..., 1) to pair with indices of `ndim` axes per example."""
    return np.arange(length).reshape((length,) + (1,) * ndim)


def getitem_rule(values, bdims):
    x, index = values
    bx, bi = bdims
    if bi is None:
        return ix.getitem(to_front(x, bx), (slice(None),) + _parts(index)), examples_axis(index)
    length = shape_of(index)[bi]  # each example's integer array picks along its axis 0
    index = to_front(index, bi)
    x = front_or_broadcast(x, bx, length)
    return ix.getitem(x, (_example_numbers(length, ndim_of(index) - 1), index)), 0


def add_at_rule(values, bdims):
    static("add_at", bdims, ("index", "shape"), start=1)
    v, index, shape = values
    axis = examples_axis(index)
    v = moveaxis(v, bdims[0], axis)
    return ix.add_at(v, (slice(None),) + _parts(index), (shape_of(v)[axis],) + tuple(shape)), 0


def gather_rule(values, bdims):
    """Rows of each example's table at each example's indices."""
    table, indices = values
    bt, bi = bdims
    if bt is None:  # one table: one lookup of every example's indices
        return ix.gather(table, indices), bi
    if bi is None:  # a table per example, the same indices: the tables' axis after theirs
        return ix.gather(moveaxis(table, bt, 1), indices), ndim_of(indices)
    return gather_each(to_front(table, bt), to_front(indices, bi)), 0


def gather_each_rule(values, bdims):
    """gather_each under a second vmap: the two levels' examples as one axis."""
    (tables, indices), (bt, bi) = values, bdims
    length = length_of(values, bdims)
    tables, indices = front_or_broadcast(tables, bt, length), front_or_broadcast(indices, bi, length)
    t, i = shape_of(tables), shape_of(indices)
    out = gather_each(reshape(tables, (t[0] * t[1],) + t[2:]), reshape(indices, (i[0] * i[1],) + i[2:]))
    return reshape(out, t[:2] + i[2:] + t[3:]), 0


def scatter_add_rule(values, bdims):
    """Each example's values summed into its own n rows."""
    v, indices, n = values
    bv, bi = bdims[:2]
    static("scatter_add", bdims, ("n",), start=2)
    if bi is None:  # the same indices: the examples' axis after the indices' axes
        k = ndim_of(indices)
        return ix.scatter_add(moveaxis(v, bv, k), indices, n), 1
    length = shape_of(indices)[bi]
    indices = to_front(indices, bi)
    k = ndim_of(indices) - 1
    v = front_or_broadcast(v, bv, length)
    flat = (indices + _example_numbers(length, k) * n).reshape(-1)  # row b * n + i
    rows = reshape(v, (-1,) + shape_of(v)[1 + k:])
    out = ix.scatter_add(rows, flat, length * n)
    return reshape(out, (length, n) + shape_of(v)[1 + k:]), 0


BATCHING_RULES.update({ix.getitem: getitem_rule, ix.add_at: add_at_rule,
                       ix.gather: gather_rule, ix.scatter_add: scatter_add_rule,
                       gather_each: gather_each_rule})
