"""The softmax family (autograd_lite/ops/softmax.py) beyond the op table: the gradient
helper against PyTorch, masks (fully masked rows; masked entries holding NaN, inf or huge
values; huge kept entries), precision on both sides of the no-shift bound, empty axes,
float16, errors."""
import numpy as np
import pytest

import autograd_lite as ag
from helpers.op_cases import assert_raises, each_error
from helpers.references import DTYPES, check_second_order, compare_with_torch, to_tensor

ALL_FLOATS = [*DTYPES, np.float16]


def torch_masked_softmax(torch, mask, axis=-1):
    """torch's reference for ag.softmax(x, axis, mask): masked entries filled with -inf."""
    return lambda t: t.masked_fill(~torch.from_numpy(mask), -np.inf).softmax(axis)


# ---- masks ------------------------------------------------------------------------------------

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
    compare_with_torch(torch, lambda x: ag.softmax(x, mask=keep), torch_masked_softmax(torch, keep),
                       x[:1])
    check_second_order(lambda x: ag.sum(ag.softmax(x, mask=mask) ** 2), x.astype(np.float64))


MASK = np.array([[True, False, True, False, True, True],
                 [False, True, True, True, False, False],
                 [True, True, False, True, True, False]])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fill", [np.nan, np.inf, -np.inf, "largest", "lowest", 1e3])
