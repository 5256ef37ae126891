"""save / load: round trips, `like` restores exact types and checks every path, shape and
dtype, nothing is ever unpickled, and a failed write leaves the old file intact."""
import os
import re
from typing import Callable, NamedTuple

import numpy as np
import pytest

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


def test_round_trip_with_like_gives_exact_types(tmp_path, rng):
    model = make_model(rng)
    ag.save(tmp_path / "model.npz", model)
    loaded = ag.load(tmp_path / "model.npz", like=model)
    assert type(loaded) is Model and type(loaded.layers) is list
    assert type(loaded.layers[1]) is Layer and type(loaded.layers[1].attn) is Attention
    assert type(loaded.extras) is dict and type(loaded.extras["steps"]) is tuple
    assert_same_tree(loaded, model)
    assert loaded.layers[0].act is np.tanh


def test_round_trip_without_like(tmp_path, rng):
    model = make_model(rng)
    ag.save(str(tmp_path / "model.npz"), model)
    loaded = ag.load(str(tmp_path / "model.npz"))
    assert type(loaded).__name__ == "Model" and loaded._fields == Model._fields
    assert type(loaded.layers[0]).__name__ == "Layer" and loaded.layers[0]._fields == Layer._fields
    layer = loaded.layers[1]
    np.testing.assert_array_equal(layer.attn.wq, model.layers[1].attn.wq)
    assert layer.attn.wq.dtype == np.float32 and layer.attn.bias.dtype == np.float64
    assert layer.ids.dtype == np.int64 and loaded.extras["table"].dtype == np.int32
    assert type(layer.scale) is np.float32 and layer.scale == np.float32(1.5)
    assert type(layer.n_heads) is int and layer.n_heads == 3
    assert type(layer.dropout) is float and layer.dropout == 0.1
    assert layer.name == "layer1" and layer.nothing is None
    assert "tanh" in layer.act  # functions are stored by name; `like` gives them back
    assert loaded.extras["steps"] == (7, 2.5, True) and type(loaded.extras["steps"][2]) is bool


