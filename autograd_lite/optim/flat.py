"""Leaves in flat buffers, for optimizers that update many leaves with a few numpy calls."""
import numpy as np

from ..core.tracer import plain
from ..core.tree import leaf_count, tree_flatten, unflatten
from ..kernels import parallel


def _address(a):
    return a.__array_interface__["data"][0]


def joined(arrays):
    """The arrays back to back in one 1-D array: a view when they already lie so in one plain
    numpy buffer (as a chunk's leaves that the optimizer returned do), else a fresh copy."""
    first = arrays[0]
    if len(arrays) == 1:
        return first.reshape(-1)
    base = first.base
    if plain(base) and base.ndim == 1 and base.flags.c_contiguous:
        end = _address(first)
        for a in arrays:
            if a.base is not base or not a.flags.c_contiguous or _address(a) != end:
                break
            end += a.nbytes
        else:
            start = (_address(first) - _address(base)) // base.itemsize
            return base[start:start + (end - _address(first)) // base.itemsize]
    return np.concatenate([a.reshape(-1) for a in arrays])


def split_like(flat, arrays):
    """Views of the 1-D `flat`, one per array, with its shape, back to back."""
    out, start = [], 0
    for a in arrays:
        out.append(flat[start:start + a.size].reshape(a.shape))
        start += a.size
    return out


def unflatten_each(like, columns):
    """[tree_unflatten(like, column) for column in columns], `like` flattened once."""
    structure = tree_flatten(like)[1]
    count = leaf_count(structure)
    if any(len(column) != count for column in columns):
        raise ValueError(f"unflatten_each: the structure holds {count} leaves, "
                         f"the columns {[len(column) for column in columns]}")
    return [unflatten(structure, column) for column in columns]


CHUNK_SIZE = 2**16  # entries: a chunk's arrays stay in the cache; a larger leaf is a chunk alone


def chunks(sizes, keys, limit=CHUNK_SIZE):
    """Positions in runs of one key, each of at most `limit` entries (or one larger leaf;
    None: no limit). sizes, keys: per position. -> [[position, ...], ...]"""
    runs, key, size = [], None, 0
    for i, (n, k) in enumerate(zip(sizes, keys)):
        if not runs or k != key or (limit is not None and size + n > limit):
            runs.append([])
            key, size = k, 0
        runs[-1].append(i)
        size += n
    return runs


def update_in_chunks(kernel, columns, keys, in_place):
    """Run `kernel(key, p, g, *buffers, *outputs)` over chunks of leaves joined into 1-D arrays.

    columns: per leaf, the arrays [p, g, *buffers] (one shape); keys: per leaf, what a chunk
    must share (the dtype, Adam's count t). The kernel writes the new p and buffers into
    `outputs`: fresh arrays, whose views become the new leaves (joined for the next update),
    or with in_place the joined arrays, copied back into leaves they are not views of.
    -> per leaf, the new [p, *buffers]. On the host, shares of the chunks run in parallel
    (kernels.parallel: the same bits at any thread count); a device's leaves make chunks of
    any size, in the calling thread (a kernel launch costs more than a cache miss there)."""
    new = [None] * len(columns)
    on_host = all(type(column[0]) is np.ndarray for column in columns)
    sizes = [column[0].size for column in columns]
    runs = chunks(sizes, keys, CHUNK_SIZE if on_host else None)

    def update(chunk):
        leaves = [[columns[i][k] for i in chunk] for k in range(len(columns[chunk[0]]))]
        flat = [joined(arrays) for arrays in leaves]
        updated = [flat[0]] + flat[2:]  # p and the buffers (not g)
        outputs = updated if in_place else [np.empty_like(a) for a in updated]
        kernel(keys[chunk[0]], *flat, *outputs)
        originals = [leaves[0]] + leaves[2:]
        if in_place:  # the leaves, written back where a joined array is a copy of them
            for output, arrays in zip(outputs, originals):
                if not np.may_share_memory(output, arrays[0]):
                    for original, value in zip(arrays, split_like(output, arrays)):
                        np.copyto(original, value)
            parts = originals
        else:
            parts = [split_like(o, a) for o, a in zip(outputs, originals)]
        for j, i in enumerate(chunk):
            new[i] = [part[j] for part in parts]

    def update_runs(start, stop):
        for chunk in runs[start:stop]:
            update(chunk)
    if on_host and runs:
        parallel.split_rows(update_runs, len(runs), row_size=sum(sizes) // len(runs))
    else:
        update_runs(0, len(runs))
    return new
