"""What the compiled kernels cost at start-up: a fresh process that imports autograd_lite and
runs one training step and one inference forward of the LM workload (workloads.py), timed
from the start of the process to the end of the step, with the numpy kernels, with numba and
an empty compile cache (cold: every kernel compiles), and with numba again on that cache
(warm). A script, not a test:

    python3 tests/benchmarks/bench_startup.py [--repeats 3] [--without-scipy]

Reported: the median seconds of each, and cold and warm minus numpy (the extra cost).
numba imports scipy, where it is installed, to look for BLAS (about 0.35 s on an AMD EPYC);
the `fast` extra does not install it, so --without-scipy hides an installed scipy from the
timed processes to measure what a fresh install of the extra pays.
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STEP = (
    "import sys, time; start = time.perf_counter()\n"
    "if HIDE_SCIPY: sys.modules['scipy'] = None  # import scipy then raises ImportError\n"
    f"sys.path[:0] = [{str(HERE)!r}, {str(ROOT)!r}]\n"
    "import autograd_lite as ag, workloads\n"
    "w = workloads.build('lm'); s = workloads.OurStep(w); s.step(); w.forward(w.params)\n"
    "print(ag.kernels.backend(), time.perf_counter() - start)\n")


def seconds(environment, hide_scipy):
    """(backend, seconds from the start of the interpreter's script to the end of the step)."""
    started = time.perf_counter()
    script = f"HIDE_SCIPY = {hide_scipy}\n" + STEP
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, **environment}, check=True)
    backend, _ = out.stdout.split()
    return backend, time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--without-scipy", action="store_true",
                        help="hide an installed scipy from the timed processes")
    args = parser.parse_args()
    times = {"numpy": [], "cold": [], "warm": []}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            for kind, environment in (("numpy", {"AUTOGRAD_LITE_KERNELS": "numpy"}),
                                      ("cold", {"AUTOGRAD_LITE_KERNELS": "numba",
                                                "NUMBA_CACHE_DIR": cache}),
                                      ("warm", {"AUTOGRAD_LITE_KERNELS": "numba",
                                                "NUMBA_CACHE_DIR": cache})):
                backend, t = seconds(environment, args.without_scipy)
                times[kind].append(t)
                print(f"{kind:5s} ({backend}): {t:.2f} s", flush=True)
    median = {kind: statistics.median(ts) for kind, ts in times.items()}
    print(f"medians of {args.repeats}: numpy {median['numpy']:.2f} s, numba cold "
          f"{median['cold']:.2f} s (+{median['cold'] - median['numpy']:.2f}), numba warm "
          f"{median['warm']:.2f} s (+{median['warm'] - median['numpy']:.2f}); load average "
          f"{os.getloadavg()[0]:.2f}" + ("; scipy hidden" if args.without_scipy else ""))


if __name__ == "__main__":
    main()
