"""Pytrees: nested NamedTuples, tuples, lists and dicts with arrays (or anything else) as leaves.

Parameters, gradients and optimizer states are all pytrees of one shape, so an
optimizer is a `tree_map` and a gradient comes back in the structure of its
argument. Containers are rebuilt with their own types (a NamedTuple stays that
NamedTuple); dicts keep their key order.

The leaf policy lives here too, once for the whole library: `is_differentiable`
says which leaves are parameters. `gradient` boxes exactly those, optimizers move
them, `check_gradients` perturbs them and `models.summary` counts them; every other
leaf (an int `n_heads`, a `Hyper` dropout rate, an integer token array, None, a
function) is static and passes through.
"""
import numbers

import numpy as np

from .tracer import Box


class Hyper(float):
    """A float setting kept in a parameter tree (a dropout rate, say): a static leaf.

    It behaves as a float everywhere, but gradients, optimizers, gradient checks and
    parameter counts pass it by, as they do ints and strings. ag.save/ag.load keep it.
    """

    def __repr__(self):
        return f"Hyper({float(self)!r})"


def is_differentiable(leaf):
    """Whether a leaf is a parameter: it gets a gradient, and optimizers move it.

    Differentiated: floating numpy arrays and numpy float scalars, exact Python floats,
    and values already traced (by an enclosing `gradient`). Static: `Hyper` (a float
    subclass, hence "exact"), ints, bools, strings, None, functions, integer and bool arrays.
    """
    t = type(leaf)
    if t is float or t is Box:
        return True
    if isinstance(leaf, np.ndarray):
        return leaf.dtype.kind == "f"
    return isinstance(leaf, np.floating)


_PYTHON_NUMBERS = (int, float, bool, complex)


def is_python_number(x):
    """A Python scalar (int, float, bool, complex, a Fraction; a `Hyper` too), as an op's
    operand: a constant, never traced, with no shape or dtype of its own."""
    t = type(x)
    if t is np.ndarray or t is Box:
        return False
    return t in _PYTHON_NUMBERS or (not hasattr(x, "shape") and isinstance(x, numbers.Number))


def is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def children(tree):
    """The child subtrees of a container, or None for a leaf."""
    if isinstance(tree, (tuple, list)):
        return list(tree)
    if isinstance(tree, dict):
        return list(tree.values())
    return None


def rebuild(like, new_children):
    """A container of the type (and fields or keys) of `like` holding `new_children`."""
    if is_namedtuple(like):
        return type(like)(*new_children)
    if isinstance(like, dict):
        return type(like)(zip(like.keys(), new_children))
    return type(like)(new_children)


def _child_names(tree):
    """How each child is addressed in a path: '.field', '[i]' or "['key']"."""
    if is_namedtuple(tree):
        return ["." + f for f in tree._fields]
    if isinstance(tree, dict):
        return [f"[{k!r}]" for k in tree.keys()]
    return [f"[{i}]" for i in range(len(tree))]


def _same_container(tree, other):
    return (type(other) is type(tree) and len(other) == len(tree)
            and (not isinstance(tree, dict) or list(other.keys()) == list(tree.keys())))


class _ContainersDiffer(Exception):
    """Raised inside _map; tree_map turns it into a ValueError naming the path."""


def _map(f, tree, others):
    kids = children(tree)
    if kids is None:
        return f(tree, *others)
    if not others:
        return rebuild(tree, [_map(f, kid, ()) for kid in kids])
    for other in others:
        if not _same_container(tree, other):
            raise _ContainersDiffer
    return rebuild(tree, [_map(f, kid, rest)
                          for kid, *rest in zip(kids, *(children(o) for o in others))])


def _first_difference(tree, others, path=""):
    """'where: what' for the first container of `tree` that an other tree does not match."""
    kids = children(tree)
    if kids is None:
        return None
    for other in others:
        if not _same_container(tree, other):
            size = f" of {len(other)}" if hasattr(other, "__len__") else ""
            return (f"'{path.lstrip('.') or '(root)'}': {type(tree).__name__} of {len(tree)} "
                    f"vs {type(other).__name__}{size}")
    other_kids = [children(o) for o in others]
    for i, (name, kid) in enumerate(zip(_child_names(tree), kids)):
        found = _first_difference(kid, [ok[i] for ok in other_kids], path + name)
        if found:
            return found
    return None


def tree_map(f, tree, *others):
    """f applied to every leaf of `tree` (with the matching leaves of `others`), same structure.
    Trees that differ raise a ValueError naming the first path where they do."""
    try:
        return _map(f, tree, others)
    except _ContainersDiffer:
        raise ValueError(f"tree_map: trees differ at {_first_difference(tree, others)}") from None


def tree_leaves(tree):
    """The leaves in order (depth first, fields in declaration order)."""
    out = []
    stack = [tree]
    while stack:
        node = stack.pop()
        kids = children(node)
        if kids is None:
            out.append(node)
        else:
            stack.extend(reversed(kids))
    return out


def tree_paths(tree, root=""):
    """A path string for each leaf, in the order of `tree_leaves`: 'encoder[0].attn.wq'."""
    out = []
    stack = [(root, tree)]
    while stack:
        path, node = stack.pop()
        kids = children(node)
        if kids is None:
            out.append(path.lstrip(".") if not root else path)
        else:
            stack.extend(reversed([(path + name, kid) for name, kid in zip(_child_names(node), kids)]))
    return out


def tree_unflatten(like, leaves):
    """The structure of `like` with its leaves replaced, in order, by `leaves`."""
    it = iter(leaves)

    def next_leaf(_):
        leaf = next(it, it)
        if leaf is it:
            raise ValueError("tree_unflatten: fewer leaves than the structure holds")
        return leaf
    result = tree_map(next_leaf, like)
    if next(it, it) is not it:
        raise ValueError("tree_unflatten: more leaves than the structure holds")
    return result
