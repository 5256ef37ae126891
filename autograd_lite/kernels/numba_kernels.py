"""The plain-array bodies of the fused ops compiled with numba: rows split over the cores
(`prange`), one or two passes over each row where numpy makes four to seven.

The interface is numpy_kernels.py's (the names in kernels.NAMES; one not written here is
numpy's). Importing this module imports numba (an ImportError without it: kernels/__init__.py
then stays with numpy). What a forward saves is this module's own business: layer norm
keeps x̂ and 1/σ, as numpy's does (x is not kept: the pullback of an op must not hold on to
an input it does not need).

Exponentials. numba's loops call a scalar exp (the llvmlite wheels carry no SVML, so LLVM
cannot vectorise it), several times slower than numpy's SIMD exp; so softmax and
cross-entropy take numpy's `np.exp` over the block, unshifted (exact where the row sums lie
in [1, ∞), as numpy_kernels explains; the other rows are redone shifted), and mask, sum and
scale in one compiled pass.

Same bits. Every reduction runs inside one row, in order, in one thread; the sums over rows
(layer norm's dscale and dbias) go through fixed blocks of rows whose partial sums are added
in block order: the result does not depend on the number of threads. The optimizer kernels
round every operation in the arrays' dtype in numpy_kernels' order, so they give numpy's
bits exactly.

Caching. Kernels compile on first use and are cached on disk (`cache=True`: numba writes
beside this file, or under the user's cache folder when the install is read-only); where no
cache folder is writable they compile in memory each run (`_compiled`).

Threads: the arrangement measured with OpenBLAS on 2 cores is in kernels/__init__.py.
"""
import numpy as np
import numba
from numba import prange

_ROW_BLOCK = 32  # rows per partial sum of dscale and dbias (fixed: same bits for any threads)


def _compiled(parallel=True, reassociate=False):
    """numba.njit with the disk cache, or without it where numba finds no writable folder.
    reassociate: let LLVM reorder the sums of a row, so that it vectorises them (the order is
    fixed at compile time: the same bits on every run and for any number of threads)."""
    options = dict(parallel=parallel, fastmath={"reassoc"} if reassociate else False)

    def decorate(function):
        try:
            return numba.njit(cache=True, **options)(function)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return numba.njit(cache=False, **options)(function)
    return decorate


def _rows(a):
    """a as C-contiguous rows (N, D) along its last axis (a view when it already is)."""
    return np.ascontiguousarray(a).reshape(-1, a.shape[-1])


# ---------------------------------------------------------------- layer norm

@_compiled(reassociate=True)
def _layer_norm_rows(x, scale, bias, eps, out, x_hat, inv_std):
    n, d = x.shape
    for i in prange(n):
        total = x.dtype.type(0)
        for j in range(d):
            total += x[i, j]
        mu = total / x.dtype.type(d)  # (a Python number would widen the row to float64)
        squares = x.dtype.type(0)
        for j in range(d):
            c = x[i, j] - mu
            squares += c * c
        r = x.dtype.type(1) / np.sqrt(squares / x.dtype.type(d) + eps)
        inv_std[i] = r
        for j in range(d):
            normalized = (x[i, j] - mu) * r
            x_hat[i, j] = normalized
            out[i, j] = normalized * scale[j] + bias[j]


def layer_norm_forward(x, scale, bias, eps):
    """out = scale ⊙ x̂ + bias, x̂ = (x - μ)/√(σ² + eps) per row: 3 passes over each row
    (sum, squares, write). saved: (x̂ rows, 1/√(σ² + eps)); x itself is not kept."""
    rows = _rows(x)
    out, x_hat = np.empty_like(rows), np.empty_like(rows)
    inv_std = np.empty(rows.shape[0], rows.dtype)
    _layer_norm_rows(rows, scale, bias, rows.dtype.type(eps), out, x_hat, inv_std)
    return out.reshape(x.shape), (x_hat, inv_std)


@_compiled(reassociate=True)
def _layer_norm_backward_rows(g, x_hat, inv_std, scale, dx, partial_scale, partial_bias):
    n, d = x_hat.shape
    for block in prange(partial_scale.shape[0]):
        for j in range(d):
            partial_scale[block, j] = 0
            partial_bias[block, j] = 0
        for i in range(block * _ROW_BLOCK, min(n, (block + 1) * _ROW_BLOCK)):
            sum_g_hat = x_hat.dtype.type(0)
            sum_g_hat_x_hat = x_hat.dtype.type(0)
            for j in range(d):
                g_hat = g[i, j] * scale[j]
                sum_g_hat += g_hat
                sum_g_hat_x_hat += g_hat * x_hat[i, j]
                partial_scale[block, j] += g[i, j] * x_hat[i, j]
                partial_bias[block, j] += g[i, j]
            a = sum_g_hat / x_hat.dtype.type(d)
            b = sum_g_hat_x_hat / x_hat.dtype.type(d)
            r = inv_std[i]
            for j in range(d):
                dx[i, j] = r * (g[i, j] * scale[j] - a - x_hat[i, j] * b)


