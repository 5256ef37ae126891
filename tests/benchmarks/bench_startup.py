"""What the compiled kernels cost at start-up: a fresh process that imports autograd_lite and
runs one training step and one inference forward of the LM workload (workloads.py), timed
from the start of the process to the end of the step, with the numpy kernels, with numba and
an empty compile cache (cold: every kernel compiles), and with numba again on that cache
(warm). A script, not a test:

    python3 tests/benchmarks/bench_startup.py [--repeats 3]

Reported: the median seconds of each, and cold and warm minus numpy (the extra cost).
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
    f"sys.path[:0] = [{str(HERE)!r}, {str(ROOT)!r}]\n"
    "import autograd_lite as ag, workloads\n"
    "w = workloads.build('lm'); s = workloads.OurStep(w); s.step(); w.forward(w.params)\n"
    "print(ag.kernels.backend(), time.perf_counter() - start)\n")


def seconds(environment):
    """(backend, seconds from the start of the interpreter's script to the end of the step)."""
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", STEP], capture_output=True, text=True,
                         env={**os.environ, **environment}, check=True)
    backend, _ = out.stdout.split()
    return backend, time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times = {"numpy": [], "cold": [], "warm": []}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            for kind, environment in (("numpy", {"AUTOGRAD_LITE_KERNELS": "numpy"}),
                                      ("cold", {"AUTOGRAD_LITE_KERNELS": "numba",
                                                "NUMBA_CACHE_DIR": cache}),
                                      ("warm", {"AUTOGRAD_LITE_KERNELS": "numba",
                                                "NUMBA_CACHE_DIR": cache})):
                backend, t = seconds(environment)
                times[kind].append(t)
                print(f"{kind:5s} ({backend}): {t:.2f} s", flush=True)
    median = {kind: statistics.median(ts) for kind, ts in times.items()}
    print(f"medians of {args.repeats}: numpy {median['numpy']:.2f} s, numba cold "
          f"{median['cold']:.2f} s (+{median['cold'] - median['numpy']:.2f}), numba warm "
          f"{median['warm']:.2f} s (+{median['warm'] - median['numpy']:.2f}); load average "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
