"""Matrix products: matmul (numpy's @, batch axes broadcast), numpy's other products, and
linear, x W + b (a dense layer: one op where matmul and add would be two).

    out[..., i, j] = Σ_k a[..., i, k] b[..., k, j]
    da = g @ bᵀ,  db = aᵀ @ g   (each summed over the batch axes its operand was broadcast along)
"""
import math
import numbers
import string

import numpy as np

from .. import kernels
from ..core.devices import on_host
from ..core.rules import fast_rule, fusable
from ..core.tracer import plain, primitive
from .broadcasting import sum_rows, unbroadcast
from ..core.dtypes import check_same_float_dtype
from .checks import as_array, as_operands
from .einsum import einsum
from .elementwise import mul
from .shape import reshape


def _as_matrix(x, side):
    """numpy's @ of a vector: a row (1, n) on the left, a column (n, 1) on the right."""
    if x.ndim != 1:
        return x
    return x.reshape(1, -1) if side == "left" else x.reshape(-1, 1)


def _check_matmul(a, b):
    """Operands of @ as given (vectors included): the shapes must fit, the dtypes agree."""
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: {a.shape} @ {b.shape}: operands need at least 1 dimension "
                         "(numpy's @ refuses scalars; multiply with * instead)")
    a_matrix, b_matrix = _as_matrix(a, "left"), _as_matrix(b, "right")
    if a_matrix.shape[-1] != b_matrix.shape[-2]:
        raise ValueError(f"matmul: {a.shape} @ {b.shape}: inner dimensions "
                         f"{a_matrix.shape[-1]} != {b_matrix.shape[-2]}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: {a.shape} @ {b.shape}: batch dimensions {a.shape[:-2]} and "
                         f"{b.shape[:-2]} do not broadcast") from None
    check_same_float_dtype("matmul", a, b)


def _blas_ready(x):
    """A plain x copied if its matrices have neither contiguous rows nor columns: numpy's
    matmul hands BLAS only a matrix with one stride the item size (not a strided slice)."""
    if plain(x) and x.itemsize not in x.strides[-2:]:
        return np.ascontiguousarray(x)
    return x


def _rows(x):
    """(..., n) -> (N, n): a stack sharing one right-hand matrix is one BLAS call. N is
    counted, not inferred: reshape(-1, 0) of an empty array is ambiguous to numpy."""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def _product_with_vectors(a, b):
    """(a @ b, its pullback) where a or b is a vector (`_as_matrix`), its axis dropped."""
    a_shape, b_shape = a.shape, b.shape
    out, matrices_pullback = matmul.body(_as_matrix(a, "left"), _as_matrix(b, "right"))
    product_shape = out.shape
    out_shape = product_shape[:-2]
    if a.ndim != 1:
        out_shape += product_shape[-2:-1]  # a's rows
    if b.ndim != 1:
        out_shape += product_shape[-1:]  # b's columns

    def matmul_pullback(g):
        da, db = matrices_pullback(g.reshape(product_shape))
        return lambda: da().reshape(a_shape), lambda: db().reshape(b_shape)
    return out.reshape(out_shape), matmul_pullback


@primitive
def matmul(a, b):
    """a @ b as numpy's @: stacks of matrices, their batch axes broadcast; a vector is a row
    on the left, a column on the right, its axis dropped from the result."""
    a, b = as_array("matmul", a, "a"), as_array("matmul", b, "b")
    _check_matmul(a, b)
    if a.ndim == 1 or b.ndim == 1:
        return _product_with_vectors(a, b)
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


def _checked_linear(x, w, b):
    """x (..., d_in), w (d_in, d_out), b (d_out,) as arrays of one float dtype, checked."""
    x, w, b = as_array("linear", x), as_array("linear", w, "w"), as_array("linear", b, "b")
    if w.ndim != 2 or x.ndim < 1:
        raise ValueError(f"linear: x {x.shape} @ w {w.shape}: x needs at least 1 dimension and "
                         f"w must be a matrix (d_in, d_out)")
    if x.shape[-1] != w.shape[0]:
        raise ValueError(f"linear: x {x.shape} @ w {w.shape}: inner dimensions {x.shape[-1]} "
                         f"!= {w.shape[0]}")
    if b.shape != w.shape[1:]:
        raise ValueError(f"linear: b {b.shape} must have shape ({w.shape[1]},), the columns of "
                         f"w {w.shape}")
    check_same_float_dtype("linear", x, w)
    check_same_float_dtype("linear", w, b)
    return x, w, b


