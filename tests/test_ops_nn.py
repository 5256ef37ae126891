"""Fused neural-network ops (autograd_lite/ops/nn.py) beyond the op table: the gradient
helpers against PyTorch, fully masked rows, stability at huge logits, softmax's precision,
cross entropy with every label ignored, dropout's statistics, errors, and the pullback's
memory."""
import numpy as np
import pytest

import autograd_lite as ag
from helpers.op_cases import assert_raises, each_error
from helpers.references import DTYPES, check_second_order, compare_with_torch, to_tensor


# ---- softmax, log_softmax, logsumexp ----------------------------------------------------------

def test_softmax_backward_helper_is_softmax_vjp(rng, torch):
    x, g = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    t = torch.from_numpy(x).requires_grad_(True)
    (want,) = torch.autograd.grad(t.softmax(0), t, torch.from_numpy(g))
    y = ag.softmax(x, axis=0)
    np.testing.assert_allclose(ag.ops.softmax_backward(g, y, 0), want.numpy(),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_row_is_zero_with_zero_gradient(dtype, rng, torch):
    x = rng.standard_normal((3, 4)).astype(dtype)
    mask = np.array([[True, False, True, True], [False] * 4, [False, False, False, True]])
    out = ag.softmax(x, mask=mask)
    assert np.all(np.isfinite(out)) and np.all(out[1] == 0) and out[2, 3] == 1
    w = rng.standard_normal((3, 4)).astype(dtype)
    g = ag.grad(lambda x: ag.sum(ag.softmax(x, mask=mask) * w))(x)
    assert g.dtype == dtype and np.all(np.isfinite(g)) and np.all(g[1] == 0) and np.all(g[2] == 0)
    # the other rows agree with torch, and so does a second derivative
    keep = mask[:1]
    compare_with_torch(torch, lambda x: ag.softmax(x, mask=keep),
                       lambda t: t.masked_fill(~torch.from_numpy(keep), -np.inf).softmax(-1), x[:1])
    check_second_order(lambda x: ag.sum(ag.softmax(x, mask=mask) ** 2), x.astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_stable_at_huge_logits(dtype, torch):
    x = np.array([[1e4, 0.0, -1e4], [1e4, 1e4 + 1, 1e4 - 2], [-1e4, -1e4, -1e4 + 3]], dtype=dtype)
    labels = np.array([2, 0, 1])
    outs = [
        compare_with_torch(torch, ag.softmax, lambda t: t.softmax(-1), x),
        compare_with_torch(torch, ag.log_softmax, lambda t: t.log_softmax(-1), x),
        compare_with_torch(torch, ag.logsumexp, lambda t: t.logsumexp(-1), x),
        compare_with_torch(torch, lambda x: ag.logsumexp(x, axis=None),
                           lambda t: t.logsumexp((0, 1)), x),
        compare_with_torch(torch, lambda x: ag.cross_entropy(x, labels, label_smoothing=0.1),
                           lambda t: torch.nn.functional.cross_entropy(
                               t, torch.from_numpy(labels), label_smoothing=0.1), x),
    ]
    grads = ag.gradient(lambda x: ag.cross_entropy(x, labels) + ag.sum(ag.logsumexp(x)), x)
    for a in [*outs, *grads]:
        assert np.all(np.isfinite(a))
    np.testing.assert_allclose(outs[2], [1e4, 1e4 + 1 + np.log1p(np.exp(-1) + np.exp(-3)),
                                         -1e4 + 3 + np.log1p(2 * np.exp(-3))], rtol=1e-7)


def softmax_in_float64(x, mask=None):
    """The textbook reference: shift by the row maximum of the kept entries, in float64."""
    x = x.astype(np.float64)
    kept = np.ones(x.shape, bool) if mask is None else np.broadcast_to(mask, x.shape)
    m = np.where(kept, x, -np.inf).max(axis=-1, keepdims=True)
    e = np.where(kept, np.exp(x - np.where(np.isfinite(m), m, 0)), 0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [0.5, 0.99, 1.01, 2.0])
def test_softmax_is_as_exact_on_both_sides_of_the_no_shift_bound(dtype, scale, rng):
    """Within ±½·log(largest float) exp is taken unshifted; beyond, shifted by the row max.
    Rows far below zero (all near -bound) keep full relative precision either way."""
    bound = 0.5 * np.log(np.finfo(dtype).max)
    x = rng.uniform(-1, 1, (6, 64)) * bound * scale
    x[0] = -bound * scale + rng.uniform(0, 3, 64)  # every entry near the lower end
    x[1] = bound * scale - rng.uniform(0, 3, 64)   # every entry near the upper end
    x = x.astype(dtype)
    mask = rng.random((6, 64)) < 0.7
    mask[2] = False  # a fully masked row
    tol = {np.float32: 2e-6, np.float64: 1e-14}[dtype]
    for m in (None, mask):
        y = ag.softmax(x, mask=m)
        assert y.dtype == dtype
        np.testing.assert_allclose(y, softmax_in_float64(x, m), rtol=tol, atol=1e-30)
    shifted = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
    want = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(ag.log_softmax(x), want, rtol=tol, atol=tol * np.abs(want).max())


# ---- layer_norm -------------------------------------------------------------------------------

def test_layer_norm_backward_helper_is_the_x_gradient(rng, torch):
    x, g, scale = rng.standard_normal((3, 6)), rng.standard_normal((3, 6)), rng.standard_normal(6)
    t = torch.from_numpy(x).requires_grad_(True)
    y = torch.nn.functional.layer_norm(t, (6,), torch.from_numpy(scale), None, 1e-5)
    (want,) = torch.autograd.grad(y, t, torch.from_numpy(g))
    centered = x - x.mean(-1, keepdims=True)
    inv_std = 1 / np.sqrt(centered.var(-1, keepdims=True) + 1e-5)
    got = ag.ops.layer_norm_backward(g, centered * inv_std, inv_std, scale)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)


# ---- cross_entropy ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_with_every_label_ignored_is_nan_with_zero_gradient_like_torch(
        torch, smoothing, dtype, rng):
    logits, labels = rng.standard_normal((2, 3)).astype(dtype), np.array([-100, -100])
    loss = lambda x: ag.cross_entropy(x, labels, ignore_index=-100, label_smoothing=smoothing)
    t = to_tensor(torch, logits, requires_grad=True)
    want = torch.nn.functional.cross_entropy(t, to_tensor(torch, labels), label_smoothing=smoothing)
    want.backward()
    value, (g,) = ag.value_and_gradient(loss, logits)
    assert np.isnan(value) and np.isnan(want.item())
    assert g.dtype == dtype and np.array_equal(g, t.grad.numpy())  # zeros, not NaN
    assert np.array_equal(t.grad.numpy(), np.zeros((2, 3)))


