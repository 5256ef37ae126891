"""The ops' kernels compiled with numba: rows one after another, one or two passes over each
row where numpy makes four to seven; the row kernels take the rows start .. stop - 1, so that
parallel.split_rows can run them in shares (kernels/__init__.py: when it does).

The interface is numpy_kernels.py's (the names in kernels.NAMES; one not written here is
numpy's). Importing this module imports numba (an ImportError without it: kernels/__init__.py
then stays with numpy). What a forward saves is this module's own business: layer norm
keeps x̂ and 1/σ, as numpy's does (x is not kept: the pullback of an op must not hold on to
an input it does not need).

Exponentials. numba's loops call a scalar exp (the llvmlite wheels carry no SVML, so LLVM
cannot vectorise it), slower than numpy's SIMD exp; in float32, softmax and cross-entropy
use numba_exp.exp32 instead, an exp written as arithmetic that LLVM vectorises (within 3
ulp), and in float64 numpy's `np.exp` over the block. Both take it unshifted (exact where
the row sums lie in [1, ∞), as numpy_kernels explains; the other rows are redone shifted),
and mask, sum and scale in one compiled pass (softmax in float32: the exp in that pass too).
The timings: tests/benchmarks/README.md.

Same bits. Every reduction runs inside one row, in order, in one thread; the sums over rows
(layer norm's dscale and dbias) go through fixed blocks of rows whose partial sums are added
in block order (the backward pass is split by blocks): the result does not depend on the
number of threads. A sum down the rows in order (bias_relu_backward's) is never split. The
optimizer kernels round every operation in the arrays' dtype in numpy_kernels' order, so they
give numpy's bits exactly.

Caching. Kernels compile on first use and are cached on disk (`cache=True`: numba writes
beside this file, or under the user's cache folder when the install is read-only); where no
cache folder is writable they compile in memory each run (`_compiled`).

The kernels live by family: layer norm here, the softmax family in numba_softmax.py, the
optimizer updates in numba_updates.py, relu, gelu, the biases (with relu: the feed-forward
layer's) and the dropout mask in numba_activations.py, the embedding's segment sum in
numba_indexing.py (its gather is numpy's), float32's vectorised exp in numba_exp.py;
numba_compile.py says how they are compiled (numpy's error model, without which no loop that
divides is vectorised). The models' fast rules (models/fast) write the Transformer's
sublayers over these kernels and BLAS, for both backends. Threads: kernels/__init__.py.
"""
import numba
import numpy as np

from .numba_activations import (add_bias, bias_relu_backward, bias_relu_forward,  # noqa: F401
                                dropout_mask, gelu_backward, gelu_forward, relu_backward,
                                relu_forward)
from .numba_compile import as_rows, compiled
from .parallel import split_rows
from .numba_indexing import segment_sum
from .numba_softmax import (cross_entropy_backward, cross_entropy_forward,  # noqa: F401
                            cross_entropy_probabilities, softmax_backward, softmax_forward)
from .numba_updates import adam_update, sgd_update  # noqa: F401

__all__ = ["layer_norm_forward", "layer_norm_backward", "layer_norm_normalized",  # the kernels
           "layer_norm_eps_cotangent", "residual_layer_norm_forward", "softmax_forward",
           "softmax_backward", "cross_entropy_forward", "cross_entropy_backward",
           "cross_entropy_probabilities", "adam_update", "sgd_update", "segment_sum",
           "dropout_mask", "relu_forward", "relu_backward", "gelu_forward", "gelu_backward",
           "add_bias", "bias_relu_forward", "bias_relu_backward"]

_ROW_BLOCK = 32  # rows per partial sum of dscale and dbias (fixed: same bits for any threads)


# ---------------------------------------------------------------- layer norm

@numba.njit(inline="always")  # compiled into each kernel below, under its flags
def _normalize_row(i, source, total, scale, bias, eps, out, x_hat, inv_std):
    """Row i of layer norm from its entries in `source` (x, or x_hat holding x + y) and their
    sum: the squares pass, 1/√(σ² + eps) into inv_std, x̂ and out written in the last pass."""
    d = source.shape[1]
    mu = total / source.dtype.type(d)  # (a Python number would widen the row to float64)
    squares = source.dtype.type(0)
    for j in range(d):
        c = source[i, j] - mu
        squares += c * c
    r = source.dtype.type(1) / np.sqrt(squares / source.dtype.type(d) + eps)
    inv_std[i] = r
    for j in range(d):
        normalized = (source[i, j] - mu) * r
        x_hat[i, j] = normalized
        out[i, j] = normalized * scale[j] + bias[j]


@compiled(reassociate=True)
def _layer_norm_rows(x, scale, bias, eps, out, x_hat, inv_std, start, stop):
    for i in range(start, stop):
        total = x.dtype.type(0)
        for j in range(x.shape[1]):
            total += x[i, j]
        _normalize_row(i, x, total, scale, bias, eps, out, x_hat, inv_std)


