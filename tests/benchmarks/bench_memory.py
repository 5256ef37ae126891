"""What ag.memory.keep_freed_memory() is worth: page faults and time of a training step.

The setting cannot be undone inside a process, so each measurement is a fresh process:
glibc's defaults ("default"), the call ("call"), and the environment variable
GLIBC_TUNABLES=<ag.memory.GLIBC_TUNABLES> without the call ("tunables"), in turns, so
that a change in the machine's speed affects all three. The step is our training step of a
workload of workloads.py (forward, cross-entropy, backward, Adam; float32, one thread).
Reported: medians over the rounds of the minor page faults and milliseconds per step,
and the median over rounds of the time ratio call / default. A script, not a test:

    python3 tests/benchmarks/bench_memory.py [--model lm] [--rounds 5] [--steps 30]

--model names a workload: w1 (the seed classifier), w2, w3 (encoder-decoders), lm.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODES = ("default", "call", "tunables")


def measure(model, steps, warmup=5):
    """(page faults, ms) per step of the model's step, in this process."""
    import resource
    import time

    import torch  # loaded as bench_models loads it: its libraries are in the process

    import workloads
    torch.set_num_threads(1)
    ours = workloads.OurStep(workloads.build(model)).step
    for _ in range(warmup):
        ours()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    for _ in range(steps):
        ours()
    seconds = time.perf_counter() - start
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / steps, 1e3 * seconds / steps


def run_child(mode, model, steps):
    """measure() in a fresh interpreter set up for `mode`; no malloc tuning is inherited."""
    import autograd_lite as ag
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLIBC_TUNABLES", "LD_PRELOAD") and not k.startswith("MALLOC_")}
    env["OPENBLAS_NUM_THREADS"] = "1"
    if mode == "tunables":
        env["GLIBC_TUNABLES"] = ag.memory.GLIBC_TUNABLES
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--model", model,
                          "--steps", str(steps)], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lm", choices=["w1", "w2", "w3", "lm"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "benchmarks")]  # the repository, uninstalled
    if args.child:
        if args.child == "call":
            import autograd_lite as ag
            assert ag.memory.keep_freed_memory(), "glibc refused the setting"
        print(json.dumps(measure(args.model, args.steps)))
        return
    results = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            results[mode].append(run_child(mode, args.model, args.steps))
    print(f"{args.model}: {args.steps} steps per process, median of {args.rounds} rounds")
    print(f"{'malloc':10s} {'page faults/step':>17s} {'ms/step':>8s}")
    for mode in MODES:
        faults, ms = zip(*results[mode])
        print(f"{mode:10s} {statistics.median(faults):17.0f} {statistics.median(ms):8.2f}")
    ratios = [c[1] / d[1] for c, d in zip(results["call"], results["default"])]
    print(f"time call / default: median {statistics.median(ratios):.2f} "
          f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