def layer_norm_backward(g, saved, scale):
    """(dx, dscale, dbias): dx = r ⊙ (ĝ - mean(ĝ) - x̂ ⊙ mean(ĝ ⊙ x̂)), ĝ = g ⊙ scale,
    r = 1/√(σ² + eps); dscale = Σ_rows g ⊙ x̂ and dbias = Σ_rows g summed per fixed block of
    rows, then over the blocks in order. 2 passes over each row."""
    x_hat, inv_std = saved
    g_rows = _rows(g)
    n, d = x_hat.shape
    blocks = max(1, -(-n // _ROW_BLOCK))
    dx = np.empty_like(x_hat)
    partial_scale = np.empty((blocks, d), x_hat.dtype)
    partial_bias = np.empty((blocks, d), x_hat.dtype)
    _layer_norm_backward_rows(g_rows, x_hat, inv_std, scale, dx, partial_scale, partial_bias)
    return dx.reshape(g.shape), partial_scale.sum(axis=0), partial_bias.sum(axis=0)


def layer_norm_normalized(saved):
    """(x̂ rows, 1/√(σ² + eps) (N, 1)) from what layer_norm_forward saved."""
    x_hat, inv_std = saved
    return x_hat, inv_std[:, None]


def layer_norm_eps_cotangent(g, saved, scale):
    """∂⟨g, out⟩/∂eps = Σ -½ g ⊙ scale ⊙ x̂ r² (only when eps is traced)."""
    x_hat, inv_std = layer_norm_normalized(saved)
    return np.asarray(np.sum(-0.5 * (_rows(g) * scale) * x_hat * (inv_std * inv_std)))


# ---------------------------------------------------------------- softmax

@_compiled()
def _shift_rows(x, mask, row_of, use_mask, shifted, peak):
    """shifted = x - max over the kept entries (-inf where masked); peak: that maximum
    (NaN when a kept entry is NaN, -inf when nothing finite is kept)."""
    n, d = x.shape
    minus_inf = x.dtype.type(-np.inf)
    for i in prange(n):
        m = minus_inf
        nan = False
        for j in range(d):
            if not use_mask or mask[row_of[i], j]:
                v = x[i, j]
                if v != v:
                    nan = True
                elif v > m:
                    m = v
        if nan:
            m = x.dtype.type(np.nan)
        peak[i] = m
        base = m if np.isfinite(m) else x.dtype.type(0)
        for j in range(d):
            if not use_mask or mask[row_of[i], j]:
                shifted[i, j] = x[i, j] - base
            else:
                shifted[i, j] = minus_inf


@_compiled(reassociate=True)
def _normalize_rows(e, peak, mask, row_of, use_mask):
    """e / Σ e per row in place; a row with nothing kept: zeros; a row whose maximum is
    NaN or +inf, or whose kept entries are all -inf: NaN (torch's masked_fill(-inf))."""
    n, d = e.shape
    for i in prange(n):
        kept_any = False
        if use_mask:
            for j in range(d):
                if mask[row_of[i], j]:
                    kept_any = True
                    break
        else:
            kept_any = d > 0
        m = peak[i]
        if not kept_any:
            for j in range(d):
                e[i, j] = 0
        elif m != m or m == np.inf or m == -np.inf:
            for j in range(d):
                e[i, j] = np.nan
        else:
            total = 0.0  # float64: the sum rounded once into e's dtype, as exact as numpy's
            for j in range(d):
                total += e[i, j]
            rounded = e.dtype.type(total)
            for j in range(d):
                e[i, j] /= rounded


def _mask_rows(mask, shape):
    """(rows, row_of, use_mask): the mask (of the scores' rank) as its own distinct C-contiguous
    bool rows (M, D) and, per row of the scores, the index of its mask row (N,): a causal
    (1, 1, T, T) mask stays T rows, not B·H·T. Dummies without a mask."""
    if mask is None:
        return np.ones((1, 1), np.bool_), np.zeros(1, np.intp), False
    lead = mask.shape[:-1]
    rows = _rows(np.broadcast_to(mask, lead + shape[-1:]))  # (M, D)
    row_of = np.broadcast_to(np.arange(rows.shape[0]).reshape(lead), shape[:-1]).reshape(-1)
    return rows, row_of, True


@_compiled(reassociate=True)
def _normalize_exact_rows(e, mask, row_of, use_mask, exact):
    """e (= exp(x), unshifted) masked and divided by its row sum where that sum lies in
    [1, ∞): there exp(x) is as exact as exp(x - max) (numpy_kernels._sums_are_exact);
    exact[i] says which rows were done."""
    n, d = e.shape
    for i in prange(n):
        if use_mask:
            for j in range(d):
                e[i, j] *= mask[row_of[i], j]  # masked: exactly 0 (inf: NaN, redone shifted)
        total = 0.0  # float64: the sum rounded once into e's dtype, as exact as numpy's
        for j in range(d):
            total += e[i, j]
        rounded = e.dtype.type(total)  # (a float64 sum may overflow only in e's dtype)
        exact[i] = rounded >= 1 and rounded < np.inf
        if exact[i]:
            for j in range(d):
                e[i, j] /= rounded


def softmax_forward(x, mask):
    """Masked softmax along the last axis: numpy's SIMD exp unshifted, then one compiled pass
    masks, sums and divides each row whose sum shows the unshifted exp exact (the common
    case, as in numpy_kernels); the other rows are redone shifted by their largest kept
    entry (a compiled shift, numpy's exp, a compiled normalisation). saved: (y, mask)."""
    rows = _rows(x)
    mask_rows, row_of, use_mask = _mask_rows(mask, x.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.exp(rows)
    exact = np.empty(rows.shape[0], np.bool_)
    _normalize_exact_rows(y, mask_rows, row_of, use_mask, exact)
    if not exact.all():
        redo = np.flatnonzero(~exact)
        redo_row_of = row_of[redo] if use_mask else row_of
        shifted = np.empty((redo.size, rows.shape[1]), rows.dtype)
        peak = np.empty(redo.size, rows.dtype)
        _shift_rows(rows[redo], mask_rows, redo_row_of, use_mask, shifted, peak)
        with np.errstate(over="ignore", invalid="ignore"):
            np.exp(shifted, out=shifted)
        _normalize_rows(shifted, peak, mask_rows, redo_row_of, use_mask)
        y[redo] = shifted
    return y.reshape(x.shape), (y, mask_rows, row_of, use_mask)


@_compiled(reassociate=True)
def _softmax_backward_rows(g, y, mask, row_of, use_mask, dx):
    n, d = y.shape
    for i in prange(n):
        s = y.dtype.type(0)
        for j in range(d):
            s += g[i, j] * y[i, j]
        for j in range(d):
            dx[i, j] = y[i, j] * (g[i, j] - s)  # 0 where y is (masked), but in a NaN row
        if use_mask and s != s:
            for j in range(d):
                if not mask[row_of[i], j]:
                    dx[i, j] = 0


def softmax_backward(g, saved):
    """dx = y ⊙ (g - Σ g ⊙ y) per row, 0 at masked entries: 2 passes over each row."""
    y, mask_rows, row_of, use_mask = saved
    dx = np.empty_like(y)
    _softmax_backward_rows(_rows(g), y, mask_rows, row_of, use_mask, dx)
    return dx.reshape(g.shape)


# ---------------------------------------------------------------- cross-entropy

@_compiled(reassociate=True)
def _cross_entropy_rows(logits, labels, e, peak, at_labels, mean_log_p, sums):
    """From e = exp(logits - peak) (numpy's exp): the row sums, log p at the labels and
    mean_c log p_c, log p = logits - peak - log Σ e."""
    n, c = logits.shape
    for i in prange(n):
        total = 0.0  # float64 sums, rounded once
        logit_total = 0.0
        for j in range(c):
            total += e[i, j]
            logit_total += logits[i, j]
        sums[i] = total
        log_sum = peak[i] + np.log(sums[i])
        at_labels[i] = logits[i, labels[i]] - log_sum
        mean_log_p[i] = logit_total / c - log_sum


@_compiled()
def _row_maxima(x, peak):
    n, c = x.shape
    for i in prange(n):
        m = x[i, 0]
        for j in range(1, c):
            if x[i, j] > m or x[i, j] != x[i, j]:
                m = x[i, j]
                if m != m:
                    break
        peak[i] = m


@_compiled()
def _shift_by(x, peak, out):
    n, c = x.shape
    for i in prange(n):
        for j in range(c):
            out[i, j] = x[i, j] - peak[i]


def cross_entropy_forward(logits, labels):
    """(log p at the labels (N,), mean_c log p_c (N,), saved) for logits (N, C): numpy's exp
    unshifted (rows whose sum is not in [1, ∞) redone shifted by their maximum), then one
    compiled pass for the sums. saved: (exp(logits - shift), row sums)."""
    if logits.size == 0:
        from . import numpy_kernels
        return numpy_kernels.cross_entropy_forward(logits, labels)
    logits = np.ascontiguousarray(logits)
    n = logits.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(logits)
    peak = np.zeros(n, logits.dtype)
    at_labels, mean_log_p, sums = (np.empty(n, logits.dtype) for _ in range(3))
    _cross_entropy_rows(logits, labels, e, peak, at_labels, mean_log_p, sums)
    redo = np.flatnonzero(~((sums >= 1) & (sums < np.inf)))
    if redo.size:
        rows = logits[redo]
        row_peak = np.empty(redo.size, logits.dtype)
        _row_maxima(rows, row_peak)
        shifted = np.empty_like(rows)
        _shift_by(rows, row_peak, shifted)
        np.exp(shifted, out=shifted)
        parts = [np.empty(redo.size, logits.dtype) for _ in range(3)]
        _cross_entropy_rows(rows, labels[redo], shifted, row_peak, *parts)
        e[redo] = shifted
        at_labels[redo], mean_log_p[redo], sums[redo] = parts
    return at_labels, mean_log_p, (e, sums)


@_compiled()
def _cross_entropy_backward_rows(e, sums, labels, smoothing, row_weight, d):
    n, c = e.shape
    one = e.dtype.type(1)
    spread = smoothing / e.dtype.type(c)
    for i in prange(n):
        total, w = sums[i], row_weight[i]
        for j in range(c):
            d[i, j] = (e[i, j] / total - spread) * w
        d[i, labels[i]] -= (one - smoothing) * w


def cross_entropy_probabilities(saved):
    """p = softmax(logits) (N, C), a fresh array."""
    if not isinstance(saved[0], np.ndarray):  # the numpy kernel's (empty logits)
        from . import numpy_kernels
        return numpy_kernels.cross_entropy_probabilities(saved)
    e, sums = saved
    return e / sums[:, None]


def cross_entropy_backward(saved, labels, smoothing, row_weight):
    """(p - target) ⊙ row_weight, target = (1 - ε) onehot + ε / C: one pass over each row."""
    if not isinstance(saved[0], np.ndarray):  # the numpy kernel's (empty logits)
        from . import numpy_kernels
        return numpy_kernels.cross_entropy_backward(saved, labels, smoothing, row_weight)
    e, sums = saved
    d = np.empty_like(e)
    weights = np.ascontiguousarray(row_weight, dtype=e.dtype)
    _cross_entropy_backward_rows(e, sums, labels, e.dtype.type(smoothing), weights, d)
    return d


# ---------------------------------------------------------------- optimizer updates

@_compiled()
def _adam_entries(p, g, m, v, out_p, out_m, out_v, one_minus_beta1, beta1, one_minus_beta2,
                  beta2, root_correction, eps, step_size, l2, shrink):
    for k in prange(p.shape[0]):
        gk = g[k] + l2 * p[k] if l2 != 0 else g[k]
        mk = m[k] * beta1 + gk * one_minus_beta1
        vk = v[k] * beta2 + (gk * gk) * one_minus_beta2
        step = (mk * step_size) / (np.sqrt(vk) / root_correction + eps)
        out_m[k], out_v[k] = mk, vk
        out_p[k] = (p[k] * shrink if shrink != 1 else p[k]) - step


def adam_update(p, g, m, v, out_p, out_m, out_v, rate, beta1, beta2, eps, weight_decay,
                decoupled, t):
    """numpy_kernels.adam_update in one compiled pass, each operation rounded in the arrays'
    dtype in the same order (the same bits)."""
    import math
    c = p.dtype.type
    l2 = weight_decay if weight_decay and not decoupled else 0.0
    shrink = 1 - rate * weight_decay if decoupled and weight_decay else 1.0
    _adam_entries(p, g, m, v, out_p, out_m, out_v, c(1 - beta1), c(beta1), c(1 - beta2),
                  c(beta2), c(math.sqrt(1 - beta2 ** t)), c(eps), c(rate / (1 - beta1 ** t)),
                  c(l2), c(shrink))


@_compiled()
def _sgd_entries(p, g, b, out_p, out_b, rate, momentum, nesterov, weight_decay, has_momentum):
    for k in prange(p.shape[0]):
        d = g[k] + weight_decay * p[k] if weight_decay != 0 else g[k]
        if not has_momentum:
            out_p[k] = p[k] - rate * d
            continue
        bk = b[k] * momentum + d
        out_b[k] = bk
        out_p[k] = p[k] - rate * (d + momentum * bk if nesterov else bk)


def sgd_update(p, g, b, out_p, out_b, rate, momentum, nesterov, weight_decay):
    """numpy_kernels.sgd_update in one compiled pass (the same bits)."""
    c = p.dtype.type
    has_momentum = b is not None
    if not has_momentum:
        b = out_b = p[:0]
    _sgd_entries(p, g, b, out_p, out_b, c(rate), c(momentum), nesterov, c(weight_decay),
                 has_momentum)
