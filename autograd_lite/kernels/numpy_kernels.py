"""The plain-array bodies of the fused ops, in numpy: the always-available implementation.

Every function takes and returns plain numpy arrays (never a traced value: the seam in
`core.tracer.primitive` sees to that), works along the last axis, and keeps the dtype it is
given (float32 or float64; float16 is widened by the ops before it gets here). A forward
returns its result and `saved`, whatever its backward needs, which only this module reads:
the compiled implementation (numba_kernels.py) saves other things. numpy runs each ufunc on
one core in a full pass over the data; the counts of passes are in the docstrings.
"""
import math

import numpy as np


def _sum_last(x):
    """Σ over the last axis, keepdims (np.einsum: x.sum(-1) is slower on short rows)."""
    return np.einsum("...i->...", x)[..., None]


def _dot_last(a, b):
    """Σ_i a_i b_i over the last axis, keepdims, without making a ⊙ b."""
    return np.einsum("...i,...i->...", a, b)[..., None]


def _sums_are_exact(sums):
    """Rows whose sum of unshifted exponentials lies in [1, ∞): there exp(x) is as exact as
    exp(x - max). Elsewhere the sum overflowed, is NaN, is 0 (nothing kept) or is small
    enough that some exponential may have left the normal range (with a sum >= 1, a term
    below the smallest normal changes neither the sum nor an output above it)."""
    return (sums >= 1) & (sums < np.inf)


# ---------------------------------------------------------------- softmax

