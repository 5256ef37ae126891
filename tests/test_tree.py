"""Pytrees: tree_map over several trees, leaf order, path strings, unflatten; and the one
leaf policy (which leaves are parameters, which Python numbers are constants)."""
import collections
import fractions
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.core.tree import (PrefixMismatch, broadcast_prefix, is_python_number,
                                     structure_paths, tree_flatten, unflatten)


class Attention(NamedTuple):
    wq: np.ndarray
    wk: np.ndarray


class Block(NamedTuple):
    attn: Attention
    n_heads: int


class Model(NamedTuple):
    encoder: list
    head: dict


Point = collections.namedtuple("Point", "x y")


def make_model():
    return Model(
        encoder=[Block(Attention(np.ones(2), np.zeros(2)), 4),
                 Block(Attention(np.full(2, 2.0), np.full(2, 3.0)), 8)],
        head={"key": np.arange(3.0), "rest": (None, "name", Point(1.0, [5, 6]))})


def test_tree_leaves_order_is_depth_first_in_declaration_order():
    leaves = ag.tree_leaves(make_model())
    assert len(leaves) == 12
    np.testing.assert_array_equal(leaves[0], np.ones(2))
    np.testing.assert_array_equal(leaves[1], np.zeros(2))
    assert leaves[2] == 4
    np.testing.assert_array_equal(leaves[3], np.full(2, 2.0))
    assert leaves[5] == 8
    np.testing.assert_array_equal(leaves[6], np.arange(3.0))
    assert leaves[7:] == [None, "name", 1.0, 5, 6]


def test_tree_paths():
    paths = ag.tree_paths(make_model())
    assert paths == [
        "encoder[0].attn.wq", "encoder[0].attn.wk", "encoder[0].n_heads",
        "encoder[1].attn.wq", "encoder[1].attn.wk", "encoder[1].n_heads",
        "head['key']", "head['rest'][0]", "head['rest'][1]",
        "head['rest'][2].x", "head['rest'][2].y[0]", "head['rest'][2].y[1]"]
    assert ag.tree_paths({"key": 1, "other": [2, 3]}) == ["['key']", "['other'][0]", "['other'][1]"]
    assert ag.tree_paths(Point(1, 2), "p") == ["p.x", "p.y"]
    assert ag.tree_paths([Point(1, 2)], "args") == ["args[0].x", "args[0].y"]
    assert ag.tree_paths(np.ones(3)) == [""]


def test_tree_map_over_several_trees_keeps_types():
    a, b = make_model(), make_model()
    summed = ag.tree_map(lambda x, y: x + y if isinstance(x, np.ndarray) else x, a, b)
    assert type(summed) is Model and type(summed.encoder) is list
    assert type(summed.encoder[1]) is Block and type(summed.encoder[1].attn) is Attention
    assert type(summed.head) is dict and list(summed.head) == ["key", "rest"]
    assert type(summed.head["rest"]) is tuple and type(summed.head["rest"][2]) is Point
    np.testing.assert_array_equal(summed.encoder[1].attn.wk, np.full(2, 6.0))
    np.testing.assert_array_equal(summed.head["key"], 2 * np.arange(3.0))
    assert summed.encoder[0].n_heads == 4 and summed.head["rest"][1] == "name"
    three = ag.tree_map(lambda x, y, z: x * y - z, [1.0, (2.0,)], [3.0, (4.0,)], [1.0, (1.0,)])
    assert three == [2.0, (7.0,)]


