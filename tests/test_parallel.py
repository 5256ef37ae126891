"""The kernels' pool (autograd_lite/kernels/parallel.py): the shares' bounds, the shares run at
once on the pool's threads with their results in order, an error raised in the caller once
every share has ended, no split inside a share, when it splits (never at 2 threads with the
default settings, on a step of the LM that splits at 4), the compiled kernels released from
the GIL, and a forked child that splits. (Each split kernel against its serial call:
test_kernels.py; the optimizers' chunks: test_optim_chunks.py; the attention core and a whole
LM step: test_fast_rules_models.py.)"""
import json
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import autograd_lite as ag
from autograd_lite.kernels import parallel
from helpers.threads import pool_runs, split_at

ROOT = pathlib.Path(__file__).resolve().parents[1]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 200), st.integers(1, 17))
def test_share_bounds_cut_the_rows_into_contiguous_runs_of_even_size(n_rows, shares):
    bounds = parallel.share_bounds(n_rows, shares)
    assert len(bounds) == shares and bounds[0][0] == 0 and bounds[-1][1] == n_rows
    assert all(stop == start for (_, stop), (start, _) in zip(bounds, bounds[1:]))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def share(start, stop):
    """(this thread, start, stop)."""
    return threading.get_ident(), start, stop


def meeting(barrier, start, stop):
    """share(start, stop) once every share has reached the barrier."""
    barrier.wait(timeout=30)
    return share(start, stop)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_the_shares_run_at_once_in_as_many_threads(n):
    """n shares of 23 rows, each waiting at a barrier of n (a share that ran after another
    would wait forever): the first in the calling thread, their results in order."""
    with split_at(n):
        results = parallel.split_rows(meeting, 23, threading.Barrier(n))
    assert [(start, stop) for _, start, stop in results] == parallel.share_bounds(23, n)
    assert len({thread for thread, _, _ in results}) == n
    assert results[0][0] == threading.get_ident()


def test_share_counts_follow_the_settings():
    with split_at(4, from_threads=4, min_share=100):
        assert parallel.share_count(3, 1000) == 3  # no more shares than rows
        assert parallel.share_count(10, 20) == 2  # 200 entries: shares of at least 100
        assert parallel.share_count(1000, 1) == 4  # no more shares than threads
    with split_at(3, from_threads=4, min_share=1):
        assert parallel.share_count(1000, 1000) == 1  # below SPLIT_FROM_THREADS


def test_an_error_in_a_share_is_raised_once_every_share_has_ended():
    """The calling thread's share fails at once; the others end first, then the error comes,
    and the pool still works."""
    ended = []

    def kernel(start, stop):
        if start == 0:
            raise ValueError("the first share")
        threading.Event().wait(0.2)
        ended.append(start)
    with split_at(3), pytest.raises(ValueError, match="the first share"):
        parallel.split_rows(kernel, 9)
    assert sorted(ended) == [3, 6]
    with split_at(3):
        assert [stop for _, _, stop in parallel.split_rows(share, 9)] == [3, 6, 9]


def test_a_split_inside_a_share_runs_serially():
    def outer(start, stop):
        return parallel.split_rows(share, 10)
    with split_at(4):
        inner = parallel.split_rows(outer, 8)
    assert len(inner) == 4
    for (thread, start, stop), in inner:
        assert (start, stop) == (0, 10)


def test_every_compiled_kernel_releases_the_gil():
    pytest.importorskip("numba")
    from autograd_lite.kernels import numba_compile, numba_kernels  # noqa: F401 (compiles them)
    assert len(numba_compile.KERNELS) > 20
    assert all(kernel.targetoptions.get("nogil") for kernel in numba_compile.KERNELS)


def lm_step():
    """A training step of the benchmarks' LM (B 16, 64 tokens, D 64): arrays large enough
    for the default settings to split at 4 threads."""
    from models import lm
    p = lm.init(np.random.default_rng(0), 65, 64, 4, 256, 2, 64)
    ids = np.random.default_rng(1).integers(0, 65, (16, 65))
    loss = lambda p: ag.cross_entropy(lm.apply(p, ids[:, :-1]), ids[:, 1:])  # noqa: E731
    adam = ag.optim.adam(1e-3)
    grads = ag.gradient(loss, p)[0]
    return adam.update(p, grads, adam.init(p), in_place=True)


def test_at_two_threads_nothing_is_handed_to_the_pool(monkeypatch):
    """With the default settings a step at 2 threads runs every kernel in the calling thread,
    and the same step at 4 threads splits."""
    runs = pool_runs(monkeypatch)
    assert parallel.SPLIT_FROM_THREADS > 2
    with split_at(2, from_threads=None, min_share=None):
        lm_step()
    assert runs == []
    with split_at(4, from_threads=None, min_share=None):
        lm_step()
    assert runs and max(runs) <= 4


def test_a_forked_child_splits_on_a_pool_of_its_own():
    """The parent's pool started, then fork: the child's split runs its shares at once (a
    barrier) on new threads, and its layer norm gives the serial bits."""
    script = ("import json, os, signal, threading, numpy as np, autograd_lite as ag\n"
              "from autograd_lite.kernels import parallel\n"
              "def share(barrier, start, stop):\n"
              "    barrier.wait(timeout=30)\n"
              "    return threading.get_ident()\n"
              "x = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)\n"
              "scale, bias = np.ones(8, np.float32), np.zeros(8, np.float32)\n"
              "serial = ag.layer_norm(x, scale, bias)\n"
              "ag.set_threads(4)\n"
              "with parallel.splitting(1, 1):\n"
              "    parent = parallel.split_rows(share, 8, threading.Barrier(4))\n"
              "    pid = os.fork()\n"
              "    if pid == 0:\n"
              "        signal.alarm(60)  # a child whose split hangs ends\n"
              "        child = parallel.split_rows(share, 8, threading.Barrier(4))\n"
              "        same = np.array_equal(ag.layer_norm(x, scale, bias), serial)\n"
              "        os._exit(0 if len(set(child)) == 4 and same else 3)\n"
              "    _, status = os.waitpid(pid, 0)\n"
              "print(json.dumps([os.waitstatus_to_exitcode(status), len(set(parent))]))\n")
    out = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", script],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [0, 4]
