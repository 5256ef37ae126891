"""Thread counts for the tests of the splits: `split_at(n)` runs a block at n threads with every
split forced (from one thread on, shares of any size, so that even the tests' small arrays
take the split path), and `pool_runs(monkeypatch)` records how many shares each hand-off to
the kernels' pool carried."""
import contextlib

import autograd_lite as ag
from autograd_lite.kernels import parallel

THREAD_COUNTS = (1, 2, 3, 4, 5, 8)  # more threads than cores is fine for the bits


@contextlib.contextmanager
def split_at(n, from_threads=1, min_share=1):
    """ag.set_threads(n) for the block, with parallel.splitting(from_threads, min_share);
    the thread count as it was afterwards."""
    before = ag.thread_count()
    ag.set_threads(n)
    try:
        with parallel.splitting(from_threads, min_share):
            yield
    finally:
        ag.set_threads(before)


def pool_runs(monkeypatch):
    """A list that gets, at each hand-off to the pool, the number of shares it ran."""
    runs, real = [], parallel.Pool.run

    def recording(pool, calls):
        runs.append(len(calls))
        return real(pool, calls)
    monkeypatch.setattr(parallel.Pool, "run", recording)
    return runs