@pytest.mark.parametrize("other, path", [
    ([Block(Attention(1, 2), 4)], "encoder"),                    # list of 1 vs list of 2
    ([Block(Attention(1, 2), 4), Block((1, 2), 8)], "encoder[1].attn"),  # tuple vs Attention
    ({"key": 1, "rest": (None, "name")}, "head['rest']"),        # tuple of 3 vs 2
    ({"rest": 1, "key": 2}, "head"),                             # keys in another order
])
def test_tree_map_mismatch_names_the_path(other, path):
    a = make_model()
    b = a._replace(encoder=other) if isinstance(other, list) else a._replace(head=other)
    with pytest.raises(ValueError, match=f"'{path}'".replace("[", r"\[").replace("]", r"\]")):
        ag.tree_map(lambda *xs: xs[0], a, b)
    with pytest.raises(ValueError, match=f"'{path}'".replace("[", r"\[").replace("]", r"\]")):
        ag.tree_map(lambda *xs: xs[0], a, a, b)  # the second of the other trees differs


def test_tree_map_mismatch_at_the_root():
    with pytest.raises(ValueError, match=r"\(root\)"):
        ag.tree_map(lambda x, y: x, [1, 2], (1, 2))


def test_tree_unflatten_round_trip():
    model = make_model()
    leaves = ag.tree_leaves(model)
    rebuilt = ag.tree_unflatten(model, leaves)
    assert type(rebuilt) is Model and ag.tree_paths(rebuilt) == ag.tree_paths(model)
    assert all(x is y for x, y in zip(ag.tree_leaves(rebuilt), leaves))
    numbered = ag.tree_unflatten(model, list(range(len(leaves))))
    assert numbered.encoder[1].attn.wk == 4 and numbered.head["rest"][2].y == [10, 11]
    assert ag.tree_leaves(numbered) == list(range(12))
    with pytest.raises(ValueError, match="more leaves"):
        ag.tree_unflatten(model, list(range(13)))


def test_tree_flatten_gives_the_structure_unflatten_fills():
    """One flatten for every tree walk: the leaves of tree_leaves, and a structure that puts
    any leaves back in the tree's containers; two trees pair leaf by leaf (tree_map) exactly
    where their structures are equal."""
    model = make_model()
    leaves, structure = tree_flatten(model)
    assert all(a is b for a, b in zip(leaves, ag.tree_leaves(model))) and len(leaves) == 12
    numbered = unflatten(structure, list(range(12)))
    assert numbered == ag.tree_unflatten(model, list(range(12)))
    assert type(numbered.encoder[0]) is Block and type(numbered.head) is dict
    assert tree_flatten(ag.tree_map(lambda x: 0, model))[1] == structure
    reordered = model._replace(head={"rest": model.head["rest"], "key": model.head["key"]})
    assert tree_flatten(reordered)[1] != structure
    assert tree_flatten(np.ones(3))[1] is None
    assert structure_paths(structure, "m")[:3] == ["m.encoder[0].attn.wq",
                                                   "m.encoder[0].attn.wk", "m.encoder[0].n_heads"]


def test_a_prefix_tree_gives_each_leaf_the_entry_above_it():
    """vmap's in_axes and a rule's cotangents: a leaf of the prefix stands for its subtree."""
    tree = ([np.ones(2), (3, 4)], {"a": 5.0})
    structure = tree_flatten(tree)[1]
    assert broadcast_prefix(([0, None], 1), structure) == [0, None, None, 1]
    assert broadcast_prefix(None, structure) == [None] * 4
    with pytest.raises(PrefixMismatch) as error:
        broadcast_prefix(([0, (1, 2, 3)], 1), structure)
    assert error.value.where("args") == "args[0][1]" and error.value.prefix == (1, 2, 3)
    with pytest.raises(PrefixMismatch) as error:
        broadcast_prefix((0, {"b": 1}), structure)
    assert error.value.where("args") == "args[1]"


def test_tree_unflatten_with_too_few_leaves_is_named():
    with pytest.raises(ValueError, match="fewer leaves"):
        ag.tree_unflatten([1, (2, 3)], [1, 2])


# The leaf policy: which leaves are parameters

class Setting(float):
    """A float subclass other than Hyper: not an exact float, so static too."""


