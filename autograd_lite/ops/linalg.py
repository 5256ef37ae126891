"""Linear algebra: norms (the vector 2-norm and the Frobenius norm) and square matrices.

    ‖x‖ = √(Σ x²),   d‖x‖/dx = x / ‖x‖   (0 where ‖x‖ = 0, as torch: x is 0 there)

Second order is exact where ‖x‖ > 0. At ‖x‖ = 0 it is finite but the limit of g/‖x‖ is
lost (torch gives NaN): the composite that matters, ‖x‖² written `n * n` or `n ** 2`, is
differentiated as Σ x² (`square_of_norm`); any other gets 0 there.
"""
import numpy as np

from ..core.placement import array_module
from ..core.tracer import (Box, RowPullback, named_body, named_pullback, primal, primitive,
                           stop_gradient)
from .broadcasting import unbroadcast
from ..core.dtypes import check_same_float_dtype, computed_in_float32
from .checks import as_array, normalize_axes
from .reductions import keepdims_shape, root_of_squares

_SUPPORTED = ("autograd_lite computes the 2-norm of vectors (ord=None or 2) and the Frobenius "
              "norm of matrices (ord=None or 'fro')")


def _norm_axes(x, ord, axis):
    """The axes np.linalg.norm(x, ord, axis) sums the squares over; an error for other ords."""
    if axis is None and ord is None:
        return tuple(range(x.ndim))  # numpy: the 2-norm of x flattened, any rank
    axes = normalize_axes("norm", axis, x.ndim)
    if len(axes) not in (1, 2):
        raise ValueError(f"norm: a norm is over one axis (a vector's) or two (a matrix's), got "
                         f"{len(axes)} axes of {x.shape} (axis={axis})")
    if ord is None or ord == (2 if len(axes) == 1 else "fro"):
        return axes
    if len(axes) == 2 and ord == 2:
        raise ValueError("norm: ord=2 over two axes is the spectral norm (the largest singular "
                         f"value), which is not supported: {_SUPPORTED}")
    kind = "a vector" if len(axes) == 1 else "a matrix"
    raise ValueError(f"norm: ord={ord!r} of {kind} is not supported: {_SUPPORTED}")


