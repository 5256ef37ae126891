"""How fast a training step could be with every core: Amdahl's bound from where a one-thread
step's CPU time goes. A script (Linux, needs `perf`: apt-get install linux-perf):

    python3 tests/benchmarks/ceiling.py [--only w2,lm] [--steps 40] [--threads 2] [--target 0.8]

For each workload, our step runs on one thread and `perf record -e cpu-clock`, attached to
this process after the warm-up steps, samples it. The samples are grouped by the library they
fall in: OpenBLAS (the products), the CPython interpreter, numba's compiled kernels, libc
(memset, memcpy) and numpy's own C. Then ours and the PyTorch twin at one thread and at n
(`ag.set_threads`, torch's intra-op threads), in alternating blocks as bench_models.py times
them. Two bounds follow, with T_1 our one-thread step, G the interpreter's share (it runs
under the GIL: no arrangement of threads shortens it), B the products' and R the rest's:

1. Every part but the interpreter split perfectly over n threads, for free:
   T_n >= G T_1 + (1 - G) T_1 / n.
2. The products' speed-up, today and needed. Today's step at n threads runs the products on
   n BLAS threads and the rest serially, so the products take T_n - (G + R) T_1 of it. To
   reach the target ratio t against PyTorch's T'_n, with the rest split perfectly, they would
   have to take t T'_n - G T_1 - R T_1 / n: B T_1 over that is the speed-up over one thread
   they would need, against n threads' n at most.
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

timing.pin_threads(1)  # one thread while perf samples; at_threads sets both sides' counts

import autograd_lite as ag  # noqa: E402
import workloads  # noqa: E402

PARTS = {"OpenBLAS": r"openblas", "CPython": r"libpython|^python3[\d.]*$",
         "numba kernels": r"\[JIT\]", "libc": r"libc\.so", "numpy": r"_multiarray_umath"}


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
                if re.search(pattern, match.group(2).strip()):
                    shares[part] += float(match.group(1)) / 100
    shares["other"] = max(0.0, 1.0 - sum(shares.values()))
    return shares


def at_threads(n, ours, twin, torch, rounds):
    """ours against PyTorch at n threads each, in alternating blocks -> timing summary."""
    ag.set_threads(n)
    timing.torch_threads(torch, n)
    try:
        return timing.alternating_blocks(ours.step, twin.step, rounds=rounds).summary()
    finally:
        ag.set_threads(1)
        timing.torch_threads(torch, 1)


def report(key, args, torch):
    workload = workloads.build(key)
    ours, twin = workloads.OurStep(workload), workload.twin(torch, workload.params)
    for _ in range(3):
        ours.step()
    shares = cpu_shares(ours.step, args.steps)
    one, many = (at_threads(n, ours, twin, torch, args.rounds) for n in (1, args.threads))
    n, t1, tn, theirs = args.threads, one["ms_a"], many["ms_a"], many["ms_b"]
    g, b = shares["CPython"], shares["OpenBLAS"]
    rest = 1 - g - b
    perfect = g * t1 + (1 - g) * t1 / n
    products_today = tn - (g + rest) * t1
    products_allowed = args.target * theirs - g * t1 - rest * t1 / n
    print(f"{key}: CPU samples of a one-thread step: "
          + ", ".join(f"{part} {100 * share:.1f}%" for part, share in shares.items()))
    print(f"  1 thread: ours {t1:.1f} ms, PyTorch {one['ms_b']:.1f} ms, {one['ratio']:.2f} "
          f"({one['ratio_q1']:.2f} - {one['ratio_q3']:.2f}); {n} threads: ours {tn:.1f} ms, "
          f"PyTorch {theirs:.1f} ms, {many['ratio']:.2f} ({many['ratio_q1']:.2f} - "
          f"{many['ratio_q3']:.2f})")
    print(f"  1. all but the interpreter split perfectly: ours >= {perfect:.1f} ms at {n} "
          f"threads, {perfect / theirs:.2f} of PyTorch's")
    needed = (f"{b * t1 / products_allowed:.2f}x" if products_allowed > 0
              else "more than any (the rest alone is over it)")
    print(f"  2. the products: {b * t1:.1f} ms at 1 thread, about {products_today:.1f} at {n} "
          f"({b * t1 / products_today:.2f}x); {args.target} of PyTorch's step needs {needed}")


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