def _times_transpose(g, w):
    """g Wᵀ; for one output column (d_out = 1) an outer product, as a broadcast multiply
    (the same bits; a product with an inner dimension of 1 is slow)."""
    return g * w.T if w.shape[1] == 1 else g @ w.T


@fusable(drawn_as_op=True)
def linear(x, w, b):
    """x W + b over the last axis of x (torch.nn.functional.linear, with W stored as (d_in,
    d_out)). Written out: matmul, then add; its fast rule is one op.
    x: (..., d_in) -> (..., d_out)

        dx = g Wᵀ,   dW = Σ_rows xᵀ g,   db = Σ_rows g
    """
    x, w, b = _checked_linear(x, w, b)
    return matmul(x, w) + b


@fast_rule(linear, applies=on_host, takes_traced=True)
def linear_rule(x, w, b):
    """linear as one op, the kernel adding the bias in place (one pass, not two)."""
    x, w, b = _checked_linear(x, w, b)
    out_shape, x_shape, b_shape = x.shape[:-1] + w.shape[1:], x.shape, b.shape
    out = kernels.add_bias(_rows(x) @ w, b)  # (N, d_out)

    def linear_pullback(g):  # the library's ops: a traced cotangent (jvp) is recorded
        return (lambda: _times_transpose(_rows(g), w).reshape(x_shape),
                lambda: _rows(x).T @ _rows(g), lambda: sum_rows(g).reshape(b_shape))
    return out.reshape(out_shape), linear_pullback


def dot(a, b):
    """np.dot(a, b): a product with a scalar; matmul where b is a vector or a matrix, or a is
    a vector; otherwise a sum over a's last axis and b's second to last, keeping every
    other axis of both (no broadcasting: (i, j, n) · (k, n, m) -> (i, j, k, m))."""
    a, b = as_operands("dot", a, b)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return mul(a, b)
    if b.ndim <= 2 or a.ndim == 1:
        return matmul(a, b)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"dot: {a.shape} · {b.shape}: the last axis of a ({a.shape[-1]}) and "
                         f"the second to last of b ({b.shape[-2]}) differ")
    return tensordot(a, b, ([-1], [-2]))


def outer(a, b):
    """np.outer(a, b): out[i, j] = a_i b_j over the flattened a and b."""
    a, b = as_array("outer", a, "a"), as_array("outer", b, "b")
    return mul(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def _tensordot_axes(a, b, axes):
    """The paired axes of np.tensordot (an int N: a's last N with b's first N), checked."""
    if isinstance(axes, numbers.Integral):
        if not 0 <= axes <= min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: axes={axes} for {a.shape} and {b.shape}: at most "
                             f"{min(a.ndim, b.ndim)} axes can be paired")
        return list(range(a.ndim - axes, a.ndim)), list(range(axes))
    a_axes, b_axes = ([x] if isinstance(x, numbers.Integral) else list(x) for x in axes)
    a_axes = [i % a.ndim if -a.ndim <= i < a.ndim else None for i in a_axes]
    b_axes = [j % b.ndim if -b.ndim <= j < b.ndim else None for j in b_axes]
    if len(a_axes) != len(b_axes) or None in a_axes + b_axes or any(
            a.shape[i] != b.shape[j] for i, j in zip(a_axes, b_axes)):
        raise ValueError(f"tensordot: axes {axes} must pair axes of equal lengths of "
                         f"{a.shape} and {b.shape}")
    return a_axes, b_axes


def tensordot(a, b, axes=2):
    """np.tensordot: Σ over the paired axes, a's other axes then b's, by einsum."""
    a, b = as_array("tensordot", a, "a"), as_array("tensordot", b, "b")
    a_axes, b_axes = _tensordot_axes(a, b, axes)
    a_letters = string.ascii_letters[:a.ndim]
    b_letters = list(string.ascii_letters[a.ndim:a.ndim + b.ndim])
    for i, j in zip(a_axes, b_axes):
        b_letters[j] = a_letters[i]
    out = [a_letters[i] for i in range(a.ndim) if i not in a_axes]
    out += [b_letters[j] for j in range(b.ndim) if j not in b_axes]
    return einsum(f"{a_letters},{''.join(b_letters)}->{''.join(out)}", a, b)


def inner(a, b):
    """np.inner: Σ over the last axis of both."""
    a, b = as_operands("inner", a, b)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return mul(a, b)
    return tensordot(a, b, ([-1], [-1]))
