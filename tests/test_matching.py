"""ag.load(path, like=...) checks every path and every leaf against `like`
(autograd_lite/io/matching.py): arrays by shape and dtype, settings (int, bool, str, None,
Hyper) by type and value, float parameters by type, functions by kind, a type by any value
of it; each refusal names the file and the path."""
import enum
import re

import numpy as np
import pytest
from helpers.serialization import array_entry, dict_entry, make_model, write_crafted

import autograd_lite as ag
from autograd_lite.io.serialization import MalformedFile


@pytest.mark.parametrize("change, message", [
    (lambda m: m._replace(layers=[m.layers[0]._replace(ids=np.arange(6)), m.layers[1]]),
     r"'layers\[0\]\.ids' is \(5,\) int64 in the file, but \(6,\) int64 in `like`"),
    (lambda m: m._replace(layers=[m.layers[0], m.layers[1]._replace(
        attn=m.layers[1].attn._replace(wq=m.layers[1].attn.wq.astype(np.float64)))]),
     r"'layers\[1\]\.attn\.wq' is \(3, 4\) float32 in the file, but \(3, 4\) float64 in `like`"),
    (lambda m: m._replace(layers=[m.layers[0], m.layers[1]._replace(scale=np.float64(1.5))]),
     r"'layers\[1\]\.scale' is a float32 scalar in the file, but a float64 scalar in `like`"),
    (lambda m: m._replace(layers=[m.layers[0],
                                  m.layers[1]._replace(scale=np.array(1.5, np.float32))]),
     r"'layers\[1\]\.scale' is a float32 scalar in the file, but \(\) float32 in `like`"),
    # settings: the same type and value
    (lambda m: m._replace(layers=[m.layers[0]._replace(n_heads=8), m.layers[1]]),
     r"'layers\[0\]\.n_heads' is int 2 in the file, but int 8 in `like`"),
    (lambda m: m._replace(layers=[m.layers[0]._replace(name="encoder"), m.layers[1]]),
     r"'layers\[0\]\.name' is str 'layer0' in the file, but str 'encoder' in `like`"),
    (lambda m: m._replace(layers=[m.layers[0]._replace(nothing=0), m.layers[1]]),
     r"'layers\[0\]\.nothing' is None in the file, but int 0 in `like`"),
    (lambda m: m._replace(extras=dict(m.extras, steps=(7, 2.5, 1))),
     r"'extras\['steps'\]\[2\]' is bool True in the file, but int 1 in `like`"),
    (lambda m: m._replace(extras=dict(m.extras, steps=(7.0, 2.5, True))),
     r"'extras\['steps'\]\[0\]' is int 7 in the file, but float 7\.0 in `like`"),
    (lambda m: m._replace(layers=[m.layers[0]._replace(act=None), m.layers[1]]),
     r"'layers\[0\]\.act' is <function tanh> in the file, but None in `like`"),
    (lambda m: m._replace(layers=[m.layers[0]._replace(n_heads=np.tanh), m.layers[1]]),
     r"'layers\[0\]\.n_heads' is int 2 in the file, but <function tanh> in `like`"),
    (lambda m: m._replace(layers=[m.layers[0]._replace(n_heads=str), m.layers[1]]),
     r"'layers\[0\]\.n_heads' is int 2 in the file, but any str in `like`"),
])
def test_load_refuses_a_leaf_unlike_like_naming_the_file_and_path(change, message, tmp_path,
                                                                  rng):
    model = make_model(rng)
    path = tmp_path / "model.npz"
    ag.save(path, model)
    with pytest.raises(MalformedFile, match=rf"^load: {re.escape(str(path))}: {message}$"):
        ag.load(path, like=change(model))


