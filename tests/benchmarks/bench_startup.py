"""What the compiled kernels cost at start-up: a fresh process that imports autograd_lite and
runs one training step and one inference forward of the LM workload (workloads.py), timed
from the start of the process to the end of the step, with the numpy kernels, with numba and
an empty compile cache (cold: every kernel compiles), and with numba again on that cache
(warm). A script, not a test:

    python3 tests/benchmarks/bench_startup.py [--repeats 3] [--without-scipy]

Reported: the median seconds of each, and cold and warm minus numpy (the extra cost); and,
for scale, numba's own floor: a process that imports numpy and calls a one-line cached numba
function (from numba's cache, its second run) against one that imports numpy only, which is
what any library with a cached numba kernel pays at start-up.
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
FLOOR_MODULE = (  # the one-line cached function of the floor's processes
    "import numba\n"
    "@numba.njit(cache=True)\n"
    "def one(x):\n"
    "    return x + 1\n")
FLOOR = ("import sys\n"
         "if HIDE_SCIPY: sys.modules['scipy'] = None\n"
         "import numpy\n"
         "if WITH_NUMBA:\n"
         "    sys.path.insert(0, FOLDER); import floor_kernel; floor_kernel.one(1)\n")


def floor_seconds(folder, with_numba, hide_scipy):
    """Seconds of a process that imports numpy, and with_numba calls floor_kernel.one."""
    started = time.perf_counter()
    script = (f"HIDE_SCIPY = {hide_scipy}\nWITH_NUMBA = {with_numba}\nFOLDER = {folder!r}\n"
              + FLOOR)
    subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                   env={**os.environ, "NUMBA_CACHE_DIR": folder})
    return time.perf_counter() - started


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
    times = {"numpy": [], "cold": [], "warm": [], "bare": [], "floor": []}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as folder:
            pathlib.Path(folder, "floor_kernel.py").write_text(FLOOR_MODULE)
            floor_seconds(folder, True, args.without_scipy)  # compiles into numba's cache
            times["bare"].append(floor_seconds(folder, False, args.without_scipy))
            times["floor"].append(floor_seconds(folder, True, args.without_scipy))
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
    print(f"numba's floor (a cached one-line function's first call): "
          f"+{median['floor'] - median['bare']:.2f} s over importing numpy alone "
          f"({median['bare']:.2f} s)")


if __name__ == "__main__":
    main()
