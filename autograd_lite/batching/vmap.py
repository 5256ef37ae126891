"""vmap: a function of one example made a function of many (jax.vmap, torch.func.vmap).

    vmap(f, in_axes=0, out_axes=0, randomness="error")(*args)

in_axes says where each argument holds its examples: an int (that axis of every array leaf),
None (not mapped: every example sees the same value), or a tuple with one entry per
positional argument, each an int, None or a tree of them in the argument's structure (a
prefix of it: an int or None there applies to the whole subtree). Array leaves (float, int
and bool) are mapped; ints, floats, strings, None and functions pass unchanged. out_axes is
the same for the output's tree: where each output leaf gets its examples (an output that
is the same for every example is broadcast there). randomness says what a random op
(ag.dropout with a generator) draws under it: "error" (it raises), "different" (each example
the draws of a Python loop over the examples: the same bits) or "same" (one draw for all);
core/randomness.py.

The function runs once, on `Batched` values (core/batched.py): each op it calls computes all
the examples at once by its batching rule (autograd_lite/batching/rules_*.py). It composes
both ways with gradient, grad, vjp, jvp, jacobian, hessian, checkpoint and itself.
"""
import functools
import numbers

import numpy as np

from ..core.batched import Batched, MappedCall, new_level, running, strip_level
from ..core.tree import children, rebuild
from ..core.weak import strong
from .axes import broadcast_axis, is_array, moveaxis


def _check_axes_spec(name, spec):
    if spec is None or isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        return
    kids = children(spec)
    if kids is None:
        raise TypeError(f"vmap: {name} must be an int, None, or a tuple or tree of them, got "
                        f"{type(spec).__name__}")
    for kid in kids:
        _check_axes_spec(name, kid)


def _paired(name, spec, tree, path, out):
    """Append (leaf, axis, path) for every leaf of `tree`, axis from the prefix tree `spec`."""
    if spec is None or isinstance(spec, numbers.Integral):
        stack = [(tree, path)]
        while stack:
            node, where = stack.pop()
            kids = children(node)
            if kids is None:
                out.append((node, spec, where))
            else:
                stack.extend(reversed([(k, f"{where}[{i}]") for i, k in enumerate(kids)]))
        return
    spec_kids, tree_kids = children(spec), children(tree)
    if tree_kids is None or type(spec) is not type(tree) or len(spec_kids) != len(tree_kids):
        raise ValueError(f"vmap: {name} at {path or 'the top'} is a {type(spec).__name__} of "
                         f"{len(spec_kids)}, but the value there is "
                         f"{type(tree).__name__ if tree_kids is None else f'a {type(tree).__name__} of {len(tree_kids)}'}: "
                         "give an int or None there, or a tree of the value's structure")
    for i, (s, t) in enumerate(zip(spec_kids, tree_kids)):
        _paired(name, s, t, f"{path}[{i}]", out)


def _rebuilt(tree, leaves):
    kids = children(tree)
    if kids is None:
        return next(leaves)
    return rebuild(tree, [_rebuilt(k, leaves) for k in kids])


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
    ndim = np.ndim(value) if bdim is None else value.ndim
    ndim_out = ndim + (1 if bdim is None else 0)
    if not -ndim_out <= axis < ndim_out:
        raise ValueError(f"vmap: out_axes {axis} for {path} is out of range for "
                         f"{ndim_out} dimensions")
    if bdim is None:
        value = broadcast_axis(value, axis, length)
    else:
        value = moveaxis(value, bdim, axis % ndim_out)
    return strong(value)


RANDOMNESS = ("error", "different", "same")


def vmap(f, in_axes=0, out_axes=0, randomness="error"):
    """The function of many examples that runs f once for all of them (module docstring)."""
    if not callable(f):
        raise TypeError(f"vmap: the first argument must be the function to map, got "
                        f"{type(f).__name__}")
    _check_axes_spec("in_axes", in_axes)
    _check_axes_spec("out_axes", out_axes)
    if randomness not in RANDOMNESS:
        raise ValueError(f"vmap: randomness must be 'error', 'different' or 'same', got "
                         f"{randomness!r}")

    @functools.wraps(f)
    def vmapped(*args):
        spec = in_axes
        if isinstance(spec, list):
            spec = tuple(spec)
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(f"vmap: in_axes has {len(spec)} entries for {len(args)} arguments")
        pairs = []
        _paired("in_axes", spec, args, "args", pairs)
        length = _mapped_length(pairs)
        level = new_level()
        leaves = [Batched(leaf, level, axis % leaf.ndim)
                  if axis is not None and is_array(leaf) else leaf
                  for leaf, axis, _ in pairs]
        call = MappedCall(level, length, randomness)
        with running(call):
            out = f(*_rebuilt(args, iter(leaves)))
            if call.draws is not None and call.draws.needs_replay():
                call.draws.rewind()  # random ops at several places: the loop's draws need
                out = f(*_rebuilt(args, iter(leaves)))  # each example's count (randomness.py)
        out_pairs = []
        _paired("out_axes", out_axes, out, "out", out_pairs)
        return _rebuilt(out, iter(_unmapped_output(leaf, level, axis, length, path)
                                  for leaf, axis, path in out_pairs))
    return vmapped
