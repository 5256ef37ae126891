"""The softmax family compiled with numba (see numba_kernels.py): masked softmax and its
backward, and cross-entropy over log-softmax rows. In float32 the exponentials are
numba_exp.exp32's, inside the pass that masks and sums each row; in float64 numpy's SIMD exp
runs over the block (numba's scalar exp is not vectorised) and one compiled pass per row
masks, sums and scales."""
import numpy as np

from .numba_compile import as_rows, compiled
from .numba_exp import exp32, exp_float32


# ---------------------------------------------------------------- softmax

@compiled()
def _shift_rows(x, mask, row_of, use_mask, shifted, peak):
    """shifted = x - max over the kept entries (-inf where masked); peak: that maximum
    (NaN when a kept entry is NaN, -inf when nothing finite is kept)."""
    n, d = x.shape
    minus_inf = x.dtype.type(-np.inf)
    for i in range(n):
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


@compiled(reassociate=True)
def _normalize_rows(e, peak, mask, row_of, use_mask):
    """e / Σ e per row in place; a row with nothing kept: zeros; a row whose maximum is
    NaN or +inf, or whose kept entries are all -inf: NaN (torch's masked_fill(-inf))."""
    n, d = e.shape
    for i in range(n):
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
    rows = as_rows(np.broadcast_to(mask, lead + shape[-1:]))  # (M, D)
    row_of = np.broadcast_to(np.arange(rows.shape[0]).reshape(lead), shape[:-1]).reshape(-1)
    return rows, row_of, True


@compiled(reassociate=True)
def _normalize_exact_rows(e, mask, row_of, use_mask, exact):
    """e (= exp(x), unshifted) masked and divided by its row sum where that sum lies in
    [1, ∞): there exp(x) is as exact as exp(x - max) (numpy_kernels._sums_are_exact);
    exact[i] says which rows were done."""
    n, d = e.shape
    for i in range(n):
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


@compiled(reassociate=True, contract=True)
def _exp_normalize_exact_rows32(x, mask, row_of, use_mask, e, exact):
    """_normalize_exact_rows for float32 with the exponentials taken in the same pass:
    e = exp32(x) (0 where masked: exp32(x) · 0, so a masked inf still shows as NaN and its
    row is redone), then scaled by 1 / its row sum where that lies in [1, ∞). The sum is
    float32, reordered so that it vectorises (about 1e-7 relative for the attention's rows)."""
    n, d = x.shape
    for i in range(n):
        total = np.float32(0)
        if use_mask:
            r = row_of[i]
            for j in range(d):
                v = exp32(x[i, j]) * mask[r, j]
                e[i, j] = v
                total += v
        else:
            for j in range(d):
                v = exp32(x[i, j])
                e[i, j] = v
                total += v
        exact[i] = total >= 1 and total < np.inf
        if exact[i]:
            inverse = np.float32(1) / total
            for j in range(d):
                e[i, j] *= inverse


@compiled(reassociate=True, contract=True)
def _shifted_rows32(x, mask, row_of, use_mask, y):
    """Masked softmax of float32 rows, exp32 shifted by each row's largest kept entry: the
    rows the unshifted pass could not do. A row with nothing kept is zeros; a kept NaN or
    +inf, or kept entries all -inf, make x - max NaN somewhere, so the sum and the row NaN."""
    n, d = x.shape
    minus_inf, zero = np.float32(-np.inf), np.float32(0)
    for i in range(n):
        r = row_of[i]
        peak, kept = minus_inf, d
        if use_mask:
            kept = 0
            for j in range(d):
                v = x[i, j] if mask[r, j] else minus_inf
                peak = max(peak, v)
                kept += mask[r, j]
        else:
            for j in range(d):
                peak = max(peak, x[i, j])
        total = zero
        if use_mask:
            for j in range(d):
                e = exp32(x[i, j] - peak)
                e = e if mask[r, j] else zero
                y[i, j] = e
                total += e
        else:
            for j in range(d):
                e = exp32(x[i, j] - peak)
                y[i, j] = e
                total += e
        scale = np.float32(1) / total if kept else zero
        for j in range(d):
            y[i, j] *= scale


