"""Elementwise ops (autograd_lite/ops/elementwise.py): central differences, second order,
PyTorch values and gradients in float64 and float32, dtypes, errors, broadcasting properties."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import autograd_lite as ag
from torch_reference import (DTYPES, check_first_order, check_second_order, compare_with_torch,
                             second_derivative_torch)


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(rng, shape):
    """Normal numbers at least 0.1 from 0, where relu and abs are not differentiable."""
    x = rng.standard_normal(shape)
    return np.where(np.abs(x) < 0.1, 0.1 + np.abs(x), x) * np.sign(x + (x == 0))


def normal(rng, shape):
    return rng.standard_normal(shape)


# name: (ag op, torch op, input sampler, smooth)
UNARY = {
    "neg": (ag.neg, lambda t: -t, normal, False),
    "exp": (ag.exp, lambda t: t.exp(), normal, True),
    "log": (ag.log, lambda t: t.log(), positive, True),
    "sqrt": (ag.sqrt, lambda t: t.sqrt(), positive, True),
    "tanh": (ag.tanh, lambda t: t.tanh(), normal, True),
    "sigmoid": (ag.sigmoid, lambda t: t.sigmoid(), normal, True),
    "relu": (ag.relu, lambda t: t.relu(), away_from_zero, False),
    "gelu": (ag.gelu, None, normal, True),
    "abs": (ag.abs, lambda t: t.abs(), away_from_zero, False),
}
SMOOTH_UNARY = [name for name, spec in UNARY.items() if spec[3]]
SHAPES = [(), (5,), (3, 4), (2, 3, 4)]


def torch_unary(torch, name):
    if name == "gelu":
        return lambda t: torch.nn.functional.gelu(t, approximate="tanh")
    return UNARY[name][1]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_first_order(name, shape, rng):
    op, _, sample, _ = UNARY[name]
    check_first_order(op, sample(rng, shape))


@pytest.mark.parametrize("name", SMOOTH_UNARY)
def test_unary_second_order(name, rng, torch):
    op, _, sample, _ = UNARY[name]
    x = sample(rng, (3, 4))
    check_second_order(lambda x: ag.sum(op(x) * op(x)), x)
    first = ag.grad(lambda x: ag.sum(op(x)))
    second = ag.grad(lambda x: ag.sum(first(x)))(x)  # elementwise f''
    np.testing.assert_allclose(second, second_derivative_torch(torch, torch_unary(torch, name), x),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_torch(name, dtype, rng, torch):
    op, _, sample, _ = UNARY[name]
    compare_with_torch(torch, op, torch_unary(torch, name), sample(rng, (4, 5)).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_kinks_match_torch(dtype, torch):
    x = np.array([-1.0, 0.0, 0.0, 2.0], dtype=dtype)
    compare_with_torch(torch, ag.relu, torch.relu, x)  # relu'(0) = 0
    compare_with_torch(torch, ag.abs, torch.abs, x)    # abs'(0) = 0
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.relu(x)))(x), [0, 0, 0, 1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_stable_at_large_arguments(dtype, torch):
    x = np.array([-1e4, -80.0, 0.0, 80.0, 1e4], dtype=dtype)
    for name in ("sigmoid", "tanh", "gelu", "relu"):
        out = compare_with_torch(torch, UNARY[name][0], torch_unary(torch, name), x)
        assert np.all(np.isfinite(out))


# name: (ag op, torch op, samplers for a and b)
BINARY = {
    "add": (ag.add, lambda a, b: a + b, normal, normal),
    "sub": (ag.sub, lambda a, b: a - b, normal, normal),
    "mul": (ag.mul, lambda a, b: a * b, normal, normal),
    "div": (ag.div, lambda a, b: a / b, normal, positive),
    "pow": (ag.pow, lambda a, b: a ** b, positive, normal),
    "maximum": (ag.maximum, lambda a, b: a.maximum(b), normal, normal),
    "minimum": (ag.minimum, lambda a, b: a.minimum(b), normal, normal),
}
BROADCAST_PAIRS = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((4,), (2, 3, 4)), ((2, 1, 4), (3, 1)),
                   ((), (3,)), ((5, 1), (1, 5))]


@pytest.mark.parametrize("shapes", BROADCAST_PAIRS)
@pytest.mark.parametrize("name", BINARY)
def test_binary_first_order(name, shapes, rng):
    op, _, sample_a, sample_b = BINARY[name]
    check_first_order(op, sample_a(rng, shapes[0]), sample_b(rng, shapes[1]))


@pytest.mark.parametrize("name", ["mul", "div", "pow"])
def test_binary_second_order(name, rng):
    op, _, sample_a, sample_b = BINARY[name]
    a, b = sample_a(rng, (3, 4)), sample_b(rng, (4,))
    check_second_order(lambda a, b: ag.sum(ag.tanh(op(a, b))), a, b)


@pytest.mark.parametrize("name", ["relu", "abs", "neg", "maximum", "minimum", "add", "sub"])
def test_piecewise_linear_ops_under_second_order(name, rng):
    """Away from kinks: ∇² Σ op(x, ...)³ via the op's pullback recorded by an outer trace."""
    x, y = away_from_zero(rng, (3, 4)), normal(rng, (4,))
    if name in UNARY:
        op = UNARY[name][0]
        check_second_order(lambda x: ag.sum(op(x) ** 3), x)
    else:
        op = BINARY[name][0]
        check_second_order(lambda x, y: ag.sum(op(x, y) ** 3), x, y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 1, 4), (3, 1))])
