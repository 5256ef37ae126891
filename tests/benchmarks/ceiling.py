"""How fast a training step could be with every core: Amdahl's bound from where a one-thread
step's CPU time goes. A script (Linux, needs `perf`: apt-get install linux-perf):

    python3 tests/benchmarks/ceiling.py [--only w2,lm] [--steps 40] [--threads 2]

For each workload, our step runs on one thread (BLAS and kernels) and `perf record -e
cpu-clock` samples it after the warm-up steps, attached to this process. The samples are
grouped by the library they fall in: OpenBLAS, the CPython interpreter, numba's compiled
kernels, libc (memset, memcpy), numpy's own C. The interpreter's share G runs under the
GIL, so no arrangement of threads shortens it; if everything else split perfectly over n
threads, with no hand-off cost, a step would take

    T_n >= G T_1 + (1 - G) T_1 / n

Then the same bound against the PyTorch twin's step at n threads, timed in alternating
blocks (timing.alternating_blocks, as bench_models.py does): the best ratio ours / PyTorch
that any use of the other cores could reach, and the one-thread step it would take to reach
a target ratio. numpy's C is counted with the parts that split: the bound is generous.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import timing

timing.pin_threads(1)  # the one-thread step; torch's threads are set per measurement below

import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
import workloads  # noqa: E402

PARTS = {"OpenBLAS": r"openblas", "CPython": r"libpython", "numba kernels": r"\[JIT\]",
         "libc": r"libc\.so", "numpy": r"_multiarray_umath"}


def cpu_shares(step, steps):
    """{part: share of the CPU samples} over `steps` calls of step(), from perf."""
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "perf.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000",
                                 "-p", str(os.getpid()), "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # perf attaches
        for _ in range(steps):
            step()
        perf.send_signal(signal.SIGINT)
        perf.wait()
        report = subprocess.run(["perf", "report", "-i", data, "--sort", "dso", "--stdio",
                                 "--no-children"], capture_output=True, text=True).stdout
    shares = {part: 0.0 for part in PARTS}
    for line in report.splitlines():
        match = re.match(r"\s*([\d.]+)%\s+(.*)", line)
        if match:
            for part, pattern in PARTS.items():
                if re.search(pattern, match.group(2)):
                    shares[part] += float(match.group(1)) / 100
    shares["other"] = max(0.0, 1.0 - sum(shares.values()))
    return shares


def report(key, args, torch):
    workload = workloads.build(key)
    ours, twin = workloads.OurStep(workload), workload.twin(torch, workload.params)
    for _ in range(3):
        ours.step()
    shares = cpu_shares(ours.step, args.steps)
    timing.torch_threads(torch, 1)
    one = timing.alternating_blocks(ours.step, twin.step, rounds=args.rounds).summary()
    timing.torch_threads(torch, args.threads)
    twin_n = float(np.median([1e3 * timing.seconds_of(twin.step, 5) / 5
                              for _ in range(args.rounds)]))
    timing.torch_threads(torch, 1)
    g, t1, n = shares["CPython"], one["ms_a"], args.threads
    bound = g * t1 + (1 - g) * t1 / n
    needed = args.target * twin_n / (g + (1 - g) / n)
    print(f"{key}: CPU samples of a one-thread step: "
          + ", ".join(f"{part} {100 * share:.1f}%" for part, share in shares.items()))
    print(f"  one thread: ours {t1:.1f} ms, PyTorch {one['ms_b']:.1f} ms "
          f"({one['ratio']:.2f}); PyTorch at {n} threads {twin_n:.1f} ms")
    print(f"  at {n} threads, every part but the interpreter split perfectly: ours >= "
          f"{bound:.1f} ms, {bound / twin_n:.2f} of PyTorch's; {args.target} of it needs a "
          f"one-thread step of {needed:.1f} ms ({needed / t1:.2f} of today's)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="w2,lm")
    parser.add_argument("--steps", type=int, default=40, help="steps sampled by perf")
    parser.add_argument("--threads", type=int, default=2, help="the thread count bounded")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--target", type=float, default=0.8, help="ours / PyTorch aimed at")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        sys.exit("ceiling.py: needs perf (apt-get install linux-perf)")
    ag.memory.keep_freed_memory()
    import torch
    print(timing.describe_environment(timing.environment(torch)))
    for key in args.only.split(","):
        report(key, args, torch)
    print(f"load average at the end: {timing.load_average():.2f}")


if __name__ == "__main__":
    main()
