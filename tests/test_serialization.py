"""save / load: round trips, the file format (a tagged union of entries), structures that
save did not write refused by path, depth bounded, and a failed write leaves the old file
intact. The checks against `like` are in test_matching.py, the .npy members in test_npz.py."""
import json
import os
import re

import numpy as np
import pytest
from helpers.serialization import (Attention, Layer, Model, array_entry, assert_same_tree,
                                   dict_entry, make_model, write_crafted)

import autograd_lite as ag
from autograd_lite.io.serialization import MalformedFile


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
     r"it has no '__structure__' entry: it was not written by ag.save"),
    (lambda path: np.savez(path, __structure__=np.array("{not json")),
     r"the '__structure__' entry is not valid JSON"),
    (lambda path: np.savez(path, __structure__=np.ones(3)),
     r"the '__structure__' entry is a \(3,\) float64 array, not the JSON text save writes"),
    (lambda path: write_crafted(path, dict_entry(w=array_entry("a0"))),
     r"the structure at '\['w'\]': the file has no array entry 'a0'"),
    (lambda path: write_crafted(path, dict_entry(w={"kind": "tensor", "entry": "a0"}),
                                a0=np.ones(2)),
     r"the structure at '\['w'\]': unknown kind of entry 'tensor'"),
    (lambda path: write_crafted(path, {"kind": ["array"], "entry": "a0"}, a0=np.ones(2)),
     r"the structure at '\(root\)': unknown kind of entry \['array'\]"),
    (lambda path: write_crafted(path, [array_entry("a0")], a0=np.ones(2)),
     r"the structure at '\(root\)': an entry with no kind: \[\{\"kind\": \"array\""),
    (lambda path: write_crafted(path, {"kind": "scalar", "entry": "a0"}, a0=np.ones(3)),
     r"the structure at '\(root\)': the scalar entry 'a0' holds an array of shape \(3,\)"),
])
def test_a_file_not_written_by_save_is_named_with_the_reason(write, message, tmp_path):
    path = tmp_path / "odd.npz"
    write(path)
    with pytest.raises(MalformedFile, match=rf"^load: {re.escape(str(path))}: {message}"):
        ag.load(path)


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
    with pytest.raises(MalformedFile, match=r"the structure at '\(root\)': " + re.escape(message)):
        ag.load(tmp_path / "odd.npz")


def namedtuple_entry(name, fields, children):
    return {"kind": "namedtuple", "name": name, "fields": fields, "children": children}


VALUE_1 = {"kind": "value", "value": 1}


@pytest.mark.parametrize("entry, where, message", [
    # a dict (or a list) where a value belongs loaded as that leaf before
    (dict_entry(n={"kind": "value", "value": {"a": 1}}), "['n']",
     """the 'value' of an entry of kind 'value' is {"a": 1}, expected None, a bool, a number """
     "or a string"),
    (dict_entry(n={"kind": "value", "value": [1, 2]}), "['n']",
     "the 'value' of an entry of kind 'value' is [1, 2], expected None, a bool"),
    (dict_entry(rate={"kind": "hyper", "value": "0.1"}), "['rate']",
     """the 'value' of an entry of kind 'hyper' is "0.1", expected a number"""),
    (dict_entry(rate={"kind": "hyper", "value": True}), "['rate']",
     "the 'value' of an entry of kind 'hyper' is true, expected a number"),
    ({"kind": "list", "children": [{"kind": "array", "entry": 0}]}, "[0]",
     "the 'entry' of an entry of kind 'array' is 0, expected a string"),
    ({"kind": "function", "name": None}, "(root)",
     "the 'name' of an entry of kind 'function' is null, expected a string"),
    ({"kind": "tuple", "children": {"a": VALUE_1}}, "(root)",
     """the 'children' of an entry of kind 'tuple' is {"a": {"kind": "value", "value": 1}}, """
     "expected a list of entries"),
    ({"kind": "dict", "keys": [1], "children": [VALUE_1]}, "(root)",
     "the 'keys' of an entry of kind 'dict' is [1], expected a list of strings"),
    ({"kind": "dict", "keys": ["w", "b"], "children": [VALUE_1]}, "(root)",
     "2 keys but 1 children"),
    ({"kind": "dict", "keys": ["w", "w"], "children": [VALUE_1, VALUE_1]}, "(root)",
     "a dict with a repeated key, among ['w', 'w']"),
    (namedtuple_entry("P", ["a", "b"], [VALUE_1]), "(root)", "2 fields but 1 children"),
    (namedtuple_entry("P", "ab", [VALUE_1, VALUE_1]), "(root)",
     """the 'fields' of an entry of kind 'namedtuple' is "ab", expected a list of strings"""),
    (namedtuple_entry("not a name", ["a"], [VALUE_1]), "(root)",
     "a namedtuple entry that Python refuses (Type names and field names must be valid identifiers"),
])
def test_an_entry_holding_the_wrong_thing_is_refused_by_path(entry, where, message, tmp_path):
    """Each field holds what the table in the module docstring says; a leaf never loads as a
    dict, a list or bytes."""
    path = tmp_path / "odd.npz"
    write_crafted(path, entry)
    with pytest.raises(MalformedFile, match=rf"^load: {re.escape(str(path))}: the structure at "
                                            rf"'{re.escape(where)}': {re.escape(message)}"):
        ag.load(path)


