"""`ag.primitive` as a user writes it: a stable softplus with its pullback (first and
second order against central differences and PyTorch), keyword arguments, names, and
the untraced fast path."""
import gc

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.tracer import Box, Node


@ag.primitive
def softplus(x):
    """log(1 + e^x), stable for large |x|; d/dx = sigmoid(x)."""
    out = np.maximum(x, 0) + np.log(1 + np.exp(-np.abs(x)))

    def softplus_pullback(g):
        return (g * ag.sigmoid(x),)
    return out, softplus_pullback


def softplus_reference(x):
    return np.logaddexp(0.0, x)


def central(f, x, eps=1e-5):
    """Elementwise central differences of an elementwise function."""
    return (f(x + eps) - f(x - eps)) / (2 * eps)


X = np.array([-30.0, -3.0, -0.5, 0.0, 0.7, 4.0, 30.0])


def test_softplus_forward_is_stable():
    np.testing.assert_allclose(softplus(X), softplus_reference(X), rtol=1e-14, atol=1e-15)
    big = np.array([800.0, -800.0])
    np.testing.assert_allclose(softplus(big), [800.0, 0.0])


def test_softplus_first_and_second_order_against_central_differences():
    d1 = ag.grad(lambda x: ag.sum(softplus(x)))
    np.testing.assert_allclose(d1(X), central(softplus_reference, X), rtol=1e-8, atol=1e-12)
    d2 = ag.grad(lambda x: ag.sum(d1(x)))
    np.testing.assert_allclose(d2(X), central(d1, X), rtol=1e-6, atol=1e-10)


def test_softplus_against_torch(torch):
    t = torch.tensor(X, requires_grad=True)
    y = torch.nn.functional.softplus(t, threshold=50.0)  # the default 20 makes x = 30 linear
    (d1,) = torch.autograd.grad(y.sum(), t, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), t)
    np.testing.assert_allclose(softplus(X), y.detach().numpy(), rtol=1e-12, atol=1e-15)
    grad1 = ag.grad(lambda x: ag.sum(softplus(x)))
    np.testing.assert_allclose(grad1(X), d1.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ag.grad(lambda x: ag.sum(grad1(x)))(X), d2.numpy(),
                               rtol=1e-9, atol=1e-15)


def test_softplus_in_float32_keeps_its_dtype():
    x = X.astype(np.float32)
    (g,) = ag.gradient(lambda x: ag.sum(softplus(x)), x)
    assert softplus(x).dtype == np.float32 and g.dtype == np.float32
    np.testing.assert_allclose(g, 1 / (1 + np.exp(-X)), rtol=1e-6, atol=1e-7)


@ag.primitive
def affine(x, scale, shift=0.0, *, power=1):
    """scale · x^power + shift."""
    out = scale * x ** power + shift

    def affine_pullback(g):
        return (g * scale * power * x ** (power - 1),
                ag.sum(g * x ** power),
                None if isinstance(shift, float) else ag.sum(g))
    return out, affine_pullback


def test_traced_values_passed_by_keyword_get_gradients(rng):
    x, s, b = rng.standard_normal(4), np.array(1.5), np.array(-0.25)
    gx, gs, gb = ag.gradient(lambda x, s, b: ag.sum(affine(x, scale=s, shift=b, power=2)), x, s, b)
    np.testing.assert_allclose(gx, 2 * 1.5 * x)
    np.testing.assert_allclose(gs, np.sum(x ** 2))
    np.testing.assert_allclose(gb, 4.0)
    # all by keyword, in another order; the default shift is a constant
    gx, gs = ag.gradient(lambda x, s: ag.sum(affine(scale=s, x=x)), x, s)
    np.testing.assert_allclose(gx, np.full(4, 1.5))
    np.testing.assert_allclose(gs, np.sum(x))
    np.testing.assert_allclose(affine(x, scale=s, shift=b, power=3), 1.5 * x ** 3 - 0.25)


def test_missing_argument_names_the_op_and_the_argument():
    with pytest.raises(TypeError, match="affine.*'scale'"):
        affine(np.ones(2), shift=1.0)


def test_primitive_with_a_name():
    @ag.primitive(name="twice")
    def double_it(x):
        return 2 * x, lambda g: ((2 * g).astype(np.float32),)

    assert double_it.op_name == "twice" and double_it.__name__ == "double_it"
    np.testing.assert_array_equal(double_it(np.arange(3.0)), [0.0, 2.0, 4.0])
    with pytest.raises(ValueError, match="^twice: "):
        ag.gradient(lambda x: ag.sum(double_it(x)), np.arange(3.0))
    assert softplus.op_name == "softplus"


def test_untraced_call_returns_a_plain_array_and_records_nothing():
    calls = []

    @ag.primitive
    def scaled_sum(x):
        def scaled_sum_pullback(g):
            calls.append("pullback")
            return (np.broadcast_to(g, x.shape) * 3.0,)
        return np.float64(3.0 * x.sum()), scaled_sum_pullback

    gc.collect()
    nodes = sum(1 for o in gc.get_objects() if type(o) is Node)
    out = scaled_sum(np.arange(4.0))
    extra = [softplus(X), ag.tanh(X) + ag.exp(X)]
    gc.collect()
    assert sum(1 for o in gc.get_objects() if type(o) is Node) == nodes
    assert type(out) is np.ndarray and out.shape == () and out == 18.0
    assert all(type(e) is np.ndarray for e in extra)
    assert calls == []


def test_traced_call_returns_a_box_recording_the_op():
    seen = {}

    def f(x):
        y = softplus(x)
        seen.update(type=type(y), op=y.node.op, shape=y.node.shape, parents=len(y.node.parents))
        return ag.sum(y)

    ag.gradient(f, X)
    assert seen == dict(type=Box, op="softplus", shape=X.shape, parents=1)


@ag.primitive
def scale_by(x, *, s):
    """x · s with s keyword-only: s is a constant of this op."""
    return x * s, lambda g: (g * s,)


def test_traced_keyword_only_argument_is_refused_not_silently_wrong():
    x, s = np.array([1.0, -2.0]), np.array(3.0)
    with pytest.raises(TypeError, match="scale_by.*keyword-only.*'s'"):
        ag.gradient(lambda x, s: ag.sum(scale_by(x, s=s)), x, s)
    with pytest.raises(TypeError, match="scale_by.*keyword-only.*'s'"):
        ag.gradient(lambda s: ag.sum(scale_by(x, s=s)), s)
    np.testing.assert_array_equal(ag.gradient(lambda x: ag.sum(scale_by(x, s=3.0)), x)[0], [3.0, 3.0])
    # traced by an enclosing trace only, it is recorded there: d/ds Σ_i ∂/∂x_i Σ (x s)² = d/ds 2 s² Σ x
    d = ag.grad(lambda s: ag.sum(ag.grad(lambda x: ag.sum(scale_by(x, s=s) ** 2))(x)))(3.0)
    assert d == pytest.approx(4 * 3.0 * x.sum())
