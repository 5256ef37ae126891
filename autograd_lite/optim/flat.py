"""Leaves in flat buffers, for optimizers that update many leaves with a few numpy calls:
`joined` lays arrays back to back in one 1-D array (a view when they already lie so),
`split_like` cuts one into views shaped like the leaves, and `unflatten_each` rebuilds
several trees of one structure from their leaves in a single walk.
"""
import numpy as np

from ..core.tree import children, rebuild, tree_leaves


def _address(a):
    return a.__array_interface__["data"][0]


def joined(arrays):
    """The arrays back to back in one 1-D array: a view when they already lie so in one
    buffer (as the leaves of a chunk that the optimizer returned do), else a fresh copy."""
    first = arrays[0]
    if len(arrays) == 1:
        return first.reshape(-1)
    base = first.base
    if type(base) is np.ndarray and base.ndim == 1 and base.flags.c_contiguous:
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
    """[tree_unflatten(like, column) for column in columns], in one walk of `like`: each
    column holds one tree's leaves in tree order (tree_leaves), all of like's length."""
    position = 0

    def build(node):
        nonlocal position
        kids = children(node)
        if kids is None:
            position += 1
            return [column[position - 1] for column in columns]
        built = [build(kid) for kid in kids]
        return [rebuild(node, [b[k] for b in built]) for k in range(len(columns))]
    try:
        trees = build(like)
    except IndexError:  # a column ran out
        trees = None
    if trees is None or any(len(column) != position for column in columns):
        raise ValueError(f"unflatten_each: the structure holds {len(tree_leaves(like))} leaves, "
                         f"the columns {[len(column) for column in columns]}")
    return trees
