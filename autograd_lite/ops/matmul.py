"""Matrix product of stacks of matrices, with numpy's broadcasting of the batch axes.

    out[..., i, j] = Σ_k a[..., i, k] b[..., k, j]
    da = g @ bᵀ,  db = aᵀ @ g   (each summed over the batch axes its operand was broadcast along)
"""
import numpy as np

from ..tracer import primitive
from .broadcasting import unbroadcast
from .checks import check_same_float_dtype


def _check_matmul(a, b):
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul: {a.shape} @ {b.shape}: both operands need at least 2 "
                         "dimensions (reshape vectors to (1, n) or (n, 1))")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: {a.shape} @ {b.shape}: inner dimensions "
                         f"{a.shape[-1]} != {b.shape[-2]}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: {a.shape} @ {b.shape}: batch dimensions {a.shape[:-2]} and "
                         f"{b.shape[:-2]} do not broadcast") from None
    check_same_float_dtype("matmul", a, b)


def _blas_ready(x):
    """x, copied if its matrices have neither contiguous rows nor contiguous columns: numpy's
    matmul hands a matrix to BLAS only when one of its two strides is the item size
    (a transposed or head-split view qualifies; a strided slice does not)."""
    if type(x) is np.ndarray and x.itemsize not in x.strides[-2:]:
        return np.ascontiguousarray(x)
    return x


def _rows(x):
    """(..., n) -> (N, n): a stack sharing one right-hand matrix is one 2-D product (3x faster)."""
    return x.reshape(-1, x.shape[-1])


@primitive
def matmul(a, b):
    """a @ b for 2-D, 3-D and 4-D operands (any rank >= 2)."""
    _check_matmul(a, b)
    a, b = _blas_ready(a), _blas_ready(b)
    shared_right = b.ndim == 2 and a.ndim > 2  # (..., n, k) @ (k, m), e.g. activations @ weights
    if shared_right:
        out = (_rows(a) @ b).reshape(a.shape[:-1] + (b.shape[-1],))
    else:
        out = a @ b

    def matmul_pullback(g):  # lazy: a constant operand (data, a mask) costs no product
        if shared_right:
            return (lambda: (_rows(g) @ b.T).reshape(a.shape), lambda: _rows(a).T @ _rows(g))
        return (lambda: unbroadcast(g @ np.swapaxes(b, -1, -2), a.shape),
                lambda: unbroadcast(np.swapaxes(a, -1, -2) @ g, b.shape))
    return out, matmul_pullback