def softmax_forward(x, mask):
    """Masked softmax along the last axis: exp unshifted (exp32 in float32, numpy's over the
    block in float64), then one compiled pass masks, sums and divides each row whose sum
    shows the unshifted exp exact (the common case, as in numpy_kernels); the other rows are
    redone shifted by their largest kept entry (in float32 one compiled kernel; in float64 a
    compiled shift, numpy's exp, a compiled normalisation). saved: (y, mask)."""
    rows = as_rows(x)
    mask_rows, row_of, use_mask = _mask_rows(mask, x.shape)
    exact = np.empty(rows.shape[0], np.bool_)
    if rows.dtype == np.float32:
        y = np.empty_like(rows)
        _exp_normalize_exact_rows32(rows, mask_rows, row_of, use_mask, y, exact)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            y = np.exp(rows)
        _normalize_exact_rows(y, mask_rows, row_of, use_mask, exact)
    if not exact.all() and rows.dtype == np.float32:
        redo = np.flatnonzero(~exact)
        shifted = np.empty((redo.size, rows.shape[1]), rows.dtype)
        _shifted_rows32(rows[redo], mask_rows, row_of[redo] if use_mask else row_of, use_mask,
                        shifted)
        y[redo] = shifted
    elif not exact.all():
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


@compiled(reassociate=True)
def _softmax_backward_rows(g, y, mask, row_of, use_mask, dx):
    n, d = y.shape
    for i in range(n):
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
    _softmax_backward_rows(as_rows(g), y, mask_rows, row_of, use_mask, dx)
    return dx.reshape(g.shape)


# ---------------------------------------------------------------- cross-entropy

@compiled(reassociate=True)
def _cross_entropy_rows(logits, labels, e, peak, at_labels, mean_log_p, sums):
    """From e = exp(logits - peak) (numpy's exp): the row sums, log p at the labels and
    mean_c log p_c, log p = logits - peak - log Σ e."""
    n, c = logits.shape
    for i in range(n):
        total = 0.0  # float64 sums, rounded once
        logit_total = 0.0
        for j in range(c):
            total += e[i, j]
            logit_total += logits[i, j]
        sums[i] = total
        log_sum = peak[i] + np.log(sums[i])
        at_labels[i] = logits[i, labels[i]] - log_sum
        mean_log_p[i] = logit_total / c - log_sum


@compiled()
def _row_maxima(x, peak):
    n, c = x.shape
    for i in range(n):
        m = x[i, 0]
        for j in range(1, c):
            if x[i, j] > m or x[i, j] != x[i, j]:
                m = x[i, j]
                if m != m:
                    break
        peak[i] = m


@compiled()
def _shift_by(x, peak, out):
    n, c = x.shape
    for i in range(n):
        for j in range(c):
            out[i, j] = x[i, j] - peak[i]


def cross_entropy_forward(logits, labels):
    """(log p at the labels (N,), mean_c log p_c (N,), saved) for logits (N, C): exp
    (exp32 in float32, numpy's in float64) unshifted (rows whose sum is not in [1, ∞)
    redone shifted by their maximum), then one compiled pass for the sums.
    saved: (exp(logits - shift), row sums)."""
    if logits.size == 0:
        from . import numpy_kernels
        return numpy_kernels.cross_entropy_forward(logits, labels)
    logits = np.ascontiguousarray(logits)
    n = logits.shape[0]
    if logits.dtype == np.float32:
        e = exp_float32(logits)
    else:
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


@compiled()
def _cross_entropy_backward_rows(e, sums, labels, smoothing, row_weight, d):
    n, c = e.shape
    one = e.dtype.type(1)
    spread = smoothing / e.dtype.type(c)
    for i in range(n):
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