def test_masked_entries_change_nothing(fill, dtype, rng, torch):
    """Whatever the masked entries hold, the result and the gradient of the kept entries are
    torch's, the gradient of the masked entries exactly 0, and a second derivative agrees."""
    x = rng.standard_normal(MASK.shape).astype(dtype)
    value = {"largest": np.finfo(dtype).max, "lowest": np.finfo(dtype).min}.get(fill, fill)
    filled = np.where(MASK, x, dtype(value))
    want = compare_with_torch(torch, lambda x: ag.softmax(x, mask=MASK),
                              torch_masked_softmax(torch, MASK), filled)
    np.testing.assert_allclose(want, ag.softmax(x, mask=MASK), rtol=10 * np.finfo(dtype).eps)
    assert np.all(want[~MASK] == 0)
    w = rng.standard_normal(MASK.shape).astype(dtype)
    g = ag.grad(lambda x: ag.sum(ag.softmax(x, mask=MASK) * w))(filled)
    assert np.all(g[~MASK] == 0)
    if np.isfinite(value):
        check_second_order(lambda x: ag.sum(ag.softmax(x, mask=MASK) ** 2),
                           filled.astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_huge_kept_entries_beside_larger_masked_ones(dtype, rng, torch):
    """Beyond the no-shift bound the exponent is shifted by the largest kept entry; a masked
    entry above every kept one must not be that maximum."""
    top = np.finfo(dtype).max
    x = np.array([[-0.6 * top, 0.3 * top],  # the masked entry is the larger one
                  [-0.6 * top, -0.6 * top + 2 * np.abs(np.spacing(dtype(0.6 * top)))],
                  [1e3, 0.9 * top]], dtype=dtype)
    mask = np.array([[True, False], [True, True], [True, False]])
    out = compare_with_torch(torch, lambda x: ag.softmax(x, mask=mask),
                             torch_masked_softmax(torch, mask), x)
    np.testing.assert_array_equal(out, [[1, 0], [0, 1], [1, 0]])
    scores = rng.standard_normal((4, 5)) * 1e3  # every row beyond the bound, some masked
    mask = rng.random((4, 5)) < 0.6
    mask[:, 0] = True
    scores[~mask] = 5e3
    compare_with_torch(torch, lambda x: ag.softmax(x, mask=mask), torch_masked_softmax(torch, mask),
                       scores.astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_kept_nan_inf_or_only_minus_inf_make_the_row_nan_as_in_torch(dtype, torch):
    """As torch's masked_fill(-inf).softmax: a kept NaN or +inf, or kept entries that are all
    -inf, make the row NaN; the other rows are untouched."""
    x = np.array([[np.nan, 1.0, 2.0], [np.inf, 1.0, 5.0], [-np.inf, 0.0, 7.0],
                  [-np.inf, -np.inf, 3.0], [0.5, 1.0, 2.0]], dtype=dtype)
    mask = np.array([[True, True, False], [True, True, False], [True, False, False],
                     [True, True, False], [True, True, False]])
    want = torch_masked_softmax(torch, mask)(torch.from_numpy(x)).numpy()
    with np.errstate(invalid="ignore", divide="ignore"):  # the NaN rows, as intended
        got = ag.softmax(x, mask=mask)
        g = ag.grad(lambda x: ag.sum(ag.softmax(x, mask=mask)))(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[:4, :2]).all()
    np.testing.assert_allclose(got[4], want[4], rtol=1e-6)
    assert np.all(g[~mask] == 0) and np.all(np.isfinite(g[4]))


# ---- precision --------------------------------------------------------------------------------

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
def test_softmax_is_as_exact_on_both_sides_of_the_no_shift_bound(dtype, scale, rng,
                                                                  fast_rules_on):
    """The kernels' precision (the fast rules'; the plain definitions shift every row, and
    their float32 rounding stays within the op table's tolerance): within
    ±½·log(largest float) exp is taken unshifted; beyond, shifted by the row max. Rows far
    below zero (all near -bound) keep full relative precision either way."""
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


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_shifts_only_the_rows_whose_sum_needs_it(axis, rng):
    """Rows whose unshifted exponentials sum below 1 (a causal mask's first row with a
    negative score, a row of large negative scores) or overflow are recomputed shifted; the
    other rows keep exp(x). Every row as exact as the float64 reference, the gradient too."""
    x = rng.standard_normal((2, 5, 5)).astype(np.float32)
    x[0, 0, 0] = -3.0  # the causal mask's first row: one key, e^-3 < 1
    x[1, 3] -= 200.0  # every exponential of this row underflows
    x[1, 4, 2] = 100.0  # overflows float32
    causal = np.tril(np.ones((5, 5), bool))
    def last(a):  # the softmax axis moved last, for the reference
        return np.moveaxis(a, axis, -1)
    for mask in (None, causal):
        y = ag.softmax(x, axis=axis, mask=mask)
        want = np.moveaxis(softmax_in_float64(last(x), None if mask is None else last(
            np.broadcast_to(mask, x.shape))), -1, axis)
        assert y.dtype == np.float32
        np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-30)
        weight = rng.standard_normal(x.shape)
        (g,) = ag.gradient(lambda x: ag.sum(ag.softmax(x, axis=axis, mask=mask) * weight),
                           x.astype(np.float64))
        dot = (weight * want).sum(axis=axis, keepdims=True)  # ∇softmax: y ⊙ (w - Σ w ⊙ y)
        np.testing.assert_allclose(g, want * (weight - dot), rtol=1e-9, atol=1e-12)


def test_logsumexp_of_a_row_of_minus_infinity_is_minus_infinity_as_in_torch(torch):
    x = np.array([[-np.inf, -np.inf], [0.0, 1.0]])
    want = torch.logsumexp(torch.tensor(x), dim=-1).numpy()
    np.testing.assert_array_equal(ag.logsumexp(x, axis=-1), want)


# ---- float16: computed in float32, as torch does on the CPU -----------------------------------

def compare_half(torch, ours, theirs, x):
    """float16 against torch in float64 on the same numbers: the exact answer, which torch's
    own float16 gradients miss by more than ours (they round the output before using it)."""
    return compare_with_torch(torch, ours, theirs, x, torch_dtype=np.float64)


def test_float16_rows_whose_sum_overflows_float16(torch):
    """Σ e^5.5 over 300 entries is 73,000, past float16's 65,504: the sum is taken in
    float32, and softmax, log_softmax and logsumexp agree with torch's float16."""
    x = np.full((2, 300), 5.5, np.float16)
    x[1, ::2] = -3.0
    mask = np.ones(300, bool)
    mask[-10:] = False
    y = compare_half(torch, ag.softmax, lambda t: t.softmax(-1), x)
    np.testing.assert_allclose(y[0], 1 / 300, rtol=1e-3)
    compare_half(torch, ag.log_softmax, lambda t: t.log_softmax(-1), x)
    compare_half(torch, lambda x: ag.softmax(x, mask=mask), torch_masked_softmax(torch, mask), x)
    out = compare_half(torch, ag.logsumexp, lambda t: t.logsumexp(-1), x)
    np.testing.assert_allclose(out[0], 5.5 + np.log(300), rtol=1e-3)


@pytest.mark.parametrize("axis", [-1, 0])
def test_float16_softmax_family_matches_torch(axis, rng, torch):
    x = (3 * rng.standard_normal((40, 50))).astype(np.float16)
    mask = rng.random((40, 50)) < 0.7
    mask[0] = mask[:, 0] = True  # something kept in every row and column
    compare_half(torch, lambda x: ag.softmax(x, axis), lambda t: t.softmax(axis), x)
    compare_half(torch, lambda x: ag.softmax(x, axis, mask),
                 torch_masked_softmax(torch, mask, axis), x)
    compare_half(torch, lambda x: ag.log_softmax(x, axis), lambda t: t.log_softmax(axis), x)
    compare_half(torch, lambda x: ag.logsumexp(x, axis), lambda t: t.logsumexp(axis), x)


# ---- empty axes -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_FLOATS)
@pytest.mark.parametrize("shape, axis", [((2, 0), -1), ((2, 0), 0), ((0, 3), -1), ((0,), 0)])
def test_empty_input_gives_the_empty_result_as_in_torch(shape, axis, dtype, torch):
    x = np.zeros(shape, dtype)
    mask = np.ones(shape, bool)
    cases = [(lambda x: ag.softmax(x, axis), lambda t: t.softmax(axis)),
             (lambda x: ag.softmax(x, axis, mask), torch_masked_softmax(torch, mask, axis)),
             (lambda x: ag.log_softmax(x, axis), lambda t: t.log_softmax(axis)),
             (lambda x: ag.logsumexp(x, axis), lambda t: t.logsumexp(axis))]
    for ours, theirs in cases:
        t = to_tensor(torch, x, requires_grad=True)
        want = theirs(t)
        (want_grad,) = torch.autograd.grad(want.sum(), t)
        value, (g,) = ag.value_and_gradient(lambda x: ag.sum(ours(x)), x)
        out = ours(x)
        assert type(out) is np.ndarray and out.dtype == dtype and out.shape == tuple(want.shape)
        np.testing.assert_array_equal(out, want.detach().numpy())  # logsumexp: -inf per row
        assert g.dtype == dtype and g.shape == shape == tuple(want_grad.shape)


# ---- errors -----------------------------------------------------------------------------------

ERRORS = [
    (lambda: ag.softmax(np.ones((2, 4)), mask=np.ones((2, 4), dtype=int)), TypeError,
     "softmax: mask must be a bool array (True = keep), got int64"),
    (lambda: ag.softmax(np.ones((2, 4)), mask=np.ones((3,), dtype=bool)), ValueError,
     "softmax: mask (3,) does not broadcast to the scores (2, 4)"),
    (lambda: ag.softmax(np.ones((2, 4)), mask=np.ones((3, 2, 4), dtype=bool)), ValueError,
     "softmax: mask (3, 2, 4) does not broadcast to the scores (2, 4)"),
    (lambda: ag.softmax(np.ones((2, 4)), axis=2), ValueError,
     "softmax: axis 2 is out of range for an array of 2 dimensions"),
    (lambda: ag.softmax(np.ones((2, 3)), axis=None), TypeError,
     "softmax: axis must be an int, got None"),
    (lambda: ag.log_softmax(np.ones((2, 4)), axis=-3), ValueError,
     "log_softmax: axis -3 is out of range for an array of 2 dimensions"),
    (lambda: ag.logsumexp(np.ones((2, 4)), axis=(1, -1)), ValueError,
     "logsumexp: repeated axis in (1, -1)"),
]


@each_error(ERRORS)
def test_errors_name_the_op_and_shapes(make, error, message):
    assert_raises(make, error, message)


def test_softmax_axis_may_be_a_numpy_integer():
    np.testing.assert_allclose(ag.softmax(np.zeros((2, 3)), axis=np.int64(1)),
                               np.full((2, 3), 1 / 3))
