"""Batching rules of indexing: getitem and add_at (its pullback), gather and scatter_add.

A static index gets a full slice in front for the examples' axis (which follows the advanced
indices' axes where numpy moves those to the front). An index with mapped entries (integer
arrays or bool masks that differ between examples) becomes one numpy index of the examples'
x, each example's number in front of its entries (each_examples_index)."""
import math
import numbers

import numpy as np

from ..core.batched import BATCHING_RULES, Batched
from ..core.placement import array_module
from ..core.tracer import every_value, primitive
from ..ops import indexing as ix, reshape, transpose
from .axes import (examples_first, front_or_broadcast, is_array, length_of, merged_front,
                   moveaxis, ndim_of, shape_of, split_front, static, to_front)
from .shared_parameters import gather_each


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
    parts, part_bdims = _parts(index), _part_bdims(index, bi)
    if _one_for_all(parts, part_bdims):
        x = to_front(x, bx)
        try:
            return ix.getitem(x, (slice(None),) + parts), examples_axis(index)
        except IndexError:  # numpy's words, of one example's axes
            _example_index_error(shape_of(x)[1:], index)
            raise
    length = length_of((x, *parts), (bx, *part_bdims))
    x = front_or_broadcast(x, bx, length)  # (B, ...): each example's
    example = shape_of(x)[1:]
    merged, index, block, before = each_examples_index("getitem", example, parts, part_bdims,
                                                       length, array_module(x))
    if merged != example:
        x = reshape(x, (length,) + merged)
    out = ix.getitem(x, index)  # (B, advanced block, the other axes)
    order = _example_order(ndim_of(out), block, before)
    return (out if order is None else transpose(out, order)), 0


def add_at_rule(values, bdims):
    """getitem_rule's adjoint: each example's values added at its own index."""
    static("add_at", bdims, ("shape",), start=2)
    v, index, shape = values
    bv, bi = bdims[:2]
    parts, part_bdims = _parts(index), _part_bdims(index, bi)
    if _one_for_all(parts, part_bdims):
        axis = examples_axis(index)
        v = moveaxis(v, bv, axis)
        return ix.add_at(v, (slice(None),) + parts, (shape_of(v)[axis],) + tuple(shape)), 0
    length = length_of((v, *parts), (bv, *part_bdims))
    v = front_or_broadcast(v, bv, length)  # (B, one example's values)
    merged, index, block, before = each_examples_index("add_at", tuple(shape), parts, part_bdims,
                                                       length, array_module(v))
    order = _example_order(ndim_of(v), block, before)
    if order is not None:  # to numpy's layout of the examples' values
        v = transpose(v, tuple(np.argsort(order)))
    out = ix.add_at(v, index, (length,) + merged)
    return reshape(out, (length,) + tuple(shape)), 0


def _part_bdims(index, bdim):
    """The batch axis of each part of an index (batched_call gives a tuple's as a tuple)."""
    return bdim if isinstance(bdim, tuple) else (bdim,) * len(_parts(index))


def _one_for_all(parts, bdims):
    """Whether every example has the same index (no entry mapped, at this level or below)."""
    return all(b is None and type(p) is not Batched for p, b in zip(parts, bdims))


def _example_order(ndim, block, before):
    """The axes of numpy's (B, advanced block, the other axes) in one example's order, the
    block after its first `before` other axes (None where that is numpy's order)."""
    if not before:
        return None
    return (0, *range(1 + block, 1 + block + before), *range(1, 1 + block),
            *range(1 + block + before, ndim))


