"""The engine's own cost per op on numpy's arrays, where devices added a type dispatch (core/
devices.py): one gradient of a small function of 43 ops on (8, 16) float32 arrays, the least
CPU time per call over 9 blocks of 200 calls, in microseconds. A script, not a test; run it
in this checkout and in another (an earlier commit) alternately, and compare the minima
(tests/benchmarks/README.md has the figures):

    python3 tests/benchmarks/bench_dispatch.py        # in each checkout's root

`--untimed N` runs N gradients and nothing else, for an instruction count that the machine's
load does not move: under `valgrind --tool=callgrind`, the total of N = 40 less that of
N = 20 is 20 gradients' instructions (the first gradients also load the kernels;
tests/benchmarks/README.md, "Measuring a small difference").
"""
import argparse
import time

import numpy as np

import autograd_lite as ag


def small_function(w, x):
    h = x
    for _ in range(10):
        h = ag.tanh(h @ w + 0.1) * 0.5
    return ag.sum(ag.log_softmax(h, -1) * h)


def arguments():
    """(w, x) of small_function."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    return rng.standard_normal((16, 16)).astype(np.float32), x


def least_cpu_seconds(calls=200, blocks=9, warmup=50):
    w, x = arguments()
    for _ in range(warmup):
        ag.gradient(small_function, w, x)
    times = []
    for _ in range(blocks):
        start = time.process_time()
        for _ in range(calls):
            ag.gradient(small_function, w, x)
        times.append((time.process_time() - start) / calls)
    return min(times)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--untimed", type=int, default=None, metavar="N",
                        help="run N gradients untimed and exit (for valgrind's callgrind)")
    untimed = parser.parse_args().untimed
    if untimed is None:
        print(f"{least_cpu_seconds() * 1e6:.1f}")
    else:
        for _ in range(untimed):
            ag.gradient(small_function, *arguments())
