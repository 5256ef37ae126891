"""Adam, AdamW and SGD over flat chunks compiled with numba (see numba_kernels.py): one pass,
each operation rounded in the arrays' dtype in numpy_kernels' order (the same bits).

Each update has two compiled loops with the same arithmetic: one writing into the arrays it
reads (in_place=True, what the training loops use) and one writing into others. LLVM
vectorises a loop over several arrays only after a run-time test that no output overlaps an
input; an update written into its own arrays fails that test and runs one entry at a time,
so the in-place loop names each array once (the timings: tests/benchmarks/README.md).
The loops take the entries start .. stop - 1: parallel.split_rows runs them in shares."""
import math

import numpy as np

from .numba_compile import compiled
from .parallel import split_rows


# ---------------------------------------------------------------- optimizer updates

@compiled()
def _adam_entries(p, g, m, v, out_p, out_m, out_v, one_minus_beta1, beta1, one_minus_beta2,
                  beta2, root_correction, eps, step_size, l2, shrink, start, stop):
    for k in range(start, stop):
        gk = g[k] + l2 * p[k] if l2 != 0 else g[k]
        mk = m[k] * beta1 + gk * one_minus_beta1
        vk = v[k] * beta2 + (gk * gk) * one_minus_beta2
        step = (mk * step_size) / (np.sqrt(vk) / root_correction + eps)
        out_m[k], out_v[k] = mk, vk
        out_p[k] = (p[k] * shrink if shrink != 1 else p[k]) - step


@compiled()
def _adam_entries_in_place(p, g, m, v, one_minus_beta1, beta1, one_minus_beta2, beta2,
                           root_correction, eps, step_size, l2, shrink, start, stop):
    """_adam_entries with out_p, out_m, out_v = p, m, v (the module's docstring: why apart)."""
    for k in range(start, stop):
        gk = g[k] + l2 * p[k] if l2 != 0 else g[k]
        mk = m[k] * beta1 + gk * one_minus_beta1
        vk = v[k] * beta2 + (gk * gk) * one_minus_beta2
        step = (mk * step_size) / (np.sqrt(vk) / root_correction + eps)
        m[k], v[k] = mk, vk
        p[k] = (p[k] * shrink if shrink != 1 else p[k]) - step


def adam_update(p, g, m, v, out_p, out_m, out_v, rate, beta1, beta2, eps, weight_decay,
                decoupled, t):
    """numpy_kernels.adam_update in one compiled pass, each operation rounded in the arrays'
    dtype in the same order (the same bits)."""
    c = p.dtype.type
    l2 = weight_decay if weight_decay and not decoupled else 0.0
    shrink = 1 - rate * weight_decay if decoupled and weight_decay else 1.0
    settings = (c(1 - beta1), c(beta1), c(1 - beta2), c(beta2), c(math.sqrt(1 - beta2 ** t)),
                c(eps), c(rate / (1 - beta1 ** t)), c(l2), c(shrink))
    if out_p is p and out_m is m and out_v is v:
        split_rows(_adam_entries_in_place, p.shape[0], p, g, m, v, *settings)
    else:
        split_rows(_adam_entries, p.shape[0], p, g, m, v, out_p, out_m, out_v, *settings)


@compiled()
def _sgd_entries(p, g, b, out_p, out_b, rate, momentum, nesterov, weight_decay, has_momentum,
                 start, stop):
    for k in range(start, stop):
        d = g[k] + weight_decay * p[k] if weight_decay != 0 else g[k]
        if not has_momentum:
            out_p[k] = p[k] - rate * d
            continue
        bk = b[k] * momentum + d
        out_b[k] = bk
        out_p[k] = p[k] - rate * (d + momentum * bk if nesterov else bk)


@compiled()
def _sgd_entries_in_place(p, g, b, rate, momentum, nesterov, weight_decay, has_momentum, start,
                          stop):
    """_sgd_entries with out_p, out_b = p, b (the module's docstring: why apart)."""
    for k in range(start, stop):
        d = g[k] + weight_decay * p[k] if weight_decay != 0 else g[k]
        if not has_momentum:
            p[k] = p[k] - rate * d
            continue
        bk = b[k] * momentum + d
        b[k] = bk
        p[k] = p[k] - rate * (d + momentum * bk if nesterov else bk)


def sgd_update(p, g, b, out_p, out_b, rate, momentum, nesterov, weight_decay):
    """numpy_kernels.sgd_update in one compiled pass (the same bits)."""
    c = p.dtype.type
    has_momentum = b is not None
    in_place = out_p is p and out_b is b
    if not has_momentum:
        b = out_b = p[:0]
    settings = (c(rate), c(momentum), nesterov, c(weight_decay), has_momentum)
    if in_place:
        split_rows(_sgd_entries_in_place, p.shape[0], p, g, b, *settings)
    else:
        split_rows(_sgd_entries, p.shape[0], p, g, b, out_p, out_b, *settings)
