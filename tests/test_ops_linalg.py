"""norm (autograd_lite/ops/linalg.py) beyond the op table: the gradient at a zero norm as
torch's, dtypes as numpy's, and the orders and axes it refuses, each named."""
import numpy as np
import pytest

import autograd_lite as ag
from helpers.op_cases import assert_raises, each_error
from helpers.references import (DTYPES, central_jacobian, check_first_order,
                                check_second_order, compare_with_torch)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_at_a_zero_norm_is_zero_like_torch(dtype, torch):
    x = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, -4.0]], dtype)
    out = compare_with_torch(torch, lambda x: ag.norm(x, axis=1),
                             lambda t: torch.linalg.norm(t, dim=1), x)
    np.testing.assert_array_equal(out, [0, 5])
    compare_with_torch(torch, ag.norm, torch.linalg.norm, np.zeros((2, 3), dtype))
    g = ag.grad(lambda x: ag.sum(ag.norm(x, axis=1)))(x)
    np.testing.assert_allclose(g, [[0, 0, 0], [0.6, 0, -0.8]], rtol=1e-6)


def test_dtypes_as_numpy():
    for x in (np.ones(3, np.float32), np.ones(3), np.arange(4), [3, 4]):
        got, want = ag.norm(x), np.linalg.norm(x)
        assert got.dtype == want.dtype and got == want


ERRORS = [
    (lambda: ag.norm(np.ones((3, 3)), 2), ValueError,
     "norm: ord=2 over two axes is the spectral norm (the largest singular value), which is not "
     "supported: autograd_lite computes the 2-norm of vectors (ord=None or 2) and the Frobenius "
     "norm of matrices (ord=None or 'fro')"),
    (lambda: ag.norm(np.ones(3), 1), ValueError, "norm: ord=1 of a vector is not supported"),
    (lambda: ag.norm(np.ones((2, 3)), np.inf, axis=1), ValueError,
     "norm: ord=inf of a vector is not supported"),
    (lambda: ag.norm(np.ones(3), "fro"), ValueError,
     "norm: ord='fro' of a vector is not supported"),
    (lambda: ag.norm(np.ones((2, 2)), "nuc"), ValueError,
     "norm: ord='nuc' of a matrix is not supported"),
    (lambda: ag.norm(np.ones((2, 2, 2)), 2), ValueError,
     "norm: a norm is over one axis (a vector's) or two (a matrix's), got 3 axes of (2, 2, 2) "
     "(axis=None)"),
    (lambda: ag.norm(np.ones((2, 2, 2)), None, (0, 1, 2)), ValueError,
     "norm: a norm is over one axis (a vector's) or two (a matrix's), got 3 axes of (2, 2, 2)"),
    (lambda: ag.norm(np.ones((2, 2)), None, 2), ValueError,
     "norm: axis 2 is out of range for an array of 2 dimensions"),
    (lambda: ag.norm(np.ones(2, complex)), TypeError, "norm: x must be real, got complex128"),
    (lambda: ag.inv(np.ones((2, 3))), ValueError,
     "inv: a must be a square matrix or a stack of them (..., n, n), got (2, 3)"),
    (lambda: ag.det(np.ones(3)), ValueError,
     "det: a must be a square matrix or a stack of them (..., n, n), got (3,)"),
    (lambda: ag.slogdet(np.eye(2, dtype=int)), TypeError,
     "slogdet: a must hold real floats, got int64"),
    (lambda: ag.solve(np.eye(3), np.ones((2, 3))), ValueError,
     "solve: b must be a vector (3,) or matrices (..., 3, k) for a (3, 3), got (2, 3)"),
    (lambda: ag.solve(np.eye(3), np.ones(3, np.float32)), TypeError,
     "solve: operands float64 (3, 3) and float32 (3,) have different dtypes"),
    (lambda: ag.cholesky(-np.eye(2)), ValueError, "cholesky: a (2, 2) is not positive definite"),
]


@each_error(ERRORS)
def test_errors_name_the_order_and_axes(make, error, message):
    assert_raises(make, error, message)



# (ord, axis, keepdims, x's shape, the index of a slice set to zero): every order and axis
# norm takes, each with a zero vector or matrix beside nonzero ones
SECOND_ORDER_CASES = [
    (None, 1, False, (3, 4), np.s_[0]), (2, 1, False, (3, 4), np.s_[1]),
    (None, -1, True, (2, 3, 4), np.s_[1, 2]), (2, 0, False, (4, 3), np.s_[:, 2]),
    (None, (1, 2), False, (3, 2, 4), np.s_[1]), ("fro", (0, 2), True, (2, 3, 4), np.s_[:, 0]),
    ("fro", (-2, -1), False, (3, 2, 2), np.s_[2]), (None, None, False, (2, 3), np.s_[:]),
]


