"""Training steps and inference of the workloads (workloads.py), autograd_lite against a
functional PyTorch twin (twins.py), at one thread count. A script, not a test:

    python3 tests/benchmarks/bench_models.py [--threads 2] [--only w1,lm] [--rounds 7]

For each workload: the twin's loss and every gradient are first checked against ours at the
same weights (workloads.check_parity); then a training step (forward, cross-entropy,
backward, Adam) and an inference forward (ours on plain arrays, the twin's under
torch.no_grad()) are timed in alternating blocks (timing.alternating_blocks). Reported: ms
per step of each side and the median ratio autograd_lite / PyTorch over the rounds, with its
quartiles. Both libraries get --threads threads (BLAS through OPENBLAS_NUM_THREADS, set
before numpy loads, which the library's thread count follows up to the cores; torch through
set_num_threads); --split-from N splits our kernels and attention core from N threads on
(kernels/parallel.py's SPLIT_FROM_THREADS: 2 compares splitting at 2 threads with the
default's serial kernels). ag.memory.keep_freed_memory() is called
first, as a training loop would (it sets glibc's malloc, which torch's CPU allocator uses
too); --system-malloc leaves it alone.
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402  (standard library only: numpy is not loaded yet)

THREADS = timing.pin_threads(timing.threads_from_argv())
import autograd_lite as ag  # noqa: E402
import twins  # noqa: E402
import workloads  # noqa: E402


def measure(torch, key, args):
    """Parity, then the training step and the inference forward timed: a dict of figures."""
    workload = workloads.build(key)
    parity = workloads.check_parity(workload, torch)
    twin = workload.twin(torch, workload.params)
    ours = workloads.OurStep(workload)
    timing_args = dict(rounds=args.rounds, pause=args.pause, block_seconds=args.block_seconds)
    train = timing.alternating_blocks(ours.step, twin.step, **timing_args).summary()
    infer = timing.alternating_blocks(lambda: workload.forward(workload.params), twin.infer,
                                      **timing_args).summary()
    return {"key": key, "title": workload.title, "train": train, "infer": infer,
            "parity": parity}


def show(row):
    for what in ("train", "infer"):
        r = row[what]
        print(f"{row['key']:4s} {what:6s} {r['ms_a']:10.2f} {r['ms_b']:10.2f} {r['ratio']:7.2f} "
              f"({r['ratio_q1']:.2f} - {r['ratio_q3']:.2f})  k={r['k']}, {r['rounds']} rounds")
    for dtype, p in row["parity"].items():
        print(f"     parity in {dtype}: loss {p['loss']:.1e}, worst gradient {p['worst']} "
              f"{p['error']:.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for each library")
    parser.add_argument("--only", default=",".join(workloads.BUILDERS),
                        help="comma-separated workloads (default: all)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pause", type=float, default=0.3, help="seconds before each block")
    parser.add_argument("--block-seconds", type=float, default=0.5,
                        help="k steps a block, k chosen so that a block lasts about this long")
    parser.add_argument("--attention", choices=("sdpa", "explicit"), default="sdpa",
                        help="the twin's attention: F.scaled_dot_product_attention or "
                             "softmax(QKᵀ)V written out")
    parser.add_argument("--system-malloc", action="store_true",
                        help="do not call ag.memory.keep_freed_memory()")
    timing.add_split_option(parser)
    args = parser.parse_args()
    timing.split_setting(args.split_from)
    if not args.system_malloc:
        ag.memory.keep_freed_memory()
    twins.ATTENTION["kernel"] = args.attention
    import torch
    timing.torch_threads(torch, THREADS)
    env = timing.environment(torch)
    print(timing.describe_environment(env))
    print(f"{'':11s} {'ours ms':>10s} {'torch ms':>10s} {'ratio':>7s} (quartiles)")
    rows = []
    for key in args.only.split(","):
        rows.append(measure(torch, key, args))
        show(rows[-1])
    end_load = timing.load_average()
    print(f"load average at the end: {end_load:.2f}")
    timing.emit({"environment": env, "end_load": end_load, "threads": THREADS,
                 "attention": args.attention, "split_from": env["split_from"], "rows": rows})


if __name__ == "__main__":
    main()
