"""Pytrees: nested NamedTuples, tuples, lists and dicts with arrays (or anything else) as leaves.

Parameters, gradients and optimizer states are all pytrees of one shape, so an
optimizer is a `tree_map` and a gradient comes back in the structure of its
argument. Containers are rebuilt with their own types (a NamedTuple stays that
NamedTuple); dicts keep their key order.

The leaf policy lives here too, once for the whole library: `is_differentiable`
says which leaves are parameters. `gradient` boxes exactly those, optimizers move
them, `check_gradients` perturbs them and `models.summary` counts them; every other
leaf (an int `n_heads`, a `Hyper` dropout rate, an integer token array, None, a
function) is static and passes through. Complex numbers are out of the library's scope
(its ops and their derivatives are real): an argument to differentiate that holds one is
refused (`check_no_complex`), rather than given a gradient of None as if it were static.
"""
import collections
import numbers

import numpy as np

from .devices import is_device_array
from .batched import Batched
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

    Differentiated: floating numpy and device (CuPy) arrays and numpy float scalars, exact
    Python floats, values already traced (by an enclosing `gradient`), and batched float
    values (vmap). Static: `Hyper` (a float
    subclass, hence "exact"), ints, bools, strings, None, functions, integer and bool arrays.
    """
    t = type(leaf)
    if t is float or t is Box:
        return True
    if t is Batched:  # under vmap: as its examples are
        return leaf.dtype.kind == "f"
    if isinstance(leaf, np.ndarray) or is_device_array(leaf):
        return leaf.dtype.kind == "f"
    return isinstance(leaf, np.floating)


def is_complex(leaf):
    """Whether a leaf is a complex number, or an array or value of a complex dtype."""
    if type(leaf) is complex:
        return True
    dtype = getattr(leaf, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind == "c"


def check_no_complex(caller, tree, name):
    """Refuse (TypeError) a tree to differentiate that holds a complex leaf, naming its path
    under `name` (the argument's name) and its dtype."""
    for path, leaf in zip(tree_paths(tree), tree_leaves(tree)):
        if is_complex(leaf):
            where = name + ("." + path if path and not path.startswith("[") else path)
            dtype = "complex" if type(leaf) is complex else leaf.dtype
            raise TypeError(f"{caller}: {where} is {dtype}: complex values are not "
                            f"differentiated here (the ops and their derivatives are real); "
                            f"pass the real and imaginary parts as two float arrays")


_PYTHON_NUMBERS = (int, float, bool, complex)


def is_python_number(x):
    """A Python scalar (int, float, bool, complex, a Fraction; a `Hyper` too), as an op's
    operand: a constant, never traced, with no shape or dtype of its own."""
    t = type(x)
    if t is np.ndarray or t is Box or t is Batched:
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
    if isinstance(like, collections.defaultdict):  # its first argument is the default factory
        return type(like)(like.default_factory, zip(like.keys(), new_children))
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
    """(k, path, a, b) for the first container `a` of `tree` that `b`, its counterpart in
    others[k], does not match; None if every container matches."""
    kids = children(tree)
    if kids is None:
        return None
    for k, other in enumerate(others):
        if not _same_container(tree, other):
            return k, path.lstrip(".") or "(root)", tree, other
    other_kids = [children(o) for o in others]
    for i, (name, kid) in enumerate(zip(_child_names(tree), kids)):
        found = _first_difference(kid, [ok[i] for ok in other_kids], path + name)
        if found:
            return found
    return None


def _describe(x):
    if isinstance(x, dict):
        return f"{type(x).__name__} with keys {list(x.keys())}"
    if isinstance(x, (tuple, list)):
        return f"{type(x).__name__} of {len(x)}"
    if isinstance(x, np.ndarray) or is_device_array(x):
        return f"{type(x).__name__} {x.shape}"
    return type(x).__name__


def _difference(a, b, a_name, b_name):
    """What differs between the containers a and b, in words."""
    if isinstance(a, dict) and type(a) is type(b):
        missing = [k for k in a if k not in b]
        extra = [k for k in b if k not in a]
        if not missing and not extra:
            return f"the same keys in another order, {list(a.keys())} and {list(b.keys())}"
        parts = []
        if missing:
            parts.append(f"{b_name} lacks the keys {missing}")
        if extra:
            parts.append(f"{b_name} has keys {a_name} has not: {extra}")
        return " and ".join(parts)
    return f"{a_name} is {_describe(a)}, {b_name} is {_describe(b)}"


def _likely_cause(a, b):
    """A hint for the usual ways two trees come to differ, or ''."""
    for whole, part in ((b, a), (a, b)):
        if type(whole) is tuple and type(part) is not tuple:
            matching = [i for i, item in enumerate(whole) if type(item) is type(part)]
            if matching:
                i = matching[0]
                return (f" ag.gradient returns a tuple with one gradient tree per argument: "
                        f"pass ag.gradient(loss, p, ...)[{i}], or ask for argnums={i}.")
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
        return " The items match in number: the container types must match too."
    return ""


def tree_map(f, tree, *others, caller="tree_map", names=None):
    """f applied to every leaf of `tree` (with the matching leaves of `others`), same structure.

    Trees that differ raise a ValueError naming the first path where they do, the two
    containers there (or the keys a dict lacks and has over the other) and a likely cause.
    caller, names: how the error names the call and each tree (a caller such as an
    optimizer passes `caller="adam.update", names=("params", "grads")`)."""
    try:
        return _map(f, tree, others)
    except _ContainersDiffer:
        names = names or ("tree",) + tuple(f"others[{k}]" for k in range(len(others)))
        k, path, a, b = _first_difference(tree, others)
        raise ValueError(f"{caller}: {names[k + 1]} does not have the structure of {names[0]}: "
                         f"at '{path}', {_difference(a, b, names[0], names[k + 1])}."
                         f"{_likely_cause(a, b)}") from None


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
