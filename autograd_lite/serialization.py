"""save / load pytrees of arrays as .npz files, without pickle.

The file holds one .npy entry per array leaf ('a0', 'a1', ...) and, under
'__structure__', a JSON description of the tree: nested entries, each an object
whose "kind" says what it stands for and which other fields it has.

    kind          fields                      stands for
    "namedtuple"  name, fields, children      a NamedTuple (loads as a namedtuple of that
                                              name and fields; `like` gives the class)
    "tuple"       children                    a tuple
    "list"        children                    a list
    "dict"        keys, children              a dict with string keys (any dict type)
    "array"       entry                       an array leaf: the .npy entry `entry`
    "scalar"      entry                       a numpy scalar: the 0-d .npy entry `entry`
    "hyper"       value                       an ag.Hyper setting
    "value"       value                       None, a bool, an int, a float or a string
    "function"    name                        a function, by qualified name only

`load(path, like=params)` gives back the functions, and the exact container types,
from `like`. A tuple or list subclass that is not a NamedTuple is refused at save
(it would come back as a plain tuple or list). Writing goes to a temporary file that
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


def _where(path):
    return path or "(root)"


def _describe_container(tree, arrays, path):
    """The entry of a NamedTuple, tuple, list or dict; None for anything else."""
    if is_namedtuple(tree):
        return {"kind": "namedtuple", "name": type(tree).__name__, "fields": list(tree._fields),
                "children": [_describe(c, arrays, f"{path}.{f}")
                             for f, c in zip(tree._fields, tree)]}
    if type(tree) in (tuple, list):
        return {"kind": type(tree).__name__,
                "children": [_describe(c, arrays, f"{path}[{i}]") for i, c in enumerate(tree)]}
    if isinstance(tree, (tuple, list)):
        base = "tuple" if isinstance(tree, tuple) else "list"
        raise TypeError(f"save: cannot store the {type(tree).__name__} at '{_where(path)}': a "
                        f"{base} subclass that is not a NamedTuple would load as a plain {base} "
                        f"(make it a NamedTuple, or store {base}(x))")
    if isinstance(tree, dict):
        for k in tree:
            if not isinstance(k, str):
                raise TypeError(f"save: dict keys must be strings; the dict at "
                                f"'{_where(path)}' has the {type(k).__name__} key {k!r}")
        return {"kind": "dict", "keys": list(tree),
                "children": [_describe(c, arrays, f"{path}[{k!r}]") for k, c in tree.items()]}
    return None


def _describe(tree, arrays, path):
    """The JSON-able entry of `tree`; array leaves go into `arrays` under 'a<i>'."""
    container = _describe_container(tree, arrays, path)
    if container is not None:
        return container
    if isinstance(tree, (np.ndarray, np.generic)):  # np.bool_ too: it loads back as np.bool_
        if tree.dtype.kind not in "biufc":
            raise TypeError(f"save: the array at '{path}' has dtype {tree.dtype}; "
                            "only numeric arrays are saved")
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(tree)
        return {"kind": "array" if isinstance(tree, np.ndarray) else "scalar", "entry": key}
    if isinstance(tree, Hyper):
        return {"kind": "hyper", "value": float(tree)}
    if tree is None or isinstance(tree, (bool, str, numbers.Integral, float)):
        return {"kind": "value", "value": tree}
    if callable(tree):
        return {"kind": "function", "name": getattr(tree, "__qualname__", repr(tree))}
    raise TypeError(f"save: cannot store the {type(tree).__name__} at '{_where(path)}'")


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


def _children(entry, arrays):
    return [_rebuild(c, arrays) for c in entry["children"]]


def _namedtuple(entry, arrays):
    # rename: fields like '_1' that namedtuple(..., rename=True) made
    cls = collections.namedtuple(entry["name"], entry["fields"], rename=True)
    return cls(*_children(entry, arrays))


# kind: (the entry's other fields, what it loads as); the module docstring's table
_KINDS = {
    "namedtuple": ({"name", "fields", "children"}, _namedtuple),
    "tuple": ({"children"}, lambda entry, arrays: tuple(_children(entry, arrays))),
    "list": ({"children"}, _children),
    "dict": ({"keys", "children"},
             lambda entry, arrays: dict(zip(entry["keys"], _children(entry, arrays), strict=True))),
    "array": ({"entry"}, lambda entry, arrays: _stored_array(arrays, entry["entry"], False)),
    "scalar": ({"entry"}, lambda entry, arrays: _stored_array(arrays, entry["entry"], True)),
    "hyper": ({"value"}, lambda entry, arrays: Hyper(entry["value"])),
    "value": ({"value"}, lambda entry, arrays: entry["value"]),
    "function": ({"name"}, lambda entry, arrays: StoredFunction(entry["name"])),
}


def _rebuild(entry, arrays):
    """The tree an entry stands for, by its kind (see the table in the module docstring)."""
    if not isinstance(entry, dict) or "kind" not in entry:
        raise MalformedFile(f"an entry of the structure has no kind: {json.dumps(entry)[:80]} "
                            "(a file written by autograd_lite before entries had kinds?)")
    kind = entry["kind"]
    if kind not in _KINDS:
        raise MalformedFile(f"unknown kind of entry {kind!r} in the structure")
    fields, build = _KINDS[kind]
    if set(entry) != fields | {"kind"}:
        raise MalformedFile(f"an entry of kind {kind!r} has the fields "
                            f"{sorted(set(entry) - {'kind'})}, expected {sorted(fields)}")
    return build(entry, arrays)


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
