"""The backward pass: long chains, diamonds, memory released as it goes, and the checks
on what a pullback returns."""
import gc
import weakref

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.core.tracer import Box, Node
from models import layers


def count_live(cls):
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is cls)


def test_ten_thousand_op_chain_matches_the_analytic_answer():
    # y = x · c^n via n multiplications: dy/dx = c^n (a recursive sort would overflow the stack)
    n, c = 10_000, 1.0001

    def f(x):
        for _ in range(n):
            x = x * c
        return ag.sum(x)

    x = np.array([0.5, -2.0])
    (g,) = ag.gradient(f, x)
    np.testing.assert_allclose(g, np.full(2, c ** n), rtol=1e-9)


def test_ten_thousand_op_chain_of_nonlinear_ops():
    # x_{k+1} = x_k + 1e-3 tanh(x_k): dx_n/dx_0 = Π (1 + 1e-3 (1 - tanh² x_k))
    n = 10_000

    def f(x):
        for _ in range(n):
            x = x + 1e-3 * ag.tanh(x)
        return ag.sum(x)

    x0 = np.array([0.3])
    expected, x = 1.0, 0.3
    for _ in range(n):
        expected *= 1 + 1e-3 * (1 - np.tanh(x) ** 2)
        x = x + 1e-3 * np.tanh(x)
    (g,) = ag.gradient(f, x0)
    np.testing.assert_allclose(g, [expected], rtol=1e-10)


def test_diamond_graphs_accumulate(rng):
    # one value used many times, along paths of different lengths
    def f(x):
        y = ag.exp(x)
        z = y * y + y
        w = z * y - ag.tanh(y)
        total = w
        for k in range(1, 20):
            total = total + y * float(k)
        return ag.sum(total)

    x = rng.standard_normal(4)
    y = np.exp(x)
    dw_dy = 3 * y ** 2 + 2 * y - (1 - np.tanh(y) ** 2)
    expected = (dw_dy + sum(range(1, 20))) * y
    (g,) = ag.gradient(f, x)
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_wide_fan_out_and_fan_in(rng):
    """x feeds 200 products (fan-out), stacked into one op (fan-in): d/dx = sum of 0..199."""
    x = rng.standard_normal(3)
    (g,) = ag.gradient(lambda x: ag.sum(ag.stack([x * float(i) for i in range(200)])), x)
    np.testing.assert_allclose(g, np.full(3, 199 * 200 / 2), rtol=0)


def test_nothing_from_the_trace_outlives_gradient(rng):
    x = rng.standard_normal((5, 5))
    refs = []

    def f(x):
        h = ag.tanh(x @ x)
        refs.append(weakref.ref(h.value))
        return ag.sum(h * x)

    ag.gradient(f, x)  # warm up (imports, caches)
    boxes, nodes = count_live(Box), count_live(Node)
    (g,) = ag.gradient(f, x)
    assert refs[-1]() is None, "an intermediate value is still alive after gradient returned"
    assert count_live(Box) == boxes and count_live(Node) == nodes
    h = np.tanh(x @ x)
    # d/dx Σ tanh(x x) ∘ x = h + (x^T (x ∘ (1-h²)) + (x ∘ (1-h²)) x^T)
    s = x * (1 - h ** 2)
    np.testing.assert_allclose(g, h + x.T @ s + s @ x.T, rtol=1e-12)


INPUT_NOT_KEPT = {  # ops whose pullback needs at most their first input's shape (softmax,
    # log_softmax keep their output; gather its indices; the rest the input's shape)
    "add": lambda h, x: h + x, "sub": lambda h, x: h - x, "div": lambda h, x: h / (x + 3.0),
    "where": lambda h, x: ag.where(x > 0, h, x), "astype": lambda h, x: h.astype(np.float32),
    "reshape": lambda h, x: h.reshape(4, 3), "expand_dims": lambda h, x: ag.expand_dims(h, 0),
    "squeeze": lambda h, x: ag.squeeze(ag.expand_dims(h, 0), 0),
    "broadcast_to": lambda h, x: ag.broadcast_to(h, (2, 3, 4)),
    "sum": lambda h, x: ag.sum(h, axis=0), "mean": lambda h, x: ag.mean(h, axis=1),
    "getitem": lambda h, x: h[np.array([0, 2, 2])],
    "gather": lambda h, x: ag.gather(h, np.array([[1, 0], [2, 2]])),
    "layer_norm": lambda h, x: ag.layer_norm(h, x[0], x[1]),
    "softmax": lambda h, x: ag.softmax(h), "log_softmax": lambda h, x: ag.log_softmax(h),
    "cross_entropy": lambda h, x: ag.cross_entropy(h, np.array([0, 3, 1])),
    "add_and_norm": lambda h, x: layers.add_and_norm(layers.LayerNorm(x[0], x[1]), x, h),
}