def layer_norm_forward(x, scale, bias, eps):
    """out = scale ⊙ x̂ + bias, x̂ = (x - μ)/√(σ² + eps) per row: 3 passes over each row
    (sum, squares, write). saved: (x̂ rows, 1/√(σ² + eps)); x itself is not kept."""
    rows = as_rows(x)
    out, x_hat = np.empty_like(rows), np.empty_like(rows)
    inv_std = np.empty(rows.shape[0], rows.dtype)
    split_rows(_layer_norm_rows, rows.shape[0], rows, scale, bias, rows.dtype.type(eps), out,
               x_hat, inv_std, row_size=rows.shape[1])
    return out.reshape(x.shape), (x_hat, inv_std)


@compiled(reassociate=True)
def _residual_layer_norm_rows(x, y, scale, bias, eps, out, x_hat, inv_std, start, stop):
    """_layer_norm_rows of x + y: the first pass writes the sum into x_hat and totals it, the
    next two read it there (rounded as numpy's x + y, so the same values as the composition)."""
    for i in range(start, stop):
        total = x.dtype.type(0)
        for j in range(x.shape[1]):
            s = x[i, j] + y[i, j]
            x_hat[i, j] = s
            total += s
        _normalize_row(i, x_hat, total, scale, bias, eps, out, x_hat, inv_std)


def residual_layer_norm_forward(x, y, scale, bias, eps):
    """layer_norm_forward of x + y (one shape), the sum taken in the first pass over each row
    instead of an array of its own. saved: as layer_norm_forward's."""
    rows, y_rows = as_rows(x), as_rows(y)
    out, x_hat = np.empty_like(rows), np.empty_like(rows)
    inv_std = np.empty(rows.shape[0], rows.dtype)
    split_rows(_residual_layer_norm_rows, rows.shape[0], rows, y_rows, scale, bias,
               rows.dtype.type(eps), out, x_hat, inv_std, row_size=rows.shape[1])
    return out.reshape(x.shape), (x_hat, inv_std)


@compiled(reassociate=True)
def _layer_norm_backward_rows(g, x_hat, inv_std, scale, dx, partial_scale, partial_bias, start,
                              stop):
    """Blocks start .. stop - 1 of _ROW_BLOCK rows: dx, and each block's partial sums."""
    n, d = x_hat.shape
    for block in range(start, stop):
        for j in range(d):
            partial_scale[block, j] = 0
            partial_bias[block, j] = 0
        for i in range(block * _ROW_BLOCK, min(n, (block + 1) * _ROW_BLOCK)):
            sum_g_hat = x_hat.dtype.type(0)
            sum_g_hat_x_hat = x_hat.dtype.type(0)
            for j in range(d):
                g_hat = g[i, j] * scale[j]
                sum_g_hat += g_hat
                sum_g_hat_x_hat += g_hat * x_hat[i, j]
                partial_scale[block, j] += g[i, j] * x_hat[i, j]
                partial_bias[block, j] += g[i, j]
            a = sum_g_hat / x_hat.dtype.type(d)
            b = sum_g_hat_x_hat / x_hat.dtype.type(d)
            r = inv_std[i]
            for j in range(d):
                dx[i, j] = r * (g[i, j] * scale[j] - a - x_hat[i, j] * b)


def layer_norm_backward(g, saved, scale):
    """(dx, dscale, dbias): dx = r ⊙ (ĝ - mean(ĝ) - x̂ ⊙ mean(ĝ ⊙ x̂)), ĝ = g ⊙ scale,
    r = 1/√(σ² + eps); dscale = Σ_rows g ⊙ x̂ and dbias = Σ_rows g summed per fixed block of
    rows, then over the blocks in order. 2 passes over each row."""
    x_hat, inv_std = saved
    g_rows = as_rows(g)
    n, d = x_hat.shape
    blocks = max(1, -(-n // _ROW_BLOCK))
    dx = np.empty_like(x_hat)
    partial_scale = np.empty((blocks, d), x_hat.dtype)
    partial_bias = np.empty((blocks, d), x_hat.dtype)
    split_rows(_layer_norm_backward_rows, blocks, g_rows, x_hat, inv_std, scale, dx,
               partial_scale, partial_bias, row_size=_ROW_BLOCK * d)
    return dx.reshape(g.shape), partial_scale.sum(axis=0), partial_bias.sum(axis=0)


def layer_norm_normalized(saved):
    """(x̂ rows, 1/√(σ² + eps) (N, 1)) from what layer_norm_forward saved."""
    x_hat, inv_std = saved
    return x_hat, inv_std[:, None]


def layer_norm_eps_cotangent(g, saved, scale):
    """∂⟨g, out⟩/∂eps = Σ -½ g ⊙ scale ⊙ x̂ r² (only when eps is traced)."""
    x_hat, inv_std = layer_norm_normalized(saved)
    return np.asarray(np.sum(-0.5 * (as_rows(g) * scale) * x_hat * (inv_std * inv_std)))