DIFFERENTIABLE = [np.ones(3), np.ones((2, 2), np.float32), np.array(1.5), np.float64(2.0),
                  np.float32(0.5), np.float16(1.0), 1.5, float("nan")]
STATIC = [ag.Hyper(0.1), Setting(0.1), 3, True, False, "relu", None, np.tanh, len,
          np.arange(3), np.ones(2, np.int32), np.array([True, False]), np.int64(4), np.bool_(True),
          np.ones(2, np.complex128), 1j]


@pytest.mark.parametrize("leaf", DIFFERENTIABLE, ids=repr)
def test_floating_arrays_numpy_float_scalars_and_exact_floats_are_differentiable(leaf):
    assert ag.is_differentiable(leaf) is True


@pytest.mark.parametrize("leaf", STATIC, ids=repr)
def test_settings_integers_strings_none_functions_and_int_arrays_are_static(leaf):
    assert ag.is_differentiable(leaf) is False


def test_traced_values_are_differentiable():
    seen = []
    ag.gradient(lambda x: seen.append(ag.is_differentiable(x)) or ag.sum(x), np.ones(2))
    assert seen == [True]


def test_gradient_boxes_exactly_the_differentiable_leaves():
    """The policy is what `gradient` acts on: a gradient for each differentiable leaf, None
    for every static one, over a tree holding every kind of leaf; a complex one, static to
    the policy, is refused by name (complex numbers are out of the library's scope)."""
    real = [leaf for leaf in STATIC if not np.iscomplexobj(leaf)]
    tree = {"differentiable": DIFFERENTIABLE[:-1], "static": real}

    def f(tree):
        return sum(ag.sum(x.astype(np.float64)) for x in tree["differentiable"])
    (g,) = ag.gradient(f, tree)
    assert all(leaf is None for leaf in g["static"])
    with pytest.raises(TypeError, match=rf"^gradient: tree\['static'\]\[{len(real)}\] is "
                                        rf"complex128: complex values are not differentiated"):
        ag.gradient(f, dict(tree, static=STATIC))
    for leaf, grad in zip(tree["differentiable"], g["differentiable"]):
        assert type(grad) is type(leaf) and np.shape(grad) == np.shape(leaf)
        np.testing.assert_array_equal(grad, np.ones(np.shape(leaf)))  # d/dx Σ x = 1


def test_hyper_is_the_tree_modules_float_setting():
    from autograd_lite.core import tree
    assert ag.Hyper is tree.Hyper and ag.is_differentiable is tree.is_differentiable
    assert repr(ag.Hyper(0.25)) == "Hyper(0.25)" and ag.Hyper(0.25) * 2 == 0.5


@pytest.mark.parametrize("x", [1, -2.5, True, 1j, fractions.Fraction(1, 3), ag.Hyper(0.1)])
def test_python_numbers_are_numbers(x):
    assert is_python_number(x)


@pytest.mark.parametrize("x", [np.float64(1.0), np.float32(2.0), np.int64(3), np.array(1.0),
                               np.ones(3), [1.0, 2.0], "1", None])
def test_arrays_numpy_scalars_and_others_are_not_python_numbers(x):
    assert not is_python_number(x)


def test_traced_values_are_not_python_numbers():
    seen = []
    ag.gradient(lambda x: seen.append(is_python_number(x)) or ag.sum(x), 2.0)
    assert seen == [False]


# defaultdicts

def test_a_defaultdict_keeps_its_type_and_default_factory():
    tree = collections.defaultdict(list, {"w": np.ones(2), "b": [1.0]})
    doubled = ag.tree_map(lambda x: x * 2, tree)
    assert type(doubled) is collections.defaultdict and doubled.default_factory is list
    assert list(doubled) == ["w", "b"] and doubled["b"] == [2.0]
    np.testing.assert_array_equal(doubled["w"], [2.0, 2.0])
    assert ag.tree_unflatten(tree, [np.zeros(2), 5.0])["b"] == [5.0]


