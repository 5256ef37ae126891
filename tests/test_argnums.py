"""argnums and has_aux in gradient, value_and_gradient and grad (one implementation, one
convention: jax.grad's), and the errors for what cannot be differentiated."""
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag


class Linear(NamedTuple):
    w: np.ndarray
    b: np.ndarray
    n_heads: int


def loss(p, x, y):
    return ag.sum((x @ p.w + p.b - y) ** 2)


@pytest.fixture
def problem(rng):
    p = Linear(rng.standard_normal((3, 2)), rng.standard_normal(2), 4)
    return p, rng.standard_normal((5, 3)), rng.standard_normal((5, 2))


def analytic(p, x, y):
    r = 2 * (x @ p.w + p.b - y)
    return Linear(x.T @ r, r.sum(0), None), r @ p.w.T, -r


def assert_trees_equal(a, b):
    assert type(a) is type(b)
    for u, v in zip(ag.tree_leaves(a), ag.tree_leaves(b)):
        np.testing.assert_array_equal(u, v)


def test_the_three_agree_on_int_and_tuple_argnums(problem):
    p, x, y = problem
    dp, dx, dy = analytic(p, x, y)
    for argnums, expected in ((0, dp), (1, dx), (-1, dy), ((0,), (dp,)), ((2, 0), (dy, dp))):
        from_gradient = ag.gradient(loss, p, x, y, argnums=argnums)
        value, from_value_and_gradient = ag.value_and_gradient(loss, p, x, y, argnums=argnums)
        from_grad = ag.grad(loss, argnums=argnums)(p, x, y)
        assert value == pytest.approx(float(np.sum((x @ p.w + p.b - y) ** 2)))
        for got in (from_gradient, from_value_and_gradient, from_grad):
            assert type(got) is type(expected)  # an int: the tree; a tuple: a tuple of trees
            for g, e in zip(ag.tree_leaves(got), ag.tree_leaves(expected)):
                if e is None:
                    assert g is None
                else:
                    np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    # no argnums: a tuple over every argument, as before
    assert_trees_equal(ag.gradient(loss, p, x, y)[0], ag.gradient(loss, p, x, y, argnums=0))


def test_arguments_left_out_of_argnums_are_not_traced(problem):
    p, x, y = problem
    seen = []

    def f(p, x, y):
        seen.append((type(p.w), type(x), type(y)))
        return loss(p, x, y)
    ag.gradient(f, p, x, y, argnums=0)
    assert seen == [(ag.core.tracer.Box, np.ndarray, np.ndarray)]


def test_has_aux_in_gradient_and_grad_follows_jax(problem):
    p, x, y = problem

    def with_aux(p, x, y):
        value = loss(p, x, y)
        return value, {"loss": value, "rows": len(x)}
    dp = analytic(p, x, y)[0]
    grads, aux = ag.gradient(with_aux, p, x, y, argnums=0, has_aux=True)
    g2, aux2 = ag.grad(with_aux, has_aux=True)(p, x, y)
    (value, aux3), g3 = ag.value_and_gradient(with_aux, p, x, y, argnums=0, has_aux=True)
    for g in (grads, g2, g3):
        np.testing.assert_allclose(g.w, dp.w, rtol=1e-12)
    for a in (aux, aux2, aux3):
        assert type(a["loss"]) is np.float64 and a["loss"] == value and a["rows"] == 5
    all_grads, _ = ag.gradient(with_aux, p, x, y, has_aux=True)
    assert len(all_grads) == 3


@pytest.mark.parametrize("call", [
    lambda f, *a: ag.gradient(f, *a, argnums=2),
    lambda f, *a: ag.value_and_gradient(f, *a, argnums=(0, 2)),
    lambda f, *a: ag.grad(f, argnums=-3)(*a),
])
def test_argnums_out_of_range_names_it_and_the_number_of_arguments(call):
    with pytest.raises(ValueError, match=r"argnums=.* is out of range: f was called with 2 "
                                         r"positional arguments"):
        call(lambda a, b: ag.sum(a * b), np.ones(2), np.ones(2))


def test_argnums_of_the_wrong_kind_or_repeated():
    f, a = (lambda a, b: ag.sum(a * b)), np.ones(2)
    for bad in (1.0, "0", (0, "1"), True, ()):
        with pytest.raises(TypeError, match=r"^gradient: argnums must be an int or a tuple of ints"):
            ag.gradient(f, a, a, argnums=bad)
    with pytest.raises(TypeError, match=r"^grad: argnums must be"):
        ag.grad(f, argnums=[0, None])
    with pytest.raises(ValueError, match=r"names an argument twice"):
        ag.gradient(f, a, a, argnums=(0, -2))


@pytest.mark.parametrize("value, described", [
    (3, r"int 3"),
    (np.arange(3), r"an array of dtype int64 and shape \(3,\)"),
    ((1, "relu", None), r"a tuple with no float leaf"),
    (ag.Hyper(0.1), r"Hyper\(0.1\)"),
])
def test_an_argument_with_nothing_to_differentiate_is_named(value, described):
    def f(x, scale):
        return ag.sum(scale * 2.0)
    message = (rf"argument 0 \('x'\) has nothing to differentiate: it is {described}\. Pass floats "
               r"\(3\.0, a float array\) there, or leave it out of argnums\.")
    with pytest.raises(TypeError, match="^grad: " + message):
        ag.grad(f)(value, np.ones(2))
    with pytest.raises(TypeError, match="^gradient: " + message):
        ag.gradient(f, value, np.ones(2), argnums=(1, 0))
    # without argnums every argument is differentiated where it can be, the others get None
    assert all(g is None for g in ag.tree_leaves(ag.gradient(f, value, np.ones(2))[0]))


def test_grad_of_a_python_int_is_an_error_not_a_zero():
    with pytest.raises(TypeError, match=r"^grad: argument 0 \('x'\) has nothing to differentiate: "
                                        r"it is int 3\."):
        ag.grad(lambda x: x * x)(3)
    assert ag.grad(lambda x: x * x)(3.0) == 6.0
