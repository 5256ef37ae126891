"""gradient, value_and_gradient, grad, vjp and stop_gradient: argument structures, static
leaves, errors, higher order, and what gradients give back. (The operators and numpy
functions on traced values: test_operators.py and the op table.)

Every number is checked against central differences, an analytic derivative or numpy."""
import collections
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from helpers.references import central_jacobian


# ---------------------------------------------------------------- argument structures

class Inner(NamedTuple):
    w: np.ndarray
    b: np.ndarray


class Outer(NamedTuple):
    layers: list
    head: Inner
    n_heads: int


Pair = collections.namedtuple("Pair", ["left", "right"])


def test_gradient_of_nested_structures_keeps_container_types(rng):
    w0, b0 = rng.standard_normal((3, 2)), rng.standard_normal(2)
    w1, b1 = rng.standard_normal((2, 2)), rng.standard_normal(2)
    hw, hb = rng.standard_normal((2, 1)), rng.standard_normal(1)
    params = Outer([Inner(w0, b0), Inner(w1, b1)], Inner(hw, hb), 4)
    batch = {"x": rng.standard_normal((5, 3)), "pair": Pair((rng.standard_normal(1),), [2.0])}

    def loss(p, batch):
        h = batch["x"]
        for layer in p.layers:
            h = ag.tanh(h @ layer.w + layer.b)
        out = h @ p.head.w + p.head.b
        scale = batch["pair"].left[0] * batch["pair"].right[0] * p.n_heads
        return ag.sum(out * out) * ag.sum(scale)

    dp, dbatch = ag.gradient(loss, params, batch)
    assert type(dp) is Outer and type(dp.layers) is list and type(dp.layers[0]) is Inner
    assert type(dp.head) is Inner and dp.n_heads is None
    assert type(dbatch) is dict and list(dbatch) == ["x", "pair"]
    assert type(dbatch["pair"]) is Pair and type(dbatch["pair"].left) is tuple
    assert type(dbatch["pair"].right) is list and type(dbatch["pair"].right[0]) is float

    def with_leaf(tree_index, leaf_index):
        def f(value):
            trees = [params, batch]
            leaves = ag.tree_leaves(trees[tree_index])
            leaves[leaf_index] = value if np.ndim(leaves[leaf_index]) else float(value)
            trees[tree_index] = ag.tree_unflatten(trees[tree_index], leaves)
            return loss(*trees)
        return f

    for tree_index, grads in ((0, dp), (1, dbatch)):
        for k, (leaf, g) in enumerate(zip(ag.tree_leaves([params, batch][tree_index]),
                                          ag.tree_leaves(grads))):
            if isinstance(leaf, int):
                assert g is None
                continue
            expected = central_jacobian(with_leaf(tree_index, k), leaf)
            np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8)


def test_numpy_scalar_and_python_float_gradients():
    gx, gz = ag.gradient(lambda x, z: x * x * z, np.float32(1.5), np.float32(-0.5))
    assert type(gx) is np.float32 and gx == np.float32(2 * 1.5 * -0.5)
    assert type(gz) is np.float32 and gz == np.float32(1.5 * 1.5)
    gy, gw = ag.gradient(lambda y, w: y * w + y ** 2, 2.0, np.float64(-0.5))
    assert type(gy) is float and gy == pytest.approx(-0.5 + 2 * 2.0)
    assert type(gw) is np.float64 and gw == pytest.approx(2.0)


