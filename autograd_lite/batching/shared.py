"""Ops for a parameter that vmap gives every example as one copy (vmap(grad(f)) with the
parameters unmapped: core/batching.py batches them as a broadcast view, so that each example
gets its own gradient). Its examples are one array, so the forward pass needs it once: one
product with the shared matrix, one lookup in the shared table; the pullbacks give every
example its own cotangent, as the gradient asks.

    shared_matmul(a, b)    a @ b for b (B, 1, ..., k, m) whose B examples are one matrix
    gather_each(tables, indices)   out[e, i...] = tables[e, indices[e, i...]]
"""
import math

import numpy as np

from ..core.tracer import primal, primitive
from ..ops import getitem, matmul, reshape, scatter_add, swapaxes, unbroadcast
from ..ops import gather


def is_one_copy(x, bdim):
    """Whether x is a plain array whose examples along bdim are one array seen B times (a
    stride of 0). Not a traced value: an enclosing trace differentiating it must see every
    example's copy used, or its derivatives would all go to the first."""
    return type(x) is np.ndarray and x.ndim > bdim and x.strides[bdim] == 0 and x.shape[bdim] > 1


@primitive(name="matmul")
def shared_matmul(a, b):
    """a @ b, b (B, 1, ..., 1, k, m) with one matrix for its B examples, a (B, ..., n, k):
    one product with that matrix forward and for a's cotangent; b's per example. (Where b
    is not one plain copy, as under higher order, the stacked product.)"""
    a_shape, b_shape = a.shape, b.shape
    matrix = reshape(b[(0,) * (b.ndim - 2)], b.shape[-2:]) if is_one_copy(b, 0) else b
    out = matmul(a, matrix)

    def shared_matmul_pullback(g):
        return (lambda: unbroadcast(matmul(g, swapaxes(matrix, -1, -2)), a_shape),
                lambda: unbroadcast(matmul(swapaxes(a, -1, -2), g), b_shape))
    return out, shared_matmul_pullback


def fits_shared_matmul(a, b):
    """a (B, ..., n, k) and b (B, 1, ..., 1, k, m), b's value one copy of a matrix along
    axis 0 (the body checks again on the array it gets)."""
    return (b.ndim >= 3 and a.ndim >= b.ndim and a.shape[0] == b.shape[0]
            and all(n == 1 for n in b.shape[1:-2]) and is_one_copy(primal(b), 0))


@primitive
def gather_each(tables, indices):
    """Each example's rows of its own table: tables (B, n, ...), indices (B, ...) integers;
    out (B, indices..., row...). Tables that are one copy are looked up once; the cotangent
    of each example's table is its own scatter_add (one call over B * n rows)."""
    length, n = tables.shape[:2]
    row = tables.shape[2:]
    if is_one_copy(tables, 0):
        out = gather(tables[0], indices)
    else:
        numbers = np.arange(length).reshape((length,) + (1,) * (indices.ndim - 1))
        out = getitem(tables, (numbers, indices))
    flat = (indices + n * np.arange(length).reshape((length,) + (1,) * (indices.ndim - 1)))

    def gather_each_pullback(g):
        rows = reshape(g, (math.prod(indices.shape),) + row)
        return reshape(scatter_add(rows, flat.reshape(-1), length * n), tables.shape), None
    return out, gather_each_pullback