@primitive
def norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm for the norms that are √(Σ x²); integers are taken as float64."""
    x = as_array("norm", x)
    if x.dtype.kind == "c":
        raise TypeError(f"norm: x must be real, got {x.dtype}")
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    axes = _norm_axes(x, ord, axis)
    out = root_of_squares((x * x).sum(axis=axes, keepdims=keepdims))
    kept = out.reshape(keepdims_shape(x.shape, axes))

    def norm_pullback(g):
        nonzero = np.where(primal(kept) > 0, kept, 1)  # where the norm is 0, so is x
        return x * (g.reshape(kept.shape) / nonzero), None, None, None
    norm_pullback.squared_from = (x, axes, keepdims)  # for square_of_norm (kept already)
    return out, norm_pullback


@primitive(name="squared_norm")
def _squared_norm(x, norm_value, axes, keepdims):
    """norm_value² (the bits of n · n), differentiated as Σ x²: 2x, smooth at x = 0."""
    out = norm_value * norm_value

    def squared_norm_pullback(g):
        return 2 * x * g.reshape(keepdims_shape(x.shape, axes)), None, None, None
    return out, squared_norm_pullback


def _traced_norm(n):
    """(x's node, x at n's level, axes, keepdims) when n is a traced norm(x), else None."""
    squared_from = getattr(n.node.pullback, "squared_from", None) if type(n) is Box else None
    if squared_from is None:
        return None
    (_, x_node), = n.node.parents  # norm's one traced argument: x at this level
    return (x_node, *squared_from)


def square_of_norm(a, b):
    """a · b differentiated as Σ x² when a and b are the same traced norm of x (one call, or
    two on the same x and axes), else None: mul and pow ask before they multiply."""
    norm_a = _traced_norm(a)
    norm_b = norm_a if b is a or norm_a is None else _traced_norm(b)
    if norm_b is None or norm_b[0] is not norm_a[0] or norm_b[2:] != norm_a[2:]:  # x, axes
        return None
    x_node, x_value, axes, keepdims = norm_a
    return _squared_norm(Box(x_value, a.trace, x_node), a.value, axes, keepdims)


# ---- square matrices (stacks of them too; float16 computed in float32) ----------------------

def _square(op, a):
    """a as a square matrix or a stack of them (..., n, n), of floats; else an error naming op."""
    a = as_array(op, a, "a")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{op}: a must be a square matrix or a stack of them (..., n, n), "
                         f"got {a.shape}")
    if a.dtype.kind != "f":
        raise TypeError(f"{op}: a must hold real floats, got {a.dtype}")
    return a


def _t(a):
    """The matrices of a stack transposed: aᵀ over the last two axes."""
    return np.swapaxes(a, -1, -2)


@primitive
@computed_in_float32
def solve(a, b):
    """x = A⁻¹ b (np.linalg.solve: b (n,) or (..., n, k), the stacks broadcast);
    b̄ = A⁻ᵀ g, Ā = -b̄ xᵀ."""
    a, b = _square("solve", a), as_array("solve", b, "b")
    vector = b.ndim == 1
    if b.ndim == 0 or b.shape[0 if vector else -2] != a.shape[-1]:
        raise ValueError(f"solve: b must be a vector ({a.shape[-1]},) or matrices "
                         f"(..., {a.shape[-1]}, k) for a {a.shape}, got {b.shape}")
    check_same_float_dtype("solve", a, b)
    out = np.linalg.solve(a, b)
    a_shape, b_shape = a.shape, b.shape

    def solve_pullback(g):
        gb = np.linalg.solve(_t(a), g)
        ga = -(gb[..., :, None] * out[..., None, :] if vector else gb @ _t(out))
        return lambda: unbroadcast(ga, a_shape), lambda: unbroadcast(gb, b_shape)
    return out, solve_pullback


def matrix_op(name, forward, vjp, equation):
    """The op `name` of square matrices from its row: out = forward(a); vjp(a, out, g) returns
    the cotangent as a 1-tuple, with the library's ops (higher order)."""
    named_pullback(vjp, name)

    def body(a):
        a = _square(name, a)
        out = forward(a)
        return out, RowPullback(vjp, a, out)
    body.__doc__ = equation
    return primitive(computed_in_float32(named_body(body, name)))


def _cholesky(a):
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise ValueError(f"cholesky: a {a.shape} is not positive definite") from None


def _cholesky_vjp(a, out, g):
    """Murray 2016's cotangent (`cholesky`): P = Φ(Lᵀ L̄), S = L⁻ᵀ P L⁻¹, Ā = (S + Sᵀ) / 2."""
    n = out.shape[-1]
    xp = array_module(out)
    halved_lower = xp.tri(n, dtype=out.dtype) - 0.5 * xp.eye(n, dtype=out.dtype)  # Φ's weights
    p = (_t(out) @ g) * halved_lower
    s = solve(_t(out), _t(solve(_t(out), _t(p))))
    return ((s + _t(s)) / 2,)


inv = matrix_op("inv", np.linalg.inv, lambda a, out, g: (-(_t(out) @ g @ _t(out)),),
                "A⁻¹ (np.linalg.inv); Ā = -A⁻ᵀ g A⁻ᵀ.")
det = matrix_op("det", np.linalg.det,
                lambda a, out, g: ((g * out)[..., None, None] * _t(inv(a)),),
                "det A (np.linalg.det); Ā = g det A · A⁻ᵀ.")
log_abs_det = matrix_op("slogdet", lambda a: np.linalg.slogdet(a)[1],
                        lambda a, out, g: (g[..., None, None] * _t(inv(a)),),
                        "log |det A| (np.linalg.slogdet's second value); Ā = g A⁻ᵀ.")
cholesky = matrix_op("cholesky", _cholesky, _cholesky_vjp,
                     """L, lower triangular with L Lᵀ = A (np.linalg.cholesky; A symmetric positive
    definite, its lower triangle read). The cotangent is the symmetric one (Murray 2016):

        P = Φ(Lᵀ L̄),  S = L⁻ᵀ P L⁻¹,  Ā = (S + Sᵀ) / 2,

    Φ keeping the lower triangle with its diagonal halved.""")


def slogdet(a):
    """(sign, log |det A|), as np.linalg.slogdet: the sign a constant, the log differentiable."""
    log_abs = log_abs_det(a)  # (checks a)
    return np.sign(det(stop_gradient(a))), log_abs
