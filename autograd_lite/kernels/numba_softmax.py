"""The softmax family compiled with numba (see numba_kernels.py): masked softmax and its
backward, and cross-entropy over log-softmax rows. In float32 the exponentials are
numba_exp.exp32's, inside the pass that masks and sums each row; in float64 numpy's SIMD exp
runs over the block (numba's scalar exp is not vectorised) and one compiled pass per row
masks, sums and scales. Softmax runs in the calling thread (the attention core calls it in
shares of heads: models/fast/sublayers.py); cross-entropy's passes take their rows in shares
(parallel.split_rows)."""
import numba
import numpy as np

from .numba_compile import as_rows, compiled
from .numba_exp import exp32, exp_float32
from .parallel import split_rows


# ---------------------------------------------------------------- softmax

_NO_MASK = (np.ones((1, 1), np.bool_), np.zeros((2, 0), np.intp), False)  # never written


def _mask_layout(mask, shape):
    """(rows, layout, use_mask) for the scores' shape: the mask (of the scores' rank) as its
    own distinct C-contiguous bool rows (M, D), a causal (1, 1, T, T) mask T rows, not B·H·T;
    and layout (2, rank - 1), the scores' leading sizes over the mask rows' stride along each
    (0 where the mask broadcasts), from which a kernel finds the mask row of each row of the
    scores (`_next_mask_row` row after row, `_mask_row` for one) instead of reading an index
    array of B·H·T rows built for each call. Dummies without a mask."""
    if mask is None:
        return _NO_MASK
    if mask.shape[-1] != shape[-1]:
        mask = np.broadcast_to(mask, mask.shape[:-1] + shape[-1:])
    strides, stride = [], 1
    for size in reversed(mask.shape[:-1]):
        strides.append(stride if size != 1 else 0)
        stride *= size
    layout = np.array([shape[:-1], strides[::-1]], np.intp).reshape(2, len(strides))
    return as_rows(mask), layout, True


@numba.njit(inline="always")
def _mask_row(i, layout):
    """The mask row of the scores' row i: its index along each leading axis, times that
    axis's stride in the mask's rows (_mask_layout)."""
    r = 0
    for axis in range(layout.shape[1] - 1, -1, -1):
        size = layout[0, axis]
        r += (i % size) * layout[1, axis]
        i //= size
    return r


@numba.njit(inline="always")
def _next_mask_row(index, r, layout):
    """The mask row of the scores' next row, from r, that of this one: `index` (this row's
    index along each leading axis) advanced like an odometer, r by the strides it moves."""
    for axis in range(layout.shape[1] - 1, -1, -1):
        index[axis] += 1
        r += layout[1, axis]
        if index[axis] < layout[0, axis]:
            return r
        r -= layout[1, axis] * layout[0, axis]
        index[axis] = 0
    return r


@numba.njit(inline="always")
def _shifted_row(x, i, mask, r, use_mask, y):
    """y[i] = the masked softmax of x[i], shifted by its largest kept entry, the exp numpy's
    (libm's, one element at a time: only for the rows the unshifted pass cannot do). A row
    with nothing kept: zeros; a kept NaN or +inf, or kept entries all -inf: NaN (torch's
    masked_fill(-inf))."""
    d = x.shape[1]
    minus_inf = x.dtype.type(-np.inf)
    peak, nan, kept_any = minus_inf, False, not use_mask and d > 0
    for j in range(d):
        if not use_mask or mask[r, j]:
            kept_any = True
            v = x[i, j]
            if v != v:
                nan = True
            elif v > peak:
                peak = v
    if not kept_any:
        for j in range(d):
            y[i, j] = 0
        return
    if nan or peak == np.inf or peak == -np.inf:
        for j in range(d):
            y[i, j] = np.nan
        return
    total = 0.0
    for j in range(d):
        e = np.exp(x[i, j] - peak) if not use_mask or mask[r, j] else x.dtype.type(0)
        y[i, j] = e
        total += e
    rounded = y.dtype.type(total)
    for j in range(d):
        y[i, j] /= rounded


@compiled(reassociate=True)
def _softmax_rows64(x, mask, layout, use_mask, y):
    """y (= exp(x) from numpy's SIMD exp, unshifted) masked and divided by its row sum where
    that sum lies in [1, ∞): there exp(x) is as exact as exp(x - max)
    (numpy_kernels._sums_are_exact); then the other rows redone shifted (_shifted_row)."""
    n, d = y.shape
    redo = np.empty(n, np.intp)
    n_redo = 0
    index, r = np.zeros(layout.shape[1], np.intp), 0  # row i's index along each leading axis
    for i in range(n):
        if use_mask:
            for j in range(d):
                y[i, j] *= mask[r, j]  # masked: exactly 0 (inf: NaN, redone shifted)
            r = _next_mask_row(index, r, layout)
        total = 0.0  # float64: the sum rounded once into y's dtype, as exact as numpy's
        for j in range(d):
            total += y[i, j]
        rounded = y.dtype.type(total)  # (a float64 sum may overflow only in y's dtype)
        if rounded >= 1 and rounded < np.inf:
            for j in range(d):
                y[i, j] /= rounded
        else:
            redo[n_redo] = i
            n_redo += 1
    for k in range(n_redo):
        i = redo[k]
        _shifted_row(x, i, mask, _mask_row(i, layout) if use_mask else 0, use_mask, y)


