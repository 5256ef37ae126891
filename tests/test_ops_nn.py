"""Fused neural-network ops (autograd_lite/ops/nn.py) beyond the op table: the gradient
helpers against PyTorch, stability at huge logits, the gradients of eps and label_smoothing,
float16, layer norm of an empty axis, cross entropy with every label ignored, dropout's
statistics, errors, and the pullback's memory."""
import numpy as np
import pytest

import autograd_lite as ag
from helpers.op_cases import assert_raises, each_error, torch_cross_entropy
from helpers.references import DTYPES, compare_with_torch, to_tensor

ALL_FLOATS = [*DTYPES, np.float16]


def central_difference(f, at, h):
    """(f(at + h) - f(at - h)) / 2h, in float64."""
    return (float(f(at + h)) - float(f(at - h))) / (2 * h)


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


@pytest.mark.parametrize("shape", [(6,), (3, 6), (2, 3, 5), (4, 1), (0, 4)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_gradients_on_plain_arrays_match_the_helpers_and_torch(shape, dtype, rng, torch):
    """The pullback on plain float32/float64 arrays (matrix-vector products for the means,
    the kernel's) against layer_norm_backward and sums over rows, and against
    torch's gradients of x, scale and bias."""
    x, g = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    scale, bias = (rng.standard_normal(shape[-1]).astype(dtype) for _ in range(2))
    _, pullback = ag.layer_norm.rules[0].body(x, scale, bias, 1e-5)  # out, pullback
    dx, d_scale, d_bias, _ = pullback(g)
    x_hat = ag.layer_norm(x, np.ones_like(scale), np.zeros_like(bias))
    inv_std = 1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dx, ag.ops.layer_norm_backward(g, x_hat, inv_std, scale), **tolerance)
    np.testing.assert_allclose(d_scale, (g * x_hat).reshape(-1, shape[-1]).sum(0), **tolerance)
    np.testing.assert_allclose(d_bias, g.reshape(-1, shape[-1]).sum(0), **tolerance)
    assert dx.dtype == d_scale.dtype == d_bias.dtype == dtype
    assert dx.shape == shape and d_scale.shape == d_bias.shape == scale.shape
    tensors = [to_tensor(torch, a, requires_grad=True) for a in (x, scale, bias)]
    y = torch.nn.functional.layer_norm(tensors[0], (shape[-1],), tensors[1], tensors[2], 1e-5)
    if x.size:
        wants = torch.autograd.grad(y, tensors, to_tensor(torch, g))
        for got, want in zip((dx, d_scale, d_bias), wants):
            np.testing.assert_allclose(got, want.numpy(), **tolerance)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_eps_gets_its_gradient(dtype, rng):
    """d/d eps of Σ layer_norm(x, s, b, eps) ⊙ x, which is not 0: central differences in
    float64 are the reference, for eps given as a 0-d array (gradient of its dtype) or as a
    Python float (gradient a Python float)."""
    x, s, b = (rng.standard_normal(shape) for shape in [(4, 6), 6, 6])
    x[0] *= 0.05  # a row whose variance is near eps: the derivative is large there

    def f(eps):
        return ag.sum(ag.layer_norm(x, s, b, eps) * x)
    want = central_difference(f, 1e-2, 1e-7)
    assert abs(want) > 0.1  # far from 0: a dropped eps term would show
    x32, s32, b32 = (a.astype(dtype) for a in (x, s, b))
    g = ag.grad(lambda e: ag.sum(ag.layer_norm(x32, s32, b32, e) * x32))(np.asarray(1e-2, dtype))
    assert type(g) is np.ndarray and g.dtype == dtype and g.shape == ()
    rtol = {np.float64: 1e-7, np.float32: 1e-4}[dtype]
    np.testing.assert_allclose(g, want, rtol=rtol)
    g_float = ag.grad(lambda e: ag.sum(ag.layer_norm(x32, s32, b32, e) * x32))(1e-2)
    assert type(g_float) is float
    np.testing.assert_allclose(g_float, want, rtol=rtol)


@pytest.mark.parametrize("shift", [0.0, 1000.0])
def test_layer_norm_in_float16_matches_torch_in_float64(shift, rng, torch):
    """In float16 the squares of deviations of 300 pass 65,504 (a float16 variance would be
    inf, the output just the bias): computed in float32 and rounded, as torch does."""
    x = (shift + 300 * rng.standard_normal((8, 64))).astype(np.float16)
    scale, bias = (rng.standard_normal(64).astype(np.float16) for _ in range(2))
    out = compare_with_torch(torch, ag.layer_norm,
                             lambda x, w, b: torch.nn.functional.layer_norm(x, (64,), w, b),
                             x, scale, bias, torch_dtype=np.float64)
    assert np.all(np.isfinite(out)) and not np.allclose(out, bias)


@pytest.mark.parametrize("dtype", ALL_FLOATS)
def test_layer_norm_of_an_empty_last_axis_is_empty_as_in_torch(dtype, torch):
    """D = 0: the empty result and empty gradients, as torch gives them, and eps's gradient 0."""
    x, scale, bias = np.zeros((2, 0), dtype), np.zeros(0, dtype), np.zeros(0, dtype)
    t = [to_tensor(torch, a, requires_grad=True) for a in (x, scale, bias)]
    want = torch.nn.functional.layer_norm(t[0], (0,), t[1], t[2])
    want_grads = torch.autograd.grad(want.sum(), t)
    out = ag.layer_norm(x, scale, bias)
    assert out.dtype == dtype and out.shape == tuple(want.shape) == (2, 0)
    grads = ag.gradient(lambda x, s, b, e: ag.sum(ag.layer_norm(x, s, b, e)), x, scale, bias,
                        np.asarray(1e-5, dtype))
    for g, a, w in zip(grads, (x, scale, bias), want_grads):
        assert g.dtype == dtype and g.shape == a.shape == tuple(w.shape)
    assert grads[3] == 0  # the output does not depend on eps


# ---- cross_entropy ----------------------------------------------------------------------------

@pytest.mark.parametrize("rules_on", [True, False], ids=["rules on", "rules off"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_with_every_label_ignored_is_nan_with_zero_gradient_like_torch(
        torch, smoothing, dtype, rules_on, rng):
    """The mean over no label is NaN; its gradient is 0, in the logits and the smoothing,
    also where a function of the loss sends back a NaN cotangent (tanh(loss)²), and so is
    the second order: torch's, the fast rule's and the plain definition's alike."""
    logits, labels = rng.standard_normal((2, 3)).astype(dtype), np.array([-100, -100])
    loss = lambda x, e=smoothing: ag.cross_entropy(x, labels, ignore_index=-100,  # noqa: E731
                                                   label_smoothing=e)
    squashed = lambda x, e=smoothing: ag.tanh(loss(x, e)) ** 2  # noqa: E731
    t = to_tensor(torch, logits, requires_grad=True)
    want = torch.nn.functional.cross_entropy(t, to_tensor(torch, labels), label_smoothing=smoothing)
    torch.tanh(want).square().backward()
    assert np.isnan(want.item()) and np.array_equal(t.grad.numpy(), np.zeros((2, 3)))
    with ag.fast_rules(rules_on):
        for f in (loss, squashed):
            value, (g, g_smoothing) = ag.value_and_gradient(f, logits, smoothing)
            assert np.isnan(value)
            assert g.dtype == dtype and np.array_equal(g, t.grad.numpy())  # zeros, not NaN
            assert g_smoothing == 0.0
            assert np.array_equal(ag.hessian(f)(logits), np.zeros((2, 3, 2, 3), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ignore_index", [None, 1])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_label_smoothing_gets_its_gradient(smoothing, ignore_index, dtype, rng, torch):
    """d loss / dε, the derivative in the smoothing ε. torch's loss is linear in ε, so its
    derivative is torch's loss at ε = 1 minus its loss at ε = 0; central differences agree in
    float64."""
    logits, labels = rng.standard_normal((2, 3, 5)).astype(dtype), rng.integers(0, 5, (2, 3))
    torch_loss = [torch_cross_entropy(ignore_index, e)(to_tensor(torch, logits),
                                                         to_tensor(torch, labels)).item()
                  for e in (0.0, 1.0)]
    want = torch_loss[1] - torch_loss[0]

    def loss(e):
        return ag.cross_entropy(logits, labels, ignore_index, e)
    g = ag.grad(loss)(np.asarray(smoothing, dtype))
    assert type(g) is np.ndarray and g.dtype == dtype and g.shape == ()
    np.testing.assert_allclose(g, want, rtol={np.float64: 1e-12, np.float32: 1e-5}[dtype])
    assert type(ag.grad(loss)(smoothing)) is float
    if dtype == np.float64:
        np.testing.assert_allclose(want, central_difference(loss, smoothing + 0.1, 1e-6), rtol=1e-8)


@pytest.mark.parametrize("dtype", ALL_FLOATS)
@pytest.mark.parametrize("masked", [-1e4, -103.0])
def test_label_smoothing_gradient_where_a_logit_underflows(masked, dtype, torch):
    """A logit far below the others (a masked class: its exp underflows, or is subnormal in
    float32) leaves d loss / dε finite and exact: the derivative is made from the logits,
    not from the log of kept exponentials (which read inf at -1e4). Reference: torch in
    float64 on the same logits."""
    logits, labels = np.array([[2.0, masked, 0.5, 1.0]], dtype=dtype), np.array([0])
    _, d_smoothing = ag.gradient(lambda x, e: ag.cross_entropy(x, labels, label_smoothing=e),
                                 logits, np.asarray(0.1, dtype))
    log_p = torch.log_softmax(torch.tensor(logits, dtype=torch.float64), -1)
    want = (log_p[0, 0] - log_p.mean()).item()  # ∂/∂ε of (1 - ε)(-log p_0) + ε(-mean log p)
    assert np.isfinite(d_smoothing) and d_smoothing.dtype == dtype
    np.testing.assert_allclose(d_smoothing, want, rtol={np.float16: 1e-3}.get(dtype, 1e-6))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("ignore_index", [None, 0])
def test_cross_entropy_in_float16_matches_torch_in_float64(ignore_index, smoothing, rng, torch):
    """300 logits of 5.5 (Σ e^5.5 past float16's range) and a spread of logits: a finite loss
    and gradients in float16, torch's in float64 to float16's precision; the equal logits'
    loss ln 300."""
    same = np.full((4, 300), 5.5, np.float16)
    spread = (4 * rng.standard_normal((64, 1000))).astype(np.float16)
    for logits in (same, spread):
        labels = rng.integers(0, logits.shape[-1], len(logits))
        loss = compare_with_torch(
            torch, lambda x: ag.cross_entropy(x, labels, ignore_index, smoothing),
            lambda t: torch_cross_entropy(ignore_index, smoothing)(t, torch.from_numpy(labels)),
            logits, torch_dtype=np.float64)
        assert np.isfinite(loss)
    np.testing.assert_allclose(ag.cross_entropy(same, np.zeros(4, int)), np.log(300), rtol=1e-3)


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
    (lambda: ag.dropout(np.ones(3), 0.5, 0), TypeError,
     "dropout: rng must be a numpy Generator (np.random.default_rng(seed)), one with its "
     "random(shape, dtype=) method, or None; got int"),
    (lambda: ag.dropout(np.ones(3), 0.5, np.random.RandomState(0)), TypeError,
     "dropout: rng must be a numpy Generator (np.random.default_rng(seed)), one with its "
     "random(shape, dtype=) method, or None; got RandomState"),
    (lambda: ag.dropout(np.full((2, 4), 3), 0.3, np.random.default_rng(0)), TypeError,
     "dropout: x must be a float array (its kept entries are scaled by 1/(1 - rate)), got "
     "int64 (2, 4)"),
    # float hyperparameters: eps and label_smoothing are differentiable scalars of the
    # operands' dtype; ignore_index and dropout's rate have no derivative and are refused
    (lambda: ag.layer_norm(np.ones((2, 4)), np.ones(4), np.ones(4), np.full(4, 1e-5)), ValueError,
     "layer_norm: eps must be a scalar, got shape (4,)"),
    (lambda: ag.layer_norm(*(np.ones(s, np.float32) for s in [(2, 4), 4, 4]), np.float64(1e-5)),
     TypeError, "layer_norm: operands float32 (2, 4) and float64 () have different dtypes"),
    (lambda: ag.cross_entropy(np.ones((2, 4)), np.array([0, 1]), label_smoothing=np.ones(2) / 4),
     ValueError, "cross_entropy: label_smoothing must be a scalar, got shape (2,)"),
    (lambda: ag.cross_entropy(np.ones((2, 4), np.float32), np.array([0, 1]),
                              label_smoothing=np.float64(0.1)),
     TypeError, "cross_entropy: operands float32 (2, 4) and float64 () have different dtypes"),
    (lambda: ag.cross_entropy(np.ones((2, 4)), np.array([0, 1]), ignore_index=-100.0), TypeError,
     "cross_entropy: ignore_index must be an int or None, got -100.0"),
    (lambda: ag.grad(lambda i: ag.cross_entropy(np.ones((2, 4)), np.array([0, 1]), i))(-100.0),
     TypeError, "cross_entropy: ignore_index must be an int or None, got array(-100.)"),
    (lambda: ag.grad(lambda r: ag.sum(ag.dropout(np.ones(3), r, np.random.default_rng(0))))(0.5),
     TypeError, "dropout: rate is a traced value, but dropout has no derivative in its rate"),
]


@each_error(ERRORS)
def test_errors_name_the_op_and_shapes(make, error, message):
    assert_raises(make, error, message)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("ignore_index", [None, 3])
def test_cross_entropy_backward_builds_no_one_hot(smoothing, ignore_index, fast_rules_on):
    """The fast rule's pullback allocates the (N, C) gradient and nothing else of that size: a
    one-hot target of the class axis (another N·C floats) would show in the peak (the plain
    definition is written with one)."""
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


def test_int_inputs_run_the_plain_functions_whatever_the_rules():
    """The kernels compute in the input's dtype, so their rules apply to float inputs only: an
    int input is promoted as numpy promotes it, with the rules on as off."""
    ints = np.array([[1, 2, -1, 0, 3]])
    calls = [lambda: ag.layer_norm(ints, np.ones(5), np.zeros(5)),
             lambda: ag.cross_entropy(ints, np.array([0])), lambda: ag.softmax(ints),
             lambda: ag.log_softmax(ints)]
    for call in calls:
        with ag.fast_rules(True):
            on = np.asarray(call())
        with ag.fast_rules(False):
            off = np.asarray(call())
        assert on.dtype == off.dtype and on.dtype.kind == "f"
        np.testing.assert_array_equal(on, off)
    centred = (ints - ints.mean()) / ints.std()
    np.testing.assert_allclose(ag.layer_norm(ints, np.ones(5), np.zeros(5)), centred, rtol=1e-4)