def test_file_without_npz_suffix_and_plain_arrays(tmp_path):
    ag.save(tmp_path / "weights", np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(ag.load(tmp_path / "weights"), np.arange(6.0).reshape(2, 3))
    assert os.listdir(tmp_path) == ["weights"]


@pytest.mark.parametrize("change, message", [
    (lambda m: m._replace(layers=[m.layers[0]._replace(ids=np.arange(6)), m.layers[1]]),
     r"layers\[0\]\.ids.*\(5,\) int64.*\(6,\) int64"),
    (lambda m: m._replace(layers=[m.layers[0], m.layers[1]._replace(
        attn=m.layers[1].attn._replace(wq=m.layers[1].attn.wq.astype(np.float64)))]),
     r"layers\[1\]\.attn\.wq.*float32.*float64"),
    (lambda m: m._replace(layers=[m.layers[0], m.layers[1]._replace(scale=np.float64(1.5))]),
     r"layers\[1\]\.scale.*float32.*float64"),
])
def test_load_refuses_a_different_shape_or_dtype_naming_the_path(change, message, tmp_path, rng):
    model = make_model(rng)
    ag.save(tmp_path / "model.npz", model)
    with pytest.raises(ValueError, match=message):
        ag.load(tmp_path / "model.npz", like=change(model))


def test_load_refuses_a_missing_or_extra_path(tmp_path, rng):
    model = make_model(rng)
    ag.save(tmp_path / "model.npz", model)
    extras = dict(model.extras, table2=np.eye(2))
    with pytest.raises(ValueError, match=r"missing.*extras\['table2'\]"):
        ag.load(tmp_path / "model.npz", like=model._replace(extras=extras))
    with pytest.raises(ValueError, match=r"unexpected.*layers\[1\]"):
        ag.load(tmp_path / "model.npz", like=model._replace(layers=model.layers[:1]))


UNPICKLED = []


def _record_unpickling():
    UNPICKLED.append(True)
    return "payload"


class Payload:
    def __reduce__(self):
        return (_record_unpickling, ())


def test_load_never_unpickles(tmp_path):
    path = tmp_path / "evil.npz"
    objects = np.empty(1, dtype=object)
    objects[0] = Payload()
    np.savez(path, a0=objects, __structure__=np.array('{"kind": "array", "entry": "a0"}'))
    with pytest.raises(ValueError, match="pickle"):
        ag.load(path)
    assert UNPICKLED == []
    assert np.load(path, allow_pickle=True)["a0"][0] == "payload" and UNPICKLED == [True]


def test_save_refuses_object_arrays(tmp_path):
    with pytest.raises(TypeError, match=r"\['x'\].*object"):
        ag.save(tmp_path / "x.npz", {"x": np.array([None, 1], dtype=object)})
    assert os.listdir(tmp_path) == []


def test_failed_write_leaves_the_old_file_and_no_partial_file(tmp_path, rng, monkeypatch):
    path = tmp_path / "model.npz"
    old = make_model(rng)
    ag.save(path, old)
    before = path.read_bytes()

    def failing_savez(fh, **arrays):
        fh.write(b"PK\x03\x04 half a zip file")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", failing_savez)
    with pytest.raises(OSError, match="disk full"):
        ag.save(path, make_model(np.random.default_rng(1)))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.npz"]
    assert_same_tree(ag.load(path, like=old), old)


def test_numpy_bool_scalars_and_bool_arrays_round_trip(tmp_path):
    tree = {"flag": np.bool_(True), "plain": False, "mask": np.array([True, False])}
    ag.save(tmp_path / "flags.npz", tree)
    for loaded in (ag.load(tmp_path / "flags.npz"), ag.load(tmp_path / "flags.npz", like=tree)):
        assert type(loaded["flag"]) is np.bool_ and loaded["flag"]
        assert type(loaded["plain"]) is bool and loaded["plain"] is False
        assert loaded["mask"].dtype == np.bool_ and loaded["mask"].tolist() == [True, False]


@pytest.mark.parametrize("tree, message", [
    ({1: np.zeros(2)}, r"save: dict keys must be strings; the dict at '\(root\)' has the int key 1"),
    ({"a": {(1, 2): np.zeros(2)}}, r"the dict at '\['a'\]' has the tuple key \(1, 2\)"),
    ([{"w": np.zeros(2)}, {None: 1.0}], r"the dict at '\[1\]' has the NoneType key None"),
])
def test_save_refuses_a_dict_key_that_is_not_a_string_naming_the_dict(tree, message, tmp_path):
    with pytest.raises(TypeError, match=message):
        ag.save(tmp_path / "x.npz", tree)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("tree, message", [
    ({"w": np.zeros(2), "opt": object()}, r"save: cannot store the object at '\['opt'\]'"),
    (Attention(np.zeros(2), {1, 2}), r"save: cannot store the set at '\.bias'"),
    ([np.zeros(2), (1, b"raw")], r"save: cannot store the bytes at '\[1\]\[1\]'"),
    (object(), r"save: cannot store the object at '\(root\)'"),
])
def test_save_refuses_an_unstorable_leaf_naming_its_type_and_path(tree, message, tmp_path):
    with pytest.raises(TypeError, match=message):
        ag.save(tmp_path / "x.npz", tree)
    assert os.listdir(tmp_path) == []


def test_a_function_leaf_is_stored_by_name_not_refused(tmp_path):
    """Unlike an object, a function is storable: by its qualified name, given back by `like`."""
    def activation(x):
        return x
    ag.save(tmp_path / "f.npz", {"act": activation})
    stored = ag.load(tmp_path / "f.npz")["act"]
    assert stored == "test_a_function_leaf_is_stored_by_name_not_refused.<locals>.activation"
    assert repr(stored) == f"<function {activation.__qualname__}>"
    assert ag.load(tmp_path / "f.npz", like={"act": np.tanh})["act"] is np.tanh


def write_crafted(path, structure, **entries):
    """An .npz in save's format: the JSON structure under '__structure__', arrays beside it."""
    import json
    np.savez(path, __structure__=np.array(json.dumps(structure)), **entries)


def array_entry(key):
    return {"kind": "array", "entry": key}


def dict_entry(**children):
    return {"kind": "dict", "keys": list(children), "children": list(children.values())}


@pytest.mark.parametrize("leaf, entries, got", [
    ({"kind": "value", "value": "weights"}, {}, "str"),  # a string where the array should be
    ({"kind": "value", "value": 3}, {}, "int"),          # a Python number
    ({"kind": "value", "value": None}, {}, "NoneType"),
    ({"kind": "function", "name": "np.tanh"}, {}, "<function np.tanh>"),  # a function's name
    ({"kind": "hyper", "value": 0.1}, {}, "Hyper"),
    ({"kind": "scalar", "entry": "a0"}, {"a0": np.array(2.0)}, r"\(\) float64"),  # 0-d, not (2, 3)
    (array_entry("a0"), {"a0": np.array(["ab", "cd"])}, r"\(2,\) <U2"),  # text, not numbers
])
def test_load_refuses_a_stored_entry_that_is_not_the_array_like_expects(leaf, entries, got,
                                                                       tmp_path):
    path = tmp_path / "crafted.npz"
    write_crafted(path, dict_entry(w=leaf, b=array_entry("b0")), b0=np.ones(3), **entries)
    like = {"w": np.zeros((2, 3)), "b": np.zeros(3)}
    with pytest.raises(ValueError, match=rf"load: '\['w'\]' is {got} in the file, "
                                         rf"but \(2, 3\) float64 in `like`"):
        ag.load(path, like=like)
    np.testing.assert_array_equal(ag.load(path)["b"], np.ones(3))  # the file itself reads


def test_the_crafted_format_is_the_one_save_writes(tmp_path):
    """write_crafted above follows the format save writes: the same file loads the same."""
    write_crafted(tmp_path / "crafted.npz", dict_entry(w=array_entry("a0")), a0=np.eye(2))
    ag.save(tmp_path / "saved.npz", {"w": np.eye(2)})
    with np.load(tmp_path / "saved.npz") as saved, np.load(tmp_path / "crafted.npz") as crafted:
        assert sorted(saved.files) == sorted(crafted.files) == ["__structure__", "a0"]
        assert str(saved["__structure__"]) == str(crafted["__structure__"])
    np.testing.assert_array_equal(ag.load(tmp_path / "crafted.npz", like={"w": np.eye(2)})["w"],
                                  np.eye(2))


@pytest.mark.parametrize("write, message", [
    (lambda path: np.savez(path, a0=np.ones(2)),
     r"has no '__structure__' entry: it was not written by ag.save"),
    (lambda path: np.savez(path, __structure__=np.array("{not json")),
     r"the '__structure__' entry is not valid JSON"),
    (lambda path: write_crafted(path, dict_entry(w=array_entry("a0"))),
     r"malformed structure: the structure names the array entry 'a0', which the file lacks"),
    (lambda path: write_crafted(path, dict_entry(w={"kind": "tensor", "entry": "a0"}),
                                a0=np.ones(2)),
     r"malformed structure: unknown kind of entry 'tensor' in the structure"),
    (lambda path: write_crafted(path, [array_entry("a0")], a0=np.ones(2)),
     r"malformed structure: an entry of the structure has no kind: \[\{\"kind\": \"array\""),
    (lambda path: write_crafted(path, {"kind": "scalar", "entry": "a0"}, a0=np.ones(3)),
     r"malformed structure: the scalar entry 'a0' holds an array of shape \(3,\)"),
    (lambda path: write_crafted(path, {"kind": "dict", "keys": ["w", "b"],
                                       "children": [array_entry("a0")]}, a0=np.ones(3)),
     r"malformed structure: ValueError: zip\(\) argument 2 is shorter than argument 1"),
])
def test_a_file_not_written_by_save_is_named_with_the_reason(write, message, tmp_path):
    path = tmp_path / "odd.npz"
    write(path)
    with pytest.raises(ValueError, match=rf"^load: {re.escape(str(path))}:? .*{message}"):
        ag.load(path)


def test_files_that_are_not_npz_archives_are_named(tmp_path):
    np.save(tmp_path / "one.npy", np.ones(3))
    with pytest.raises(ValueError, match=r"one\.npy holds a single array, not an \.npz file"):
        ag.load(tmp_path / "one.npy")
    ag.save(tmp_path / "cut.npz", {"w": np.ones(1000)})
    data = (tmp_path / "cut.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.npz (is not an \.npz file written by ag\.save|"
                                         r": an entry cannot be read)"):
        ag.load(tmp_path / "cut.npz")


@pytest.mark.parametrize("entry, message", [
    ({"kind": "value", "value": 1, "x": 2},
     "an entry of kind 'value' has the fields ['value', 'x'], expected ['value']"),
    ({"kind": "array"}, "an entry of kind 'array' has the fields [], expected ['entry']"),
    ({"kind": "namedtuple", "name": "P", "children": []},
     "an entry of kind 'namedtuple' has the fields ['children', 'name'], expected "
     "['children', 'fields', 'name']"),
])
def test_an_entry_with_other_fields_than_its_kind_has_is_malformed(entry, message, tmp_path):
    write_crafted(tmp_path / "odd.npz", entry)
    with pytest.raises(ValueError, match=r"malformed structure: " + re.escape(message)):
        ag.load(tmp_path / "odd.npz")


def test_a_namedtuple_with_renamed_fields_round_trips(tmp_path):
    """namedtuple(..., rename=True) turns invalid field names into '_1', '_2'."""
    import collections
    Renamed = collections.namedtuple("Renamed", ["a", "def", "a"], rename=True)
    tree = Renamed(np.ones(2), 2, np.zeros(1))
    ag.save(tmp_path / "r.npz", tree)
    loaded = ag.load(tmp_path / "r.npz")
    assert loaded._fields == ("a", "_1", "_2") and loaded._1 == 2
    np.testing.assert_array_equal(loaded.a, np.ones(2))


class Pair(tuple):
    """A tuple subclass that is not a NamedTuple."""


class Rows(list):
    """A list subclass."""


@pytest.mark.parametrize("tree, message", [
    (Pair((np.zeros(2), 1)), r"save: cannot store the Pair at '\(root\)': a tuple subclass that "
                             r"is not a NamedTuple would load as a plain tuple"),
    ({"rows": Rows([np.zeros(2)])}, r"save: cannot store the Rows at '\['rows'\]': a list "
                                    r"subclass that is not a NamedTuple would load as a plain list"),
])
def test_a_tuple_or_list_subclass_is_refused_by_name(tree, message, tmp_path):
    with pytest.raises(TypeError, match=message):
        ag.save(tmp_path / "x.npz", tree)
    assert os.listdir(tmp_path) == []


def test_a_dict_subclass_loads_as_a_dict_and_as_its_type_with_like(tmp_path):
    import collections
    tree = collections.OrderedDict(b=np.ones(2), a=np.zeros(1))
    ag.save(tmp_path / "d.npz", tree)
    plain, typed = ag.load(tmp_path / "d.npz"), ag.load(tmp_path / "d.npz", like=tree)
    assert type(plain) is dict and list(plain) == ["b", "a"]
    assert type(typed) is collections.OrderedDict and list(typed) == ["b", "a"]
    np.testing.assert_array_equal(typed["b"], np.ones(2))


def test_every_entry_has_a_kind_from_the_documented_table(tmp_path, rng):
    """The structure save writes is a tagged union: every entry names its kind, and the kinds
    and fields are those of the table in the module docstring."""
    import json
    from autograd_lite import serialization
    table = {}
    for line in serialization.__doc__.splitlines():
        words = line.split()
        if words and words[0].startswith('"') and words[0].endswith('"'):
            fields = line[18:46].replace(",", " ").split()  # the 'fields' column
            table[words[0].strip('"')] = set(fields)
    ag.save(tmp_path / "model.npz", dict(model=make_model(rng), rate=ag.Hyper(0.1)))
    with np.load(tmp_path / "model.npz") as data:
        structure = json.loads(str(data["__structure__"]))
    seen, stack = set(), [structure]
    while stack:
        entry = stack.pop()
        assert set(entry) == table[entry["kind"]] | {"kind"}, entry
        seen.add(entry["kind"])
        stack.extend(entry.get("children", []))
    assert seen == set(table) == {"namedtuple", "tuple", "list", "dict", "array", "scalar",
                                  "hyper", "value", "function"}


def test_a_file_in_the_format_before_kinds_is_named(tmp_path):
    write_crafted(tmp_path / "old.npz", {"dict": [["w", {"array": "a0"}]]}, a0=np.ones(2))
    with pytest.raises(ValueError, match=r"an entry of the structure has no kind: .*written by "
                                         r"autograd_lite before entries had kinds"):
        ag.load(tmp_path / "old.npz")