def test_static_leaves_pass_through_and_get_none(rng):
    def act(h):
        return ag.tanh(h)
    x = rng.standard_normal(4)
    tokens = np.array([0, 2, 3])
    mask = np.array([True, False, True, True])
    seen = {}

    def f(x, tokens, mask, nothing, name, n, fn):
        seen.update(tokens=tokens, mask=mask, nothing=nothing, name=name, n=n, fn=fn)
        return ag.sum(fn(x[tokens]) * n) + ag.sum(ag.where(mask, x, 0.0))

    grads = ag.gradient(f, x, tokens, mask, None, "enc", 3, act)
    assert grads[1:] == (None,) * 6
    assert seen["tokens"] is tokens and seen["mask"] is mask and seen["fn"] is act
    assert seen["nothing"] is None and seen["name"] == "enc" and seen["n"] == 3
    expected = central_jacobian(lambda v: f(v, tokens, mask, None, "enc", 3, act), x)
    np.testing.assert_allclose(grads[0], expected, rtol=1e-6, atol=1e-8)


def test_non_scalar_output_is_refused_naming_its_shape(rng):
    x = rng.standard_normal((2, 3))
    f = lambda x: x * 2.0  # noqa: E731
    for caller, differentiate in (("gradient", lambda: ag.gradient(f, x)),
                                  ("value_and_gradient", lambda: ag.value_and_gradient(f, x)),
                                  ("grad", lambda: ag.grad(f)(x))):
        with pytest.raises(ValueError, match=rf"^{caller}: f must return a scalar, got an array "
                                             r"of shape \(2, 3\); use vjp for non-scalar outputs"):
            differentiate()


def test_gradient_twice_gives_identical_answers(rng):
    x = rng.standard_normal((3, 3))
    f = lambda x: ag.sum(ag.tanh(x @ x) * x)  # noqa: E731
    first, second = ag.gradient(f, x)[0], ag.gradient(f, x)[0]
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, central_jacobian(f, x), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unused_input_gets_zeros_of_its_shape_and_dtype(dtype):
    x, y = np.ones((2, 3), dtype=dtype), np.full(4, 2.0, dtype=dtype)
    gx, gy = ag.gradient(lambda x, y: ag.sum(y * y), x, y)
    assert gx.shape == (2, 3) and gx.dtype == dtype and not gx.any()
    np.testing.assert_array_equal(gy, 2 * y)
    assert ag.gradient(lambda x: 3.0, 1.0) == (0.0,)


def test_value_and_gradient(rng):
    x = rng.standard_normal(5)
    value, (g,) = ag.value_and_gradient(lambda x: ag.sum(ag.exp(x)), x)
    assert value == pytest.approx(np.exp(x).sum())
    np.testing.assert_allclose(g, np.exp(x))


def test_grad_argnums_int_and_tuple(rng):
    a, b = rng.standard_normal(3), rng.standard_normal(3)

    def f(a, b):
        return ag.sum(a * a * b)

    np.testing.assert_allclose(ag.grad(f)(a, b), 2 * a * b)
    np.testing.assert_allclose(ag.grad(f, argnums=1)(a, b), a * a)
    ga, gb = ag.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, 2 * a * b)
    np.testing.assert_allclose(gb, a * a)
    (gb_only,) = ag.grad(f, argnums=(1,))(a, b)
    np.testing.assert_allclose(gb_only, a * a)


# ---------------------------------------------------------------- vjp

def test_vjp_of_non_scalar_output_builds_the_jacobian(rng):
    w, x = rng.standard_normal((3, 4)), rng.standard_normal(4)

    def f(w, x):
        return ag.tanh(w @ x.reshape(4, 1)).reshape(3)

    out, pullback = ag.vjp(f, w, x)
    np.testing.assert_allclose(out, np.tanh(w @ x))
    jacobian_x = np.stack([pullback(e)[1] for e in np.eye(3)])
    expected = (1 - np.tanh(w @ x) ** 2)[:, None] * w
    np.testing.assert_allclose(jacobian_x, expected, rtol=1e-12)
    c = rng.standard_normal(3)
    first, second = pullback(c), pullback(c)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    np.testing.assert_allclose(first[1], c @ expected, rtol=1e-12)


def test_vjp_cotangent_must_match_shape_and_dtype(rng):
    _, pullback = ag.vjp(lambda x: x * 2.0, rng.standard_normal((2, 3)))
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        pullback(np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"float32.*float64"):
        pullback(np.ones((2, 3), dtype=np.float32))


