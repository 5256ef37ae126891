"""`ag.primitive` as a user writes it: a stable softplus with its pullback (first and
second order against central differences and PyTorch), keyword arguments, names, the
untraced fast path, and the recording hook a trace offers (`Trace(on_op=...)`)."""
import gc
import inspect

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.core.tracer import PRIMITIVE_CODE, Box, Node, Trace, primal


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


# --- the recording hook: Trace(on_op=...) -------------------------------------------------

def boxed_on(trace, x):
    """x as an input of `trace`, as gradient boxes its arguments."""
    return Box(x, trace, Node(None, (), "input", x.shape, x.dtype))


def test_a_hook_sees_each_op_of_its_trace_with_its_arguments_and_box(rng):
    calls = []
    trace = Trace(on_op=lambda op, args, kwargs, box: calls.append((op, list(args), kwargs, box)))
    x, s = rng.standard_normal(3), np.array(1.5)
    bx = boxed_on(trace, x)
    y = affine(bx, scale=s, power=2)          # keywords: moved to their positions, shift's default
    z = ag.tanh(y)
    assert [(op, kwargs) for op, _, kwargs, _ in calls] == [(affine, {"power": 2}), (ag.tanh, {})]
    op, args, _, box = calls[0]
    assert args[0] is bx and args[1] is s and args[2] == 0.0 and len(args) == 3
    assert box is y and calls[1][1][0] is y and calls[1][3] is z
    np.testing.assert_allclose(z.value, np.tanh(1.5 * x ** 2))  # the values are the ops' own
    assert box.node.parents == ((0, bx.node),)
    # untraced calls, and ops of another trace (a nested gradient), do not reach it
    affine(x, s)
    ag.gradient(lambda x: ag.sum(ag.exp(x)), x)
    assert len(calls) == 2
    # nested traces: an op over values of both is recorded on the inner one, and its body's
    # numpy product of the outer value is recorded on the outer one; each hook sees its own
    seen = {}
    outer = Trace(on_op=lambda op, args, kwargs, box: seen.setdefault("outer", []).append(box))
    inner = Trace(on_op=lambda op, args, kwargs, box: seen.setdefault("inner", []).append(box))
    product = ag.mul(boxed_on(outer, x), boxed_on(inner, x))
    (inner_box,), (outer_box,) = seen["inner"], seen["outer"]
    assert inner_box is product and outer_box is product.value and outer_box.trace is outer
    np.testing.assert_allclose(primal(product), x * x)
    assert len(calls) == 2


