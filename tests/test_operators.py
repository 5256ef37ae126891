"""Python operators, methods and numpy functions on traced values (autograd_lite/ops/operators.py):
the same values as plain numpy, gradients against central differences and analytic derivatives,
constants for comparisons, astype's dtypes, and the errors for what has no rule."""
import math
import re

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.tracer import Box
from torch_reference import DTYPES, check_first_order, check_second_order


def traced(f, *arrays):
    """(value, pullback, type of f's output while traced) of f at arrays."""
    seen = []

    def recorded(*a):
        out = f(*a)
        seen.append(out)
        return out
    value, pullback = ag.vjp(recorded, *arrays)
    return value, pullback, type(seen[0])


def inside(f, x):
    """f(x) with x traced (a Box); f's result is returned as it was, for inspection."""
    results = []
    ag.gradient(lambda x: results.append(f(x)) or 0.0, x)
    return results[0]


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(rng, shape):
    x = rng.standard_normal(shape)
    return np.where(np.abs(x) < 0.2, 0.2 * np.sign(x + (x == 0)), x)


# name: (function written with numpy's vocabulary, input sampler, analytic elementwise derivative)
ELEMENTWISE = {
    "np.exp": (np.exp, away_from_zero, np.exp),
    "np.log": (np.log, positive, lambda x: 1 / x),
    "np.sqrt": (np.sqrt, positive, lambda x: 0.5 / np.sqrt(x)),
    "np.tanh": (np.tanh, away_from_zero, lambda x: 1 / np.cosh(x) ** 2),
    "np.abs": (np.abs, away_from_zero, np.sign),
    "np.square": (np.square, away_from_zero, lambda x: 2 * x),
    "np.negative": (np.negative, away_from_zero, lambda x: -np.ones_like(x)),
    "np.positive": (np.positive, away_from_zero, np.ones_like),
    "-x": (lambda x: -x, away_from_zero, lambda x: -np.ones_like(x)),
    "+x": (lambda x: +x, away_from_zero, np.ones_like),
    "abs(x)": (abs, away_from_zero, np.sign),
    "x ** 3": (lambda x: x ** 3, away_from_zero, lambda x: 3 * x * x),
    "x ** 0.5": (lambda x: x ** 0.5, positive, lambda x: 0.5 / np.sqrt(x)),
    "2 ** x": (lambda x: 2.0 ** x, away_from_zero, lambda x: math.log(2) * 2.0 ** x),
    "1 / x": (lambda x: 1.0 / x, positive, lambda x: -1 / (x * x)),
    "x / 4": (lambda x: x / 4.0, away_from_zero, lambda x: np.full_like(x, 0.25)),
    "3 - x": (lambda x: 3.0 - x, away_from_zero, lambda x: -np.ones_like(x)),
    "x - 3": (lambda x: x - 3.0, away_from_zero, np.ones_like),
    "5 * x + 1": (lambda x: 5 * x + 1, away_from_zero, lambda x: np.full_like(x, 5.0)),
    "x * 5 + 1": (lambda x: x * 5 + 1, away_from_zero, lambda x: np.full_like(x, 5.0)),
}


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_values_and_analytic_derivatives(name, rng):
    f, sample, derivative = ELEMENTWISE[name]
    x = sample(rng, (3, 4))
    value, pullback, kind = traced(f, x)
    assert kind is Box  # recorded, not computed on the side
    np.testing.assert_allclose(value, f(x), rtol=1e-15, atol=0)
    w = rng.standard_normal((3, 4))
    (g,) = pullback(w)
    np.testing.assert_allclose(g, w * derivative(x), rtol=1e-13, atol=1e-15)
    check_first_order(f, x)


