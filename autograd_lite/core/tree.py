"""Pytrees: nested NamedTuples, tuples, lists and dicts with anything else as leaves.

Parameters, gradients and optimizer states are pytrees of one shape, rebuilt with their own
container types (dicts in their key order). The one leaf policy: `is_differentiable` says
which leaves are parameters (boxed by `gradient`, moved by optimizers, counted by
`models.summary`); every other leaf (an int, a `Hyper` rate, an integer array, None, a
function) is static. Complex leaves are refused rather than taken for static (the ops and
their derivatives are real).
"""
import collections
import numbers

import numpy as np

from .devices import is_device_array
from .batched import Batched
from .tracer import Box


class Hyper(float):
    """A float setting kept in a parameter tree (a dropout rate, say): a static leaf, which
    gradients, optimizers and parameter counts pass by. ag.save/ag.load keep it."""

    def __repr__(self):
        return f"Hyper({float(self)!r})"


def is_differentiable(leaf):
    """Whether a leaf is a parameter: a float array (numpy's, a device's, batched) or numpy
    float scalar, an exact Python float (not a `Hyper`), or a value already traced."""
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
    """Refuse a tree to differentiate that holds a complex leaf, naming its path and dtype."""
    for path, leaf in zip(tree_paths(tree), tree_leaves(tree)):
        if is_complex(leaf):
            where = name + ("." + path if path and not path.startswith("[") else path)
            dtype = "complex" if type(leaf) is complex else leaf.dtype
            raise TypeError(f"{caller}: {where} is {dtype}: complex values are not "
                            f"differentiated here (the ops and their derivatives are real); "
                            f"pass the real and imaginary parts as two float arrays")


_PYTHON_NUMBERS = (int, float, bool, complex)


def is_python_number(x):
    """A Python scalar (int, float, bool, complex, a Fraction, a `Hyper`): as an op's
    operand, a constant without a shape or dtype."""
    t = type(x)
    if t is np.ndarray or t is Box or t is Batched:
        return False
    return t in _PYTHON_NUMBERS or (not hasattr(x, "shape") and isinstance(x, numbers.Number))


def is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


_CONTAINERS = (tuple, list, dict)  # and their subclasses (NamedTuples): every other value a leaf


def children(tree):
    """The child subtrees of a container, or None for a leaf."""
    if not isinstance(tree, _CONTAINERS):
        return None
    return list(tree.values()) if isinstance(tree, dict) else list(tree)


# ---------------------------------------------------------------- flattening with a structure


class DictKeys(tuple):
    """A dict's keys in a structure; a defaultdict's carry its factory (equality ignores it)."""


def tree_flatten(tree):
    """(leaves, structure): the leaves depth first, and the structure `unflatten` puts them
    back into: None for a leaf, (type, a dict's keys or None, the children's structures) for
    a container. Structures compare equal exactly where tree_map may pair their leaves."""
    t = type(tree)
    if t is np.ndarray or t is Box or not isinstance(tree, _CONTAINERS):
        return [tree], None
    leaves = []
    return leaves, flatten_into(tree, leaves)


def flatten_into(container, leaves):
    """Append the leaves under `container` to `leaves` and return its structure: one call
    per container, none per leaf (a fast rule's dispatch flattens on every call)."""
    t = type(container)
    keys = None
    kids = container
    if t is not tuple and t is not list and isinstance(container, dict):
        keys = DictKeys(container)
        if isinstance(container, collections.defaultdict):
            keys.factory = container.default_factory
        kids = container.values()
    structure = []
    for kid in kids:
        k = type(kid)
        if k is np.ndarray or k is Box or not isinstance(kid, _CONTAINERS):
            leaves.append(kid)
            structure.append(None)
        else:
            structure.append(flatten_into(kid, leaves))
    return t, keys, tuple(structure)


def leaf_count(structure):
    """How many leaves a tree of `structure` holds."""
    if structure is None:
        return 1
    return sum(1 if kid is None else leaf_count(kid) for kid in structure[2])


def unflatten(structure, leaves):
    """The tree of `structure` holding `leaves` (a sequence, in tree order)."""
    if structure is None:
        return leaves[0]
    return _built(structure, iter(leaves))


def _built(structure, leaves):
    t, keys, kids = structure
    items = [next(leaves) if kid is None else _built(kid, leaves) for kid in kids]
    if t is tuple or t is list:
        return t(items)
    if keys is not None:
        if hasattr(keys, "factory"):  # a defaultdict's
            return t(keys.factory, zip(keys, items))
        return t(zip(keys, items))
    if hasattr(t, "_fields"):  # a NamedTuple
        return t(*items)
    return t(items)


def _child_names(structure):
    """How each child of a container is addressed in a path: '.field', '[i]' or "['key']"."""
    t, keys, kids = structure
    if keys is not None:
        return [f"[{k!r}]" for k in keys]
    if t is not tuple and t is not list and hasattr(t, "_fields"):
        return ["." + f for f in t._fields]
    return [f"[{i}]" for i in range(len(kids))]


