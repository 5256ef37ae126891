"""Elementwise ops (autograd_lite/ops/elementwise.py) beyond the op table: kinks, large and
tiny arguments against PyTorch, errors, random broadcast shapes, and astype."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import autograd_lite as ag
from helpers.references import DTYPES, compare_with_torch
from helpers.op_table import BY_NAME

BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_kinks_match_torch(dtype, torch):
    x = np.array([-1.0, 0.0, 0.0, 2.0], dtype=dtype)
    compare_with_torch(torch, ag.relu, torch.relu, x)  # relu'(0) = 0
    compare_with_torch(torch, ag.abs, torch.abs, x)    # abs'(0) = 0
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.relu(x)))(x), [0, 0, 0, 1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_of_infinities_and_negatives_is_torchs(dtype, torch):
    """relu(-inf) = 0 (not -inf · 0 = NaN), relu(-1) = +0 (not -0), relu(inf) = inf."""
    x = np.array([-np.inf, -1.0, 0.0, 3.0, np.inf], dtype=dtype)
    out = ag.relu(x)
    expected = torch.relu(torch.from_numpy(x)).numpy()
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.relu(x)))(x), [0, 0, 0, 1, 1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_stable_at_large_arguments(dtype, torch):
    x = np.array([-1e4, -80.0, 0.0, 80.0, 1e4], dtype=dtype)
    for name in ("sigmoid", "tanh", "gelu", "relu", "softplus", "silu", "sin", "cos"):
        out = compare_with_torch(torch, BY_NAME[name].ours, BY_NAME[name].theirs, x)
        assert np.all(np.isfinite(out))


SIGMOID_POINTS = {np.float32: [-88.0, -40.0, -20.0, -10.0, 0.0, 10.0, 20.0, 40.0, 88.0],
                  np.float64: [-700.0, -40.0, -37.0, -20.0, 0.0, 20.0, 40.0, 700.0]}


@pytest.mark.parametrize("dtype", DTYPES)
def test_sigmoid_keeps_its_relative_precision_on_both_sides(dtype, torch):
    """Far into the negative side, where (1 + tanh(x/2)) / 2 rounds to 0 (below x = -10 in
    float32, -37 in float64) and log σ(x) would have a NaN gradient: each value within a few
    ulps of torch's, relatively; the gradient of log σ(x), 1 - σ(x), finite and torch's."""
    x = np.array(SIGMOID_POINTS[dtype], dtype)
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    want = torch.sigmoid(t)
    (want_grad,) = torch.autograd.grad(torch.log(want).sum(), t)
    y = ag.sigmoid(x)
    assert y.dtype == dtype and np.all(y > 0)
    np.testing.assert_allclose(y, want.detach().numpy(), rtol=4 * np.finfo(dtype).eps, atol=0)
    g = ag.grad(lambda x: ag.sum(ag.log(ag.sigmoid(x))))(x)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, want_grad.numpy(), rtol=4 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log1p_expm1_and_softplus_keep_tiny_arguments(dtype, torch):
    """Where log(1 + x), exp(x) - 1 and log(1 + exp(x)) written out lose x to rounding."""
    x = np.array([-1e-10, 1e-12, 3e-8, -40.0], dtype=dtype)
    for name in ("log1p", "expm1"):
        out = compare_with_torch(torch, BY_NAME[name].ours, BY_NAME[name].theirs, x[:3])
        np.testing.assert_allclose(out, x[:3], rtol=1e-6)  # ≈ x for tiny x
    out = compare_with_torch(torch, ag.softplus, torch.nn.functional.softplus, x)
    assert out[-1] > 0  # log1p(e^-40) ≈ 4e-18, not 0


@pytest.mark.parametrize("name", [*BINARY, "where"])
def test_mixed_float_dtypes_raise(name):
    a, b = np.ones((2, 3), np.float32), np.ones((3,), np.float64)
    op = BY_NAME[name].ours if name != "where" else (lambda a, b: ag.where(np.ones(3, bool), a, b))
    with pytest.raises(TypeError, match=re.escape(f"{name}: operands float32 (2, 3) and "
                                                  "float64 (3,) have different dtypes")):
        op(a, b)


@pytest.mark.parametrize("name", BINARY)
def test_broadcasting_failure_names_op_and_shapes(name):
    a, b = np.ones((2, 3)), np.ones((4,))
    with pytest.raises(ValueError, match=re.escape(f"{name}: shapes (2, 3) and (4,) do not "
                                                   "broadcast together")):
        BY_NAME[name].ours(a, b)


elementwise_shapes = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                   min_side=1, max_side=4)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(shapes=elementwise_shapes, name=st.sampled_from(BINARY), seed=st.integers(0, 2**16))
def test_broadcast_gradients_property(torch, shapes, name, seed):
    """∇ Σ f(a, b) ⊙ w for random broadcast-compatible shapes: torch's numbers,
    a's and b's shapes (each operand drawn from the op table's domain)."""
    rng = np.random.default_rng(seed)
    case = BY_NAME[name]
    a, b = (x.draw(rng, shape) for x, shape in zip(case.args, shapes.input_shapes))
    out = compare_with_torch(torch, case.ours, case.theirs, np.asarray(a), np.asarray(b))
    assert out.shape == shapes.result_shape


def test_float64_with_integer_arrays_is_allowed():
    x = np.array([1.0, 2.0, 4.0])
    np.testing.assert_array_equal(ag.mul(x, np.arange(3)), x * np.arange(3))
    np.testing.assert_array_equal(ag.div(np.int64(2), x), 2 / x)


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