@pytest.mark.parametrize("name", BINARY)
def test_binary_matches_torch(name, shapes, dtype, rng, torch):
    op, torch_op, sample_a, sample_b = BINARY[name]
    a, b = sample_a(rng, shapes[0]).astype(dtype), sample_b(rng, shapes[1]).astype(dtype)
    compare_with_torch(torch, op, torch_op, a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_ties_split_the_gradient_like_torch(name, dtype, torch):
    a = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]], dtype=dtype)
    b = np.array([1.0, 1.0, 5.0], dtype=dtype)  # ties at (0, 0) and (1, 2)
    op, torch_op = BINARY[name][:2]
    compare_with_torch(torch, op, torch_op, a, b)
    ga, gb = ag.gradient(lambda a, b: ag.sum(op(a, b)), a, b)
    assert ga[0, 0] == 0.5 and ga[1, 2] == 0.5
    assert gb[0] == 0.5 + (name == "maximum")  # for maximum b also wins at (1, 0)


# Python numbers are constants of the operand's dtype: (ag expression, torch expression)
NUMBER_OPERANDS = {
    "x+c": (lambda x: ag.add(x, 2.0), lambda x: x + 2.0),
    "c+x": (lambda x: ag.add(2.0, x), lambda x: 2.0 + x),
    "x-c": (lambda x: ag.sub(x, 1), lambda x: x - 1),
    "c-x": (lambda x: ag.sub(3.0, x), lambda x: 3.0 - x),
    "c*x": (lambda x: ag.mul(2, x), lambda x: 2 * x),
    "x/c": (lambda x: ag.div(x, 4.0), lambda x: x / 4.0),
    "c/x": (lambda x: ag.div(1.5, x), lambda x: 1.5 / x),
    "x**2": (lambda x: ag.pow(x, 2), lambda x: x ** 2),
    "x**.5": (lambda x: ag.pow(x, 0.5), lambda x: x ** 0.5),
    "c**x": (lambda x: ag.pow(2.0, x), lambda x: 2.0 ** x),
    "max(x,c)": (lambda x: ag.maximum(x, 1.0), lambda x: x.clamp(min=1.0)),
    "min(c,x)": (lambda x: ag.minimum(1.0, x), lambda x: x.clamp(max=1.0)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NUMBER_OPERANDS)
def test_python_number_operands(name, dtype, rng, torch):
    ag_expr, torch_expr = NUMBER_OPERANDS[name]
    x = positive(rng, (2, 3)).astype(dtype)
    compare_with_torch(torch, ag_expr, torch_expr, x)
    check_first_order(ag_expr, x.astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4), (3, 4)), ((3, 1), (4,), (2, 1, 1)),
                                    ((2, 3), (), (3,))])
def test_where_matches_torch(shapes, dtype, rng, torch):
    condition = rng.random(shapes[0]) > 0.5
    x, y = normal(rng, shapes[1]).astype(dtype), normal(rng, shapes[2]).astype(dtype)
    compare_with_torch(torch, lambda x, y: ag.where(condition, x, y),
                       lambda x, y: torch.where(torch.from_numpy(condition), x, y), x, y)
    check_first_order(lambda x, y: ag.where(condition, x, y), x, y)


def test_where_with_number_and_second_order(rng):
    condition = rng.random((3, 4)) > 0.5
    x = normal(rng, (3, 4))
    out = ag.where(condition, x, 0.0)
    np.testing.assert_array_equal(out, x * condition)
    check_second_order(lambda x: ag.sum(ag.where(condition, x * x * x, -x)), x)


@pytest.mark.parametrize("name", [*BINARY, "where"])
def test_mixed_float_dtypes_raise(name):
    a, b = np.ones((2, 3), np.float32), np.ones((3,), np.float64)
    op = BINARY[name][0] if name != "where" else (lambda a, b: ag.where(np.ones(3, bool), a, b))
    with pytest.raises(TypeError, match=re.escape(f"{name}: operands float32 (2, 3) and "
                                                  "float64 (3,) have different dtypes")):
        op(a, b)
    with pytest.raises(TypeError, match=f"{name}: operands"):
        ag.gradient(lambda a, b: ag.sum(op(a, b)), a, b)


