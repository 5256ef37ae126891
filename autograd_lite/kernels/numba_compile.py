"""How the numba kernels are compiled: on first use, cached on disk (`cache=True`: numba
writes beside the source, or under the user's cache folder when the install is read-only),
or in memory each run where no cache folder is writable; and the row layout they take."""
import os

import numba
import numpy as np

KERNELS = []  # every compiled kernel (its numba dispatcher), for `uncached`


def compiled(reassociate=False, contract=False):
    """numba.njit with the disk cache, or without it where numba finds no writable folder.
    Serial: the kernels run in the calling thread (no numba thread pool; kernels/__init__.py
    has the measurements). reassociate: let LLVM reorder the sums of a row, so that it
    vectorises them (the order is fixed at compile time: the same bits on every run).
    contract: let it fuse a multiply and an add into one FMA (numba_exp.py's polynomial).

    Division and the like follow numpy's rules (error_model="numpy": x / 0 is ±inf or NaN, as
    in the numpy kernels). numba's default, Python's rules, tests every divisor for zero to
    raise ZeroDivisionError, and that branch keeps LLVM from vectorising the loop (the same
    bits without it, since SIMD division and square root round as the scalar ones; the
    timings: tests/benchmarks/README.md)."""
    flags = {name for name, wanted in (("reassoc", reassociate), ("contract", contract))
             if wanted}
    options = dict(fastmath=flags or False, error_model="numpy")

    def decorate(function):
        try:
            kernel = numba.njit(cache=True, **options)(function)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            kernel = numba.njit(cache=False, **options)(function)
        KERNELS.append(kernel)
        return kernel
    return decorate


def uncached():
    """The number of kernels with no index in numba's disk cache: each compiles on its first
    call (about half a second). Read from numba's cache layout; a kernel compiled in memory
    (no writable folder) or a numba laid out otherwise counts as uncached."""
    def has_index(kernel):
        cache_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
        index = getattr(cache_file, "_index_path", None)
        return index is not None and os.path.exists(index)
    return sum(not has_index(kernel) for kernel in KERNELS)


def as_rows(a):
    """a as C-contiguous rows (N, D) along its last axis (a view when it already is)."""
    return np.ascontiguousarray(a).reshape(-1, a.shape[-1])