def structure_paths(structure, root=""):
    """Each leaf's path, in leaf order: root + 'encoder[0].attn.wq'."""
    if structure is None:
        return [root]
    out = []
    for name, kid in zip(_child_names(structure), structure[2]):
        if kid is None:
            out.append(root + name)
        else:
            out.extend(structure_paths(kid, root + name))
    return out


class PrefixMismatch(ValueError):
    """A tree that does not match a structure: `path`, the (structure, child index) pairs
    down to where it does not; `prefix`, the tree's subtree there; `structure`, the
    structure's there (None: a leaf)."""

    def __init__(self, prefix, structure):
        super().__init__("the prefix tree does not match the structure")
        self.prefix, self.structure, self.path = prefix, structure, []

    def where(self, root):
        """The path of the mismatch, as tree_paths writes it, under `root`."""
        return root + "".join(_child_names(s)[i] for s, i in self.path)


def broadcast_prefix(prefix, structure):
    """One entry for each leaf of a tree of `structure`: the leaf of `prefix` above it, a
    prefix leaf standing for the whole subtree below it (vmap's in_axes; a rule's None
    cotangent for a subtree). Containers that differ raise PrefixMismatch."""
    out = []
    _broadcast(prefix, structure, out)
    return out


def _broadcast(prefix, structure, out):
    t = type(prefix)
    if t is np.ndarray or t is Box or not isinstance(prefix, _CONTAINERS):  # a prefix leaf
        if structure is None:
            out.append(prefix)
        else:
            out.extend([prefix] * leaf_count(structure))
        return
    if structure is None:
        raise PrefixMismatch(prefix, structure)
    kind, keys, kids = structure
    if t is not kind or len(prefix) != len(kids) or keys is not None and tuple(prefix) != keys:
        raise PrefixMismatch(prefix, structure)
    for i, (sub, kid) in enumerate(zip(prefix.values() if keys is not None else prefix, kids)):
        if kid is None and (sub is None or type(sub) is np.ndarray):
            out.append(sub)
            continue
        try:
            _broadcast(sub, kid, out)
        except PrefixMismatch as error:
            error.path.insert(0, (structure, i))
            raise


def leaves_up_to(structure, tree):
    """The subtrees of `tree` at the leaves of `structure`, a prefix of tree's structure,
    in leaf order; PrefixMismatch (`prefix`: tree's subtree) where a container differs."""
    if structure is None:
        return [tree]
    out = []
    _up_to(structure, tree, out)
    return out


def _up_to(structure, tree, out):
    kind, keys, kids = structure
    if type(tree) is not kind or len(tree) != len(kids) or \
            keys is not None and tuple(tree) != keys:
        raise PrefixMismatch(tree, structure)
    for i, (kid, sub) in enumerate(zip(kids, tree.values() if keys is not None else tree)):
        if kid is None:
            out.append(sub)
            continue
        try:
            _up_to(kid, sub, out)
        except PrefixMismatch as error:
            error.path.insert(0, (structure, i))
            raise


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
    """f applied to every leaf of `tree` (with the subtrees of `others` at its leaves), in
    tree's structure. Trees that differ raise a ValueError naming the path, the two containers
    there and a likely cause; caller and names (("params", "grads"), say) name the call and
    the trees in it."""
    leaves, structure = tree_flatten(tree)
    if not others:
        return unflatten(structure, [f(leaf) for leaf in leaves])
    columns = []
    for k, other in enumerate(others):
        try:
            columns.append(leaves_up_to(structure, other))
        except PrefixMismatch as error:
            names = names or ("tree",) + tuple(f"others[{i}]" for i in range(len(others)))
            a, b = tree, error.prefix
            for at, i in error.path:
                a = children(a)[i]
            raise ValueError(f"{caller}: {names[k + 1]} does not have the structure of "
                             f"{names[0]}: at '{error.where('').lstrip('.') or '(root)'}', "
                             f"{_difference(a, b, names[0], names[k + 1])}."
                             f"{_likely_cause(a, b)}") from None
    return unflatten(structure, [f(*row) for row in zip(leaves, *columns)])


def tree_leaves(tree):
    """The leaves in order (depth first, fields in declaration order)."""
    return tree_flatten(tree)[0]


def tree_paths(tree, root=""):
    """Each leaf's path, in the order of `tree_leaves`: 'encoder[0].attn.wq'."""
    paths = structure_paths(tree_flatten(tree)[1], root)
    return paths if root else [path.lstrip(".") for path in paths]


def tree_unflatten(like, leaves):
    """The structure of `like` with its leaves replaced, in order, by `leaves`."""
    structure = tree_flatten(like)[1]
    leaves = list(leaves)
    count = leaf_count(structure)
    if len(leaves) != count:
        more = "more" if len(leaves) > count else "fewer"
        raise ValueError(f"tree_unflatten: {more} leaves ({len(leaves)}) than the structure "
                         f"holds ({count})")
    return unflatten(structure, leaves)
