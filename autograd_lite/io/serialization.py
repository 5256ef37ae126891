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

Containers nest at most MAX_DEPTH (100) deep; a tuple or list subclass that is not a
NamedTuple is refused (it would load as a plain one). save writes atomically (atomic.py);
`load(path, like=params)` gives back the functions and exact types of `like` (see load).
"""
import collections
import json
import numbers
import os

import numpy as np

from .atomic import write_atomically
from .matching import StoredFunction, function_name, matched, shown_path
from .npz import MalformedFile, NpzArchive
from ..core.placement import device_of
from ..core.tree import Hyper, is_namedtuple

_STRUCTURE_KEY = "__structure__"
MAX_DEPTH = 100  # containers nested in containers: save refuses deeper trees, load deeper files


def _describe_container(tree, arrays, path, depth):
    """The entry of a NamedTuple, tuple, list or dict; None for anything else."""
    if isinstance(tree, (tuple, list, dict)) and depth > MAX_DEPTH:
        raise ValueError(f"save: the tree is nested deeper than {MAX_DEPTH} containers, at "
                         f"'{shown_path(path)}'")
    if is_namedtuple(tree):
        return {"kind": "namedtuple", "name": type(tree).__name__, "fields": list(tree._fields),
                "children": [_describe(c, arrays, f"{path}.{f}", depth + 1)
                             for f, c in zip(tree._fields, tree)]}
    if type(tree) in (tuple, list):
        return {"kind": type(tree).__name__,
                "children": [_describe(c, arrays, f"{path}[{i}]", depth + 1)
                             for i, c in enumerate(tree)]}
    if isinstance(tree, (tuple, list)):
        base = "tuple" if isinstance(tree, tuple) else "list"
        raise TypeError(f"save: cannot store the {type(tree).__name__} at "
                        f"'{shown_path(path)}': a {base} subclass that is not a NamedTuple "
                        f"would load as a plain {base} (make it a NamedTuple, or store {base}(x))")
    if isinstance(tree, dict):
        for k in tree:
            if not isinstance(k, str):
                raise TypeError(f"save: dict keys must be strings; the dict at "
                                f"'{shown_path(path)}' has the {type(k).__name__} key {k!r}")
        return {"kind": "dict", "keys": list(tree),
                "children": [_describe(c, arrays, f"{path}[{k!r}]", depth + 1)
                             for k, c in tree.items()]}
    return None


def _describe(tree, arrays, path, depth=1):
    """The JSON-able entry of `tree`, at the depth-th level of containers; array leaves go
    into `arrays` under 'a<i>'."""
    container = _describe_container(tree, arrays, path, depth)
    if container is not None:
        return container
    on_device = device_of(tree)
    if on_device is not None:  # a device's array (CuPy's): the file holds its host copy
        tree = on_device.to_host(tree)
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
        return {"kind": "function", "name": function_name(tree)}
    raise TypeError(f"save: cannot store the {type(tree).__name__} at '{shown_path(path)}'")


def save(path, tree):
    """Write `tree` to `path` (.npz) atomically."""
    arrays = {}
    structure = _describe(tree, arrays, "")
    arrays[_STRUCTURE_KEY] = np.array(json.dumps(structure))
    write_atomically(path, lambda fh: np.savez(fh, **arrays))


# what a field of a structure entry must hold: (its test, what the error says is expected)
_STRING = (lambda x: isinstance(x, str), "a string")
_STRINGS = (lambda x: isinstance(x, list) and all(isinstance(s, str) for s in x),
            "a list of strings")
_ENTRIES = (lambda x: isinstance(x, list), "a list of entries")
_NUMBER = (lambda x: type(x) in (int, float), "a number")
_PLAIN = (lambda x: x is None or type(x) in (bool, int, float, str),
          "None, a bool, a number or a string")


def _namedtuple(entry, children):
    # rename: fields like '_1' that namedtuple(..., rename=True) made
    try:
        cls = collections.namedtuple(entry["name"], entry["fields"], rename=True)
    except ValueError as error:
        raise MalformedFile(f"a namedtuple entry that Python refuses ({error})") from None
    return cls(*children)


def _stored_array(archive, key, zero_dimensional):
    array = archive.array(key)
    if zero_dimensional and array.ndim:
        raise MalformedFile(f"the scalar entry {key!r} holds an array of shape {array.shape}")
    return array[()] if zero_dimensional else array


# kind: (its other fields and what they hold, what it loads as); the module docstring's table.
# A container is built from its children, already loaded; a leaf from the archive.
_KINDS = {
    "namedtuple": ({"name": _STRING, "fields": _STRINGS, "children": _ENTRIES}, _namedtuple),
    "tuple": ({"children": _ENTRIES}, lambda entry, children: tuple(children)),
    "list": ({"children": _ENTRIES}, lambda entry, children: children),
    "dict": ({"keys": _STRINGS, "children": _ENTRIES},
             lambda entry, children: dict(zip(entry["keys"], children))),
    "array": ({"entry": _STRING},
              lambda entry, archive: _stored_array(archive, entry["entry"], False)),
    "scalar": ({"entry": _STRING},
               lambda entry, archive: _stored_array(archive, entry["entry"], True)),
    "hyper": ({"value": _NUMBER}, lambda entry, archive: Hyper(entry["value"])),
    "value": ({"value": _PLAIN}, lambda entry, archive: entry["value"]),
    "function": ({"name": _STRING}, lambda entry, archive: StoredFunction(entry["name"])),
}


def _malformed(path, problem):
    return MalformedFile(f"the structure at '{shown_path(path)}': {problem}")


def _kind(entry, path):
    """The kind of a structure entry, checked: its fields and what they hold."""
    if not isinstance(entry, dict) or "kind" not in entry:
        raise _malformed(path, f"an entry with no kind: {json.dumps(entry)[:80]} (a file "
                               "written by autograd_lite before entries had kinds?)")
    kind = entry["kind"]
    if not isinstance(kind, str) or kind not in _KINDS:
        raise _malformed(path, f"unknown kind of entry {kind!r}")
    fields = _KINDS[kind][0]
    if set(entry) != set(fields) | {"kind"}:
        raise _malformed(path, f"an entry of kind {kind!r} has the fields "
                               f"{sorted(set(entry) - {'kind'})}, expected {sorted(fields)}")
    for name, (valid, expected) in fields.items():
        if not valid(entry[name]):
            raise _malformed(path, f"the {name!r} of an entry of kind {kind!r} is "
                                   f"{json.dumps(entry[name])[:80]}, expected {expected}")
    return kind


def _child_paths(entry, path):
    """The tree path of each child of a container entry; its names and children must pair up."""
    n_children = len(entry["children"])
    if "fields" in entry or "keys" in entry:
        what = "fields" if "fields" in entry else "keys"
        names = entry[what]
        if len(names) != n_children:
            raise _malformed(path, f"{len(names)} {what} but {n_children} children")
        if what == "keys" and len(set(names)) != len(names):
            raise _malformed(path, f"a dict with a repeated key, among {names[:10]}")
        return [f"{path}.{n}" if what == "fields" else f"{path}[{n!r}]" for n in names]
    return [f"{path}[{i}]" for i in range(n_children)]


def _rebuild(entry, archive, path="", depth=1):
    """The tree an entry stands for, by its kind (see the table in the module docstring)."""
    kind = _kind(entry, path)
    build = _KINDS[kind][1]
    if "children" in entry:
        if depth > MAX_DEPTH:
            raise _malformed(path, f"containers nested deeper than {MAX_DEPTH} (save writes "
                                   "no deeper)")
        source = [_rebuild(child, archive, child_path, depth + 1) for child, child_path
                  in zip(entry["children"], _child_paths(entry, path))]
    else:
        source = archive
    try:
        return build(entry, source)
    except MalformedFile as error:
        raise _malformed(path, error) from None


def _read_structure(archive):
    """The tree the archive's '__structure__' entry describes."""
    if _STRUCTURE_KEY not in archive:
        raise MalformedFile(f"it has no {_STRUCTURE_KEY!r} entry: it was not written by ag.save")
    text = archive.array(_STRUCTURE_KEY)
    if text.dtype.kind != "U" or text.ndim:
        raise MalformedFile(f"the {_STRUCTURE_KEY!r} entry is a {text.shape} {text.dtype} "
                            "array, not the JSON text save writes")
    try:
        structure = json.loads(str(text))
    except json.JSONDecodeError as error:
        raise MalformedFile(f"the {_STRUCTURE_KEY!r} entry is not valid JSON ({error})") from None
    except RecursionError:
        raise MalformedFile(f"the {_STRUCTURE_KEY!r} entry is nested too deeply to read (save "
                            f"writes at most {MAX_DEPTH} levels of containers)") from None
    return _rebuild(structure, archive)


