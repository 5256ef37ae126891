"""Shared by the tests of ag.save / ag.load: a small model tree holding every kind of leaf,
a comparison of trees, and files that ag.save did not write, built by hand: an .npz in
save's format with a chosen structure, .npy bytes with a chosen header, and zip archives
with chosen members."""
import io
import json
import zipfile
from typing import Callable, NamedTuple

import numpy as np

import autograd_lite as ag


class Attention(NamedTuple):
    wq: np.ndarray
    bias: np.ndarray


class Layer(NamedTuple):
    attn: Attention
    ids: np.ndarray
    scale: np.floating
    n_heads: int
    dropout: float
    name: str
    act: Callable
    nothing: object


class Model(NamedTuple):
    layers: list
    extras: dict


def make_model(rng):
    def layer(i):
        return Layer(Attention(rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4)),
                     np.arange(5, dtype=np.int64) * i, np.float32(0.5 + i), 2 + i, 0.1 * i,
                     f"layer{i}", np.tanh, None)
    return Model([layer(0), layer(1)], {"steps": (7, 2.5, True), "table": np.eye(2, dtype=np.int32)})


def assert_same_tree(a, b, exact_types=True):
    assert ag.tree_paths(a) == ag.tree_paths(b)
    for path, x, y in zip(ag.tree_paths(a), ag.tree_leaves(a), ag.tree_leaves(b)):
        if exact_types:
            assert type(x) is type(y), path
        if isinstance(y, (np.ndarray, np.generic)):
            assert x.dtype == y.dtype and x.shape == y.shape, path
            np.testing.assert_array_equal(x, y, err_msg=path)
        elif callable(y):
            assert x is y, path
        else:
            assert x == y, path


def write_crafted(path, structure, **entries):
    """An .npz in save's format: the structure (an object, or JSON text taken as it is) under
    '__structure__', arrays beside it."""
    text = structure if isinstance(structure, str) else json.dumps(structure)
    np.savez(path, __structure__=np.array(text), **entries)


def array_entry(key):
    return {"kind": "array", "entry": key}


def dict_entry(**children):
    return {"kind": "dict", "keys": list(children), "children": list(children.values())}


def npy_bytes(array=None, header=None, data=b""):
    """The bytes of an .npy file: np.save's for `array`, or a version 1.0 header from the dict
    `header` (descr, fortran_order, shape) followed by `data`."""
    fh = io.BytesIO()
    if array is not None:
        np.save(fh, array)
    else:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(data)
    return fh.getvalue()


def write_members(path, structure, members):
    """A zip archive holding '__structure__.npy' (the structure as save writes it) and each
    of `members` ({name: bytes}) under its name."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("__structure__.npy", npy_bytes(np.array(json.dumps(structure))))
        for name, data in members.items():
            archive.writestr(name, data)