def nested_lists(depth):
    tree = 1
    for _ in range(depth):
        tree = [tree]
    return tree


def test_trees_nest_up_to_max_depth(tmp_path):
    from autograd_lite.io.serialization import MAX_DEPTH
    ag.save(tmp_path / "deep.npz", nested_lists(MAX_DEPTH))
    assert ag.load(tmp_path / "deep.npz") == nested_lists(MAX_DEPTH)
    with pytest.raises(ValueError, match=rf"^save: the tree is nested deeper than {MAX_DEPTH} "
                                         r"containers, at '\[0\]\[0\]\[0\].*\.\.\..*\[0\]'$"):
        ag.save(tmp_path / "deeper.npz", nested_lists(MAX_DEPTH + 1))
    assert os.listdir(tmp_path) == ["deep.npz"]


def test_a_structure_nested_deeper_than_save_writes_is_refused(tmp_path):
    path = tmp_path / "deeper.npz"
    structure = VALUE_1
    for _ in range(101):
        structure = {"kind": "list", "children": [structure]}
    write_crafted(path, structure)
    with pytest.raises(MalformedFile, match=rf"^load: {re.escape(str(path))}: the structure at "
                                            r"'\[0\]\[0\].*\[0\]': containers nested deeper "
                                            r"than 100 \(save writes no deeper\)$"):
        ag.load(path)


def test_a_structure_nested_100_000_deep_is_refused_not_a_recursion_error(tmp_path):
    path = tmp_path / "abyss.npz"
    depth = 100_000
    write_crafted(path, '{"kind": "list", "children": [' * depth + json.dumps(VALUE_1)
                  + "]}" * depth)
    with pytest.raises(MalformedFile, match=rf"^load: {re.escape(str(path))}: the '__structure__' "
                                            r"entry is nested too deeply to read \(save writes at "
                                            r"most 100 levels of containers\)$"):
        ag.load(path)


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
    from autograd_lite.io import serialization
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
    with pytest.raises(MalformedFile, match=r"an entry with no kind: .*written by "
                                            r"autograd_lite before entries had kinds"):
        ag.load(tmp_path / "old.npz")


def test_save_into_a_missing_folder_names_the_users_path(tmp_path):
    path = tmp_path / "no such folder" / "model.npz"
    with pytest.raises(FileNotFoundError) as raised:
        ag.save(path, {"w": np.ones(2)})
    assert raised.value.filename == str(path)
    assert str(raised.value) == f"[Errno 2] save: No such file or directory: '{path}'"
    assert ".partial" not in str(raised.value)
    assert os.listdir(tmp_path) == []
