"""How the numba kernels are compiled: on first use, cached on disk (`cache=True`: numba
writes beside the source, or under the user's cache folder when the install is read-only),
or in memory each run where no cache folder is writable; and the row layout they take.

A kernel's first call with new argument types (where numba loads or compiles it) runs with
Ctrl-C deferred to its end (autograd_lite/interrupts.py, a leaf, is all this package takes
from the library): numba's compiler calls back into Python through ctypes, where a
KeyboardInterrupt is dropped. `watch_compiles` counts the kernels this process really
compiles, from numba's "numba:compile" event, which a load from the disk cache does not
send: so a notice of it tells the truth, and says nothing once they are cached."""
import time

import numba
import numba.core.event
import numpy as np

from ..interrupts import deferred_interrupts

KERNELS = []  # every compiled kernel (its numba dispatcher)


def compiled(reassociate=False, contract=False):
    """numba.njit with the disk cache, or without it where numba finds no writable folder.
    `nogil`: a kernel releases the GIL while it runs, so that the shares of a split
    (parallel.py) run at once on the pool's threads; numba's own thread pool is never used
    (kernels/__init__.py says why). reassociate: let LLVM reorder the sums of a row, so that it
    vectorises them (the order is fixed at compile time: the same bits on every run).
    contract: let it fuse a multiply and an add into one FMA (numba_exp.py's polynomial).

    Division and the like follow numpy's rules (error_model="numpy": x / 0 is ±inf or NaN, as
    in the numpy kernels). numba's default, Python's rules, tests every divisor for zero to
    raise ZeroDivisionError, and that branch keeps LLVM from vectorising the loop (the same
    bits without it, since SIMD division and square root round as the scalar ones; the
    timings: tests/benchmarks/README.md)."""
    flags = {name for name, wanted in (("reassoc", reassociate), ("contract", contract))
             if wanted}
    options = dict(fastmath=flags or False, error_model="numpy", nogil=True)

    def decorate(function):
        try:
            kernel = numba.njit(cache=True, **options)(function)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            kernel = numba.njit(cache=False, **options)(function)
        _defer_interrupts_in_first_calls(kernel)
        KERNELS.append(kernel)
        return kernel
    return decorate


def _defer_interrupts_in_first_calls(kernel):
    """Ctrl-C during the kernel's load or compile raises once it is done (the dispatcher
    calls its `_compile_for_args` only when no compiled version fits the arguments)."""
    load_or_compile = kernel._compile_for_args

    def _compile_for_args(*args, **kwargs):
        with deferred_interrupts():
            return load_or_compile(*args, **kwargs)
    kernel._compile_for_args = _compile_for_args


class CompileWatch(numba.core.event.Listener):
    """numba's compile events of our kernels: calls each `first` callback with no argument
    at the first one, and keeps the seconds each compile took."""

    def __init__(self):
        self.first, self.seconds, self.started = [], [], {}

    def ours(self, event):
        return any(event.data["dispatcher"] is kernel for kernel in KERNELS)

    def on_start(self, event):
        if self.ours(event):
            self.started[id(event.data["dispatcher"])] = time.perf_counter()
            first, self.first = self.first, []
            for callback in first:
                callback()

    def on_end(self, event):
        started = self.started.pop(id(event.data["dispatcher"]), None)
        if started is not None:
            self.seconds.append(time.perf_counter() - started)


_watch = None


def watch_compiles(first=None):
    """Start counting the kernels this process compiles (not those it loads from the disk
    cache); `first()` is called at the next compile. -> the CompileWatch (its `seconds`:
    one entry a compiled kernel)."""
    global _watch
    if _watch is None:
        _watch = CompileWatch()
        numba.core.event.register("numba:compile", _watch)
    if first is not None:
        _watch.first.append(first)
    return _watch


def as_rows(a):
    """a as C-contiguous rows (N, D) along its last axis (a view when it already is)."""
    return np.ascontiguousarray(a).reshape(-1, a.shape[-1])
