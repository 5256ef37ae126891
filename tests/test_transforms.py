"""jacobian, hessian, hvp and jvp: against PyTorch (torch.func and
torch.autograd.functional), central differences and each other, with NamedTuple
parameters in and out, float32 kept float32, and the errors that name the call."""
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from helpers.references import central_jacobian

RTOL = {np.float32: 1e-5, np.float64: 1e-12}


class Layer(NamedTuple):
    w: np.ndarray  # (3, 2)
    b: np.ndarray  # (2,)
    n_heads: int   # static: no derivative


def layer(p, x):
    """x (4, 3) -> (4, 2)"""
    return ag.tanh(x @ p.w + p.b)


def cubed(p, x):
    return ag.sum(layer(p, x) ** 3)


def make(rng, dtype=np.float64):
    def draw(*shape):
        return rng.standard_normal(shape).astype(dtype)
    return Layer(draw(3, 2), draw(2), 4), draw(4, 3), Layer(draw(3, 2), draw(2), None), draw(4, 3)


def tensors(torch, *arrays):
    return [torch.tensor(a) for a in arrays]


# ---------------------------------------------------------------- jacobian

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_jacobian_vector_to_vector(dtype, rng, torch):
    a = rng.standard_normal((3, 4)).astype(dtype)
    x = rng.standard_normal(4).astype(dtype)

    def f(x):
        return ag.tanh(ag.sum(a * x, axis=1)) * x[:3]  # tanh(a x) ⊙ x[:3]
    jacobian = ag.jacobian(f)(x)
    assert type(jacobian) is np.ndarray and jacobian.shape == (3, 4) and jacobian.dtype == dtype
    expected = torch.func.jacrev(lambda x: torch.tanh(torch.tensor(a) @ x) * x[:3])(
        torch.tensor(x))
    np.testing.assert_allclose(jacobian, expected.numpy(), rtol=RTOL[dtype], atol=RTOL[dtype])
    if dtype == np.float64:
        np.testing.assert_allclose(jacobian, central_jacobian(f, x), rtol=1e-7, atol=1e-9)


def test_jacobian_scalar_to_vector():
    c = np.array([0.5, -1.0, 2.0], np.float32)
    jacobian = ag.jacobian(lambda t: ag.exp(c * t))(np.array(0.3, np.float32))
    assert jacobian.shape == (3,) and jacobian.dtype == np.float32
    np.testing.assert_allclose(jacobian, c * np.exp(c * 0.3), rtol=1e-6)
    # a Python float argument: its derivatives are float64, as its gradient is a float
    jacobian = ag.jacobian(lambda t: ag.exp(c * t))(0.3)
    assert jacobian.shape == (3,) and jacobian.dtype == np.float64
    np.testing.assert_allclose(jacobian, c * np.exp(c * 0.3), rtol=1e-6)


def test_jacobian_of_named_tuples_with_argnums(rng, torch):
    p, x, _, _ = make(rng)
    jp, jx = ag.jacobian(layer, argnums=(0, 1))(p, x)
    assert type(jp) is Layer and jp.n_heads is None
    assert jp.w.shape == (4, 2, 3, 2) and jp.b.shape == (4, 2, 2) and jx.shape == (4, 2, 4, 3)
    w, b, tx = tensors(torch, p.w, p.b, x)
    expected = torch.func.jacrev(lambda w, b, x: torch.tanh(x @ w + b), argnums=(0, 1, 2))(w, b, tx)
    for got, want in zip((jp.w, jp.b, jx), expected):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-14)
    assert type(ag.jacobian(layer)(p, x)) is Layer  # an int argnums: the argument's tree


def test_jacobian_of_a_tree_valued_function(rng, torch):
    p, x, _, _ = make(rng)

    def f(p):
        return {"h": layer(p, x), "norm": ag.sum(p.w * p.w)}
    jacobian = ag.jacobian(f)(p)
    assert list(jacobian) == ["h", "norm"] and type(jacobian["norm"]) is Layer
    w, b, tx = tensors(torch, p.w, p.b, x)
    expected = torch.func.jacrev(lambda w, b: {"h": torch.tanh(tx @ w + b), "norm": (w * w).sum()},
                                 argnums=(0, 1))(w, b)
    for key in ("h", "norm"):
        np.testing.assert_allclose(jacobian[key].w, expected[key][0].numpy(), rtol=1e-12)
        np.testing.assert_allclose(jacobian[key].b, expected[key][1].numpy(), rtol=1e-12, atol=0)


def test_jacobian_of_a_constant_is_zero():
    jacobian = ag.jacobian(lambda x: np.ones(2))(np.ones(3, np.float32))
    assert jacobian.shape == (2, 3) and jacobian.dtype == np.float32 and not jacobian.any()