@pytest.mark.parametrize("name", BINARY)
def test_broadcasting_failure_names_op_and_shapes(name):
    a, b = np.ones((2, 3)), np.ones((4,))
    with pytest.raises(ValueError, match=re.escape(f"{name}: shapes (2, 3) and (4,) do not "
                                                   "broadcast together")):
        BINARY[name][0](a, b)


def test_where_errors():
    x = np.ones((2, 3))
    with pytest.raises(TypeError, match="where: condition must be a bool array, got int64"):
        ag.where(np.ones((2, 3), dtype=np.int64), x, x)
    with pytest.raises(ValueError, match=re.escape("where: condition (4,), x (2, 3) and "
                                                   "y (2, 3) do not broadcast together")):
        ag.where(np.ones(4, bool), x, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_untraced_ops_return_plain_arrays_of_the_input_dtype(dtype):
    x = np.linspace(0.5, 1.5, 6).reshape(2, 3).astype(dtype)
    outs = [op(x) for op, *_ in UNARY.values()]
    outs += [op(x, x) for op, *_ in BINARY.values()]
    outs += [ag.where(x > 1, x, x), ag.add(x[0, 0], x[0, 1])]
    for out in outs:
        assert type(out) is np.ndarray and out.dtype == dtype


elementwise_shapes = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                   min_side=1, max_side=4)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(shapes=elementwise_shapes, name=st.sampled_from(["add", "sub", "mul", "div"]),
       seed=st.integers(0, 2**16))
def test_broadcast_gradients_property(torch, shapes, name, seed):
    """∇ Σ f(a, b) ⊙ w for random broadcast-compatible shapes: torch's numbers,
    a's and b's shapes."""
    rng = np.random.default_rng(seed)
    op, torch_op, sample_a, sample_b = BINARY[name]
    a, b = sample_a(rng, shapes.input_shapes[0]), sample_b(rng, shapes.input_shapes[1])
    out = compare_with_torch(torch, op, torch_op, a, b)
    assert out.shape == shapes.result_shape


def test_float64_with_integer_arrays_is_allowed_but_a_list_is_named():
    x = np.array([1.0, 2.0, 4.0])
    np.testing.assert_array_equal(ag.mul(x, np.arange(3)), x * np.arange(3))
    np.testing.assert_array_equal(ag.div(np.int64(2), x), 2 / x)
    with pytest.raises(TypeError, match=r"add: operands must be arrays or Python numbers, got list"):
        ag.add(x, [1.0, 2.0, 3.0])
    for op, call in (("add", lambda: ag.add([1.0, 2.0], 3.0)), ("sub", lambda: ag.sub(1.0, (2.0,))),
                     ("div", lambda: ag.div([1.0], 2)),
                     ("where", lambda: ag.where(np.array([True]), [1.0], 0.0))):
        with pytest.raises(TypeError, match=rf"{op}: operands must be arrays or Python numbers, "
                                            r"got (list|tuple)"):
            call()


# astype: public as ag.astype, and what x.astype(...) on a traced value calls

@pytest.mark.parametrize("src, dst", [(np.float32, np.float64), (np.float64, np.float32),
                                      (np.float64, np.float16)])
def test_astype_to_a_float_dtype_matches_torch(src, dst, rng, torch):
    x = rng.standard_normal((2, 3)).astype(src)
    w = rng.standard_normal((2, 3)).astype(dst)
    out = ag.astype(x, dst)
    assert type(out) is np.ndarray and out.dtype == dst
    np.testing.assert_array_equal(out, x.astype(dst))
    (g,) = ag.gradient(lambda x: ag.sum(ag.astype(x, dst) * w), x)
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    (t.to(getattr(torch, np.dtype(dst).name)) * torch.from_numpy(w)).sum().backward()
    assert g.dtype == src
    np.testing.assert_array_equal(g, t.grad.numpy())  # both: w converted back to x's dtype


def test_astype_to_integers_or_bool_is_a_constant(rng):
    x = 3 * rng.standard_normal(4)
    (g,) = ag.gradient(lambda x: ag.sum(x * ag.astype(x, np.int64)), x)
    np.testing.assert_array_equal(g, x.astype(np.int64))  # d/dx x·c = c: c is a constant
    assert ag.astype(x, bool).dtype == np.bool_


def test_astype_refuses_what_is_not_an_array():
    with pytest.raises(TypeError, match=re.escape("astype: x must be an array, got list")):
        ag.astype([1.0, 2.0], np.float32)


def test_astype_second_order():
    """d²/dx² Σ (x³ in float64) = 6x, for float32 x."""
    x = np.array([0.5, -1.5, 2.0], np.float32)
    second = ag.grad(lambda x: ag.sum(ag.grad(lambda x: ag.sum(ag.astype(x, np.float64) ** 3))(x)))
    got = second(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 6 * x, rtol=1e-6)