def test_stop_gradient(rng):
    x = rng.standard_normal(3)
    (g,) = ag.gradient(lambda x: ag.sum(x * ag.stop_gradient(x)), x)
    np.testing.assert_allclose(g, x)
    # nested: the inner constant is constant for the outer trace too
    d2 = ag.grad(ag.grad(lambda x: x * ag.stop_gradient(x) ** 2))(1.5)
    assert d2 == 0.0


# ---------------------------------------------------------------- higher order

@pytest.mark.parametrize("f, d1, d2, x", [
    (lambda x: x ** 3, lambda x: 3 * x ** 2, lambda x: 6 * x, 1.7),
    (lambda x: ag.tanh(x), lambda x: 1 - np.tanh(x) ** 2,
     lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2), 0.4),
    (lambda x: ag.exp(2.0 * x), lambda x: 2 * np.exp(2 * x), lambda x: 4 * np.exp(2 * x), -0.3),
    (lambda x: ag.log(x) * x, lambda x: np.log(x) + 1, lambda x: 1 / x, 2.5),
    (lambda x: 1.0 / (1.0 + x * x), lambda x: -2 * x / (1 + x * x) ** 2,
     lambda x: (6 * x * x - 2) / (1 + x * x) ** 3, 0.8),
])
def test_second_derivatives_against_analytic(f, d1, d2, x):
    assert ag.grad(f)(x) == pytest.approx(d1(x), rel=1e-12)
    assert ag.grad(ag.grad(f))(x) == pytest.approx(d2(x), rel=1e-10)


def test_third_derivative():
    assert ag.grad(ag.grad(ag.grad(lambda x: x ** 4)))(1.3) == pytest.approx(24 * 1.3)


