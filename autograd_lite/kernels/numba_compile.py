"""How the numba kernels are compiled: on first use, cached on disk (`cache=True`: numba
writes beside the source, or under the user's cache folder when the install is read-only),
or in memory each run where no cache folder is writable; and the row layout they take."""
import numba
import numpy as np


def compiled(parallel=True, reassociate=False):
    """numba.njit with the disk cache, or without it where numba finds no writable folder.
    reassociate: let LLVM reorder the sums of a row, so that it vectorises them (the order is
    fixed at compile time: the same bits on every run and for any number of threads)."""
    options = dict(parallel=parallel, fastmath={"reassoc"} if reassociate else False)

    def decorate(function):
        try:
            return numba.njit(cache=True, **options)(function)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return numba.njit(cache=False, **options)(function)
    return decorate


def as_rows(a):
    """a as C-contiguous rows (N, D) along its last axis (a view when it already is)."""
    return np.ascontiguousarray(a).reshape(-1, a.shape[-1])
