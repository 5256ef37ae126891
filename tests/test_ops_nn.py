"""Fused neural-network ops (autograd_lite/ops/nn.py): softmax (with masks), log_softmax,
logsumexp, layer_norm, cross_entropy, dropout and the gradient helpers, against central
differences and PyTorch; second order, stability at large logits, dtypes and errors."""
import re

import numpy as np
import pytest

import autograd_lite as ag
from torch_reference import (DTYPES, check_first_order, check_second_order, compare_with_torch,
                             to_tensor)

SOFTMAX_CASES = [((5,), -1), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1),
                 ((2, 3, 4), 0)]
LOGSUMEXP_CASES = [((5,), -1, False), ((3, 4), 0, True), ((2, 3, 4), -1, True),
                   ((2, 3, 4), (0, 2), False), ((2, 3, 4), None, False), ((2, 3, 4), None, True)]


def torch_dims(axis, ndim):
    return tuple(range(ndim)) if axis is None else axis


# ---- softmax, log_softmax, logsumexp ----------------------------------------------------------

@pytest.mark.parametrize("shape, axis", SOFTMAX_CASES)
@pytest.mark.parametrize("op", [ag.softmax, ag.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_family_first_and_second_order(op, shape, axis, rng):
    x = rng.standard_normal(shape)
    check_first_order(lambda x: op(x, axis), x)
    check_second_order(lambda x: ag.sum(ag.tanh(op(x, axis=axis))), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, axis", SOFTMAX_CASES)
def test_softmax_family_matches_torch(shape, axis, dtype, rng, torch):
    x = rng.standard_normal(shape).astype(dtype)
    compare_with_torch(torch, lambda x: ag.softmax(x, axis), lambda t: t.softmax(axis), x)
    compare_with_torch(torch, lambda x: ag.log_softmax(x, axis=axis),
                       lambda t: t.log_softmax(axis), x)


@pytest.mark.parametrize("shape, axis, keepdims", LOGSUMEXP_CASES)
def test_logsumexp_first_and_second_order(shape, axis, keepdims, rng):
    x = rng.standard_normal(shape)
    check_first_order(lambda x: ag.logsumexp(x, axis, keepdims), x)
    check_second_order(lambda x: ag.sum(ag.logsumexp(x, axis=axis, keepdims=keepdims) ** 2), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, axis, keepdims", LOGSUMEXP_CASES)
def test_logsumexp_matches_torch(shape, axis, keepdims, dtype, rng, torch):
    x = rng.standard_normal(shape).astype(dtype)
    compare_with_torch(torch, lambda x: ag.logsumexp(x, axis=axis, keepdims=keepdims),
                       lambda t: t.logsumexp(torch_dims(axis, len(shape)), keepdims), x)


def test_softmax_backward_helper_is_softmax_vjp(rng, torch):
    x, g = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    t = torch.from_numpy(x).requires_grad_(True)
    (want,) = torch.autograd.grad(t.softmax(0), t, torch.from_numpy(g))
    y = ag.softmax(x, axis=0)
    np.testing.assert_allclose(ag.ops.softmax_backward(g, y, 0), want.numpy(),
                               rtol=1e-12, atol=1e-15)


# masks: (scores shape, mask shape, axis); True = keep
MASK_CASES = [((3, 5), (3, 5), -1), ((3, 5), (5,), -1), ((2, 2, 4, 4), (2, 1, 1, 4), -1),
              ((2, 4, 4), (4, 4), -1), ((4, 3), (4, 1), 0)]


def random_mask(rng, mask_shape, axis):
    """A random mask that keeps at least one entry of every softmax row."""
    mask = rng.random(mask_shape) > 0.4
    first = [slice(None)] * len(mask_shape)
    first[axis] = 0
    mask[tuple(first)] = True
    return mask


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, mask_shape, axis", MASK_CASES)
def test_masked_softmax_matches_torch_masked_fill(shape, mask_shape, axis, dtype, rng, torch):
    x = rng.standard_normal(shape).astype(dtype)
    mask = random_mask(rng, mask_shape, axis)
    out = compare_with_torch(
        torch, lambda x: ag.softmax(x, axis, mask),
        lambda t: t.masked_fill(~torch.from_numpy(mask), float("-inf")).softmax(axis), x)
    assert np.all(out[~np.broadcast_to(mask, shape)] == 0)
    check_first_order(lambda x: ag.softmax(x, axis=axis, mask=mask), x.astype(np.float64))
    check_second_order(lambda x: ag.sum(ag.softmax(x, axis, mask) ** 2), x.astype(np.float64))


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

@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 3, 5)])
@pytest.mark.parametrize("eps", [1e-5, 1e-1])
def test_layer_norm_first_and_second_order(shape, eps, rng):
    x = rng.standard_normal(shape)
    scale, bias = rng.standard_normal(shape[-1:]), rng.standard_normal(shape[-1:])
    check_first_order(lambda x, s, b: ag.layer_norm(x, s, b, eps), x, scale, bias)
    check_second_order(lambda x, s, b: ag.sum(ag.tanh(ag.layer_norm(x, s, b, eps=eps))),
                       x, scale, bias)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 3, 5)])