def test_hessian_vector_product_against_differences_of_the_gradient(rng):
    a = rng.standard_normal((4, 4))

    def f(x):
        return ag.sum(ag.tanh(a @ x) ** 2) + ag.sum(ag.exp(x * 0.5))

    x, v = rng.standard_normal((4, 1)), rng.standard_normal((4, 1))
    hvp = ag.grad(lambda x: ag.sum(ag.grad(f)(x) * v))(x)
    eps = 1e-5
    expected = (ag.grad(f)(x + eps * v) - ag.grad(f)(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hvp, expected, rtol=1e-6, atol=1e-9)


class MLP(NamedTuple):
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray


def test_gradient_penalty_against_central_differences(rng):
    params = MLP(rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal((5, 1)))
    x = rng.standard_normal((4, 3))

    def loss(p, x):
        return ag.sum(ag.tanh(x @ p.w1 + p.b1) @ p.w2)

    def penalty(p):
        dx = ag.grad(loss, argnums=1)(p, x)
        return ag.sum(dx * dx)

    # the penalty itself against an analytic input gradient
    h = np.tanh(x @ params.w1 + params.b1)
    dx = ((1 - h ** 2) * params.w2.T) @ params.w1.T
    assert penalty(params) == pytest.approx(np.sum(dx ** 2), rel=1e-12)
    (dp,) = ag.gradient(penalty, params)
    assert type(dp) is MLP
    for field in MLP._fields:
        def moved(value, field=field):
            return penalty(params._replace(**{field: value}))
        np.testing.assert_allclose(getattr(dp, field), central_jacobian(moved, getattr(params, field)),
                                   rtol=1e-6, atol=1e-8)


def test_no_perturbation_confusion():
    # d/dx [x · d/dy (x + y)] = d/dx [x · 1] = 1, not 2
    assert ag.grad(lambda x: x * ag.grad(lambda y: x + y)(1.0))(1.0) == pytest.approx(1.0)
    # d/dx [x · d/dy (x · y)] = d/dx [x²] = 2x; at x = 3: 6 (confusing the two gives 2x + 1... or 3x)
    assert ag.grad(lambda x: x * ag.grad(lambda y: x * y)(2.0))(3.0) == pytest.approx(6.0)
    # d/dx [x · d/dy (x · y²)]|_{y=x} ... with y evaluated at x: d/dx [2x³] = 6x² = 24 at x = 2
    assert ag.grad(lambda x: x * ag.grad(lambda y: x * y * y)(x))(2.0) == pytest.approx(24.0)


# ---------------------------------------------------------------- constants, fresh gradients

def test_traced_value_cannot_become_a_plain_array_or_float(rng):
    x = rng.standard_normal(3)
    with pytest.raises(TypeError, match="traced"):
        ag.gradient(lambda x: ag.sum(np.asarray(x)), x)
    with pytest.raises(TypeError, match="float"):
        ag.gradient(lambda x: float(ag.sum(x)), x)
    # stop_gradient is the way to ask for a constant
    (g,) = ag.gradient(lambda x: ag.sum(x) * float(ag.stop_gradient(ag.sum(x))), x)
    np.testing.assert_allclose(g, np.full(3, x.sum()))


def test_gradients_are_fresh_writable_arrays(rng):
    x = rng.standard_normal(3)
    gx, gy = ag.gradient(lambda x, y: ag.sum(x + y), x, x)  # both from one broadcast cotangent
    assert gx is not gy and gx.flags.writeable and gy.flags.writeable
    gx += 1.0
    np.testing.assert_array_equal(gy, np.ones(3))


def test_vjp_of_the_gradient_is_the_hessian(rng):
    a = rng.standard_normal((3, 3))

    def f(x):
        return ag.sum(ag.tanh(a @ x) ** 2) + ag.sum(x ** 4)

    x = rng.standard_normal((3, 1))
    g, pullback = ag.vjp(ag.grad(f), x)
    np.testing.assert_allclose(g, central_jacobian(f, x), rtol=1e-6, atol=1e-8)
    hessian = np.stack([pullback(e.reshape(3, 1))[0].ravel() for e in np.eye(3)])
    expected = np.stack([central_jacobian(lambda x: ag.grad(f)(x)[i, 0], x).ravel()
                         for i in range(3)])
    np.testing.assert_allclose(hessian, expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hessian, hessian.T, rtol=1e-12, atol=1e-14)


def test_no_two_gradients_share_memory_and_none_aliases_the_cotangent():
    ga, gb = ag.gradient(lambda a, b: ag.sum((a + b.reshape(2, 3)) * 2), np.ones((2, 3)),
                         np.ones(6))
    assert not np.shares_memory(ga, gb)
    ga *= 0
    np.testing.assert_array_equal(gb, np.full(6, 2.0))
    _, pullback = ag.vjp(lambda x: x + 0.0, np.ones(3))
    cotangent = np.array([1.0, 2.0, 3.0])
    (g,) = pullback(cotangent)
    assert not np.shares_memory(g, cotangent)
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0])


def test_vjp_of_a_scalar_takes_a_number_and_returns_the_value_like_value_and_gradient():
    f = lambda x: ag.sum(x * x)  # noqa: E731
    x = np.array([1.0, -2.0])
    value, pullback = ag.vjp(f, x)
    assert value == ag.value_and_gradient(f, x)[0] == 5.0 and np.ndim(value) == 0
    np.testing.assert_array_equal(pullback(3.0)[0], 3.0 * 2 * x)


def test_grad_keeps_the_name_and_signature_of_f():
    def loss(p, x):
        return ag.sum(p * x)
    g = ag.grad(loss)
    assert g.__name__ == "loss"
    assert ag.core.differentiate.argument_names(g, 2) == ["p", "x"]  # reports and pictures say p, x
    np.testing.assert_array_equal(g(np.ones(2), np.array([3.0, 4.0])), [3.0, 4.0])


