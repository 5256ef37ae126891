"""Checking a tree read from a file against `like`, the tree the caller expects: every
path, and every leaf by what `like` holds there (the rules are ag.load's docstring).
A mismatch is a MalformedFile naming the path, e.g. "'layers[0].n_heads' is int 4 in
the file, but int 8 in `like`"; `ag.load` adds the file's name.
"""
import numbers

import numpy as np

from .npz import MalformedFile
from ..core.placement import device_of
from ..core.tree import Hyper, is_differentiable, tree_leaves, tree_paths, tree_unflatten


def shown_path(path, keep=60):
    """A tree path as messages show it: '(root)' for the root; a path 100 levels deep is
    cut in the middle."""
    path = path or "(root)"
    return path if len(path) <= 2 * keep else f"{path[:keep]}...{path[-keep:]}"


def function_name(f):
    """The name a function is stored and shown by: its qualified name, else its name (numpy
    2.1's ufuncs have only __name__: np.tanh is 'tanh' on every numpy), else its repr."""
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


class StoredFunction(str):
    """A function's name as stored in a file: `like` gives the function back."""

    def __repr__(self):
        return f"<function {str(self)}>"


def _loaded_type(value):
    """The type a Python leaf comes back as from a file (the JSON type of a "value" entry)."""
    for python_type, loaded in ((Hyper, Hyper), (bool, bool), (numbers.Integral, int),
                                (float, float), (str, str)):
        if isinstance(value, python_type):
            return loaded
    return type(value)


def _shown(leaf):
    """A leaf as an error message shows it: '(2, 3) float32', 'int 4', '<function tanh>'."""
    if isinstance(leaf, np.ndarray) or device_of(leaf) is not None:
        return f"{leaf.shape} {leaf.dtype}"
    if isinstance(leaf, np.generic):
        return f"a {leaf.dtype} scalar"
    if isinstance(leaf, StoredFunction):
        return repr(leaf)
    if isinstance(leaf, type):
        return f"any {leaf.__name__}"
    if callable(leaf):
        return f"<function {function_name(leaf)}>"
    if leaf is None or isinstance(leaf, Hyper):
        return repr(leaf)
    return f"{type(leaf).__name__} {leaf!r}"


def _matched_leaf(path, wanted, stored):
    """The leaf to return where `like` holds `wanted` and the file `stored`; where `wanted`
    is a device's array (CuPy's), the file's array goes to that device."""
    on_device = device_of(wanted)
    if on_device is not None:
        same = (isinstance(stored, np.ndarray)
                and (stored.shape, stored.dtype) == (wanted.shape, wanted.dtype))
        result = on_device.to_device(stored) if same else stored
    elif isinstance(wanted, (np.ndarray, np.generic)):
        same = (isinstance(stored, (np.ndarray, np.generic))
                and isinstance(stored, np.ndarray) == isinstance(wanted, np.ndarray)
                and (stored.shape, stored.dtype) == (wanted.shape, wanted.dtype))
        result = stored
    elif isinstance(wanted, type) and not isinstance(stored, StoredFunction):
        same, result = type(stored) is wanted, stored
    elif callable(wanted) or isinstance(wanted, StoredFunction):
        same, result = isinstance(stored, StoredFunction), wanted
    elif is_differentiable(wanted):  # a Python float parameter: its value is the file's
        same, result = type(stored) is float, stored
    else:  # a setting: n_heads, norm="pre", a Hyper rate, None
        same, result = type(stored) is _loaded_type(wanted) and stored == wanted, wanted
    if not same:
        raise MalformedFile(f"'{shown_path(path)}' is {_shown(stored)} in the file, but "
                            f"{_shown(wanted)} in `like`")
    return result


def matched(like, tree):
    """`tree` (loaded) in the types of `like`, every path and leaf checked."""
    stored_paths, wanted_paths = tree_paths(tree), tree_paths(like)
    if stored_paths != wanted_paths:
        stored, wanted = set(stored_paths), set(wanted_paths)
        missing = [p for p in wanted_paths if p not in stored]
        extra = [p for p in stored_paths if p not in wanted]
        raise MalformedFile(f"the file's structure differs from `like`: missing {missing[:5]}, "
                            f"unexpected {extra[:5]}")
    return tree_unflatten(like, [_matched_leaf(p, w, s) for p, w, s
                                 in zip(wanted_paths, tree_leaves(like), tree_leaves(tree))])
