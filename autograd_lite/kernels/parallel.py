"""Kernels in shares of rows, on a pool of Python threads.

`split_rows(kernel, n_rows, *args, row_size=...)` calls `kernel(*args, start, stop)` over
contiguous shares [start, stop) of the rows 0 .. n_rows - 1: one share in the calling thread,
the others on the pool, all at once (the compiled kernels release the GIL: numba_compile.py
compiles them `nogil`; numpy and BLAS release it too). Each share runs the serial kernel on
its own rows, so a kernel whose reductions stay within a row gives the same bits at any share
count. A kernel whose sum runs down the rows must not be split this way.

When to split (the two settings below; `splitting` changes them for a block, as tests and
benchmarks do):

    shares = min(ag.thread_count(), n_rows, n_rows · row_size // MIN_SHARE)

and 1 (the serial call, in the calling thread, nothing handed to the pool) when
ag.thread_count() < SPLIT_FROM_THREADS. row_size is what one row costs, in entries of the
kernel's arrays (a row's length for a pass over rows; a head's score entries for the
attention core); tests/benchmarks/bench_parallel.py measures both settings.

The pool's threads are started on the first split (as many as it needs: thread_count() - 1
at most) and sleep between calls. A split inside a share runs serially, in that share's
thread. After a fork the child starts a pool of its own (os.register_at_fork).
"""
import contextlib
import os
import queue
import threading

from .. import threads

# Below SPLIT_FROM_THREADS threads every kernel runs in the calling thread and OpenBLAS keeps
# its threads for the products. Measured on 2 cores against the other arrangements (the
# kernels and the attention core in 2 shares, MIN_SHARE 2^15 to 2^20; OpenBLAS on one thread
# with the products split by rows on the pool; OpenBLAS's threads told to sleep at once):
# none made a training step faster, most made it slower (tests/benchmarks/README.md, "Two
# threads").
SPLIT_FROM_THREADS = 4
MIN_SHARE = 2**15  # entries: about 50 µs of a kernel's passes over float32 rows (an estimate)


def share_count(n_rows, row_size=1):
    """How many shares split_rows cuts n_rows rows of row_size entries into (1: serial)."""
    count = threads.thread_count()
    if count < SPLIT_FROM_THREADS or getattr(_inside, "share", False):
        return 1
    return max(1, min(count, n_rows, n_rows * row_size // MIN_SHARE))


def share_bounds(n_rows, shares):
    """[(start, stop), ...]: n_rows cut into `shares` contiguous runs whose sizes differ by at
    most one, the longer ones first."""
    size, longer = divmod(n_rows, shares)
    bounds, start = [], 0
    for k in range(shares):
        stop = start + size + (k < longer)
        bounds.append((start, stop))
        start = stop
    return bounds


def split_rows(kernel, n_rows, *args, row_size=1):
    """kernel(*args, start, stop) over shares of the rows 0 .. n_rows - 1 (share_count of
    them), at once. -> the kernel's results, in the order of the shares."""
    shares = share_count(n_rows, row_size)
    if shares == 1:
        return [kernel(*args, 0, n_rows)]
    calls = [(kernel, args + bounds) for bounds in share_bounds(n_rows, shares)]
    return _pool(shares - 1).run(calls)


@contextlib.contextmanager
def splitting(from_threads=None, min_share=None):
    """Within the block, split from `from_threads` threads on and into shares of at least
    `min_share` entries (None: the setting as it is): a test forces the split on small arrays
    with splitting(1, 1); a benchmark compares splitting at 2 threads with splitting(2)."""
    global SPLIT_FROM_THREADS, MIN_SHARE
    before = SPLIT_FROM_THREADS, MIN_SHARE
    SPLIT_FROM_THREADS = before[0] if from_threads is None else from_threads
    MIN_SHARE = before[1] if min_share is None else min_share
    try:
        yield
    finally:
        SPLIT_FROM_THREADS, MIN_SHARE = before


# ---------------------------------------------------------------- the pool

_inside = threading.local()  # .share: this thread is running a share (no split inside it)


class Pool:
    """Worker threads that wait on one queue of calls (sleeping while it is empty)."""

    def __init__(self):
        self.calls, self.workers = queue.SimpleQueue(), []

    def grow(self, n_workers):
        while len(self.workers) < n_workers:
            worker = threading.Thread(target=self._work, name="autograd_lite-kernels",
                                      daemon=True)
            worker.start()
            self.workers.append(worker)

    def _work(self):
        _inside.share = True
        while True:
            index, (function, args), done = self.calls.get()
            try:
                done.put((index, function(*args), None))
            except BaseException as error:  # raised again in the calling thread
                done.put((index, None, error))

    def run(self, calls):
        """Each (function, args) of calls run, the first in this thread and the others on
        the workers. -> their results in order; the first error raised, once all have ended."""
        done = queue.SimpleQueue()
        for index, call in enumerate(calls[1:], 1):
            self.calls.put((index, call, done))
        results, errors = [None] * len(calls), []
        _inside.share = True
        try:
            function, args = calls[0]
            results[0] = function(*args)
        except BaseException as error:
            errors.append(error)
        finally:
            _inside.share = False
        for _ in calls[1:]:
            index, result, error = done.get()
            results[index] = result
            if error is not None:
                errors.append(error)
        if errors:
            raise errors[0]
        return results


_the_pool = None
_fork_hook = False  # whether _forget_the_pool is registered to run in a forked child


def _pool(n_workers):
    """The process's pool, with at least n_workers threads (started here when it lacks them)."""
    global _the_pool, _fork_hook
    if _the_pool is None:
        if not _fork_hook and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forget_the_pool)
            _fork_hook = True
        _the_pool = Pool()
    _the_pool.grow(n_workers)
    return _the_pool


def _forget_the_pool():
    """In a forked child: the parent's workers do not exist here; the next split starts new."""
    global _the_pool, _inside
    _the_pool, _inside = None, threading.local()
