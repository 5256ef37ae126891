"""save / load pytrees of arrays as .npz files, without pickle.

The file holds one .npy entry per array leaf and a JSON description of the
structure (container types, NamedTuple names and fields, dict keys, and the
Python scalars, strings, None and `Hyper` settings among the leaves). Functions among the leaves
(an activation, say) are stored by name only: `load(path, like=params)` takes
them, and the container types, from `like`. Writing goes to a temporary file that
replaces the target only when complete, so a crash never leaves a half-written file.
"""
import collections
import json
import numbers
import os
import zipfile

import numpy as np

from .tree import Hyper, is_namedtuple, tree_leaves, tree_paths, tree_unflatten

_STRUCTURE_KEY = "__structure__"


def _describe(tree, arrays, path):
    """JSON-able description of `tree`; array leaves go into `arrays` under 'a<i>'."""
    if is_namedtuple(tree):
        return {"namedtuple": type(tree).__name__, "fields": list(tree._fields),
                "children": [_describe(c, arrays, f"{path}.{f}") for f, c in zip(tree._fields, tree)]}
    if isinstance(tree, (tuple, list)):
        return {type(tree).__name__ if type(tree) in (tuple, list) else "list":
                [_describe(c, arrays, f"{path}[{i}]") for i, c in enumerate(tree)]}
    if isinstance(tree, dict):
        for k in tree:
            if not isinstance(k, str):
                raise TypeError(f"save: dict keys must be strings; the dict at "
                                f"'{path or '(root)'}' has the {type(k).__name__} key {k!r}")
        return {"dict": [[k, _describe(c, arrays, f"{path}[{k!r}]")] for k, c in tree.items()]}
    if isinstance(tree, (np.ndarray, np.generic)):  # np.bool_ too: it loads back as np.bool_
        if tree.dtype.kind not in "biufc":
            raise TypeError(f"save: the array at '{path}' has dtype {tree.dtype}; "
                            "only numeric arrays are saved")
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(tree)
        return {"array" if isinstance(tree, np.ndarray) else "scalar": key}
    if isinstance(tree, Hyper):
        return {"hyper": float(tree)}
    if tree is None or isinstance(tree, (bool, str, numbers.Integral, float, np.bool_)):
        return {"value": tree.item() if isinstance(tree, np.bool_) else tree}
    if callable(tree):
        return {"function": getattr(tree, "__qualname__", repr(tree))}
    raise TypeError(f"save: cannot store the {type(tree).__name__} at '{path or '(root)'}'")