@pytest.mark.parametrize("f, returned", [
    (lambda x: "loss", "str"),
    (lambda x: (ag.sum(x), ag.sum(x * x)), "tuple"),
    (lambda x: [ag.sum(x)], "list"),
    (lambda x: {"loss": ag.sum(x)}, "dict"),
    (lambda x: None, "NoneType"),
])
def test_a_function_that_does_not_return_an_array_is_refused_naming_what_it_returned(f, returned):
    x = np.arange(3.0)
    message = rf": the differentiated function must return an array, got {returned}$"
    for caller, differentiate in (("gradient", lambda: ag.gradient(f, x)),
                                  ("value_and_gradient", lambda: ag.value_and_gradient(f, x)),
                                  ("grad", lambda: ag.grad(f)(x)), ("vjp", lambda: ag.vjp(f, x))):
        with pytest.raises(TypeError, match="^" + caller + message):
            differentiate()


def test_numbers_and_untraced_arrays_are_outputs_with_zero_gradient():
    """The other side of the check: a Python number or a constant array is an output
    (one that does not depend on x), not an error."""
    x = np.arange(3.0)
    for f, value in ((lambda x: 2.5, 2.5), (lambda x: 7, 7), (lambda x: np.float32(1.5), 1.5),
                     (lambda x: np.array(4.0), 4.0)):
        out, (g,) = ag.value_and_gradient(f, x)
        assert out == value
        np.testing.assert_array_equal(g, np.zeros(3))


# ---------------------------------------------------------------- has_aux

def test_has_aux_returns_the_plain_gradient_and_the_aux_tree_untraced(rng):
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))

    def loss(w, x):
        return ag.mean((x @ w) ** 2)

    def loss_with_metrics(w, x):
        out = x @ w
        value = ag.mean(out ** 2)
        return value, {"root": ag.sqrt(value), "out": out, "rows": x.shape[0], "name": "mse"}

    (value, aux), (dw, dx) = ag.value_and_gradient(loss_with_metrics, w, x, has_aux=True)
    plain_value, (plain_dw, plain_dx) = ag.value_and_gradient(loss, w, x)
    assert value == plain_value
    np.testing.assert_array_equal(dw, plain_dw)
    np.testing.assert_array_equal(dx, plain_dx)
    np.testing.assert_allclose(dw, central_jacobian(lambda w: loss(w, x), w), rtol=1e-6)
    # every traced value comes back plain: a scalar metric as a numpy scalar, as the value
    assert type(aux["root"]) is np.float64 and aux["root"] == np.sqrt(np.mean((x @ w) ** 2))
    assert type(aux["out"]) is np.ndarray
    np.testing.assert_array_equal(aux["out"], x @ w)
    assert aux["rows"] == 4 and aux["name"] == "mse"


def test_has_aux_inside_an_outer_gradient_keeps_the_outer_trace(rng):
    """Under an outer trace, an aux value traced by it stays traced for it: the outer
    gradient flows through the aux of the inner call."""
    x = rng.standard_normal(3)

    def outer(x):
        (_, aux), _ = ag.value_and_gradient(lambda y: (ag.sum(y * x), ag.sum(x * x)),
                                            np.ones(3), has_aux=True)
        return aux  # Σ x², traced by the outer gradient
    np.testing.assert_allclose(ag.gradient(outer, x)[0], 2 * x, rtol=1e-12)


@pytest.mark.parametrize("f, returned", [
    (lambda x: ag.sum(x), "Box"),
    (lambda x: [ag.sum(x), {}], "list"),
    (lambda x: (ag.sum(x), {}, 1), "a tuple of 3"),
])
def test_has_aux_refuses_anything_but_a_pair_naming_the_call(f, returned):
    with pytest.raises(TypeError, match=r"^value_and_gradient: with has_aux=True the differentiated "
                                        rf"function must return a pair \(scalar, aux\), got {returned}$"):
        ag.value_and_gradient(f, np.arange(3.0), has_aux=True)


