"""The fused ops' kernels on CuPy's arrays (a CUDA GPU; the `gpu` extra): the same interface
as numpy_kernels.py for softmax, log-softmax, layer norm, cross-entropy and the optimizers'
updates, each a few CuPy element-wise and reduction kernels along the last axis. A forward
returns its result and `saved`, which only this module reads. Importing this module imports
nothing of CuPy: each kernel is compiled on its first call (`_compiled`) and kept.

The ops choose these through core/devices.kernels_of ("cupy" where every operand is a CuPy
array); anything else the plain functions compute, with CuPy's own functions.
"""
import functools
import math


@functools.lru_cache(maxsize=None)
def _compiled():
    """The element-wise and reduction kernels, compiled once (CuPy imported here)."""
    import cupy
    ew, red = cupy.ElementwiseKernel, cupy.ReductionKernel
    return {
        # max over the kept entries (-inf where none is kept)
        "masked_max": red("T x, bool keep", "T y", "keep ? x : (T)-INFINITY", "max(a, b)",
                          "y = a", "-INFINITY", "al_masked_max"),
        "exp_shifted": ew("T x, bool keep, T peak", "T e",
                          "e = keep ? exp(x - (isinf(peak) && peak < 0 ? (T)0 : peak)) : (T)0",
                          "al_exp_shifted"),
        "sum_exp_shifted": red("T x, T peak", "T s", "exp(x - peak)", "a + b", "s = a", "0",
                               "al_sum_exp_shifted"),
        "dot": red("T a, T b", "T s", "a * b", "a + b", "s = a", "0", "al_dot"),
        "centered_square": red("T x, T mu", "T s", "(x - mu) * (x - mu)", "a + b", "s = a",
                               "0", "al_centered_square"),
        "softmax_backward": ew("T g, T y, T s", "T dx", "dx = y * (g - s)",
                               "al_softmax_backward"),
        "log_softmax_backward": ew("T g, T y, T s", "T dx", "dx = g - exp(y) * s",
                                   "al_log_softmax_backward"),
        "normalize": ew("T x, T mu, T inv_std, T scale, T bias", "T x_hat, T out",
                        "x_hat = (x - mu) * inv_std; out = x_hat * scale + bias",
                        "al_layer_norm"),
        "layer_norm_backward": ew(
            "T g, T x_hat, T inv_std, T scale, T g_mean, T projection", "T dx",
            "dx = inv_std * (g * scale - g_mean - x_hat * projection)",
            "al_layer_norm_backward"),
        "cross_entropy_backward": ew(
            "T log_p, raw L labels, raw T row_weight, T smoothing, int64 n_classes", "T d",
            "long long row = i / n_classes; long long c = i % n_classes;"
            "T target = (c == labels[row] ? (T)1 - smoothing : (T)0) + smoothing / n_classes;"
            "d = (exp(log_p) - target) * row_weight[row]",
            "al_cross_entropy_backward"),
        "adam": ew(
            "T p, T g, T m, T v, T l2, T decay, T beta1, T beta2, T step_size, T bias2_sqrt, "
            "T eps", "T out_p, T out_m, T out_v",
            "T grad = g + l2 * p;"
            "T m1 = m * beta1 + grad * ((T)1 - beta1);"
            "T v1 = v * beta2 + grad * grad * ((T)1 - beta2);"
            "out_p = p * decay - m1 * step_size / (sqrt(v1) / bias2_sqrt + eps);"
            "out_m = m1; out_v = v1",
            "al_adam"),
        "sgd": ew("T p, T g, T rate, T weight_decay", "T out_p",
                  "out_p = p - rate * (g + weight_decay * p)", "al_sgd"),
        "sgd_momentum": ew(
            "T p, T g, T b, T rate, T momentum, T weight_decay, bool nesterov", "T out_p, T out_b",
            "T d = g + weight_decay * p; T b1 = momentum * b + d;"
            "out_p = p - rate * (nesterov ? d + momentum * b1 : b1); out_b = b1",
            "al_sgd_momentum"),
    }


def _row_reduce(name, *arrays):
    """A reduction kernel over the last axis, keepdims: (..., D) -> (..., 1)."""
    return _compiled()[name](*arrays, axis=-1, keepdims=True)


# ---------------------------------------------------------------- softmax

def softmax_forward(x, mask):
    """y = exp(x - m) / Σ exp(x - m) along the last axis over the kept entries (mask bool,
    broadcastable, or None), m the largest kept entry (0 where that is -inf); a row with
    nothing kept is zeros, a kept NaN or +inf makes its row NaN. 3 passes (4 with a mask)."""
    import cupy
    if mask is None:
        peak, keep = x.max(axis=-1, keepdims=True), True
    else:
        peak, keep = _row_reduce("masked_max", x, mask), mask
    e = _compiled()["exp_shifted"](x, keep, peak)
    sums = e.sum(axis=-1, keepdims=True)
    if mask is not None:  # nothing kept: Σ = ∞, so the row is 0 (0 / 0 would be NaN)
        sums = cupy.where(cupy.broadcast_to(mask, x.shape).any(axis=-1, keepdims=True), sums,
                          cupy.inf)
    e /= sums
    return e, e