@pytest.mark.parametrize("saved, like, message", [
    ({"n": 3}, {"n": "three"}, r"'\['n'\]' is int 3 in the file, but str 'three' in `like`"),
    ({"rate": ag.Hyper(0.1)}, {"rate": ag.Hyper(0.3)},
     r"'\['rate'\]' is Hyper\(0\.1\) in the file, but Hyper\(0\.3\) in `like`"),
    ({"rate": ag.Hyper(0.1)}, {"rate": 0.1},  # a setting where like has a parameter
     r"'\['rate'\]' is Hyper\(0\.1\) in the file, but float 0\.1 in `like`"),
    ({"scale": 0.5}, {"scale": ag.Hyper(0.5)},
     r"'\['scale'\]' is float 0\.5 in the file, but Hyper\(0\.5\) in `like`"),
    ({"w": np.zeros(2)}, {"w": int}, r"'\['w'\]' is \(2,\) float64 in the file, but any int"),
])
def test_python_leaves_are_compared_by_type_and_settings_by_value(saved, like, message, tmp_path):
    ag.save(tmp_path / "x.npz", saved)
    with pytest.raises(MalformedFile, match=message):
        ag.load(tmp_path / "x.npz", like=like)


class Norm(str, enum.Enum):
    PRE = "pre"
    POST = "post"


def test_what_like_leaves_open_comes_from_the_file_the_rest_from_like(tmp_path):
    """A float parameter takes the file's value; a type takes any value of it; an equal
    setting comes back as like's own object (an enum member, say); functions from like."""
    saved = {"scale": 0.5, "step": 12, "log": "{\"epoch\": 3}", "w": np.arange(3.0),
             "norm": "pre", "n_heads": 4, "rate": ag.Hyper(0.1), "act": lambda x: x}
    ag.save(tmp_path / "x.npz", saved)
    like = {"scale": 2.0, "step": int, "log": str, "w": np.ndarray, "norm": Norm.PRE,
            "n_heads": 4, "rate": ag.Hyper(0.1), "act": np.tanh}
    loaded = ag.load(tmp_path / "x.npz", like=like)
    assert loaded["scale"] == 0.5 and loaded["step"] == 12 and loaded["log"] == saved["log"]
    np.testing.assert_array_equal(loaded["w"], np.arange(3.0))
    assert loaded["norm"] is Norm.PRE and loaded["act"] is np.tanh
    assert type(loaded["rate"]) is ag.Hyper and loaded["rate"] == 0.1


def test_load_refuses_a_missing_or_extra_path(tmp_path, rng):
    model = make_model(rng)
    path = tmp_path / "model.npz"
    ag.save(path, model)
    extras = dict(model.extras, table2=np.eye(2))
    with pytest.raises(MalformedFile, match=rf"^load: {re.escape(str(path))}: the file's "
                                            r"structure differs from `like`: missing "
                                            r"\[\"extras\['table2'\]\"\], unexpected \[\]$"):
        ag.load(path, like=model._replace(extras=extras))
    with pytest.raises(MalformedFile, match=r"missing \[\], unexpected \['layers\[1\]\.attn\.wq'"):
        ag.load(path, like=model._replace(layers=model.layers[:1]))


@pytest.mark.parametrize("leaf, entries, got", [
    ({"kind": "value", "value": "weights"}, {}, "str 'weights'"),  # a string, not the array
    ({"kind": "value", "value": 3}, {}, "int 3"),          # a Python number
    ({"kind": "value", "value": None}, {}, "None"),
    ({"kind": "function", "name": "np.tanh"}, {}, "<function np.tanh>"),  # a function's name
    ({"kind": "hyper", "value": 0.1}, {}, r"Hyper\(0\.1\)"),
    ({"kind": "scalar", "entry": "a0"}, {"a0": np.array(2.0)}, "a float64 scalar"),
    (array_entry("a0"), {"a0": np.array(2.0)}, r"\(\) float64"),  # 0-d, not (2, 3)
    (array_entry("a0"), {"a0": np.array(["ab", "cd"])}, r"\(2,\) <U2"),  # text, not numbers
])
def test_load_refuses_a_stored_entry_that_is_not_the_array_like_expects(leaf, entries, got,
                                                                       tmp_path):
    path = tmp_path / "crafted.npz"
    write_crafted(path, dict_entry(w=leaf, b=array_entry("b0")), b0=np.ones(3), **entries)
    like = {"w": np.zeros((2, 3)), "b": np.zeros(3)}
    with pytest.raises(MalformedFile, match=rf"^load: {re.escape(str(path))}: '\['w'\]' is "
                                            rf"{got} in the file, but \(2, 3\) float64 in `like`$"):
        ag.load(path, like=like)
    np.testing.assert_array_equal(ag.load(path)["b"], np.ones(3))  # the file itself reads
