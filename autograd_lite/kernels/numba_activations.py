"""Elementwise kernels compiled with numba (see numba_kernels.py): relu and gelu forward and
backward, and the threshold-and-scale pass of the dropout mask. Each does numpy_kernels'
operations in its order, rounded in the array's dtype (the constants are cast to it first,
as numpy casts a Python number): the same bits, in one pass where numpy makes two to
fourteen. Arrays of another dtype (float16, integers) go to numpy_kernels. Also the
feed-forward's bias passes (add_bias, bias + relu forward and backward). relu's passes and the
bias forwards take their entries or rows in shares where parallel.split_rows splits them;
gelu, the dropout mask and bias_relu_backward run in the calling thread.

gelu's tanh is numpy's np.tanh over the block: numba has no vectorised tanh (the llvmlite
wheels carry no SVML), and a scalar tanh per entry would not give numpy's bits either.
Their timings against numpy's: tests/benchmarks/README.md.
"""
import numpy as np

from . import numpy_kernels
from .numba_compile import compiled
from .parallel import split_rows

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _flat(a):
    """a as one C-contiguous row (a view when it is contiguous already)."""
    return np.ascontiguousarray(a).reshape(-1)


# ---------------------------------------------------------------- bias, and bias + relu

@compiled()
def _add_bias_rows(h, b, start, stop):
    for i in range(start, stop):
        for j in range(h.shape[1]):
            h[i, j] += b[j]


def _row_kernel_takes(a):
    """Whether the row kernels below take `a`: a C-contiguous float32 or float64 matrix."""
    return a.dtype in _FLOATS and a.ndim == 2 and a.flags.c_contiguous


def add_bias(h, b):
    """numpy_kernels.add_bias in one compiled pass (the same bits)."""
    if not _row_kernel_takes(h):
        return numpy_kernels.add_bias(h, b)
    split_rows(_add_bias_rows, h.shape[0], h, b, row_size=h.shape[1])
    return h


@compiled()
def _bias_relu_rows(h, b, start, stop):
    zero = h.dtype.type(0)
    for i in range(start, stop):
        for j in range(h.shape[1]):
            v = h[i, j] + b[j]
            h[i, j] = v if v > 0 or v != v else zero  # np.maximum(v, 0), as _relu_entries


def bias_relu_forward(h, b):
    """numpy_kernels.bias_relu_forward in one pass (the same bits)."""
    if not _row_kernel_takes(h):
        return numpy_kernels.bias_relu_forward(h, b)
    split_rows(_bias_relu_rows, h.shape[0], h, b, row_size=h.shape[1])
    return h


@compiled()
def _relu_backward_rows(g, h, sums):
    zero = g.dtype.type(0)
    for j in range(g.shape[1]):
        sums[j] = 0
    for i in range(g.shape[0]):
        for j in range(g.shape[1]):
            v = g[i, j] if h[i, j] > 0 else g[i, j] * zero
            g[i, j] = v
            sums[j] += v


def bias_relu_backward(g, h):
    """numpy_kernels.bias_relu_backward in one pass: dz as numpy's bits; db summed down the
    rows in order (numpy's is a BLAS product: within float rounding of it). Never split: a
    share's partial sums would change db's bits."""
    if not _row_kernel_takes(g) or not _row_kernel_takes(h):
        return numpy_kernels.bias_relu_backward(g, h)
    sums = np.empty(g.shape[1], g.dtype)
    _relu_backward_rows(g, h, sums)
    return g, sums


# ---------------------------------------------------------------- relu

@compiled()
def _relu_entries(x, out, positive, start, stop):
    zero = x.dtype.type(0)
    for i in range(start, stop):
        v = x[i]
        positive[i] = v > 0
        out[i] = v if v > 0 or v != v else zero  # np.maximum(v, 0): NaN stays, -0.0 is 0