@pytest.mark.parametrize("op", INPUT_NOT_KEPT)
def test_an_input_the_pullback_does_not_need_is_freed_after_the_forward_pass(op, rng,
                                                                            fast_rules_on):
    """h = 2x is used by `op` alone; the backward pass must not keep it alive (as an add after
    a matmul would keep the matmul's output), yet the gradient stays right. With the fast
    rules, which save what their pullbacks need (gather's plain definition, a product with a
    one-hot matrix, keeps the table as any product keeps its operands)."""
    x = rng.standard_normal((3, 4))
    refs = []

    def f(x):
        h = x * 2.0
        refs.append(weakref.ref(getattr(h, "value", h)))
        return ag.sum(ag.exp(INPUT_NOT_KEPT[op](h, x)))

    value, pullback = ag.vjp(f, x)
    gc.collect()
    assert refs[0]() is None, f"{op}'s pullback keeps its input alive"
    (g,) = pullback(np.ones((), value.dtype))
    np.testing.assert_array_equal(g, ag.gradient(f, x)[0])
    if op == "astype":  # through float32: differences over a wider step, a looser tolerance
        ag.check_gradients(f, x, eps=1e-2, rtol=1e-3, atol=1e-4)
    else:
        ag.check_gradients(f, x)


def test_nothing_outlives_second_order(rng):
    f = lambda x: ag.sum(ag.exp(x) * x)  # noqa: E731
    x = rng.standard_normal(3)
    ag.grad(lambda x: ag.sum(ag.grad(f)(x)))(x)
    boxes, nodes = count_live(Box), count_live(Node)
    g2 = ag.grad(lambda x: ag.sum(ag.grad(f)(x)))(x)
    assert count_live(Box) == boxes and count_live(Node) == nodes
    np.testing.assert_allclose(g2, np.exp(x) * (x + 2), rtol=1e-12)


def test_cotangents_are_released_during_the_backward_pass(rng):
    """When the first op's pullback runs, the cotangent handed to the second op's pullback is gone."""
    seen = {}

    @ag.primitive
    def first(x):
        def first_pullback(g):
            seen["second's cotangent alive"] = seen["second's cotangent"]() is not None
            seen["second's pullback alive"] = seen["second's pullback"]() is not None
            return (3.0 * g,)
        return 3.0 * x, first_pullback

    @ag.primitive
    def second(x):
        def second_pullback(g):
            seen["second's cotangent"] = weakref.ref(g)
            return (2.0 * g,)
        seen["second's pullback"] = weakref.ref(second_pullback)
        return 2.0 * x, second_pullback

    x = rng.standard_normal(4)
    (g,) = ag.gradient(lambda x: ag.sum(second(first(x)) * x), x)
    np.testing.assert_allclose(g, 12.0 * x)
    assert seen["second's cotangent alive"] is False
    assert seen["second's pullback alive"] is False


def test_vjp_keeps_its_pullbacks_for_later_calls(rng):
    x = rng.standard_normal(3)
    out, pullback = ag.vjp(lambda x: ag.tanh(x) * 2.0, x)
    for c in (np.ones(3), np.arange(3.0)):
        np.testing.assert_allclose(pullback(c)[0], c * 2 * (1 - np.tanh(x) ** 2))


def test_pullback_of_wrong_shape_names_op_argument_and_shapes():
    @ag.primitive
    def bad_shape(x, y):
        return x + y, lambda g: (g.sum(axis=0), g.sum(axis=0))

    with pytest.raises(ValueError) as info:
        ag.gradient(lambda x, y: ag.sum(bad_shape(x, y)), np.ones(3), np.ones((2, 3)))
    message = str(info.value)
    assert "bad_shape" in message and "argument 1" in message
    assert "(3,)" in message and "(2, 3)" in message


def test_pullback_of_wrong_dtype_names_op_argument_and_dtypes():
    @ag.primitive
    def bad_dtype(x):
        return x * 2, lambda g: ((2 * g).astype(np.float64),)

    with pytest.raises(ValueError) as info:
        ag.gradient(lambda x: ag.sum(bad_dtype(x)), np.ones(3, dtype=np.float32))
    message = str(info.value)
    assert "bad_dtype" in message and "argument 0" in message
    assert "float64" in message and "float32" in message and "(3,)" in message


