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
    """Whether x's examples along bdim are one array seen B times (a stride of 0)."""
    value = primal(x)
    return type(value) is np.ndarray and value.ndim > bdim and value.strides[bdim] == 0 \
        and value.shape[bdim] > 1


@primitive(name="matmul")
def shared_matmul(a, b):
    """a @ b, b (B, 1, ..., 1, k, m) with one matrix for its B examples, a (B, ..., n, k):
    one product with that matrix forward and for a's cotangent; b's per example."""
    matrix = reshape(b[(0,) * (b.ndim - 2)], b.shape[-2:])  # (k, m)
    out = matmul(a, matrix)
    a_shape, b_shape = a.shape, b.shape

    def shared_matmul_pullback(g):
        return (lambda: reshape(matmul(g, swapaxes(matrix, 0, 1)), a_shape),
                lambda: unbroadcast(matmul(swapaxes(a, -1, -2), g), b_shape))
    return out, shared_matmul_pullback


def fits_shared_matmul(a, b):
    """a (B, ..., n, k) and b (B, 1, ..., 1, k, m), b one copy of a matrix along axis 0."""
    return (b.ndim >= 3 and a.ndim >= b.ndim and a.shape[0] == b.shape[0]
            and all(n == 1 for n in b.shape[1:-2]) and is_one_copy(b, 0))


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
