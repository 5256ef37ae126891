"""Batching rules of indexing: getitem and add_at, gather and scatter_add.

A static index gets a full slice in front for the examples' axis; where numpy moves the
advanced indices' axes to the front (advanced indices not side by side), the examples' axis
follows them. A mapped index (an integer array or a bool mask per example) picks each
example's entries from its own x: gather_each, after a mask becomes the flat positions it
selects (`selected_positions`), which exist as one array only where every example selects
as many entries."""
import math
import numbers

import numpy as np

from ..core.batching import BATCHING_RULES, Batched
from ..core.devices import array_module
from ..core.tracer import every_value, primitive
from ..ops import indexing as ix, reshape, where
from .axes import (front_or_broadcast, is_array, length_of, moveaxis, ndim_of, shape_of, static,
                   to_front)
from .shared import gather_each


def _parts(index):
    return index if isinstance(index, tuple) else (index,)


def _is_array_index(p):
    return isinstance(p, list) or is_array(p)  # numpy's, or a device's


def examples_axis(index):
    """Where x[(slice(None),) + index] puts the examples' axis (x's axis 0)."""
    parts = _parts(index)
    arrays = [np.asarray(p) if isinstance(p, list) else p for p in parts if _is_array_index(p)]
    if not arrays:
        return 0
    advanced = [i for i, p in enumerate(parts)
                if _is_array_index(p) or isinstance(p, numbers.Integral)]
    if advanced == list(range(advanced[0], advanced[-1] + 1)):
        return 0  # side by side: numpy keeps their axes in place, after the examples'
    shapes = [(int(a.sum()),) if a.dtype == np.bool_ else a.shape for a in arrays]
    return len(np.broadcast_shapes(*shapes))


def _example_numbers(length, ndim, xp=np):
    """0..length-1 shaped (length, 1, ..., 1) to pair with indices of `ndim` axes per example."""
    return xp.arange(length).reshape((length,) + (1,) * ndim)


def getitem_rule(values, bdims):
    x, index = values
    bx, bi = bdims
    if bi is None and type(index) is not Batched:  # one index for every example
        x = to_front(x, bx)
        try:
            return ix.getitem(x, (slice(None),) + _parts(index)), examples_axis(index)
        except IndexError:  # numpy's words, of one example's axes
            _example_index_error(shape_of(x)[1:], index)
            raise
    length = length_of(values, bdims)
    index = front_or_broadcast(index, bi, length)  # (B, ...): each example's
    x = front_or_broadcast(x, bx, length)  # (B, n, ...)
    example = shape_of(x)[1:]
    if index.dtype == np.bool_:
        k = ndim_of(index) - 1
        if not 1 <= k <= len(example) or shape_of(index)[1:] != example[:k]:
            raise IndexError(f"vmap: getitem: each example's bool index {shape_of(index)[1:]} "
                             f"must match the first axes of its x {example}")
        x = reshape(x, (length, math.prod(example[:k])) + example[k:])
        index = selected_positions(reshape(index, (length, -1)))
    else:
        _check_integer_index(index, example)
        index = where(index < 0, index + example[0], index)
    return gather_each(x, index), 0


def _example_index_error(example, index):
    """Raise numpy's IndexError for `index` into an array of one example's shape, naming
    vmap and getitem (nothing if the index fits it)."""
    try:
        np.lib.stride_tricks.as_strided(np.zeros(1), example, (0,) * len(example))[index]
    except IndexError as error:
        raise IndexError(f"vmap: getitem: {error} (each example's x is {example})") from None


def _check_integer_index(index, example):
    """Each example's integer index into its x's first axis, in numpy's range [-n, n)."""
    if index.dtype.kind not in "iu" or not example:
        raise IndexError(f"vmap: getitem: a mapped index must be an integer array or a bool "
                         f"mask, into an x of at least one axis; got {index.dtype} for x "
                         f"{example}")
    values, n = every_value(index), example[0]
    if not values.size:
        return
    extreme = values.min() if values.min() < -n else values.max()
    if not -n <= extreme < n:
        raise IndexError(f"vmap: getitem: index {extreme} is out of range for axis 0 of each "
                         f"example's x {example}")


@primitive
def selected_positions(masks):
    """The flat positions of each row's True entries: masks (B, N) bool -> (B, k) integers,
    k the count that every row must share (one array holds every example's selection only
    then). No derivative."""
    counts = masks.sum(axis=1)
    if masks.shape[0] and bool((counts != counts[0]).any()):
        found = sorted({int(c) for c in every_value(counts).reshape(-1).tolist()})
        raise ValueError(f"vmap: getitem with a mapped bool mask selects {found} entries in "
                         "different examples, so the loop's results differ in shape and no "
                         "one array holds them: use ag.where(mask, x, 0) to keep the shape, "
                         "or select outside the mapped function")
    positions = array_module(masks).nonzero(masks)[1]
    count = int(counts[0]) if masks.shape[0] else 0
    return positions.reshape(masks.shape[0], count), lambda g: (None,)


def selected_positions_rule(values, bdims):
    """selected_positions under a second vmap: the two levels' rows as one axis."""
    (masks,), (b,) = values, bdims
    masks = to_front(masks, b)
    shape = shape_of(masks)
    out = selected_positions(reshape(masks, (shape[0] * shape[1], shape[2])))
    return reshape(out, shape[:2] + shape_of(out)[1:]), 0


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
    ix.check_indices("scatter_add", indices, n)
    k = ndim_of(indices) - 1
    v = front_or_broadcast(v, bv, length)
    numbers = _example_numbers(length, k, array_module(indices))
    flat = reshape(indices + numbers * n, (-1,))  # row b * n + i
    rows = reshape(v, (-1,) + shape_of(v)[1 + k:])
    out = ix.scatter_add(rows, flat, length * n)
    return reshape(out, (length, n) + shape_of(v)[1 + k:]), 0


BATCHING_RULES.update({ix.getitem: getitem_rule, ix.add_at: add_at_rule,
                       ix.gather: gather_rule, ix.scatter_add: scatter_add_rule,
                       gather_each: gather_each_rule,
                       selected_positions: selected_positions_rule})
