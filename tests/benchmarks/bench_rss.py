"""Peak resident memory of one training step of w3 (the base encoder-decoder of workloads.py:
D 512, 6 + 6 blocks, vocab 8000, 64 tokens, batch 16), ours and the PyTorch twin's, each in
a fresh process. A script, not a test:

    python3 tests/benchmarks/bench_rss.py [--threads 2] [--workload w3]

Each process builds the workload, takes one step (so that Adam's moments exist, torch
allocating them at its first step), then reads its resident memory ("before": weights, Adam
state, the libraries' code, and the freed memory the allocator keeps for reuse), resets its
peak (/proc/self/clear_refs, Linux) and takes a second step: "peak" is the process's peak RSS
over that step. Our process never imports torch; both call ag.memory.keep_freed_memory()
first, as bench_models does, so that "before" already holds much of a step's working memory
and the difference of the two says little: the peak is the figure.
"""
import argparse
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402  (standard library only: numpy is not loaded yet)

SIDES = ("ours", "torch")


def measure(side, key, threads):
    """In this process: the RSS before a second step and the peak over it (MiB)."""
    import gc

    import autograd_lite as ag
    import workloads
    ag.memory.keep_freed_memory()
    workload = workloads.build(key)
    if side == "torch":
        import torch
        timing.torch_threads(torch, threads)
        step = workload.twin(torch, workload.params).step
        workload = None  # our parameters: not part of the twin's memory
    else:
        step = workloads.OurStep(workload).step
    step()
    gc.collect()
    before = timing.rss_mib()
    if not timing.reset_peak_rss():
        raise RuntimeError("bench_rss: /proc/self/clear_refs is not writable; the peak RSS "
                           "of one step cannot be isolated here")
    seconds = timing.seconds_of(step)
    peak = timing.peak_rss_mib()
    return {"side": side, "before_mib": before, "peak_mib": peak, "seconds": seconds}


def run_child(side, key, threads):
    out = subprocess.run([sys.executable, __file__, "--child", side, "--workload", key,
                          "--threads", str(threads)], cwd=timing.ROOT, capture_output=True,
                         text=True, env=dict(os.environ))
    if out.returncode:
        raise RuntimeError(f"bench_rss: the {side} process failed:\n{out.stderr[-3000:]}")
    return timing.read_result(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workload", default="w3")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    timing.pin_threads(args.threads)
    if args.child:
        timing.emit(measure(args.child, args.workload, args.threads))
        return
    rows = [run_child(side, args.workload, args.threads) for side in SIDES]
    print(f"{args.workload}: one training step, threads: {args.threads}, each side in a fresh "
          f"process")
    print(f"{'':6s} {'before':>10s} {'peak':>10s} {'seconds':>8s}")
    for r in rows:
        print(f"{r['side']:6s} {r['before_mib']:6.0f} MiB {r['peak_mib']:6.0f} MiB "
              f"{r['seconds']:8.2f}")
    timing.emit({"workload": args.workload, "threads": args.threads, "rows": rows})


if __name__ == "__main__":
    main()