def load(path, like=None):
    """Read a tree written by `save`; every refusal is a MalformedFile (a ValueError) naming
    the file and the path in the tree.

    With `like`, return the tree in like's exact types, after checking that every path
    agrees and, leaf by leaf, what `like` holds:
      an array or numpy scalar: an array (or scalar) of the same shape and dtype; the
          values are the file's;
      a Python float (a parameter): a float; the value is the file's;
      a setting (an int, bool, str, None or Hyper, such as n_heads or norm): the same type
          and the same value, since weights saved for n_heads=4 are wrong for n_heads=8;
      a function: a stored function, which `like` gives back (stored by name only, the
          name is not compared: a lambda or a renamed function still loads);
      a type (str, int, np.ndarray): any value of exactly that type, as the file holds it
          (for a leaf whose value `like` cannot know, e.g. a step count as a Python int).

    Memory: what load allocates is at most about ten times the file's size, whatever the
    file claims: each array entry is read once, into exactly the bytes its member holds
    (npz.py); the structure's Python objects take at most about eight times its text (a
    list of empty objects, the worst case measured). An entry compressed with deflate
    (np.savez_compressed; save never compresses) may hold 1032 times its compressed bytes.
    """
    path = os.fspath(path)
    try:
        with NpzArchive(path) as archive:
            tree = _read_structure(archive)
        return tree if like is None else matched(like, tree)
    except MalformedFile as error:
        raise MalformedFile(f"load: {path}: {error}") from None