def each_examples_index(op, example, parts, bdims, length, xp):
    """The index parts of one example of x (each mapped along its bdim, or None) as one
    numpy index of the examples' x (B, the example's shape with each mask's axes merged):
    -> (that shape, index, block, before). Each array entry gets the examples' axis in
    front, arange(B) (made by xp) leads, a bool mask becomes the flat positions it selects
    (selected_positions). numpy gives (B, advanced block of `block` axes, the other axes);
    one example's result has the block after its first `before` axes (numpy's rule:
    advanced entries side by side keep their place, else their axes go first)."""
    parts, bdims = _spelled_out(op, parts, bdims, example)
    shape, entries, advanced = [], [], []  # x's axes (masks' merged), the index, (position, shape)
    axis = 0
    for p, b in zip(parts, bdims):
        if p is None or isinstance(p, slice):
            entries.append(p)
            shape.extend(() if p is None else example[axis:axis + 1])
            axis += p is not None
            continue
        if isinstance(p, numbers.Integral) and not isinstance(p, bool):
            pass  # the same int for every example
        elif is_array(p) and p.dtype.kind in "iub":
            p = front_or_broadcast(p, b, length)  # (B, ...)
        else:
            raise IndexError(f"vmap: {op}: an index holds {_described(p)}; only integers, "
                             "slices, Ellipsis, None, and integer or bool arrays are valid")
        if getattr(p, "dtype", None) == np.bool_:
            k = ndim_of(p) - 1
            if not 1 <= k or shape_of(p)[1:] != example[axis:axis + k]:
                raise IndexError(f"vmap: {op}: each example's bool index {shape_of(p)[1:]} "
                                 f"must match the axes {axis} to {axis + max(k, 1) - 1} of its "
                                 f"x {example}")
            p = selected_positions(reshape(p, (length, -1)))  # (B, count)
            shape.append(math.prod(example[axis:axis + k]))
            axis += k
        else:
            _check_in_range(op, p, example, axis)
            shape.append(example[axis])
            axis += 1
        advanced.append((len(entries), shape_of(p)[1:] if is_array(p) else ()))
        entries.append(p)
    shape.extend(example[axis:])
    try:
        block = np.broadcast_shapes(*(s for _, s in advanced))
    except ValueError:
        raise IndexError(f"vmap: {op}: each example's index arrays could not be broadcast "
                         f"together, with shapes {[s for _, s in advanced]}") from None
    for i, s in advanced:
        if is_array(entries[i]):  # (B, 1, ..., 1, s): each example's, against the block
            entries[i] = reshape(entries[i], (length,) + (1,) * (len(block) - len(s)) + s)
    positions = [i for i, _ in advanced]
    side_by_side = positions == list(range(positions[0], positions[-1] + 1))
    before = sum(e is None or isinstance(e, slice) for e in entries[:positions[0]]) \
        if side_by_side else 0
    index = (_example_numbers(length, len(block), xp),) + tuple(entries)
    return tuple(shape), index, len(block), before


def _spelled_out(op, parts, bdims, example):
    """The parts with lists as arrays and Ellipsis as the full slices it stands for."""
    parts = [np.asarray(p) if isinstance(p, list) else p for p in parts]
    taken = sum(0 if p is None or p is Ellipsis else
                ndim_of(p) - (b is not None) if getattr(p, "dtype", None) == np.bool_ else 1
                for p, b in zip(parts, bdims))
    ellipses = [i for i, p in enumerate(parts) if p is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError(f"vmap: {op}: an index can only have a single ellipsis ('...')")
    if taken > len(example):
        raise IndexError(f"vmap: {op}: too many indices for each example's x {example}: "
                         f"{taken} were indexed")
    if ellipses:
        i, fill = ellipses[0], len(example) - taken
        parts[i:i + 1] = [slice(None)] * fill
        bdims = bdims[:i] + (None,) * fill + bdims[i + 1:]
    return parts, bdims


def _check_in_range(op, index, example, axis):
    """An integer (or every example's integers) in numpy's range [-n, n) for x's `axis`."""
    n = example[axis]
    if isinstance(index, numbers.Integral):
        extreme = index
    else:
        values = every_value(index)
        if not values.size:
            return
        extreme = values.min() if values.min() < -n else values.max()
    if not -n <= extreme < n:
        raise IndexError(f"vmap: {op}: index {int(extreme)} is out of bounds for axis "
                         f"{axis} with size {n} (each example's x is {example})")


def _described(p):
    dtype = getattr(p, "dtype", None)
    return f"an array of {dtype}" if dtype is not None else f"a {type(p).__name__}"


def _example_index_error(example, index):
    """Raise numpy's IndexError, if any, for `index` into one example's shape."""
    try:
        np.lib.stride_tricks.as_strided(np.zeros(1), example, (0,) * len(example))[index]
    except IndexError as error:
        raise IndexError(f"vmap: getitem: {error} (each example's x is {example})") from None


@primitive
def selected_positions(masks):
    """The flat positions of each row's True entries: masks (B, N) bool -> (B, k) integers,
    k the count that every row must share. No derivative."""
    counts = masks.sum(axis=1)
    if masks.shape[0] and bool((counts != counts[0]).any()):
        found = sorted({int(c) for c in every_value(counts).reshape(-1)})  # int(): one number
        raise ValueError(f"vmap: getitem with a mapped bool mask selects {found} entries in "
                         "different examples, so the loop's results differ in shape and no "
                         "one array holds them: use ag.where(mask, x, 0) to keep the shape, "
                         "or select outside the mapped function")
    positions = array_module(masks).nonzero(masks)[1]
    count = int(counts[0]) if masks.shape[0] else 0
    return positions.reshape(masks.shape[0], count), lambda g: (None,)


@examples_first(selected_positions)
def selected_positions_rule(op, masks):
    """selected_positions under a second vmap: the two levels' rows as one axis."""
    return split_front(op(merged_front(masks)), shape_of(masks)[0])


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
    length = length_of(values, bdims)
    tables, indices = (merged_front(front_or_broadcast(v, b, length))
                       for v, b in zip(values, bdims))
    return split_front(gather_each(tables, indices), length), 0


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
                       gather_each: gather_each_rule})