def test_gradient_of_a_defaultdict_argument():
    x = collections.defaultdict(float, {"a": np.array([1.0, -2.0]), "scale": 3.0})
    (g,) = ag.gradient(lambda d: ag.sum(d["a"] ** 2) * d["scale"], x)
    assert type(g) is collections.defaultdict and g.default_factory is float
    np.testing.assert_array_equal(g["a"], 2 * 3.0 * x["a"])
    assert g["scale"] == 5.0 and type(g["scale"]) is float


# mismatch messages at the user's level

class Dense(NamedTuple):
    w: np.ndarray
    b: np.ndarray


def toy_update(params, grads):
    """An optimizer-like caller: it names itself and its arguments."""
    return ag.tree_map(lambda p, g: p - 0.1 * g, params, grads, caller="toy.update",
                       names=("params", "grads"))


def test_a_caller_names_itself_its_arguments_and_the_likely_cause():
    p = Dense(np.ones((3, 2)), np.zeros(2))
    x, y = np.ones((4, 3)), np.ones((4, 2))
    grads = ag.gradient(lambda p, x, y: ag.mean((x @ p.w + p.b - y) ** 2), p, x, y)
    with pytest.raises(ValueError) as error:
        toy_update(p, grads)
    assert str(error.value) == (
        "toy.update: grads does not have the structure of params: at '(root)', params is Dense "
        "of 2, grads is tuple of 3. ag.gradient returns a tuple with one gradient tree per "
        "argument: pass ag.gradient(loss, p, ...)[0], or ask for argnums=0.")
    moved = toy_update(p, grads[0])  # the fix the message gives
    np.testing.assert_allclose(moved.w, p.w - 0.1 * grads[0].w)
    # the hint finds the argument wherever it is in the tuple, and either way round
    with pytest.raises(ValueError, match=r"\[1\], or ask for argnums=1\.$"):
        ag.tree_map(lambda a, b: a, (x, p), p, names=("grads", "params"))


def test_adam_names_its_update_and_the_gradient_tree():
    p = Dense(np.ones((3, 2)), np.zeros(2))
    opt = ag.optim.adam()
    with pytest.raises(ValueError, match=r"^adam\.update: grads does not have the structure of "
                                         r"params: at '\(root\)', params is Dense of 2, "
                                         r"grads is tuple of 3\. ag\.gradient returns"):
        opt.update(p, (p, np.ones(3), np.ones(3)), opt.init(p))


def test_dict_mismatches_name_the_missing_and_the_extra_keys():
    params = {"encoder": {"wq": 1.0, "wk": 2.0, "wv": 3.0}}
    grads = {"encoder": {"wq": 1.0, "wk": 2.0, "wo": 3.0}}
    with pytest.raises(ValueError) as error:
        ag.tree_map(lambda a, b: a, params, grads, caller="toy.update", names=("params", "grads"))
    assert str(error.value) == (
        "toy.update: grads does not have the structure of params: at '['encoder']', grads lacks "
        "the keys ['wv'] and grads has keys params has not: ['wo'].")
    with pytest.raises(ValueError, match=r"at '\(root\)', the same keys in another order, "
                                         r"\['a', 'b'\] and \['b', 'a'\]\.$"):
        ag.tree_map(lambda a, b: a, {"a": 1, "b": 2}, {"b": 2, "a": 1})


def test_without_names_the_trees_are_named_as_tree_map_calls_them():
    with pytest.raises(ValueError, match=r"^tree_map: others\[1\] does not have the structure of "
                                         r"tree: at '\[1\]', tree is tuple of 2, others\[1\] is "
                                         r"list of 2\. The items match in number: the container "
                                         r"types must match too\.$"):
        ag.tree_map(lambda *xs: xs[0], [1, (2, 3)], [1, (2, 3)], [1, [2, 3]])
