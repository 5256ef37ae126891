"""The compiled kernels against the numpy ones, paired in one process: each workload's training
step and inference forward (workloads.py), and each fused op alone, timed in alternating blocks
(timing.alternating_blocks) with `ag.kernels.select("numba")` on one side and
`select("numpy")` on the other, so that both sides see the same load. A script, not a test:

    python3 tests/benchmarks/bench_kernels.py [--threads 2] [--only w1,lm] [--rounds 7] [--ops]

Reported: ms per call of each side and the median ratio numba / numpy over the rounds, with
its quartiles (below 1: the compiled kernels are faster), and the load average.
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402  (standard library only: numpy is not loaded yet)

THREADS = timing.pin_threads(timing.threads_from_argv())
import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
import workloads  # noqa: E402


def with_kernels(name, fn):
    """fn, run with the kernels of `name`."""
    def run():
        ag.kernels.select(name)
        fn()
    return run


def paired(fn, args):
    """numba against numpy for fn, in alternating blocks -> summary (ratio = numba / numpy)."""
    return timing.alternating_blocks(with_kernels("numba", fn), with_kernels("numpy", fn),
                                     rounds=args.rounds, pause=args.pause,
                                     block_seconds=args.block_seconds).summary()


def op_cases(rng):
    """(name, fn) for each fused op's forward and backward at a workload's size (float32)."""
    x = rng.standard_normal((16 * 64, 512)).astype(np.float32)  # w3's activations
    scale, bias = np.ones(512, np.float32), np.zeros(512, np.float32)
    scores = rng.standard_normal((16, 8, 64, 64)).astype(np.float32)  # w3's attention
    causal = np.tril(np.ones((64, 64), bool))
    logits = rng.standard_normal((16 * 64, 8000)).astype(np.float32)  # w3's output
    labels = rng.integers(0, 8000, 16 * 64)
    params = {"w": rng.standard_normal((4_000_000,)).astype(np.float32)}
    grads = {"w": rng.standard_normal((4_000_000,)).astype(np.float32)}
    adam = ag.optim.adam(1e-4)
    state = adam.init(params)

    def gradient_of(f, *a):
        return lambda: ag.gradient(f, *a)
    return [
        ("layer_norm (1024, 512) fwd+bwd", gradient_of(
            lambda x: ag.sum(ag.layer_norm(x, scale, bias) * x), x)),
        ("softmax causal (16, 8, 64, 64) fwd+bwd", gradient_of(
            lambda s: ag.sum(ag.softmax(s, mask=causal) * s), scores)),
        ("cross_entropy (1024, 8000) fwd+bwd", gradient_of(
            lambda z: ag.cross_entropy(z, labels), logits)),
        ("adam 4M float32 in place", lambda: adam.update(params, grads, state, in_place=True)),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default="w1,w2,w3,lm")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pause", type=float, default=0.2)
    parser.add_argument("--block-seconds", type=float, default=0.5)
    parser.add_argument("--ops", action="store_true", help="the fused ops alone, not the models")
    args = parser.parse_args()
    print(timing.describe_environment(timing.environment()), flush=True)
    print("| case | numba ms | numpy ms | numba / numpy (quartiles) |\n|---|---|---|---|")
    cases = op_cases(np.random.default_rng(0)) if args.ops else []
    if not args.ops:
        for key in args.only.split(","):
            workload = workloads.build(key)
            step = workloads.OurStep(workload)
            cases += [(f"{key} training step", step.step),
                      (f"{key} inference", lambda w=workload: w.forward(w.params))]
    for name, fn in cases:
        s = paired(fn, args)
        print(f"| {name} | {s['ms_a']:.2f} | {s['ms_b']:.2f} | {s['ratio']:.2f} "
              f"({s['ratio_q1']:.2f}-{s['ratio_q3']:.2f}) |", flush=True)
    print(f"load average at the end: {timing.load_average():.2f}")


if __name__ == "__main__":
    main()