def test_pullback_must_return_a_tuple():
    @ag.primitive
    def not_a_tuple(x):
        return x * 2, lambda g: 2 * g

    with pytest.raises(TypeError, match="not_a_tuple.*tuple.*ndarray"):
        ag.gradient(lambda x: ag.sum(not_a_tuple(x)), np.ones(3))

    @ag.primitive
    def a_list(x):
        return x * 2, lambda g: [2 * g]

    with pytest.raises(TypeError, match="a_list.*tuple.*list"):
        ag.gradient(lambda x: ag.sum(a_list(x)), np.ones(3))


def test_pullback_returning_none_for_a_traced_argument_gives_zeros():
    @ag.primitive
    def blocks(x, y):
        return x * y, lambda g: (g * y, None)

    gx, gy = ag.gradient(lambda x, y: ag.sum(blocks(x, y)), np.ones(2), np.full(2, 3.0))
    np.testing.assert_array_equal(gx, [3.0, 3.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0])


def test_pullback_returning_too_few_cotangents_is_a_clear_error():
    @ag.primitive
    def too_short(x, y):
        return x * y, lambda g: (g * y,)

    with pytest.raises(TypeError, match="too_short.*tuple.*tuple of 1"):
        ag.gradient(lambda x, y: ag.sum(too_short(x, y)), np.ones(2), np.ones(2))
    # only the traced arguments need an entry: y constant, one entry is enough
    (g,) = ag.gradient(lambda x: ag.sum(too_short(x, np.full(2, 3.0))), np.ones(2))
    np.testing.assert_array_equal(g, [3.0, 3.0])


def test_lazy_cotangents_are_computed_only_for_traced_arguments():
    calls = []

    @ag.primitive
    def scaled(x, c):
        def scaled_pullback(g):
            return (lambda: calls.append("x") or g * c), (lambda: calls.append("c") or g * x)
        return x * c, scaled_pullback

    x, c = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    (gx,) = ag.gradient(lambda x: ag.sum(scaled(x, c)), x)
    np.testing.assert_array_equal(gx, c)
    assert calls == ["x"]


def test_a_constant_operand_of_matmul_costs_no_product():
    """matmul's pullback entries are lazy: d/dW sum(X @ W) needs Xᵀ g only, and g Wᵀ
    (for the constant X) is never formed."""
    x, w = np.arange(6.0).reshape(3, 2), np.ones((2, 4))
    (gw,) = ag.gradient(lambda w: ag.sum(x @ w), w)
    np.testing.assert_allclose(gw, np.repeat(x.sum(axis=0)[:, None], 4, axis=1))
    _, pullback = ag.matmul.body(x, w)
    gx_entry, gw_entry = pullback(np.ones((3, 4)))
    assert callable(gx_entry) and callable(gw_entry)  # nothing multiplied until asked for
    np.testing.assert_allclose(gw_entry(), gw)


def test_pow_with_exponent_zero_has_zero_derivative_at_zero():
    """d/dx x⁰ = 0 everywhere, and the third derivative of x² is 0 (a ** (b-1) is inf at 0)."""
    x = np.array([0.0, 1.0, -2.0])
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(x ** 0))(x), [0.0, 0.0, 0.0])
    third = ag.grad(lambda x: ag.sum(ag.grad(lambda x: ag.sum(ag.grad(
        lambda x: ag.sum(x ** 2))(x)))(x)))(x)
    np.testing.assert_array_equal(third, [0.0, 0.0, 0.0])
    b = np.array([0.0, 2.0, 1.0])
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(x ** b))(x), [0.0, 2.0, 1.0])


def test_a_pullback_returning_more_cotangents_than_the_op_has_arguments_is_refused():
    @ag.primitive
    def double(x):
        def double_pullback(g):
            return 2.0 * g, g  # one cotangent too many
        return 2.0 * x, double_pullback

    @ag.primitive
    def scale(x, factor=2.0):
        def scale_pullback(g):
            return factor * g, None  # one per parameter, the default one included: fine
        return factor * x, scale_pullback
    with pytest.raises(TypeError, match=r"^double: a pullback must return a tuple \(one entry "
                                        r"per argument, 1 here\), got tuple of 2$"):
        ag.gradient(lambda x: ag.sum(double(x)), np.ones(3))
    (g,) = ag.gradient(lambda x: ag.sum(scale(x)), np.ones(3))
    np.testing.assert_array_equal(g, [2.0, 2.0, 2.0])
