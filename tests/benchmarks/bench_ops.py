"""Per-op overhead: forward + backward through a chain of tiny ops, autograd_lite vs PyTorch.

A chain of N_OPS ops (alternating x * 0.9, x + 0.1, tanh x) on a (4, 4) and a (64, 64)
float64 array, ended by a sum, differentiated once. Reported as microseconds per op
(the whole forward + backward divided by the number of ops), with numpy's bare forward
chain for reference, and the median ratio autograd_lite / PyTorch over rounds of
alternating blocks (timing.alternating_blocks), --threads threads each. A script, not a test:

    python3 tests/benchmarks/bench_ops.py [--threads 2] [--rounds 9]
"""
import argparse
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402  (standard library only: numpy is not loaded yet)

THREADS = timing.pin_threads(timing.threads_from_argv())
import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402

N_OPS = 200


def chain_ag(x):
    for i in range(N_OPS):
        k = i % 3
        x = x * 0.9 if k == 0 else x + 0.1 if k == 1 else ag.tanh(x)
    return ag.sum(x)


def chain_numpy(x):
    for i in range(N_OPS):
        k = i % 3
        x = x * 0.9 if k == 0 else x + 0.1 if k == 1 else np.tanh(x)
    return x.sum()


def make_torch_step(torch):
    def chain_torch(x):
        for i in range(N_OPS):
            k = i % 3
            x = x * 0.9 if k == 0 else x + 0.1 if k == 1 else torch.tanh(x)
        return x.sum()

    def step(x):
        t = torch.from_numpy(x).requires_grad_(True)
        chain_torch(t).backward()
        return t.grad
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for each library")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    ag.memory.keep_freed_memory()  # as a training loop would: freed blocks are reused
    import torch

    timing.torch_threads(torch, THREADS)
    torch_step = make_torch_step(torch)
    rng = np.random.default_rng(0)
    print(f"chain of {N_OPS} ops (mul, add, tanh), float64, forward + backward; median of "
          f"{args.rounds} rounds of alternating blocks, {THREADS} threads each")
    print(timing.describe_environment(timing.environment(torch)))
    print(f"{'shape':>9} {'numpy fwd':>10} {'autograd_lite':>14} {'torch':>8} {'ratio':>6}")
    print(f"{'':>9} {'us/op':>10} {'us/op':>14} {'us/op':>8}")
    per_op = 1e6 / N_OPS
    rows = []
    for shape in ((4, 4), (64, 64)):
        x = rng.standard_normal(shape)
        g_ag = ag.gradient(chain_ag, x)[0]
        np.testing.assert_allclose(g_ag, torch_step(x).numpy(), rtol=1e-10)  # same computation
        t_numpy = statistics.median(timing.seconds_of(lambda: chain_numpy(x)) for _ in range(21))
        r = timing.alternating_blocks(lambda: ag.gradient(chain_ag, x), lambda: torch_step(x),
                                      args.rounds, pause=0.3, block_seconds=0.2).summary()
        rows.append({"shape": list(shape), "numpy_us": t_numpy * per_op,
                     "ours_us": r["ms_a"] * 1e3 / N_OPS, "torch_us": r["ms_b"] * 1e3 / N_OPS,
                     "ratio": r["ratio"], "ratio_q1": r["ratio_q1"], "ratio_q3": r["ratio_q3"]})
        print(f"{str(shape):>9} {rows[-1]['numpy_us']:>10.2f} {rows[-1]['ours_us']:>14.2f} "
              f"{rows[-1]['torch_us']:>8.2f} {r['ratio']:>6.2f} "
              f"({r['ratio_q1']:.2f} - {r['ratio_q3']:.2f})")
    print("(ratio = the median over rounds of autograd_lite / torch, with its quartiles)")
    timing.emit({"threads": THREADS, "n_ops": N_OPS, "rows": rows})


if __name__ == "__main__":
    main()