def softmax_backward(g, saved):
    """dx = y ⊙ (g - Σ g ⊙ y) along the last axis; 2 passes."""
    return _compiled()["softmax_backward"](g, saved, _row_reduce("dot", g, saved))


def log_softmax_forward(x):
    """y = x - m - log Σ exp(x - m) along the last axis, m the row maximum; 3 passes."""
    peak = x.max(axis=-1, keepdims=True)
    y = x - (peak + _log(_row_reduce("sum_exp_shifted", x, peak)))
    return y, y


def _log(a):
    import cupy
    return cupy.log(a)


def log_softmax_backward(g, saved):
    """dx = g - exp(y) Σ g along the last axis; 2 passes."""
    return _compiled()["log_softmax_backward"](g, saved, g.sum(axis=-1, keepdims=True))


# ---------------------------------------------------------------- layer norm

def layer_norm_forward(x, scale, bias, eps):
    """out = scale ⊙ x̂ + bias, x̂ = (x - μ) / √(σ² + eps) over the last axis (D entries);
    3 passes. saved: (x̂, 1/√(σ² + eps) keepdims)."""
    d = x.shape[-1]
    mu = x.mean(axis=-1, keepdims=True)
    inv_std = (_row_reduce("centered_square", x, mu) * (1.0 / d) + eps) ** -0.5
    x_hat, out = _compiled()["normalize"](x, mu, inv_std, scale, bias)
    return out, (x_hat, inv_std)


def residual_layer_norm_forward(x, y, scale, bias, eps):
    """layer_norm_forward of x + y."""
    return layer_norm_forward(x + y, scale, bias, eps)


def layer_norm_backward(g, saved, scale):
    """(dx, dscale, dbias) over rows (..., D):

        dx = inv_std ⊙ (ĝ - mean(ĝ) - x̂ ⊙ mean(ĝ ⊙ x̂)),  ĝ = g ⊙ scale
        dscale = Σ_rows g ⊙ x̂,  dbias = Σ_rows g
    """
    x_hat, inv_std = saved
    d = g.shape[-1]
    g_hat = g * scale
    g_mean = g_hat.mean(axis=-1, keepdims=True)
    projection = _row_reduce("dot", g_hat, x_hat) * (1.0 / d)
    dx = _compiled()["layer_norm_backward"](g, x_hat, inv_std, scale, g_mean, projection)
    rows = g.reshape(-1, d)
    return dx, (rows * x_hat.reshape(-1, d)).sum(axis=0), rows.sum(axis=0)


def layer_norm_normalized(saved):
    """(x̂, 1/√(σ² + eps) keepdims) from what layer_norm_forward saved."""
    return saved


def layer_norm_eps_cotangent(g, saved, scale):
    """∂⟨g, out⟩/∂eps = Σ -½ g ⊙ scale ⊙ x̂ / (σ² + eps), a 0-d array."""
    x_hat, inv_std = saved
    return (-0.5 * (g * scale) * x_hat * (inv_std * inv_std)).sum()


# ---------------------------------------------------------------- cross-entropy

def cross_entropy_forward(logits, labels):
    """For logits (N, C) and labels (N,): (log p at the labels (N,), mean_c log p (N,), saved),
    p = softmax(logits); saved: log p."""
    import cupy
    log_p, _ = log_softmax_forward(logits)
    return log_p[cupy.arange(len(labels)), labels], log_p.mean(axis=-1), log_p


def cross_entropy_probabilities(saved):
    """p = softmax(logits) (N, C), a fresh array."""
    import cupy
    return cupy.exp(saved)


def cross_entropy_backward(saved, labels, smoothing, row_weight):
    """(p - target) ⊙ row_weight per row, target = (1 - ε) onehot(label) + ε / C; 1 pass."""
    import cupy
    log_p = cupy.ascontiguousarray(saved)
    return _compiled()["cross_entropy_backward"](
        log_p, cupy.ascontiguousarray(labels), cupy.ascontiguousarray(row_weight), smoothing,
        log_p.shape[-1])


# ---------------------------------------------------------------- optimizer updates

def adam_update(p, g, m, v, out_p, out_m, out_v, rate, beta1, beta2, eps, weight_decay,
                decoupled, t):
    """One Adam / AdamW step over 1-D arrays into out_p, out_m, out_v (which may be p, m, v),
    as numpy_kernels.adam_update: one pass."""
    l2 = 0.0 if decoupled else weight_decay
    decay = 1 - rate * weight_decay if decoupled else 1.0
    _compiled()["adam"](p, g, m, v, l2, decay, beta1, beta2, rate / (1 - beta1 ** t),
                        math.sqrt(1 - beta2 ** t), eps, out_p, out_m, out_v)


def sgd_update(p, g, b, out_p, out_b, rate, momentum, nesterov, weight_decay):
    """One SGD step over 1-D arrays into out_p, out_b, as numpy_kernels.sgd_update."""
    if b is None:
        _compiled()["sgd"](p, g, rate, weight_decay, out_p)
    else:
        _compiled()["sgd_momentum"](p, g, b, rate, momentum, weight_decay, nesterov, out_p, out_b)