@pytest.mark.parametrize("squared", [None, "n * n", "n ** 2", "two calls"])
@pytest.mark.parametrize("ord, axis, keepdims, shape, zero", SECOND_ORDER_CASES)
def test_second_order_at_a_zero_norm_is_finite_and_exact_elsewhere(
        ord, axis, keepdims, shape, zero, squared, rng):
    """∇⟨∇f, v⟩ for f = Σ w ⊙ ‖x‖ (or ‖x‖²) with a zero vector among the slices, where a
    traced sqrt's pullback would divide 0 by 0: finite everywhere. Central differences of the
    gradient are the reference wherever the norm is nonzero. ‖x‖², however written, is smooth at 0:
    there (and everywhere) the result is the analytic 2 w ⊙ v; ‖x‖ itself is not, and its
    result at the zero slice is finite."""
    x = rng.standard_normal(shape)
    x[zero] = 0
    w = rng.standard_normal(np.shape(np.linalg.norm(x, ord, axis, keepdims)))
    v = rng.standard_normal(shape)
    w_kept = w.reshape(np.linalg.norm(x, ord, axis, keepdims=True).shape)
    square = {None: lambda x: ag.norm(x, ord, axis, keepdims),
              "n * n": lambda x: (lambda n: n * n)(ag.norm(x, ord, axis, keepdims)),
              "n ** 2": lambda x: ag.norm(x, ord, axis, keepdims) ** 2,
              "two calls": lambda x: ag.norm(x, ord, axis, keepdims) * ag.norm(x, ord, axis,
                                                                             keepdims)}[squared]

    def f(x):
        return ag.sum(w * square(x))

    def gradient_along_v(x):
        return ag.sum(ag.grad(f)(x) * v)
    got = ag.grad(gradient_along_v)(x)
    assert np.all(np.isfinite(got))
    if squared:
        np.testing.assert_allclose(got, 2 * w_kept * v, rtol=1e-12)
    nonzero = np.ones(shape, bool)
    nonzero[zero] = False
    if nonzero.any():
        want = central_jacobian(gradient_along_v, x)
        np.testing.assert_allclose(got[nonzero], want[nonzero], rtol=1e-6, atol=1e-7)


def test_the_hessian_of_a_squared_norm_at_a_zero_row_is_2():
    """Σ_rows ‖x_i‖² is Σ x², so the derivative of Σ ∇f is 2 everywhere, a zero row too."""
    def f(x):
        return ag.sum(ag.norm(x, axis=1) ** 2)
    x = np.array([[0., 0, 0], [1, 2, 2]])
    got, = ag.gradient(lambda x: ag.sum(ag.gradient(f, x)[0]), x)
    np.testing.assert_array_equal(got, np.full((2, 3), 2.0))
    np.testing.assert_array_equal(ag.hessian(lambda x: ag.norm(x) ** 2)(np.zeros(3)),
                                  2 * np.eye(3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_squared_norm_keeps_the_values_and_dtype_of_n_times_n(dtype, rng):
    """The rewrite changes derivatives only: the value is n · n's, bit for bit, in x's dtype,
    and the first-order gradient is 2x."""
    x = rng.standard_normal((3, 4)).astype(dtype)
    n = np.linalg.norm(x, axis=1)
    value, (g,) = ag.value_and_gradient(lambda x: ag.sum(ag.norm(x, axis=1) ** 2), x)
    assert value.dtype == g.dtype == dtype
    np.testing.assert_array_equal(value, np.sum(n * n))
    np.testing.assert_array_equal(g, 2 * x)


def test_the_square_matrix_ops_against_their_definitions(rng):
    """inv, solve, det and slogdet of one matrix against numpy's; their gradients against
    the closed forms: d tr(W A⁻¹) = -A⁻ᵀ Wᵀ A⁻ᵀ, d log|det A| = A⁻ᵀ, d det A = det A · A⁻ᵀ."""
    a = np.eye(3) + 0.3 * rng.standard_normal((3, 3))
    w = rng.standard_normal((3, 3))
    a_inv_t = np.linalg.inv(a).T
    np.testing.assert_allclose(ag.grad(lambda a: ag.sum(ag.inv(a) * w.T))(a),
                               -a_inv_t @ w.T @ a_inv_t, rtol=1e-10)
    np.testing.assert_allclose(ag.grad(lambda a: ag.slogdet(a)[1])(a), a_inv_t, rtol=1e-10)
    np.testing.assert_allclose(ag.grad(ag.det)(a), np.linalg.det(a) * a_inv_t, rtol=1e-10)
    sign, logdet = ag.slogdet(-a)
    np.testing.assert_allclose((sign, logdet), np.linalg.slogdet(-a))
    b = rng.standard_normal(3)
    np.testing.assert_allclose(ag.solve(a, b), np.linalg.solve(a, b))
    np.testing.assert_allclose(ag.grad(lambda b: ag.sum(ag.solve(a, b) * b))(b),
                               (np.linalg.inv(a) + a_inv_t) @ b, rtol=1e-10)


def test_cholesky_second_order_against_central_differences(rng):
    """cholesky of the symmetric (A + Aᵀ)/2 + 3I, whose derivative in A is the symmetric
    cotangent's: first and second order against central differences."""
    def f(a):
        return ag.cholesky((a + ag.transpose(a)) / 2 + 3 * np.eye(3))
    a = rng.standard_normal((3, 3))
    check_first_order(f, a)
    check_second_order(lambda a: ag.sum(ag.tanh(f(a)) ** 2), a)


def test_a_norm_and_a_std_of_a_row_with_a_nan_are_nan_as_numpy():
    """Only an exact 0 takes the zero branch of √(sum of squares); nan and inf pass."""
    x = np.array([[1.0, np.nan], [3.0, 4.0], [0.0, 0.0], [np.inf, -np.inf]])
    with np.errstate(invalid="ignore"):
        for ours, theirs in ((ag.norm(x, axis=1), np.linalg.norm(x, axis=1)),
                             (ag.std(x, axis=1), np.std(x, axis=1))):
            np.testing.assert_array_equal(ours, theirs)
        traced = ag.value_and_gradient(lambda x: ag.sum(ag.std(x, axis=1)), x)[0]
    assert np.isnan(traced)
