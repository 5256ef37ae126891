"""Ops for a parameter that vmap gives every example as one copy (vmap(grad(f)) with the
parameters unmapped: a broadcast view, core/batched.py). The forward pass needs it once; the
pullbacks give every example its own cotangent, as the gradient asks."""
import math

import numpy as np

from ..core.devices import on_host
from ..core.placement import array_module
from ..core.rules import fast_rule, fusable
from ..core.tracer import primal, primitive
from ..ops import expand_dims, getitem, matmul, reshape, scatter_add, swapaxes, unbroadcast
from ..ops import gather, layer_norm, linear
from ..ops.indexing import check_indices
from ..ops.nn import layer_norm_rule

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def is_one_copy(x, bdim):
    """Whether x is a plain array whose examples along bdim are one array seen B times (a
    stride of 0); never a traced value: a trace must see every copy used, or the derivatives
    would all go to the first."""
    return type(x) is np.ndarray and x.ndim > bdim and x.strides[bdim] == 0 and x.shape[bdim] > 1


@primitive(name="matmul")
def shared_matmul(a, b):
    """a @ b, b (B, 1, ..., 1, k, m) with one matrix for its B examples, a (B, ..., n, k):
    one product with that matrix forward and for a's cotangent (the stacked product where b
    is not one plain copy, as under higher order); b's per example."""
    a_shape, b_shape = a.shape, b.shape
    matrix = reshape(b[(0,) * (b.ndim - 2)], b.shape[-2:]) if is_one_copy(b, 0) else b
    out = matmul(a, matrix)

    def shared_matmul_pullback(g):
        return (lambda: unbroadcast(matmul(g, swapaxes(matrix, -1, -2)), a_shape),
                lambda: unbroadcast(matmul(swapaxes(a, -1, -2), g), b_shape))
    return out, shared_matmul_pullback


def fits_shared_matmul(a, b):
    """a (B, ..., n, k) and b (B, 1, ..., 1, k, m), b's value one copy of a matrix."""
    return (b.ndim >= 3 and a.ndim >= b.ndim and a.shape[0] == b.shape[0]
            and all(n == 1 for n in b.shape[1:-2]) and is_one_copy(primal(b), 0))


@primitive
def gather_each(tables, indices):
    """Each example's rows of its own table: tables (B, n, ...), indices (B, ...) in [0, n)
    -> (B, indices..., row...); one lookup where the tables are one copy. The tables'
    cotangent: one scatter_add over B * n rows."""
    length, n = tables.shape[:2]
    row = tables.shape[2:]
    check_indices("gather", indices, n)
    numbers = array_module(indices).arange(length).reshape(
        (length,) + (1,) * (indices.ndim - 1))  # each example's number, beside its indices
    if is_one_copy(tables, 0):
        out = gather(tables[0], indices)
    else:
        out = getitem(tables, (numbers, indices))
    flat = indices + n * numbers

    def gather_each_pullback(g):
        rows = reshape(g, (math.prod(indices.shape),) + row)
        return reshape(scatter_add(rows, flat.reshape(-1), length * n), tables.shape), None
    return out, gather_each_pullback


@fusable(drawn_as_op=True, name="linear")
def linear_each(x, w, b):
    """linear of each example by its own weights: x (B, ..., d_in), w (B, d_in, d_out),
    b (B, d_out) -> (B, ..., d_out)."""
    rows = reshape(x, (x.shape[0], -1, x.shape[-1]))  # (B, N, d_in)
    out = matmul(rows, w) + expand_dims(b, 1)
    return reshape(out, x.shape[:-1] + w.shape[-1:])


def _one_copy_of_weights(x, w, b):
    return is_one_copy(w, 0) and is_one_copy(b, 0) and on_host(x, w, b)


@fast_rule(linear_each, applies=_one_copy_of_weights)
def linear_each_of_one_copy(x, w, b):
    """w and b one copy: one linear forward and one product for x's cotangent; w's and b's
    per example, xₑᵀ gₑ and Σ_rows gₑ."""
    w0 = w[0]
    out = linear(x, w0, b[0])
    length, d_in, d_out = w.shape

    def linear_each_pullback(g):
        g_rows = g.reshape(length, -1, d_out)
        return (lambda: g @ w0.T,
                lambda: np.swapaxes(x.reshape(length, -1, d_in), 1, 2) @ g_rows,
                lambda: g_rows.sum(axis=1))
    return out, linear_each_pullback


@fusable(drawn_as_op=True, name="layer_norm")
def layer_norm_each(x, scale, bias, eps):
    """layer_norm of each example by its own scale and bias: x (B, ..., D), scale and bias
    (B, D)."""
    d, xp = x.shape[-1], array_module(x)
    normalized = layer_norm(x, xp.ones(d, x.dtype), xp.zeros(d, x.dtype), eps)
    shape = (x.shape[0],) + (1,) * (x.ndim - 2) + (d,)
    return normalized * reshape(scale, shape) + reshape(bias, shape)


def _one_copy_of_scale_and_bias(x, scale, bias, eps):
    return x.dtype in _FLOATS and _one_copy_of_weights(x, scale, bias)


@fast_rule(layer_norm_each, applies=_one_copy_of_scale_and_bias)
def layer_norm_each_of_one_copy(x, scale, bias, eps):
    """scale and bias one copy: layer_norm's fast rule, once, gives the output and x's
    cotangent; scale's and bias's per example, Σ_rows gₑ ⊙ x̂ₑ (x̂ recomputed) and Σ_rows gₑ.
    eps is constant (the batching rule sends a traced eps to the plain definition)."""
    out, x_pullback = layer_norm_rule(x, scale[0], bias[0], eps)
    length, d = scale.shape

    def normalized():
        return layer_norm(x, np.ones(d, x.dtype), np.zeros(d, x.dtype), eps).reshape(length, -1, d)

    def layer_norm_each_pullback(g):
        g_rows = g.reshape(length, -1, d)
        return (lambda: x_pullback(g)[0], lambda: (g_rows * normalized()).sum(axis=1),
                lambda: g_rows.sum(axis=1), None)
    return out, layer_norm_each_pullback