def save(path, tree):
    """Write `tree` to `path` (.npz) atomically."""
    arrays = {}
    structure = _describe(tree, arrays, "")
    arrays[_STRUCTURE_KEY] = np.array(json.dumps(structure))
    path = os.fspath(path)
    temporary = f"{path}.partial-{os.getpid()}"
    try:
        with open(temporary, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


class StoredFunction(str):
    """A function's name as stored in a file: `like` gives the function back."""

    def __repr__(self):
        return f"<function {str(self)}>"


class MalformedFile(ValueError):
    """A file that `save` did not write (or that was changed since)."""


def _stored_array(arrays, key, zero_dimensional):
    if key not in arrays:
        raise MalformedFile(f"the structure names the array entry {key!r}, which the file lacks")
    array = arrays[key]
    if zero_dimensional and array.ndim:
        raise MalformedFile(f"the scalar entry {key!r} holds an array of shape {array.shape}")
    return array[()] if zero_dimensional else array


_NAMEDTUPLE_KEYS = {"namedtuple", "fields", "children"}


def _rebuild(spec, arrays):
    """The tree a description stands for; NamedTuples come back as namedtuple types of the same name and fields."""
    if not isinstance(spec, dict) or (len(spec) != 1 and set(spec) != _NAMEDTUPLE_KEYS):
        raise MalformedFile(f"an entry of the structure is {json.dumps(spec)[:80]}")
    if "namedtuple" in spec:  # rename: fields like '_1' that namedtuple(..., rename=True) made
        cls = collections.namedtuple(spec["namedtuple"], spec["fields"], rename=True)
        return cls(*(_rebuild(c, arrays) for c in spec["children"]))
    if "tuple" in spec:
        return tuple(_rebuild(c, arrays) for c in spec["tuple"])
    if "list" in spec:
        return [_rebuild(c, arrays) for c in spec["list"]]
    if "dict" in spec:
        return {k: _rebuild(c, arrays) for k, c in spec["dict"]}
    if "array" in spec:
        return _stored_array(arrays, spec["array"], zero_dimensional=False)
    if "scalar" in spec:
        return _stored_array(arrays, spec["scalar"], zero_dimensional=True)
    if "hyper" in spec:
        return Hyper(spec["hyper"])
    if "function" in spec:
        return StoredFunction(spec["function"])
    if "value" in spec:
        return spec["value"]
    raise MalformedFile(f"unknown kind of entry {sorted(spec)} in the structure")


def _read_structure(path, arrays):
    if _STRUCTURE_KEY not in arrays:
        raise MalformedFile(f"load: {path} has no {_STRUCTURE_KEY!r} entry: it was not "
                            "written by ag.save")
    try:
        structure = json.loads(str(arrays.pop(_STRUCTURE_KEY)))
    except json.JSONDecodeError as error:
        raise MalformedFile(f"load: {path}: the {_STRUCTURE_KEY!r} entry is not valid JSON "
                            f"({error})") from None
    try:
        return _rebuild(structure, arrays)
    except (MalformedFile, KeyError, TypeError, ValueError) as error:
        reason = error if isinstance(error, MalformedFile) else f"{type(error).__name__}: {error}"
        raise MalformedFile(f"load: {path}: malformed structure: {reason}") from None


def _check_leaf(path, wanted, stored):
    if isinstance(wanted, (np.ndarray, np.generic)):
        if not isinstance(stored, (np.ndarray, np.generic)) or (
                stored.shape, stored.dtype) != (wanted.shape, wanted.dtype):
            got = (f"{stored.shape} {stored.dtype}" if hasattr(stored, "dtype")
                   else repr(stored) if isinstance(stored, StoredFunction)
                   else type(stored).__name__)
            raise ValueError(f"load: '{path}' is {got} in the file, "
                             f"but {wanted.shape} {wanted.dtype} in `like`")
        return stored
    if callable(wanted):
        return wanted
    return stored


_UNREADABLE = (ValueError, zipfile.BadZipFile, EOFError)  # what np.load raises on odd files


def _read_arrays(path):
    """Every entry of the .npz file at `path`, read without pickle."""
    try:
        data = np.load(path, allow_pickle=False)
    except _UNREADABLE as error:
        raise MalformedFile(f"load: {path} is not an .npz file written by ag.save "
                            f"({error})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise MalformedFile(f"load: {path} holds a single array, not an .npz file written by "
                            "ag.save")
    with data:
        try:
            return {k: data[k] for k in data.files}
        except _UNREADABLE as error:  # e.g. an object array, which would need pickle
            raise MalformedFile(f"load: {path}: an entry cannot be read ({error})") from None


def load(path, like=None):
    """Read a tree written by `save`. With `like`, return it in like's exact types,
    checking that every path, shape and dtype agrees. A file that `save` did not write,
    or a mismatch with `like`, raises ValueError naming the file or the path."""
    path = os.fspath(path)
    tree = _read_structure(path, _read_arrays(path))
    if like is None:
        return tree
    stored_paths, wanted_paths = tree_paths(tree), tree_paths(like)
    if stored_paths != wanted_paths:
        stored, wanted = set(stored_paths), set(wanted_paths)
        missing = [p for p in wanted_paths if p not in stored]
        extra = [p for p in stored_paths if p not in wanted]
        raise ValueError(f"load: the file's structure differs from `like`: missing {missing[:5]}, "
                         f"unexpected {extra[:5]}")
    leaves = [_check_leaf(p, w, s) for p, w, s in zip(wanted_paths, tree_leaves(like), tree_leaves(tree))]
    return tree_unflatten(like, leaves)