def test_layer_norm_matches_torch(shape, dtype, rng, torch):
    x = (3 * rng.standard_normal(shape) + 1).astype(dtype)
    scale, bias = (rng.standard_normal(shape[-1:]).astype(dtype) for _ in range(2))
    compare_with_torch(torch, ag.layer_norm,
                       lambda x, s, b: torch.nn.functional.layer_norm(x, shape[-1:], s, b),
                       x, scale, bias)
    compare_with_torch(torch, lambda x, s, b: ag.layer_norm(x, s, b, eps=0.5),
                       lambda x, s, b: torch.nn.functional.layer_norm(x, shape[-1:], s, b, 0.5),
                       x, scale, bias)


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

def torch_cross_entropy(torch, ignore_index, label_smoothing):
    """torch's cross entropy on ag's layout (class axis last); ignore_index None: none ignored."""
    def f(logits, labels):
        if logits.ndim > 2:
            logits = logits.movedim(-1, 1)
        return torch.nn.functional.cross_entropy(
            logits, labels, ignore_index=-100 if ignore_index is None else ignore_index,
            label_smoothing=label_smoothing)
    return f


def random_labels(rng, shape, n_classes, ignore_index):
    labels = rng.integers(0, n_classes, size=shape)
    if ignore_index is not None and labels.size > 1:
        labels.flat[::3] = ignore_index  # some positions ignored, some counted
    return labels


CE_SHAPES = [(5,), (4, 5), (2, 3, 5), (2, 2, 2, 3)]
CE_SETTINGS = [(None, 0.0), (None, 0.1), (-100, 0.0), (-100, 0.2), (2, 0.0), (2, 0.1)]


@pytest.mark.parametrize("ignore_index, smoothing", CE_SETTINGS)
@pytest.mark.parametrize("shape", CE_SHAPES)
def test_cross_entropy_first_and_second_order(shape, ignore_index, smoothing, rng):
    logits = rng.standard_normal(shape)
    labels = random_labels(rng, shape[:-1], shape[-1], ignore_index)

    def loss(x):
        return ag.cross_entropy(x, labels, ignore_index=ignore_index, label_smoothing=smoothing)
    ag.check_gradients(loss, logits)
    check_second_order(loss, logits)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ignore_index, smoothing", CE_SETTINGS)
@pytest.mark.parametrize("shape", CE_SHAPES)
def test_cross_entropy_matches_torch(shape, ignore_index, smoothing, dtype, rng, torch):
    logits = (2 * rng.standard_normal(shape)).astype(dtype)
    labels = random_labels(rng, shape[:-1], shape[-1], ignore_index)
    compare_with_torch(torch, lambda x, y: ag.cross_entropy(x, y, ignore_index, smoothing),
                       torch_cross_entropy(torch, ignore_index, smoothing), logits, labels)


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
    check_first_order(lambda x: ag.dropout(x, rate, np.random.default_rng(2)), x[:3, :4])


def test_dropout_is_the_identity_at_inference(rng):
    x = rng.standard_normal((3, 4))
    assert ag.dropout(x, 0.0, np.random.default_rng(0)) is x
    assert ag.dropout(x, 0.5, None) is x
    np.testing.assert_array_equal(ag.grad(lambda x: ag.sum(ag.dropout(x, 0.3, None)))(x), 1)


# ---- dtypes and errors ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_untraced_results_are_plain_arrays(dtype, rng):
    x = rng.standard_normal((2, 3, 4)).astype(dtype)
    d = np.ones(4, dtype)
    outs = [ag.softmax(x), ag.softmax(x, mask=x > 0), ag.log_softmax(x, 0), ag.logsumexp(x),
            ag.logsumexp(x, None), ag.layer_norm(x, d, d),
            ag.cross_entropy(x, np.zeros((2, 3), int)),
            ag.cross_entropy(x, np.zeros((2, 3), int), ignore_index=1),
            ag.cross_entropy(x, np.zeros((2, 3), int), ignore_index=0)]  # all ignored: NaN
    for out in outs:
        assert type(out) is np.ndarray and out.dtype == dtype
    assert np.isnan(outs[-1]) and np.isfinite(outs[-2])


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


@pytest.mark.parametrize("make, error, message", ERRORS,
                         ids=[f"{m.split(':')[0]}{i}" for i, (_, _, m) in enumerate(ERRORS)])
def test_errors_name_the_op_and_shapes(make, error, message):
    with pytest.raises(error, match=re.escape(message)):
        make()


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