def _masked_softmax_shifted(x, mask):
    """The masked softmax of any x, exp shifted by the largest kept entry of each row, and
    whether every row had a finite one (then it is exactly 0 at masked entries). A kept NaN
    or +inf, or kept entries all -inf, make their row NaN (torch's masked_fill(-inf))."""
    minus_inf = x.dtype.type(-np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        kept = np.where(mask, x, minus_inf)
        peak = kept.max(axis=-1, keepdims=True)
        finite_rows = bool(np.isfinite(peak).all())
        peak[peak == -np.inf] = 0  # nothing kept, or only -inf: exp(-inf - 0) = 0
        e = np.exp(kept - peak)
        sums = np.where(mask.any(axis=-1, keepdims=True), _sum_last(e), np.inf)
        return np.divide(e, sums, out=e), finite_rows  # a row with nothing kept: zeros


def _softmax_shifted(x, mask):
    """(softmax of any x with exp shifted by row maxima, exactly 0 at masked entries?)"""
    if mask is not None:
        return _masked_softmax_shifted(x, mask)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return np.divide(e, _sum_last(e), out=e), True


def softmax_forward(x, mask):
    """y = exp(x) / Σ exp(x) along the last axis over the entries where `mask` (bool,
    broadcastable to x, or None) is True; a row with nothing kept is zeros. exp is taken
    unshifted where the row sums show that to be as exact as with row maxima (attention
    scores, logits), 3 passes; the other rows are redone shifted. -> (y, saved)"""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.exp(x)
        if mask is not None:
            np.multiply(e, mask, out=e)  # masked entries: exactly 0
        sums = _sum_last(e)
        y = np.divide(e, sums, out=e)
    exact = _sums_are_exact(sums)[..., 0]
    exact_zeros = True
    if not exact.all():  # a few rows (a causal mask's first ones), or a row that overflowed
        rows = ~exact
        y[rows], exact_zeros = _softmax_shifted(
            x[rows], None if mask is None else np.broadcast_to(mask, x.shape)[rows])
    return y, (y, None if exact_zeros else mask)


def softmax_backward(g, saved):
    """dx = y ⊙ (g - Σ g ⊙ y) along the last axis, 0 at masked entries; 2 passes."""
    y, zero_at_masked = saved
    dx = g - _dot_last(g, y)
    dx *= y
    return dx if zero_at_masked is None else np.where(zero_at_masked, dx, 0)


# ---------------------------------------------------------------- log-softmax

def _exp_and_sums(x):
    """(exp(x), Σ exp(x) keepdims) along the last axis without row maxima, or None unless
    every row's sum is exact (_sums_are_exact)."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        sums = _sum_last(e)
    return (e, sums) if _sums_are_exact(sums).all() else None


def _log_softmax_shifted(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(_sum_last(np.exp(shifted)))


def log_softmax_forward(x):
    """y = x - log Σ exp(x) along the last axis (unshifted where exact): 3-4 passes."""
    found = _exp_and_sums(x)
    y = _log_softmax_shifted(x) if found is None else x - np.log(found[1])
    return y, y


def log_softmax_backward(g, saved):
    """dx = g - exp(y) Σ g along the last axis; 3 passes."""
    return g - np.exp(saved) * _sum_last(g)


# ---------------------------------------------------------------- layer norm

def layer_norm_forward(x, scale, bias, eps):
    """out = scale ⊙ x̂ + bias, x̂ = (x - μ) / √(σ² + eps) over the last axis; 5 passes.
    saved: (x̂, 1/√(σ² + eps))."""
    d = x.shape[-1]
    centered = x - _sum_last(x) * (1.0 / d)
    inv_std = 1 / np.sqrt(_dot_last(centered, centered) * (1.0 / d) + eps)
    x_hat = np.multiply(centered, inv_std, out=centered)
    out = x_hat * scale
    out += bias
    return out, (x_hat, inv_std)


def residual_layer_norm_forward(x, y, scale, bias, eps):
    """layer_norm_forward of x + y, the post-LN block's residual sum (x and y of one shape):
    here the sum, then the norm; numba's kernel reads both in its first pass."""
    return layer_norm_forward(x + y, scale, bias, eps)


def layer_norm_backward(g, saved, scale):
    """(dx, dscale, dbias) for rows (..., D):

        dx = inv_std ⊙ (ĝ - mean(ĝ) - x̂ ⊙ mean(ĝ ⊙ x̂)),  ĝ = g ⊙ scale
        dscale = Σ_rows g ⊙ x̂,  dbias = Σ_rows g

    with each mean a matrix-vector product over rows (BLAS): mean(ĝ) = (g @ scale) / D.
    """
    x_hat, inv_std = saved
    d = g.shape[-1]
    g_rows, x_hat_rows = g.reshape(-1, d), x_hat.reshape(-1, d)  # (N, D)
    ones = np.ones(g_rows.shape[0], dtype=g.dtype)
    g_x_hat = g_rows * x_hat_rows
    d_scale, d_bias = ones @ g_x_hat, ones @ g_rows  # (D,)
    g_mean = (g_rows @ scale)[:, None] * (1.0 / d)  # (N, 1)
    projection = (g_x_hat @ scale)[:, None] * (1.0 / d)  # (N, 1)
    dx = g_rows * scale
    dx -= g_mean
    dx -= np.multiply(x_hat_rows, projection, out=g_x_hat)
    dx *= inv_std.reshape(-1, 1)
    return dx.reshape(g.shape), d_scale, d_bias


def layer_norm_normalized(saved):
    """(x̂, 1/√(σ² + eps) keepdims) from what layer_norm_forward saved."""
    return saved


def layer_norm_eps_cotangent(g, saved, scale):
    """∂⟨g, out⟩/∂eps = Σ -½ g ⊙ scale ⊙ x̂ / (σ² + eps), a 0-d array."""
    x_hat, inv_std = saved
    return np.asarray(np.sum(-0.5 * (g * scale) * x_hat * (inv_std * inv_std)))


# ---------------------------------------------------------------- cross-entropy

def cross_entropy_forward(logits, labels):
    """For logits (N, C) and labels (N,): (log p at the labels (N,), mean_c log p (N,),
    saved), p = softmax(logits). Unshifted where exact: the exponentials and their sums are
    kept, so that the backward pass divides instead of taking exp again."""
    rows = np.arange(len(labels))
    found = _exp_and_sums(logits) if logits.size else None
    if found is None:
        log_p = _log_softmax_shifted(logits) if logits.size else logits.copy()
        return log_p[rows, labels], log_p.mean(axis=-1), (None, log_p)
    exps, sums = found
    log_sums = np.log(sums[:, 0])
    at_labels = logits[rows, labels] - log_sums
    return at_labels, _sum_last(logits)[:, 0] * (1.0 / logits.shape[-1]) - log_sums, (found, None)


def cross_entropy_probabilities(saved):
    """p = softmax(logits) (N, C), a fresh array, from what cross_entropy_forward saved."""
    found, log_p = saved
    return np.exp(log_p) if found is None else found[0] / found[1]


def cross_entropy_backward(saved, labels, smoothing, row_weight):
    """(p - target) ⊙ row_weight per row, target = (1 - ε) onehot(label) + ε / C, (N, C):
    no one-hot is built; 2-3 passes."""
    p = cross_entropy_probabilities(saved)
    if smoothing:
        p -= smoothing / p.shape[-1]
    p[np.arange(len(labels)), labels] -= 1 - smoothing
    p *= row_weight.reshape(-1, 1)
    return p


# ---------------------------------------------------------------- gather and scatter-add

def gather_rows(table, indices):
    """table[indices] along axis 0: shape indices.shape + table.shape[1:]."""
    return np.take(table, indices, axis=0)


def _run_bounds(sorted_indices):
    """(starts, ends): where each run of equal entries of a sorted 1-D array begins and ends."""
    starts = np.empty(sorted_indices.size, dtype=bool)
    starts[0] = True
    np.not_equal(sorted_indices[1:], sorted_indices[:-1], out=starts[1:])
    ends = np.empty_like(starts)
    ends[-1] = True
    ends[:-1] = starts[1:]
    return starts, ends


def segment_sum(values, indices, n):
    """Σ of the rows of `values` (shape indices.shape + row) that share an index, into n rows.
    Indices met once have their row copied; runs of repeated ones are summed with
    np.add.reduceat (np.add.at is slow)."""
    row_shape = values.shape[indices.ndim:]
    out = np.zeros((n,) + row_shape, dtype=values.dtype)
    flat = indices.reshape(-1)
    if flat.size == 0:
        return out
    rows = values.reshape((flat.size,) + row_shape)
    order = np.argsort(flat, kind="stable")
    sorted_indices = flat[order]
    starts, ends = _run_bounds(sorted_indices)
    once = starts & ends
    out[sorted_indices[once]] = rows[order[once]]
    repeated = ~once
    if repeated.any():
        run_starts = np.flatnonzero(starts[repeated])
        out[sorted_indices[repeated][run_starts]] = np.add.reduceat(rows[order[repeated]],
                                                                    run_starts, axis=0)
    return out


# ---------------------------------------------------------------- optimizer updates

def adam_update(p, g, m, v, out_p, out_m, out_v, rate, beta1, beta2, eps, weight_decay,
                decoupled, t):
    """One Adam / AdamW step over 1-D arrays, written into out_p, out_m, out_v (which may be
    p, m, v themselves); the settings are Python numbers, t the leaves' count (this step
    included):

        g ← g + wd·p (Adam),  m ← β1·m + (1 - β1)·g,  v ← β2·v + (1 - β2)·g²,
        p ← p·(1 - lr·wd) (AdamW),  p ← p - lr/(1 - β1^t) · m / (√v / √(1 - β2^t) + eps)

    12 numpy passes, each operation rounded in the arrays' dtype in this order."""
    if weight_decay and not decoupled:
        g = g + weight_decay * p
    scratch = np.multiply(g, 1 - beta1)
    np.multiply(m, beta1, out=out_m)
    out_m += scratch
    np.multiply(g, g, out=scratch)
    scratch *= 1 - beta2
    np.multiply(v, beta2, out=out_v)
    out_v += scratch
    np.sqrt(out_v, out=scratch)
    scratch /= math.sqrt(1 - beta2 ** t)
    scratch += eps
    step = np.multiply(out_m, rate / (1 - beta1 ** t))
    step /= scratch
    if decoupled and weight_decay:
        np.multiply(p, 1 - rate * weight_decay, out=out_p)
        out_p -= step
    else:
        np.subtract(p, step, out=out_p)


def sgd_update(p, g, b, out_p, out_b, rate, momentum, nesterov, weight_decay):
    """One SGD step over 1-D arrays into out_p, out_b (b, out_b None without momentum):

        d = g + wd·p,  b ← momentum·b + d,  p ← p - lr·(d + momentum·b if nesterov else b)
    """
    d = g + weight_decay * p if weight_decay else g
    if b is None:
        np.subtract(p, rate * d, out=out_p)
        return
    np.multiply(b, momentum, out=out_b)
    out_b += d
    direction = d + momentum * out_b if nesterov else out_b
    np.subtract(p, rate * direction, out=out_p)


# ---------------------------------------------------------------- activations

def relu_forward(x):
    """max(x, 0) (np.maximum: NaN stays NaN, -0.0 stays -0.0) and saved, x > 0; 2 passes."""
    return np.maximum(x, 0), x > 0


def relu_backward(g, saved):
    """g where x > 0, else g · 0 (as g * mask); 1 pass."""
    return g * saved


def column_sums(rows):
    """Σ over the rows of a matrix (N, n) -> (n,), as one BLAS product with a ones vector (the
    bias's cotangent; rows.sum(axis=0) is slower over many rows)."""
    return np.ones(rows.shape[0], rows.dtype) @ rows


def add_bias(h, b):
    """h += b along the rows of h (N, n), in place (h: an array its caller just made). -> h"""
    h += b
    return h


def bias_relu_forward(h, b):
    """h ← max(h + b, 0) in place: a feed-forward layer's bias and relu after its product
    (h (N, n), fresh). -> h"""
    h += b
    return np.maximum(h, 0, out=h)


def bias_relu_backward(g, h):
    """For h = max(z, 0), z = x W + b: (dz, db) = (g ⊙ [h > 0], Σ_rows dz); dz is written
    into g (N, n), fresh. [h > 0] is [z > 0] (a NaN z gives a NaN h, not above 0)."""
    g *= h > 0
    return g, column_sums(g)


GELU_C = math.sqrt(2.0 / math.pi)  # gelu's tanh form: u = GELU_C (x + GELU_CUBIC x³)
GELU_CUBIC = 0.044715


def gelu_forward(x):
    """x/2 · (1 + tanh(u)), u = √(2/π) (x + 0.044715 x³) (the Python constants take x's
    dtype); saved: (x, tanh(u)); 9 passes."""
    t = np.tanh(GELU_C * (x + GELU_CUBIC * x * x * x))
    return 0.5 * x * (1 + t), (x, t)


def gelu_backward(g, saved):
    """g · ((1 + t)/2 + x/2 · (1 - t²) · √(2/π) (1 + 3 · 0.044715 x²)); 14 passes."""
    x, t = saved
    du = GELU_C * (1 + 3 * GELU_CUBIC * x * x)
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du)


# ---------------------------------------------------------------- dropout

def dropout_mask(shape, rate, rng, dtype):
    """keep / (1 - rate), keep an entry with probability 1 - rate (float32 draws)."""
    keep = rng.random(shape, dtype=np.float32) >= rate
    return keep * np.asarray(1 / (1 - rate), dtype=dtype)