# ---------------------------------------------------------------- hessian

def test_hessian_of_named_tuples_against_torch(rng, torch):
    p, x, _, _ = make(rng)
    hessian = ag.hessian(cubed)(p, x)
    assert type(hessian) is Layer and type(hessian.w) is Layer and hessian.n_heads is None
    assert hessian.w.w.shape == (3, 2, 3, 2) and hessian.w.b.shape == (3, 2, 2)
    w, b, tx = tensors(torch, p.w, p.b, x)
    expected = torch.autograd.functional.hessian(lambda w, b: (torch.tanh(tx @ w + b) ** 3).sum(),
                                                 (w, b))
    for i, row in enumerate(("w", "b")):
        for j, column in enumerate(("w", "b")):
            np.testing.assert_allclose(getattr(getattr(hessian, row), column),
                                       expected[i][j].numpy(), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(hessian.w.b, np.moveaxis(hessian.b.w, 0, -1), rtol=1e-12)


def test_hessian_against_central_differences_of_the_gradient(rng):
    a = rng.standard_normal((3, 3))

    def f(x):
        return ag.sum(ag.tanh(ag.sum(a * x, axis=1)) ** 2) + ag.sum(x ** 4)
    x = rng.standard_normal(3)
    hessian = ag.hessian(f)(x)
    np.testing.assert_allclose(hessian, central_jacobian(ag.grad(f), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hessian, hessian.T, rtol=1e-12)


# ---------------------------------------------------------------- hvp

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hvp_against_torch(dtype, rng, torch):
    p, x, v, _ = make(rng, dtype)
    value, (product,) = ag.hvp(lambda p: cubed(p, x), (p,), (v,))
    assert type(product) is Layer and product.n_heads is None
    assert product.w.dtype == product.b.dtype == dtype
    w, b, tx, vw, vb = tensors(torch, p.w, p.b, x, v.w, v.b)
    want_value, (want_w, want_b) = torch.autograd.functional.hvp(
        lambda w, b: (torch.tanh(tx @ w + b) ** 3).sum(), (w, b), (vw, vb))
    assert value == pytest.approx(want_value.item(), rel=RTOL[dtype])
    np.testing.assert_allclose(product.w, want_w.numpy(), rtol=RTOL[dtype] * 10, atol=RTOL[dtype])
    np.testing.assert_allclose(product.b, want_b.numpy(), rtol=RTOL[dtype] * 10, atol=RTOL[dtype])


def test_hvp_is_the_hessian_times_v_over_several_arguments(rng):
    p, x, v, vx = make(rng)
    _, (hp, hx) = ag.hvp(cubed, (p, x), (v, vx))
    assert hp.n_heads is None
    # jax.hessian's nesting: h[i] is the jacobian of ∂f/∂args[i], a tuple over the arguments
    h = ag.hessian(cubed, argnums=(0, 1))(p, x)
    assert h[0].n_heads is None and h[0].w[0].n_heads is None
    assert h[0].w[0].w.shape == (3, 2, 3, 2) and h[0].w[1].shape == (3, 2, 4, 3)
    expected_w = (h[0].w[0].w.reshape(6, 6) @ v.w.ravel() + h[0].w[0].b.reshape(6, 2) @ v.b
                  + h[0].w[1].reshape(6, 12) @ vx.ravel())
    expected_x = (h[1][0].w.reshape(12, 6) @ v.w.ravel() + h[1][0].b.reshape(12, 2) @ v.b
                  + h[1][1].reshape(12, 12) @ vx.ravel())
    np.testing.assert_allclose(hp.w.ravel(), expected_w, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(hx.ravel(), expected_x, rtol=1e-11, atol=1e-13)


# ---------------------------------------------------------------- jvp

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_jvp_against_torch(dtype, rng, torch):
    p, x, v, vx = make(rng, dtype)
    out, tangent = ag.jvp(layer, (p, x), (v, vx))
    assert out.dtype == tangent.dtype == dtype and tangent.shape == (4, 2)
    w, b, tx, vw, vb, tvx = tensors(torch, p.w, p.b, x, v.w, v.b, vx)
    want_out, want_tangent = torch.autograd.functional.jvp(
        lambda w, b, x: torch.tanh(x @ w + b), (w, b, tx), (vw, vb, tvx))
    np.testing.assert_allclose(out, want_out.numpy(), rtol=RTOL[dtype], atol=RTOL[dtype])
    np.testing.assert_allclose(tangent, want_tangent.numpy(), rtol=RTOL[dtype] * 10,
                               atol=RTOL[dtype])


def test_jvp_is_exactly_the_jacobian_times_v(rng):
    p, x, v, vx = make(rng)
    _, tangent = ag.jvp(layer, (p, x), (v, vx))
    jp, jx = ag.jacobian(layer, argnums=(0, 1))(p, x)
    expected = (jp.w.reshape(8, 6) @ v.w.ravel() + jp.b.reshape(8, 2) @ v.b
                + jx.reshape(8, 12) @ vx.ravel())
    np.testing.assert_allclose(tangent.ravel(), expected, rtol=1e-13, atol=1e-15)


def test_jvp_of_a_tree_valued_function_of_a_python_float(rng):
    x = rng.standard_normal(3).astype(np.float32)
    out, tangent = ag.jvp(lambda t, x: {"scaled": x * t, "total": ag.sum(x) * t}, (2.0, x),
                          (1.0, np.zeros(3, np.float32)))
    assert list(tangent) == ["scaled", "total"] and tangent["scaled"].dtype == np.float32
    np.testing.assert_array_equal(out["scaled"], x * 2)
    np.testing.assert_array_equal(tangent["scaled"], x)
    assert type(tangent["total"]) is np.float32 and tangent["total"] == np.sum(x)


def test_forward_over_reverse_equals_reverse_over_reverse(rng):
    """jvp of the gradient (its static leaf None included) is the Hessian-vector product."""
    p, x, v, vx = make(rng)
    gradient, tangent = ag.jvp(ag.grad(cubed), (p, x), (v, vx))
    _, (hp, _) = ag.hvp(cubed, (p, x), (v, vx))
    assert type(tangent) is Layer and gradient.n_heads is None and tangent.n_heads is None
    np.testing.assert_allclose(gradient.w, ag.grad(cubed)(p, x).w, rtol=1e-15)
    np.testing.assert_allclose(tangent.w, hp.w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tangent.b, hp.b, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------- composition and errors

def test_transformations_compose_with_grad(rng):
    a = rng.standard_normal((2, 3))
    x0, v = rng.standard_normal(3), rng.standard_normal(3)

    def f(x):
        return ag.tanh(ag.sum(a * x, axis=1)) * ag.sum(x * x)

    def jvp_norm(x):
        return ag.sum(ag.jvp(f, (x,), (v,))[1] ** 2)

    def jacobian_norm(x):
        return ag.sum(ag.jacobian(f)(x) ** 2)
    for g in (jvp_norm, jacobian_norm):
        np.testing.assert_allclose(ag.grad(g)(x0), central_jacobian(g, x0), rtol=1e-6, atol=1e-8)
    # the jacobian of the jacobian of a vector function: its second derivatives
    second = ag.jacobian(ag.jacobian(f))(x0)
    np.testing.assert_allclose(second[0], ag.hessian(lambda x: f(x)[0])(x0), rtol=1e-12)


def test_tangents_are_checked_and_named(rng):
    p, x, v, vx = make(rng)
    with pytest.raises(ValueError, match=r"^jvp: tangents\[0\] does not have the structure of "
                                         r"primals\[0\]: at '\(root\)', primals\[0\] is Layer of 3, "
                                         r"tangents\[0\] is tuple of 2"):
        ag.jvp(layer, (p, x), ((v.w, v.b), vx))
    with pytest.raises(ValueError, match=r"^hvp: the tangent of primals\[0\]\.w is \(3, 2\) float32, "
                                         r"but primals\[0\]\.w is \(3, 2\) float64"):
        ag.hvp(cubed, (p, x), (v._replace(w=v.w.astype(np.float32)), vx))
    with pytest.raises(TypeError, match=r"^jvp: primals and tangents must be tuples of one length"):
        ag.jvp(layer, (p, x), (v,))
    with pytest.raises(TypeError, match=r"got ndarray and ndarray$"):
        ag.jvp(lambda x: x, x, vx)


def test_jacobian_and_hessian_name_themselves_in_errors(rng):
    with pytest.raises(TypeError, match=r"^jacobian: argument 0 \('x'\) has nothing to differentiate"):
        ag.jacobian(lambda x: x * 2.0)(3)
    with pytest.raises(ValueError, match=r"^hessian: argnums=2 is out of range"):
        ag.hessian(lambda x: ag.sum(x), argnums=2)(np.ones(2))
    with pytest.raises(ValueError, match=r"^hessian: f must return a scalar"):
        ag.hessian(lambda x: x * x)(np.ones(2))
    with pytest.raises(TypeError, match=r"^jacobian: argnums must be an int or a tuple of ints"):
        ag.jacobian(lambda x: x, argnums="x")