# ---- dropout ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_dropout(rate, dtype, rng):
    x = (rng.random((200, 50)) + 0.5).astype(dtype)
    out = ag.dropout(x, rate, np.random.default_rng(1))
    assert type(out) is np.ndarray and out.dtype == dtype
    kept = out != 0
    np.testing.assert_allclose(out[kept], x[kept] / dtype(1 - rate), rtol=1e-6)
    assert abs(kept.mean() - (1 - rate)) < 0.02  # 10,000 Bernoulli draws: 4+ standard deviations
    np.testing.assert_array_equal(out, ag.dropout(x, rate, np.random.default_rng(1)))  # same bits
    g = ag.grad(lambda x: ag.sum(ag.dropout(x, rate, np.random.default_rng(1))))(x)
    assert g.dtype == dtype
    np.testing.assert_allclose(g, out / x, rtol=1e-6)  # each output is x times its own factor


def test_dropout_is_the_identity_at_inference(rng):
    x = rng.standard_normal((3, 4))
    assert ag.dropout(x, 0.0, np.random.default_rng(0)) is x
    assert ag.dropout(x, 0.5, None) is x
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.dropout(x, 0.3, None)))(x), 1)


# ---- errors ----------------------------------------------------------------------------------

ERRORS = [
    (lambda: ag.softmax(np.ones((2, 4)), mask=np.ones((2, 4), dtype=int)), TypeError,
     "softmax: mask must be a bool array (True = keep), got int64"),
    (lambda: ag.softmax(np.ones((2, 4)), mask=np.ones((3,), dtype=bool)), ValueError,
     "softmax: mask (3,) does not broadcast to the scores (2, 4)"),
    (lambda: ag.softmax(np.ones((2, 4)), mask=np.ones((3, 2, 4), dtype=bool)), ValueError,
     "softmax: mask (3, 2, 4) does not broadcast to the scores (2, 4)"),
    (lambda: ag.softmax(np.ones((2, 4)), axis=2), ValueError,
     "softmax: axis 2 is out of range for an array of 2 dimensions"),
    (lambda: ag.log_softmax(np.ones((2, 4)), axis=-3), ValueError,
     "log_softmax: axis -3 is out of range for an array of 2 dimensions"),
    (lambda: ag.logsumexp(np.ones((2, 4)), axis=(1, -1)), ValueError,
     "logsumexp: repeated axis in (1, -1)"),
    (lambda: ag.layer_norm(np.ones((2, 4)), np.ones(3), np.ones(4)), ValueError,
     "layer_norm: scale (3,) and bias (4,) must have shape (4,), the last axis of x (2, 4)"),
    (lambda: ag.layer_norm(np.ones((2, 4)), np.ones(4), np.ones((1, 4))), ValueError,
     "layer_norm: scale (4,) and bias (1, 4) must have shape (4,), the last axis of x (2, 4)"),
    (lambda: ag.layer_norm(np.ones((2, 4), np.float32), np.ones(4), np.ones(4)), TypeError,
     "layer_norm: operands float32 (2, 4) and float64 (4,) have different dtypes"),
    (lambda: ag.cross_entropy(np.ones((2, 4)), np.zeros(3, int)), ValueError,
     "cross_entropy: labels (3,) must have the shape (2,) of logits (2, 4) without the class axis"),
    (lambda: ag.cross_entropy(np.ones((2, 4)), np.zeros(2)), TypeError,
     "cross_entropy: labels must be an integer array, got float64"),
    (lambda: ag.cross_entropy(np.ones((2, 4)), [0, 1]), TypeError,
     "cross_entropy: labels must be an integer array, got list"),
    (lambda: ag.cross_entropy(np.ones((2, 4)), np.array([0, 4])), IndexError,
     "cross_entropy: labels must lie in [0, 4) (or equal ignore_index=None), "
     "got values from 0 to 4"),
    (lambda: ag.cross_entropy(np.ones((2, 4)), np.array([-100, -1]), ignore_index=-100), IndexError,
     "cross_entropy: labels must lie in [0, 4) (or equal ignore_index=-100), "
     "got values from -1 to -1"),
    (lambda: ag.cross_entropy(np.ones((2, 4)), np.array([0, 1]), label_smoothing=1.5), ValueError,
     "cross_entropy: label_smoothing must lie in [0, 1], got 1.5"),
    (lambda: ag.dropout(np.ones(3), 1.0, np.random.default_rng(0)), ValueError,
     "dropout: rate must lie in [0, 1), got 1.0"),
]


