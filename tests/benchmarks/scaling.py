"""How the step scales with the threads: bench_models.py at each thread count, ours and the
PyTorch twin at the same count, and the ratios side by side. A script, not a test:

    python3 tests/benchmarks/scaling.py [--threads 2,8,16] [--only w1,w2,w3,lm] [--rounds 7]
        [--split-from N] [--profile] [--quick]

For each thread count, bench_models.py runs in its own process (OpenBLAS fixes its threads
when numpy loads; there both libraries get the count, ours through ag.set_threads): parity,
then the training step and the inference forward timed in alternating blocks
(timing.alternating_blocks). Reported per workload: ours / PyTorch at each count (median and
quartiles over the rounds), and each side's speed-up from the first count (its median ms
there over its median ms here). --split-from N is passed on (our kernels and attention core
split from N threads on: 2 to see splitting at 2 threads; bench_parallel.py pairs the two in
one process). --profile also runs profile_step.py at each count (where the step's time goes,
op by op). --quick: 2 rounds of short blocks, the LM alone unless --only says otherwise,
2 profiled steps: checks the machinery, in about a minute on 2 cores.
"""
import argparse
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import run  # noqa: E402  (run_script, ratio_cell: standard library only, as timing)
import timing  # noqa: E402


def scaling_table(kind, results, threads):
    """Markdown: per workload, ours / PyTorch at each count, then each side's speed-up from
    the first count. kind: train or infer."""
    first = results[threads[0]]["rows"]
    head = "".join(f" {n}: ours / PyTorch |" for n in threads)
    speedups = "".join(f" speed-up at {n}: ours, PyTorch |" for n in threads[1:])
    lines = [f"| workload |{head}{speedups}", "|---|" + "---|" * (2 * len(threads) - 1)]
    for i, row in enumerate(first):
        at = [results[n]["rows"][i][kind] for n in threads]
        ratios = "".join(f" {run.ratio_cell(r)} |" for r in at)
        gains = "".join(f" {at[0]['ms_a'] / r['ms_a']:.2f}, {at[0]['ms_b'] / r['ms_b']:.2f} |"
                        for r in at[1:])
        lines.append(f"| {row['key']} |{ratios}{gains}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="2,8,16", help="thread counts, comma-separated")
    parser.add_argument("--only", default=None,
                        help="comma-separated workloads (default: all; --quick: lm)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds of short blocks, the LM alone: checks the machinery")
    parser.add_argument("--profile", action="store_true",
                        help="also profile_step.py at each thread count")
    timing.add_split_option(parser)
    args = parser.parse_args()
    threads = [int(n) for n in args.threads.split(",")]
    only = args.only or ("lm" if args.quick else "w1,w2,w3,lm")
    timing_options = (["--rounds", 2, "--pause", 0.05, "--block-seconds", 0.1] if args.quick
                      else ["--rounds", args.rounds])
    split = [] if args.split_from is None else ["--split-from", args.split_from]
    start_load = timing.load_average()
    print(f"scaling.py: threads {threads}, workloads {only}; CPU {timing.cpu_model()}, "
          f"{os.cpu_count()} cores; load average at the start {start_load:.2f}")
    results = {}
    for n in threads:
        results[n] = run.run_script("bench_models.py", "--threads", n, "--only", only,
                                    *timing_options, *split)
        if args.profile:
            run.run_script("profile_step.py", "--threads", n, "--only", only, "--steps",
                           2 if args.quick else 5, *split, result=False)
    end_load = timing.load_average()
    env = results[threads[0]]["environment"]
    print(f"\nMeasured on: {run.environment_line(env, start_load, end_load)}; kernels split "
          f"from {results[threads[0]]['split_from']} threads.")
    for kind, title in (("train", "A training step"), ("infer", "Inference")):
        print(f"\n{title}: ours / PyTorch at each thread count (median, quartiles); each "
              f"side's speed-up from {run.plural(threads[0], 'thread')}:\n")
        print(scaling_table(kind, results, threads))
    timing.emit({"threads": threads, "start_load": start_load, "end_load": end_load,
                 "results": {str(n): results[n] for n in threads}})


if __name__ == "__main__":
    main()