def test_has_aux_is_keyword_only():
    """A positional True is an argument to differentiate (no gradient: a bool is static)."""
    value, grads = ag.value_and_gradient(lambda x, flag: ag.sum(x), np.ones(2), True)
    assert value == 2.0 and grads[1] is None


def test_misuses_of_the_api_say_what_to_write_instead():
    def f(x):
        return ag.sum(x * x)
    with pytest.raises(TypeError, match=r"^gradient\(f\) was given no arguments to differentiate "
                                        r"at: .* for the function x -> gradient, as "
                                        r"jax\.grad\(f\)\(x\), write ag\.grad\(f\)\(x\)$"):
        ag.gradient(f)(np.ones(2))
    with pytest.raises(TypeError, match=r"^value_and_gradient\(f\) was given no arguments"):
        ag.value_and_gradient(f)
    for call, name in ((lambda: ag.gradient(np.ones(2), np.ones(2)), "gradient"),
                       (lambda: ag.value_and_gradient("f", np.ones(2)), "value_and_gradient"),
                       (lambda: ag.grad(3.0), "grad")):
        with pytest.raises(TypeError, match=rf"^{name}: the first argument must be the function "
                                            r"to differentiate, got (ndarray|str|float)$"):
            call()
    with pytest.raises(TypeError, match=r"^gradient: argument x is a list of 2 numbers, which is "
                                        r"differentiated as 2 separate scalars; where f expects "
                                        r"an array, pass np\.array\(x\) \(can't multiply "
                                        r"sequence by non-int of type 'list'\)$"):
        ag.gradient(f, [1.0, 2.0])
    # the array it asks for: d/dx Σ x² = 2x
    np.testing.assert_array_equal(ag.gradient(f, np.array([1.0, 2.0]))[0], [2.0, 4.0])
    np.testing.assert_array_equal(ag.grad(f)(np.array([1.0, 2.0])), [2.0, 4.0])


class WithComplex(NamedTuple):
    w: np.ndarray
    z: object


@pytest.mark.parametrize("call, message", [
    (lambda: ag.gradient(lambda p, x: ag.sum(x), WithComplex(np.ones(2), np.ones(2, complex)),
                         np.ones(2)),
     "gradient: p.z is complex128"),
    (lambda: ag.value_and_gradient(lambda xs: 0.0, [np.ones(2), np.ones(2, np.complex64)]),
     "value_and_gradient: xs[1] is complex64"),
    (lambda: ag.grad(lambda x: x)(2 + 1j), "grad: x is complex"),
    (lambda: ag.vjp(lambda d: d["a"], {"a": np.ones(2, complex)}), "vjp: d['a'] is complex128"),
    (lambda: ag.jvp(lambda x: x, (np.ones(2, complex),), (np.ones(2),)), "jvp: x is complex128"),
    (lambda: ag.jacobian(lambda x: x)(np.ones(2, complex)), "jacobian: x is complex128"),
    (lambda: ag.check_gradients(lambda x, y: ag.sum(x), np.ones(2), np.complex64(1)),
     "y is complex64"),
])
def test_complex_inputs_are_refused_naming_the_argument_path_and_dtype(call, message):
    """Complex numbers are out of scope: a complex leaf to differentiate is refused in one
    line, not given the gradient None of a static leaf as if nothing were wrong."""
    with pytest.raises(TypeError) as refused:
        call()
    assert message in str(refused.value) and "\n" not in str(refused.value), refused.value
    assert str(refused.value).endswith("complex values are not differentiated here (the ops "
                                       "and their derivatives are real); pass the real and "
                                       "imaginary parts as two float arrays")
    # not differentiated (argnums leaves it out): a complex argument is static, as before
    assert ag.gradient(lambda x, z: ag.sum(x), np.ones(2), np.ones(2, complex), argnums=0) \
        is not None
