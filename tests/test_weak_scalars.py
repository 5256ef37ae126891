"""Python floats are weakly typed, traced or not: in an op with float arrays they take the
arrays' dtype (numpy's NEP 50, JAX's weak types), and their gradient comes back as a Python
float. References: the untraced call, PyTorch (whose 0-d tensors also yield to dimensioned
ones) and central differences."""
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from helpers.references import central_jacobian


def test_a_float_times_a_float32_array_stays_float32_as_the_untraced_call_does():
    x = np.ones(3, np.float32)
    f = lambda t, x: ag.sum(x * t)  # noqa: E731
    assert f(2.0, x).dtype == np.float32  # untraced: numpy keeps float32
    gt, gx = ag.gradient(f, 2.0, x)
    assert type(gt) is float and gt == 3.0
    assert gx.dtype == np.float32
    np.testing.assert_array_equal(gx, np.full(3, 2.0, np.float32))


BINARY = {  # ours(t, x), theirs(torch, t, x)
    "add": (lambda t, x: x + t, lambda torch, t, x: x + t),
    "rsub": (lambda t, x: t - x, lambda torch, t, x: t - x),
    "mul": (lambda t, x: t * x, lambda torch, t, x: t * x),
    "div": (lambda t, x: x / t, lambda torch, t, x: x / t),
    "rdiv": (lambda t, x: t / x, lambda torch, t, x: t / x),
    "pow": (lambda t, x: x ** t, lambda torch, t, x: x ** t),
    "rpow": (lambda t, x: t ** x, lambda torch, t, x: t ** x),
    "maximum": (lambda t, x: ag.maximum(x, t), lambda torch, t, x: torch.maximum(x, t)),
    "where": (lambda t, x: ag.where(x > 1.0, x, t), lambda torch, t, x: torch.where(x > 1.0, x, t)),
    "sub": (lambda t, x: x - t, lambda torch, t, x: x - t),
    "minimum": (lambda t, x: ag.minimum(t, x), lambda torch, t, x: torch.minimum(t, x)),
    "clip": (lambda t, x: ag.clip(x, t, 1.75),
             lambda torch, t, x: torch.clamp(x, t, torch.tensor(1.75, dtype=torch.float64))),
}