def test_gradient_never_sets_the_hook():
    seen = []

    def f(x):
        boxed = x
        while type(boxed) is Box:  # every trace the value is boxed in
            seen.append(boxed.trace.on_op)
            boxed = boxed.value
        return ag.sum(softplus(x))
    (g,) = ag.gradient(f, X)
    second = ag.grad(lambda x: ag.sum(ag.grad(f)(x)))(X)  # nested traces too
    assert Trace().on_op is None and seen == [None] * 3
    np.testing.assert_allclose(g, central(softplus_reference, X), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(second, central(lambda x: 1 / (1 + np.exp(-x)), X),
                               rtol=1e-6, atol=1e-10)


def test_a_primitive_exposes_its_name_and_positional_parameters():
    empty = inspect.Parameter.empty
    assert affine.op_name == "affine" and affine.body.__name__ == "affine"
    assert affine.parameters == (("x", empty), ("scale", empty), ("shift", 0.0))  # not power
    assert ag.softmax.parameters == (("x", empty), ("axis", -1), ("mask", None))
    concatenate = ag.ops.shape.concatenate_arrays  # concatenate_arrays(axis, *xs)
    assert concatenate.op_name == "concatenate" and concatenate.parameters == (("axis", empty),)
    assert all(op.__code__ is PRIMITIVE_CODE for op in (affine, softplus, ag.exp, concatenate))


# --- a traced value that escapes its call ----------------------------------------------

def test_a_value_kept_from_an_earlier_gradient_is_refused_by_name(rng):
    x = rng.standard_normal(3)
    kept = {}

    def f(x):
        kept["x"] = x * 2.0  # escapes: stored in a dict that outlives the call
        return ag.sum(x)
    ag.gradient(f, x)
    message = r"a traced value from an earlier ag\.gradient call was used after that call returned"
    with pytest.raises(RuntimeError, match=r"^mul: " + message):
        ag.gradient(lambda y: ag.sum(y * kept["x"]), x)   # used in an op of a later call
    with pytest.raises(RuntimeError, match=r"^sum: " + message):
        ag.sum(kept["x"])                                  # or outside any call
    with pytest.raises(RuntimeError, match=r"^getitem: " + message):
        ag.gradient(lambda y: kept["x"][0] * 0.0 + y, 1.0)  # each op names itself
    kept["x"] = ag.stop_gradient(kept["x"])  # the way to keep a value: its plain array
    (g,) = ag.gradient(lambda y: ag.sum(y * kept["x"]), x)
    np.testing.assert_array_equal(g, 2 * x)


def test_returning_an_escaped_value_is_refused_not_taken_as_a_constant():
    kept = []
    ag.gradient(lambda x: kept.append(x) or x * 3.0, 2.0)
    with pytest.raises(RuntimeError, match=r"^value_and_gradient: a traced value from an "
                                           r"earlier ag\.gradient call"):
        ag.value_and_gradient(lambda y: kept[0], 1.0)


def test_an_inner_value_escaping_into_the_enclosing_call_is_refused(rng):
    """Stored by a grad nested in an outer gradient, and used later in that outer call."""
    x = rng.standard_normal(3)

    def outer(x):
        kept = []
        ag.grad(lambda y: kept.append(y * x) or ag.sum(y * x))(np.ones(3))
        return ag.sum(kept[0])
    with pytest.raises(RuntimeError, match=r"^sum: a traced value from an earlier ag\.grad call"):
        ag.gradient(outer, x)


def test_the_trace_ends_when_f_raises():
    kept = []

    def f(x):
        kept.append(x)
        raise KeyError("inside f")
    with pytest.raises(KeyError):
        ag.gradient(f, np.ones(2))
    assert kept[0].trace.active is False
    with pytest.raises(RuntimeError, match="earlier ag.gradient call"):
        ag.exp(kept[0])


def test_a_vjp_pullback_still_works_after_its_call_returned(rng):
    x = rng.standard_normal(3)
    out, pullback = ag.vjp(lambda x: ag.tanh(x), x)
    np.testing.assert_allclose(pullback(np.ones(3))[0], 1 - np.tanh(x) ** 2)
    np.testing.assert_allclose(pullback(np.ones(3))[0], 1 - np.tanh(x) ** 2)


@ag.primitive
def identity_seen(a, b):
    """a + b, and whether the body got its two arguments as one object (recorded)."""
    SEEN.append(a is b)
    return a + b, lambda g: (g, g)


SEEN = []


@pytest.mark.parametrize("call, one_object", [
    (lambda x: ag.gradient(lambda a, b: ag.sum(identity_seen(a, b)), x, x), False),
    (lambda x: ag.gradient(lambda a: ag.sum(identity_seen(a, ag.stop_gradient(a))), x), False),
    (lambda x: ag.gradient(lambda a: ag.sum(identity_seen(a, x)), x), False),
    (lambda x: ag.gradient(lambda a: ag.sum(identity_seen(x, a)), x), False),
    (lambda x: ag.gradient(lambda a: ag.sum(identity_seen(a, a)), x), True),
    (lambda x: identity_seen(x, x), True),
])
def test_a_body_sees_one_object_only_where_the_caller_passed_one(call, one_object):
    """Two traced values made from one array, or a traced value and its constant, reach the
    body as two objects (a fused body may take `a is b` for "one value to differentiate");
    the gradient of Σ (a + b) is then 1 for each argument, 2 for one traced value."""
    SEEN.clear()
    x = np.arange(3.0)
    grads = call(x)
    assert SEEN == [one_object]
    if isinstance(grads, tuple):
        want = 2.0 if one_object else 1.0
        for g in grads:
            np.testing.assert_array_equal(g, np.full(3, want))