def relu_forward(x):
    """numpy_kernels.relu_forward in one pass (the same bits): out and the mask x > 0."""
    if x.dtype not in _FLOATS:
        return numpy_kernels.relu_forward(x)
    flat = _flat(x)
    out, positive = np.empty_like(flat), np.empty(flat.shape, np.bool_)
    split_rows(_relu_entries, flat.size, flat, out, positive)
    return out.reshape(x.shape), positive.reshape(x.shape)


@compiled()
def _relu_backward_entries(g, positive, dx, start, stop):
    zero = g.dtype.type(0)
    for i in range(start, stop):  # g · 1 is g: numpy's g * mask, selected (it vectorises)
        dx[i] = g[i] if positive[i] else g[i] * zero


def relu_backward(g, saved):
    """numpy_kernels.relu_backward (the same bits)."""
    if g.dtype not in _FLOATS or g.shape != saved.shape:
        return numpy_kernels.relu_backward(g, saved)
    dx = np.empty(g.size, g.dtype)
    split_rows(_relu_backward_entries, g.size, _flat(g), _flat(saved), dx)
    return dx.reshape(g.shape)


# ---------------------------------------------------------------- gelu

@compiled()
def _gelu_arguments(x, u, c, a):
    for i in range(x.shape[0]):
        v = x[i]
        u[i] = c * (v + a * v * v * v)


@compiled()
def _gelu_entries(x, t, out, half, one):
    for i in range(x.shape[0]):
        out[i] = half * x[i] * (one + t[i])


def gelu_forward(x):
    """numpy_kernels.gelu_forward (the same bits): u in one compiled pass, numpy's np.tanh
    over it in place, then x/2 · (1 + t) in another. saved: (x, t)."""
    if x.dtype not in _FLOATS:
        return numpy_kernels.gelu_forward(x)
    c = x.dtype.type
    flat = _flat(x)
    t = np.empty_like(flat)
    _gelu_arguments(flat, t, c(numpy_kernels.GELU_C), c(numpy_kernels.GELU_CUBIC))
    np.tanh(t, out=t)
    out = np.empty_like(flat)
    _gelu_entries(flat, t, out, c(0.5), c(1))
    return out.reshape(x.shape), (flat, t)


@compiled()
def _gelu_backward_entries(g, x, t, dx, c, c3, half, one):
    for i in range(x.shape[0]):
        v, ti = x[i], t[i]
        du = c * (one + c3 * v * v)
        dx[i] = g[i] * (half * (one + ti) + half * v * (one - ti * ti) * du)


def gelu_backward(g, saved):
    """numpy_kernels.gelu_backward in one pass (the same bits)."""
    x, t = saved
    if g.dtype not in _FLOATS or g.dtype != x.dtype or g.size != x.size:
        return numpy_kernels.gelu_backward(g, (x.reshape(g.shape), t.reshape(g.shape)))
    c = g.dtype.type
    dx = np.empty(g.size, g.dtype)
    _gelu_backward_entries(_flat(g), x, t, dx, c(numpy_kernels.GELU_C),
                           c(3 * numpy_kernels.GELU_CUBIC), c(0.5), c(1))
    return dx.reshape(g.shape)


# ---------------------------------------------------------------- dropout

@compiled()
def _threshold_and_scale(draws, threshold, scale, out):
    zero = out.dtype.type(0)
    for i in range(draws.shape[0]):
        out[i] = scale if draws[i] >= threshold else zero


def dropout_mask(shape, rate, rng, dtype):
    """numpy_kernels.dropout_mask (the same draws from rng, the same bits): the float32
    draws are numpy's `rng.random`; the comparison with the rate (in the dtype numpy
    compares in: float32 for a Python float) and the scaling are one compiled pass."""
    dtype = np.dtype(dtype)
    if dtype not in _FLOATS:
        return numpy_kernels.dropout_mask(shape, rate, rng, dtype)
    draws = rng.random(shape, dtype=np.float32)
    out = np.empty(draws.shape, dtype)
    _threshold_and_scale(draws.reshape(-1), np.result_type(np.float32, rate).type(rate),
                         dtype.type(1 / (1 - rate)), out.reshape(-1))
    return out