@pytest.mark.parametrize("name", BINARY)
def test_each_binary_op_keeps_float32_and_matches_torch(name, torch):
    ours, theirs = BINARY[name]
    x = np.array([0.5, 1.25, 2.0], np.float32)
    t = 1.5
    value = ours(t, x)
    assert value.dtype == np.float32, name  # untraced
    traced = {}

    def loss(t, x):
        out = ours(t, x)
        traced["dtype"] = out.dtype
        return ag.sum(out * out)
    gt, gx = ag.gradient(loss, t, x)
    assert traced["dtype"] == np.float32 and gx.dtype == np.float32 and type(gt) is float
    # torch: a float64 0-d tensor yields to a float32 vector, as a weak scalar does
    tt = torch.tensor(t, dtype=torch.float64, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    out = theirs(torch, tt, tx)
    assert out.dtype == torch.float32
    (out * out).sum().backward()
    np.testing.assert_allclose(value, out.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-5)
    assert gt == pytest.approx(tt.grad.item(), rel=1e-5)


def test_an_op_over_weak_values_only_stays_weak():
    """t * 2.0 and exp(t) are weak, as in JAX: the product with float32 x is float32."""
    x = np.array([1.0, -2.0, 0.5], np.float32)

    def f(t, x):
        return ag.sum(x * (t * 2.0) + x * ag.exp(-t))
    gt, gx = ag.gradient(f, 0.3, x)
    assert gx.dtype == np.float32 and type(gt) is float
    expected = central_jacobian(lambda t: np.sum(x.astype(np.float64) * (2 * t + np.exp(-t))), 0.3)
    assert gt == pytest.approx(expected, rel=1e-6)
    np.testing.assert_allclose(gx, np.full(3, 0.6 + np.exp(-0.3), np.float32), rtol=1e-6)


def test_a_weak_scalar_alone_computes_in_float64():
    assert ag.grad(lambda t: t * t * t)(1.1) == pytest.approx(3 * 1.1 ** 2, rel=1e-15)
    assert type(ag.grad(lambda t: ag.exp(t))(0.5)) is float


def test_an_explicit_cast_makes_a_strong_value(rng):
    """t.astype(float32) is float32 for good: it meets float64 data as any float32 does."""
    x64 = rng.standard_normal(3)
    with pytest.raises(TypeError, match="mul: operands float32"):
        ag.gradient(lambda t, x: ag.sum(t.astype(np.float32) * x), 2.0, x64)


def test_with_float64_arrays_the_computation_is_float64(rng):
    x = rng.standard_normal(4)
    gt, gx = ag.gradient(lambda t, x: ag.sum(ag.tanh(x * t)), 0.7, x)
    assert gx.dtype == np.float64
    assert gt == pytest.approx(float(np.sum(x * (1 - np.tanh(0.7 * x) ** 2))), rel=1e-12)


def test_second_order_through_a_weak_scalar():
    x = np.array([1.0, 2.0], np.float32)
    d2 = ag.grad(ag.grad(lambda t: ag.sum(x * t * t * t)))(2.0)
    assert type(d2) is float and d2 == pytest.approx(6 * 2.0 * 3.0)
    # an outer trace over x, an inner one over t: d/dx [(∂/∂t Σ x t²)(1.5) · Σ x] = 6 Σ x
    gx = ag.grad(lambda x: ag.grad(lambda t: ag.sum(x * t * t))(1.5) * ag.sum(x))(x)
    assert gx.dtype == np.float32
    np.testing.assert_allclose(gx, np.full(2, 6 * 3.0, np.float32), rtol=1e-6)


class Norm(NamedTuple):
    scale: np.ndarray
    bias: np.ndarray
    eps: float  # a Python float in the parameter tree


def test_a_python_float_in_a_parameter_tree_keeps_layer_norm_float32(rng, torch):
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    p = Norm(rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32),
             1e-3)
    w = rng.standard_normal((2, 3, 8)).astype(np.float32)
    seen = {}

    def loss(p, x):
        out = ag.layer_norm(x, p.scale, p.bias, p.eps)
        seen["dtype"] = out.dtype
        return ag.sum(out * w)
    dp, dx = ag.gradient(loss, p, x)
    assert seen["dtype"] == np.float32
    assert dp.scale.dtype == dx.dtype == np.float32 and type(dp.eps) is float
    tx, ts, tb = (torch.tensor(a, requires_grad=True) for a in (x, p.scale, p.bias))
    (torch.nn.functional.layer_norm(tx, (8,), ts, tb, eps=1e-3) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dp.scale, ts.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dp.bias, tb.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_traced_and_untraced_give_the_same_bits(rng):
    x = rng.standard_normal(5).astype(np.float32)
    f = lambda t, x: ag.sum(ag.tanh(x * t + 0.1) / t)  # noqa: E731
    value, _ = ag.value_and_gradient(f, 0.37, x)
    assert value.dtype == np.float32 and value == f(0.37, x)


def test_a_weak_scalar_gradient_comes_back_as_a_float_inside_trees():
    tree = {"rate": 0.5, "w": np.arange(3, dtype=np.float32)}
    (g,) = ag.gradient(lambda p: ag.sum(p["w"] * p["rate"]), tree)
    assert type(g["rate"]) is float and g["rate"] == 3.0 and g["w"].dtype == np.float32


def test_a_primitive_a_user_defines_sees_a_python_float_as_numpy_does(rng):
    """ag.primitive gives a user's op what the library's ops get: the body computes in the
    arrays' dtype, and the Python float's gradient is a float (d/dt Σ x t = Σ x)."""
    @ag.primitive
    def scale(x, s):
        def scale_pullback(g):
            return g * s, np.sum(g * x)
        return x * s, scale_pullback

    x = rng.standard_normal(3).astype(np.float32)
    gt, gx = ag.gradient(lambda t, x: ag.sum(scale(x, t) * scale(x, t)), 1.5, x)
    assert gx.dtype == np.float32 and type(gt) is float
    np.testing.assert_allclose(gx, 2 * 1.5 ** 2 * x, rtol=1e-6)
    assert gt == pytest.approx(2 * 1.5 * float(np.sum(x.astype(np.float64) ** 2)), rel=1e-6)


@pytest.mark.parametrize("rules_on", [True, False], ids=["rules on", "rules off"])
def test_a_python_float_differentiated_under_vmap_stays_weak(rules_on, rng):
    """A gradient taken inside vmap gives each example its own copy of a Python float it
    differentiates (a weak float of many examples): layer_norm stays float32 beside it, and
    vmap returns its gradients as the loop stacks them, a float64 array."""
    xs = rng.standard_normal((3, 2, 4)).astype(np.float32)
    scale, bias = np.ones(4, np.float32), rng.standard_normal(4).astype(np.float32)
    grad = ag.grad(lambda x, eps: ag.sum(ag.layer_norm(x, scale, bias, eps) ** 2), (0, 1))
    with ag.fast_rules(rules_on):
        dx, d_eps = ag.vmap(lambda x: grad(x, 1e-3))(xs)
        loop = [grad(x, 1e-3) for x in xs]
    assert dx.dtype == np.float32 and type(d_eps) is np.ndarray and d_eps.dtype == np.float64
    np.testing.assert_allclose(dx, np.stack([g for g, _ in loop]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d_eps, [e for _, e in loop], rtol=1e-5)


REDUCTIONS_OF_ONE = {  # name: (the reduction, its derivative at a single element t = 3.5)
    "ag.sum": (ag.sum, 1.0), "ag.mean": (ag.mean, 1.0), "ag.var": (ag.var, 0.0),
    "ag.std": (ag.std, 0.0), "ag.max": (ag.max, 1.0), "ag.min": (ag.min, 1.0),
    "ag.prod": (ag.prod, 1.0), "ag.logsumexp": (lambda t: ag.logsumexp(t, None), 1.0),
    "ag.norm": (ag.norm, 1.0), "ag.cumsum": (lambda t: ag.cumsum(t)[0], 1.0),
    "np.sum": (np.sum, 1.0), "np.mean": (np.mean, 1.0), "np.var": (np.var, 0.0),
    "np.std": (np.std, 0.0), "np.max": (np.max, 1.0), "np.prod": (np.prod, 1.0),
    "np.linalg.norm": (np.linalg.norm, 1.0),
}


@pytest.mark.parametrize("name", REDUCTIONS_OF_ONE)
def test_a_reduction_of_a_traced_python_float(name):
    """numpy's mean and var divide their sum in place (out=), which a weak float takes too.
    The value as numpy's of 3.5; the derivative analytic and against central differences."""
    reduction, derivative = REDUCTIONS_OF_ONE[name]
    np.testing.assert_allclose(reduction(3.5), np.asarray(reduction(np.float64(3.5))))
    assert ag.grad(reduction)(3.5) == pytest.approx(derivative)
    assert ag.grad(reduction)(3.5) == pytest.approx(
        central_jacobian(lambda t: np.asarray(reduction(float(t))), 3.5), abs=1e-6)