@each_error(ERRORS)
def test_errors_name_the_op_and_shapes(make, error, message):
    assert_raises(make, error, message)


def test_logsumexp_of_a_row_of_minus_infinity_is_minus_infinity_as_in_torch(torch):
    x = np.array([[-np.inf, -np.inf], [0.0, 1.0]])
    want = torch.logsumexp(torch.tensor(x), dim=-1).numpy()
    np.testing.assert_array_equal(ag.logsumexp(x, axis=-1), want)
    with pytest.raises(ValueError, match=r"logsumexp: cannot reduce an empty axis of \(2, 0\)"):
        ag.logsumexp(np.zeros((2, 0)))


def test_softmax_axis_must_be_one_axis():
    with pytest.raises(TypeError, match=r"softmax: axis must be an int, got None"):
        ag.softmax(np.ones((2, 3)), axis=None)
    np.testing.assert_allclose(ag.softmax(np.zeros((2, 3)), axis=np.int64(1)), np.full((2, 3), 1 / 3))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("ignore_index", [None, 3])
def test_cross_entropy_backward_builds_no_one_hot(smoothing, ignore_index):
    """The pullback allocates the (N, C) gradient and nothing else of that size: a one-hot
    target of the class axis (another N·C floats) would show in the peak."""
    import tracemalloc
    n, c = 64, 5000
    x = np.random.default_rng(0).standard_normal((n, c)).astype(np.float32)
    labels = np.random.default_rng(1).integers(0, c, n)
    _, pullback = ag.vjp(lambda x: ag.cross_entropy(x, labels, ignore_index=ignore_index,
                                                     label_smoothing=smoothing), x)
    tracemalloc.start()
    try:
        (g,) = pullback(np.float32(1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * g.nbytes, peak / g.nbytes
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    target = np.full((n, c), smoothing / c)
    target[np.arange(n), labels] += 1 - smoothing
    counted = np.ones(n) if ignore_index is None else (labels != ignore_index).astype(float)
    want = (p - target) * counted[:, None] / counted.sum()
    np.testing.assert_allclose(g, want, rtol=2e-5, atol=1e-9)