@numba.njit(inline="always")
def _shifted_row32(x, i, mask, r, use_mask, y):
    """y[i] = the masked softmax of the float32 row x[i], exp32 shifted by its largest kept
    entry: the rows the unshifted pass could not do. A row with nothing kept is zeros; a kept
    NaN or +inf, or kept entries all -inf, make x - max NaN somewhere, so the sum and the
    row NaN."""
    d = x.shape[1]
    minus_inf, zero = np.float32(-np.inf), np.float32(0)
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


@compiled(reassociate=True, contract=True)
def _softmax_rows32(x, mask, layout, use_mask, y):
    """Masked softmax of float32 rows in one call: y = exp32(x) unshifted (0 where masked:
    exp32(x) · 0, so a masked inf still shows as NaN and its row is redone), scaled by
    1 / its row sum where that lies in [1, ∞); then every other row redone shifted in place
    (_shifted_row32). The sum is float32, reordered so that it vectorises (about 1e-7
    relative for the attention's rows)."""
    n, d = x.shape
    redo = np.empty(n, np.intp)
    n_redo = 0
    index, r = np.zeros(layout.shape[1], np.intp), 0  # row i's index along each leading axis
    for i in range(n):
        total = np.float32(0)
        if use_mask:
            for j in range(d):
                v = exp32(x[i, j]) * mask[r, j]
                y[i, j] = v
                total += v
            r = _next_mask_row(index, r, layout)
        else:
            for j in range(d):
                v = exp32(x[i, j])
                y[i, j] = v
                total += v
        if total >= 1 and total < np.inf:
            inverse = np.float32(1) / total
            for j in range(d):
                y[i, j] *= inverse
        else:
            redo[n_redo] = i
            n_redo += 1
    for k in range(n_redo):
        i = redo[k]
        _shifted_row32(x, i, mask, _mask_row(i, layout) if use_mask else 0, use_mask, y)


def softmax_forward(x, mask):
    """Masked softmax along the last axis in one compiled call: exp unshifted (exp32 in
    float32, inside the pass; in float64 numpy's over the block, before it), and each row
    whose sum shows the unshifted exp exact (the common case, as in numpy_kernels) masked,
    summed and divided in that pass; the other rows redone there, shifted by their largest
    kept entry. saved: (y, mask rows, layout, use_mask)."""
    rows = as_rows(x)
    mask_rows, layout, use_mask = _mask_layout(mask, x.shape)
    if rows.dtype == np.float32:
        y = np.empty_like(rows)
        _softmax_rows32(rows, mask_rows, layout, use_mask, y)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            y = np.exp(rows)
        _softmax_rows64(rows, mask_rows, layout, use_mask, y)
    return y.reshape(x.shape), (y, mask_rows, layout, use_mask)


@compiled(reassociate=True)
def _softmax_backward_rows(g, y, mask, layout, use_mask, dx):
    n, d = y.shape
    for i in range(n):
        s = y.dtype.type(0)
        for j in range(d):
            s += g[i, j] * y[i, j]
        for j in range(d):
            dx[i, j] = y[i, j] * (g[i, j] - s)  # 0 where y is (masked), but in a NaN row
        if use_mask and s != s:
            r = _mask_row(i, layout)
            for j in range(d):
                if not mask[r, j]:
                    dx[i, j] = 0


def softmax_backward(g, saved):
    """dx = y ⊙ (g - Σ g ⊙ y) per row, 0 at masked entries: 2 passes over each row."""
    y, mask_rows, layout, use_mask = saved
    dx = np.empty_like(y)
    _softmax_backward_rows(as_rows(g), y, mask_rows, layout, use_mask, dx)
    return dx.reshape(g.shape)


# ---------------------------------------------------------------- cross-entropy

@compiled(reassociate=True)
def _cross_entropy_rows(logits, labels, e, peak, at_labels, mean_log_p, sums, start, stop):
    """From e = exp(logits - peak) (numpy's exp): the row sums, log p at the labels and
    mean_c log p_c, log p = logits - peak - log Σ e, for rows start .. stop - 1."""
    c = logits.shape[1]
    for i in range(start, stop):
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
    redone shifted by their maximum), then one compiled pass for the sums. The float32 exp
    and the pass over the sums take their rows in shares (parallel.split_rows); the rows
    redone, rare, are one call.
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
    split_rows(_cross_entropy_rows, n, logits, labels, e, peak, at_labels, mean_log_p, sums,
               row_size=logits.shape[1])
    redo = np.flatnonzero(~((sums >= 1) & (sums < np.inf)))
    if redo.size:
        rows = logits[redo]
        row_peak = np.empty(redo.size, logits.dtype)
        _row_maxima(rows, row_peak)
        shifted = np.empty_like(rows)
        _shift_by(rows, row_peak, shifted)
        np.exp(shifted, out=shifted)
        parts = [np.empty(redo.size, logits.dtype) for _ in range(3)]
        _cross_entropy_rows(rows, labels[redo], shifted, row_peak, *parts, 0, redo.size)
        e[redo] = shifted
        at_labels[redo], mean_log_p[redo], sums[redo] = parts
    return at_labels, mean_log_p, (e, sums)


@compiled()
def _cross_entropy_backward_rows(e, sums, labels, smoothing, row_weight, d, start, stop):
    c = e.shape[1]
    one = e.dtype.type(1)
    spread = smoothing / e.dtype.type(c)
    for i in range(start, stop):
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
    split_rows(_cross_entropy_backward_rows, e.shape[0], e, sums, labels,
               e.dtype.type(smoothing), weights, d, row_size=e.shape[1])
    return d