@pytest.mark.parametrize("name", ["np.exp", "np.log", "np.tanh", "x ** 3", "1 / x"])
def test_elementwise_second_order_through_numpy_functions(name, rng):
    f, sample, _ = ELEMENTWISE[name]
    check_second_order(lambda x: np.sum(f(x) * f(x)), sample(rng, (2, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_keep_float32(dtype, rng):
    x = positive(rng, (2, 3)).astype(dtype)
    for name, (f, _, _) in ELEMENTWISE.items():
        value, pullback, _ = traced(f, x)
        assert value.dtype == dtype, name
        assert pullback(np.ones((2, 3), dtype))[0].dtype == dtype, name


# name: (binary function, samplers of a and b); shapes (3, 4) and (4,) broadcast.
BINARY = {
    "np.add": (np.add, away_from_zero, away_from_zero),
    "np.subtract": (np.subtract, away_from_zero, away_from_zero),
    "np.multiply": (np.multiply, away_from_zero, away_from_zero),
    "np.true_divide": (np.true_divide, away_from_zero, positive),
    "np.power": (np.power, positive, away_from_zero),
    "np.maximum": (np.maximum, away_from_zero, away_from_zero),
    "np.minimum": (np.minimum, away_from_zero, away_from_zero),
    "a + b": (lambda a, b: a + b, away_from_zero, away_from_zero),
    "a - b": (lambda a, b: a - b, away_from_zero, away_from_zero),
    "a * b": (lambda a, b: a * b, away_from_zero, away_from_zero),
    "a / b": (lambda a, b: a / b, away_from_zero, positive),
    "a ** b": (lambda a, b: a ** b, positive, away_from_zero),
}


@pytest.mark.parametrize("name", BINARY)
def test_binary_values_and_gradients(name, rng):
    f, sample_a, sample_b = BINARY[name]
    a, b = sample_a(rng, (3, 4)), sample_b(rng, (4,))
    value, _, kind = traced(f, a, b)
    assert kind is Box
    np.testing.assert_allclose(value, f(a, b), rtol=1e-15, atol=0)
    check_first_order(f, a, b)
    # One side traced, the other a plain array (left or right): still recorded.
    np.testing.assert_allclose(traced(lambda a: f(a, b), a)[0], f(a, b), rtol=1e-15)
    np.testing.assert_allclose(traced(lambda b: f(a, b), b)[0], f(a, b), rtol=1e-15)
    check_first_order(lambda b: f(a, b), b)


def test_product_rule_analytic(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    w = rng.standard_normal((3, 4))
    _, pullback, _ = traced(lambda a, b: np.multiply(a, b) + a / b, a, b)
    ga, gb = pullback(w)
    np.testing.assert_allclose(ga, w * (b + 1 / b), rtol=1e-13)
    np.testing.assert_allclose(gb, np.sum(w * (a - a / b ** 2), axis=0), rtol=1e-12)


@pytest.mark.parametrize("form", ["a @ w", "np.matmul", "plain @ traced", "traced @ plain"])
def test_matmul_operator_and_function(form, rng):
    a, w = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    f = {"a @ w": lambda a, w: a @ w, "np.matmul": np.matmul}.get(form)
    if f is not None:
        value, pullback, kind = traced(f, a, w)
        assert kind is Box
        np.testing.assert_allclose(value, np.matmul(a, w), rtol=1e-14)
        g = rng.standard_normal((2, 3, 5))
        ga, gw = pullback(g)
        np.testing.assert_allclose(ga, g @ w.T, rtol=1e-13)
        np.testing.assert_allclose(gw, np.einsum("bti,btj->ij", a, g), rtol=1e-13)
        check_first_order(f, a, w)
    elif form == "plain @ traced":
        value, pullback, _ = traced(lambda w: a @ w, w)
        np.testing.assert_allclose(value, a @ w, rtol=1e-14)
        check_first_order(lambda w: a @ w, w)
    else:
        value, pullback, _ = traced(lambda a: a @ w, a)
        np.testing.assert_allclose(value, a @ w, rtol=1e-14)
        check_first_order(lambda a: a @ w, a)


# name: function of one (2, 3, 4) array written with numpy functions and methods
STRUCTURAL = {
    "x.T": lambda x: x.T,
    "x.transpose()": lambda x: x.transpose(),
    "x.transpose(1, 0, 2)": lambda x: x.transpose(1, 0, 2),
    "x.transpose((2, 0, 1))": lambda x: x.transpose((2, 0, 1)),
    "np.transpose": lambda x: np.transpose(x, (0, 2, 1)),
    "x.reshape(6, 4)": lambda x: x.reshape(6, 4),
    "x.reshape((4, -1))": lambda x: x.reshape((4, -1)),
    "np.reshape": lambda x: np.reshape(x, (-1,)),
    "x.swapaxes": lambda x: x.swapaxes(0, 2),
    "np.swapaxes": lambda x: np.swapaxes(x, 1, 2),
    "np.expand_dims": lambda x: np.expand_dims(x, 1),
    "np.squeeze": lambda x: np.squeeze(x[:, :1], axis=1),
    "x.squeeze": lambda x: x[None].squeeze(0),
    "np.broadcast_to": lambda x: np.broadcast_to(x[:, :1], (2, 5, 4)),
    "np.sum": lambda x: np.sum(x),
    "np.sum(axis)": lambda x: np.sum(x, axis=(0, 2)),
    "x.sum(keepdims)": lambda x: x.sum(axis=1, keepdims=True),
    "np.mean": lambda x: np.mean(x, axis=-1),
    "x.mean": lambda x: x.mean(),
    "np.max": lambda x: np.max(x, axis=1),
    "np.amax": lambda x: np.amax(x, axis=(0, 1)),
    "x.max": lambda x: x.max(),
    "np.var": lambda x: np.var(x, axis=0),
    "x.var(ddof=1)": lambda x: x.var(axis=2, ddof=1),
    "x[1]": lambda x: x[1],
    "x[:, ::-1, 1:3]": lambda x: x[:, ::-1, 1:3],
    "x[[0, 0, 1]]": lambda x: x[[0, 0, 1]],
    "np.take": lambda x: np.take(x, np.array([[1, 0], [1, 1]]), axis=0),
    "np.concatenate": lambda x: np.concatenate([x, x[:, :1] * 2.0], axis=1),
    "np.concatenate(plain)": lambda x: np.concatenate([np.ones((1, 3, 4)), x]),
    "np.stack": lambda x: np.stack([x[0], x[1] ** 2], axis=-1),
    "np.split": lambda x: np.concatenate(np.split(x, [1, 3], axis=2)[::-1], axis=2),
    "np.where": lambda x: np.where(x > 0, x, 0.5 * x),
    "np.where(plain)": lambda x: np.where(x < 0.3, np.ones((3, 4)), x ** 2),
    "iteration": lambda x: np.stack([row * (i + 1) for i, row in enumerate(x)]),
    "unpacking": lambda x: (lambda a, b: a * b)(*x),
}


def distinct(rng, shape):
    """Normal values without ties (max) and away from the where thresholds."""
    return away_from_zero(rng, shape) + 1e-3 * np.arange(np.prod(shape)).reshape(shape)


@pytest.mark.parametrize("name", STRUCTURAL)
def test_numpy_functions_and_methods_match_numpy(name, rng):
    f = STRUCTURAL[name]
    x = distinct(rng, (2, 3, 4))
    value, _, kind = traced(f, x)
    want = f(x)  # plain numpy on the plain array
    assert kind is Box
    assert np.shape(value) == np.shape(want)
    np.testing.assert_allclose(value, want, rtol=1e-15, atol=0)
    check_first_order(f, x)


def test_take_gradient_counts_repeated_rows(rng):
    x = rng.standard_normal((4, 3))
    idx = np.array([2, 0, 2, 2])
    (g,) = ag.gradient(lambda x: np.sum(np.take(x, idx, axis=0)), x)
    np.testing.assert_array_equal(g, np.bincount(idx, minlength=4)[:, None] * np.ones((1, 3)))


def test_sum_mean_var_gradients_analytic(rng):
    """d/dx_ij [var₁(x_i·) + 3·mean(x) + Σ_j (Σ_i x_ij)²] = 2(x_ij - x̄_i)/(n-1) + 3/N + 2 Σ_k x_kj."""
    x = rng.standard_normal((3, 5))
    (g,) = ag.gradient(lambda x: np.sum(x.var(axis=1, ddof=1)) + np.mean(x) * 3
                       + np.sum(np.sum(x, axis=0) ** 2), x)
    want = 2 * (x - x.mean(axis=1, keepdims=True)) / 4 + 3 / 15 + 2 * x.sum(axis=0)
    np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-14)


# Constants: comparisons and ufuncs without a derivative

COMPARISONS = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparisons_give_plain_bool_arrays(op, rng):
    compare = COMPARISONS[op]
    x = np.array([[0.0, 1.0, -1.0], [2.0, 2.0, 0.5]])
    y = np.array([0.0, 2.0, 0.5])
    for got, want in [(inside(lambda x: compare(x, y), x), compare(x, y)),
                      (inside(lambda x: compare(x, 0.5), x), compare(x, 0.5)),
                      (inside(lambda x: compare(y, x), x), compare(y, x)),
                      (inside(lambda x: compare(x, x[0]), x), compare(x, x[0]))]:
        assert type(got) is np.ndarray and got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)


CONSTANT_UFUNCS = [np.sign, np.floor, np.ceil, np.rint, np.isfinite, np.isnan, np.isinf,
                   np.signbit, np.logical_not]


@pytest.mark.parametrize("ufunc", CONSTANT_UFUNCS, ids=lambda u: u.__name__)
def test_constant_ufuncs_are_plain_and_cut_from_the_gradient(ufunc):
    x = np.array([-1.5, -0.2, 0.0, 0.7, 2.5, np.inf])
    got = inside(ufunc, x)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, ufunc(x))
    y = x[:-1]
    (g,) = ag.gradient(lambda y: np.sum(ufunc(y) * y), y)  # d/dy [c(y)·y] = c(y), c constant
    np.testing.assert_array_equal(g, ufunc(y).astype(np.float64))


def test_binary_constant_ufuncs():
    x = np.array([-1.0, 0.0, 2.0])
    for ufunc in (np.logical_and, np.logical_or, np.logical_xor, np.equal, np.less):
        got = inside(lambda x: ufunc(x, np.array([1.0, 0.0, 2.0])), x)
        assert type(got) is np.ndarray
        np.testing.assert_array_equal(got, ufunc(x, np.array([1.0, 0.0, 2.0])))


def test_masks_from_comparisons_select_gradients(rng):
    x = away_from_zero(rng, (4, 5))
    (g,) = ag.gradient(lambda x: np.sum(np.where(x > 0, x ** 2, -x)), x)
    np.testing.assert_allclose(g, np.where(x > 0, 2 * x, -1.0), rtol=1e-15)


# Array attributes and Python protocols

def test_shape_ndim_dtype_size_len_on_traced_values(rng):
    for dtype in DTYPES:
        x = rng.standard_normal((3, 4, 2)).astype(dtype)
        got = inside(lambda x: (x.shape, x.ndim, x.dtype, x.size, len(x),
                                np.shape(x), np.ndim(x), np.size(x)), x)
        assert got == ((3, 4, 2), 3, dtype, 24, 3, (3, 4, 2), 3, 24)


def test_zeros_like_and_ones_like_are_plain_arrays(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    zeros, ones, ones64 = inside(lambda x: (np.zeros_like(x), np.ones_like(x),
                                            np.ones_like(x, dtype=np.float64)), x)
    for got, fill, dtype in [(zeros, 0, np.float32), (ones, 1, np.float32), (ones64, 1, np.float64)]:
        assert type(got) is np.ndarray and got.dtype == dtype and got.shape == (2, 3)
        np.testing.assert_array_equal(got, np.full((2, 3), fill))


def test_bool_of_a_one_element_traced_value_and_hashing():
    assert inside(lambda x: (bool(x[0] > 0), bool(x[1])), np.array([2.0, 0.0])) == (True, False)
    with pytest.raises(TypeError, match="unhashable"):
        inside(hash, np.ones(2))


def test_iteration_over_a_0d_traced_value_is_an_error():
    with pytest.raises(TypeError, match=re.escape("iteration over a 0-d traced value")):
        inside(list, np.array(1.0))
    rows = inside(list, np.arange(6.0).reshape(3, 2))
    assert len(rows) == 3 and all(type(r) is Box for r in rows)
    np.testing.assert_array_equal([r.value for r in rows], np.arange(6.0).reshape(3, 2))


# astype

@pytest.mark.parametrize("src, dst", [(np.float32, np.float64), (np.float64, np.float32),
                                      (np.float32, np.float32), (np.float64, "float32")])
def test_astype_between_floats_is_recorded(src, dst, rng):
    x = rng.standard_normal((2, 3)).astype(src)
    value, pullback, kind = traced(lambda x: x.astype(dst), x)
    assert kind is Box and value.dtype == np.dtype(dst)
    np.testing.assert_array_equal(value, x.astype(dst))
    w = rng.standard_normal((2, 3)).astype(dst)
    (g,) = pullback(w)
    assert g.dtype == src  # the cotangent comes back in the input's dtype
    np.testing.assert_array_equal(g, w.astype(src))
    (g,) = ag.gradient(lambda x: np.sum(x.astype(dst) ** 2), x)
    assert g.dtype == src
    np.testing.assert_allclose(g, 2 * x.astype(np.float64),
                               rtol=1e-15 if src == dst == np.float64 else 1e-6)


def test_astype_to_integer_or_bool_is_a_constant(rng):
    x = 3 * rng.standard_normal(5)
    for dtype in (np.int64, np.int32, bool):
        got = inside(lambda x: x.astype(dtype), x)
        assert type(got) is np.ndarray
        np.testing.assert_array_equal(got, x.astype(dtype))
    (g,) = ag.gradient(lambda x: np.sum(x.astype(np.int64) * 1.0 + x * x.astype(np.int64)), x)
    np.testing.assert_array_equal(g, x.astype(np.int64).astype(np.float64))


def test_astype_second_order(rng):
    """d²/dx² Σ x³ = 6x through a float32 -> float64 cast, with float32 at both levels."""
    x32 = rng.standard_normal(4).astype(np.float32)
    first = ag.grad(lambda x: np.sum(x.astype(np.float64) ** 3))
    second = ag.grad(lambda x: np.sum(first(x)))(x32)
    assert second.dtype == np.float32
    np.testing.assert_allclose(second, 6 * x32.astype(np.float64), rtol=1e-6)
    check_second_order(lambda x: np.sum(np.tanh(x.astype(np.float64)) ** 3), x32.astype(np.float64))


# Dtype promotion that numpy does silently is refused on traced values

def test_numpy_float64_scalar_with_float32_is_refused(rng):
    x32 = rng.standard_normal(3).astype(np.float32)
    assert (np.float64(2.0) * x32).dtype == np.float64  # numpy promotes (NEP 50)
    with pytest.raises(TypeError, match=r"mul: operands float64 \(\) and float32 \(3,\)"):
        inside(lambda x: np.float64(2.0) * x, x32)
    for f in (lambda x: np.float32(2.0) * x, lambda x: 2.0 * x, lambda x: x * 2):
        value, pullback, _ = traced(f, x32)
        assert value.dtype == np.float32
        np.testing.assert_array_equal(value, 2 * x32)
        assert pullback(np.ones(3, np.float32))[0].dtype == np.float32


# Errors for what has no rule

def test_take_supports_axis_zero_only(rng):
    x = rng.standard_normal((3, 4))
    message = "np.take on a traced value supports axis=0 only (ag.gather)"
    for kwargs in ({"axis": 1}, {"axis": -1}, {}):  # {}: numpy's default axis=None (flattened)
        with pytest.raises(TypeError, match=re.escape(message)):
            inside(lambda x: np.take(x, np.array([0, 1]), **kwargs), x)
    np.testing.assert_array_equal(np.take(x, [0, 1], axis=1), x[:, :2])  # plain numpy: fine


@pytest.mark.parametrize("call, message", [
    (np.sin, "autograd_lite has no rule for numpy's sin on traced values; "
             "define one with ag.primitive"),
    (lambda x: np.arctan2(x, x), "no rule for numpy's arctan2 on traced values"),
    (np.add.reduce, "no rule for numpy's add.reduce on traced values"),
    (lambda x: np.multiply.outer(x, x), "no rule for numpy's multiply.outer on traced values"),
    (lambda x: np.exp(x, out=np.empty(x.shape)), "no rule for numpy's exp with out on traced"),
    (lambda x: np.add(x, x, dtype=np.float64), "no rule for numpy's add with dtype on traced"),
    (np.cumsum, "autograd_lite has no rule for np.cumsum on traced values; "
                "define one with ag.primitive"),
    (np.sort, "no rule for np.sort on traced values"),
    (lambda x: np.dot(x, x), "no rule for np.dot on traced values"),
])
def test_unsupported_numpy_calls_name_the_function(call, message, rng):
    with pytest.raises(TypeError, match=re.escape(message)):
        inside(call, rng.standard_normal(3))


def test_module_getattr_unknown_name():
    with pytest.raises(AttributeError,
                       match=re.escape("module 'autograd_lite' has no attribute 'no_such_name'")):
        ag.no_such_name
    assert not hasattr(ag, "no_such_name")
    assert getattr(ag, "no_such_name", 17) == 17
    with pytest.raises(ImportError, match="no_such_name"):
        from autograd_lite import no_such_name  # noqa: F401
    assert ag.viz.trace is not None  # the one lazily imported name
