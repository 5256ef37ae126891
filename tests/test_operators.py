"""Python operators, methods and numpy functions on traced values (autograd_lite/ops/operators.py)
beyond the op table (whose rows written in numpy's vocabulary check that each reaches its op
with numpy's numbers): comparisons and constant ufuncs, attributes and protocols, astype's
dtypes, refused promotions, the errors for what has no rule, and for what would change a
traced value in place."""
import re

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.core.tracer import Box
from helpers.references import DTYPES


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
    x = rng.standard_normal((4, 5))
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
    (np.cbrt, "autograd_lite has no rule for numpy's cbrt on traced values; "
              "define one with ag.primitive"),
    (lambda x: np.fmod(x, x), "no rule for numpy's fmod on traced values"),
    (np.add.reduce, "no rule for numpy's add.reduce on traced values"),
    (lambda x: np.multiply.outer(x, x), "no rule for numpy's multiply.outer on traced values"),
    (lambda x: np.exp(x, out=np.empty(x.shape)), "no rule for numpy's exp with out on traced"),
    (lambda x: np.add(x, x, dtype=np.float64), "no rule for numpy's add with dtype on traced"),
    (np.cumprod, "autograd_lite has no rule for np.cumprod on traced values; "
                 "define one with ag.primitive"),
    (lambda x: np.argpartition(x, 1), "no rule for np.argpartition on traced values"),
    (lambda x: np.convolve(x, x), "no rule for np.convolve on traced values"),
])
def test_unsupported_numpy_calls_name_the_function(call, message, rng):
    with pytest.raises(TypeError, match=re.escape(message)):
        inside(call, rng.standard_normal(3))


# In-place changes: a traced value is a value, not a buffer

def test_item_assignment_says_what_to_write_instead():
    message = ("x[index] = value: a traced value cannot be changed in place. Build a new array "
               "instead: ag.where(mask, value, x) takes value where the bool array mask is True "
               "and x elsewhere; ag.concatenate or ag.stack joins pieces")

    def assign(x):
        x[0] = 1.0
    with pytest.raises(TypeError, match=re.escape(message)):
        inside(assign, np.ones(3))
    # what the message suggests does the job
    x = np.array([2.0, 3.0, 4.0])
    first = np.array([True, False, False])
    value, (g,) = ag.value_and_gradient(lambda x: ag.sum(ag.where(first, 1.0, x) * x), x)
    assert value == 2.0 + 9.0 + 16.0
    np.testing.assert_array_equal(g, [1.0, 6.0, 8.0])


def test_sort_method_says_it_sorts_in_place():
    with pytest.raises(TypeError, match=re.escape("x.sort() sorts in place, which a traced value "
                                                  "cannot be: write np.sort(x, axis)")):
        inside(lambda x: x.sort(), np.ones(3))


def test_module_getattr_unknown_name():
    with pytest.raises(AttributeError,
                       match=re.escape("module 'autograd_lite' has no attribute 'no_such_name'")):
        ag.no_such_name
    assert not hasattr(ag, "no_such_name")
    assert getattr(ag, "no_such_name", 17) == 17
    with pytest.raises(ImportError, match="no_such_name"):
        from autograd_lite import no_such_name  # noqa: F401
    assert ag.viz.trace is not None  # the one lazily imported name
