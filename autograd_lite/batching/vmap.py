"""vmap: a function of one example made a function of many (jax.vmap, torch.func.vmap).

    vmap(f, in_axes=0, out_axes=0, randomness="error")(*args)

in_axes: where the examples are, an int (that axis of every array leaf), None (the same for
every example), or a tuple with an entry per positional argument, each an int, None or a tree
of them (a prefix of the argument's structure: an int or None stands for its whole subtree).
Array leaves (float, int, bool) are mapped, others pass unchanged. out_axes: the same for the
output (an output that is the same for every example is broadcast). randomness, for a random
op (ag.dropout with a generator): "error" (it raises), "different" (each example the draws of
a Python loop over them: the same bits) or "same" (one draw for all); core/randomness.py.

f runs once, on `Batched` values (core/batched.py): each op computes every example by its
batching rule (rules_*.py). It composes both ways with the other transforms and itself.
"""
import functools
import numbers

import numpy as np

from ..core.batched import Batched, MappedCall, new_level, running, strip_level
from ..core.tree import (PrefixMismatch, broadcast_prefix, structure_paths, tree_flatten,
                         tree_leaves, unflatten)
from ..core.dtypes import strong
from .axes import broadcast_axis, is_array, moveaxis


def _check_axes_spec(name, spec):
    for axis in tree_leaves(spec):
        if axis is not None and not (isinstance(axis, numbers.Integral)
                                     and not isinstance(axis, bool)):
            raise TypeError(f"vmap: {name} must be an int, None, or a tuple or tree of them, "
                            f"got {type(axis).__name__}")


def _axes_of_leaves(name, spec, structure, root):
    """The axis of each leaf of a tree of `structure`, from `spec`, a prefix of it."""
    try:
        return broadcast_prefix(spec, structure)
    except PrefixMismatch as error:
        there = error.structure
        value = "a leaf" if there is None else f"a {there[0].__name__} of {len(there[2])}"
        raise ValueError(f"vmap: {name} at {error.where(root)} is a "
                         f"{type(error.prefix).__name__} of {len(error.prefix)}, but the value "
                         f"there is {value}: give an int or None there, or a tree of the "
                         "value's structure") from None


def _mapped_length(pairs):
    """The number of examples: the size of every mapped axis, which must agree."""
    lengths = {}
    for leaf, axis, path in pairs:
        if axis is None or not is_array(leaf):
            continue
        ndim = leaf.ndim
        if not -ndim <= axis < ndim:
            raise ValueError(f"vmap: in_axes {axis} for {path}, of shape {leaf.shape}: out of "
                             f"range for {ndim} dimensions")
        lengths.setdefault(leaf.shape[axis], []).append(f"{path} {leaf.shape} axis {axis}")
    if not lengths:
        raise ValueError("vmap: no argument is mapped (in_axes gives None, or an axis only "
                         "to leaves that are not arrays)")
    if len(lengths) > 1:
        listed = "; ".join(f"{n}: {', '.join(paths)}" for n, paths in lengths.items())
        raise ValueError(f"vmap: the mapped axes have different sizes ({listed})")
    return next(iter(lengths))


def _unmapped_output(leaf, level, axis, length, path):
    """An output leaf with its examples of `level` on `axis`."""
    if not (is_array(leaf) or isinstance(leaf, (np.generic, numbers.Number))):
        return leaf  # a static leaf (None, a string)
    value, bdim = strip_level(leaf, level)
    if axis is None:
        if bdim is not None:
            raise ValueError(f"vmap: out_axes is None for {path}, but it differs from one "
                             "example to the next")
        return leaf
    ndim_out = np.ndim(value) + (bdim is None)
    if not -ndim_out <= axis < ndim_out:
        raise ValueError(f"vmap: out_axes {axis} for {path} is out of range for "
                         f"{ndim_out} dimensions")
    if bdim is None:
        value = broadcast_axis(value, axis, length)
    else:
        value = moveaxis(value, bdim, axis % ndim_out)
    return strong(value)


def vmap(f, in_axes=0, out_axes=0, randomness="error"):
    """The function of many examples that runs f once for all of them (module docstring)."""
    if not callable(f):
        raise TypeError(f"vmap: the first argument must be the function to map, got "
                        f"{type(f).__name__}")
    _check_axes_spec("in_axes", in_axes)
    _check_axes_spec("out_axes", out_axes)
    spec = tuple(in_axes) if isinstance(in_axes, list) else in_axes
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"vmap: randomness must be 'error', 'different' or 'same', got "
                         f"{randomness!r}")

    @functools.wraps(f)
    def vmapped(*args):
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(f"vmap: in_axes has {len(spec)} entries for {len(args)} arguments")
        leaves, structure = tree_flatten(args)
        axes = _axes_of_leaves("in_axes", spec, structure, "args")
        pairs = list(zip(leaves, axes, structure_paths(structure, "args")))
        length = _mapped_length(pairs)
        level = new_level()
        leaves = [Batched(leaf, level, axis % leaf.ndim)
                  if axis is not None and is_array(leaf) else leaf
                  for leaf, axis, _ in pairs]
        call = MappedCall(level, length, randomness)
        with running(call):
            out = f(*unflatten(structure, leaves))
            if call.draws is not None and call.draws.needs_replay():
                call.draws.rewind()  # random ops at several places: the loop's draws need
                out = f(*unflatten(structure, leaves))  # each example's count (randomness.py)
        leaves, structure = tree_flatten(out)
        axes = _axes_of_leaves("out_axes", out_axes, structure, "out")
        return unflatten(structure, [
            _unmapped_output(leaf, level, axis, length, path)
            for leaf, axis, path in zip(leaves, axes, structure_paths(structure, "out"))])
    return vmapped
