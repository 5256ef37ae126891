"""Per-op overhead: forward + backward through a chain of tiny ops, autograd_lite vs PyTorch.

A chain of N_OPS ops (alternating x * 0.9, x + 0.1, tanh x) on a (4, 4) and a (64, 64)
float64 array, ended by a sum, differentiated once. Reported as microseconds per op
(the whole forward + backward divided by the number of ops), with numpy's bare forward
chain for reference, and the ratio autograd_lite / PyTorch. A script, not a test:

    python3 tests/benchmarks/bench_ops.py [--repeats 21]
"""
import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # the repository, uninstalled
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


def median_seconds(fn, x, repeats, warmup=3):
    for _ in range(warmup):
        fn(x)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    import torch

    torch_step = make_torch_step(torch)
    rng = np.random.default_rng(0)
    default_threads = torch.get_num_threads()
    print(f"chain of {N_OPS} ops (mul, add, tanh), float64, forward + backward; "
          f"median of {args.repeats}; numpy {np.__version__}, torch {torch.__version__}")
    header = (f"{'shape':>9} {'numpy fwd':>10} {'autograd_lite':>14} {'torch':>8} {'ratio':>6} "
              f"{'torch 1 thr':>12} {'ratio':>6}")
    print(header)
    print(f"{'':>9} {'us/op':>10} {'us/op':>14} {'us/op':>8} {'':>6} {'us/op':>12}")
    for shape in ((4, 4), (64, 64)):
        x = rng.standard_normal(shape)
        g_ag = ag.gradient(chain_ag, x)[0]
        np.testing.assert_allclose(g_ag, torch_step(x).numpy(), rtol=1e-10)  # same computation
        per_op = 1e6 / N_OPS
        t_numpy = median_seconds(chain_numpy, x, args.repeats) * per_op
        t_ag = median_seconds(lambda x: ag.gradient(chain_ag, x), x, args.repeats) * per_op
        torch.set_num_threads(default_threads)
        t_torch = median_seconds(torch_step, x, args.repeats) * per_op
        torch.set_num_threads(1)
        t_torch1 = median_seconds(torch_step, x, args.repeats) * per_op
        torch.set_num_threads(default_threads)
        print(f"{str(shape):>9} {t_numpy:>10.2f} {t_ag:>14.2f} {t_torch:>8.2f} {t_ag / t_torch:>6.2f} "
              f"{t_torch1:>12.2f} {t_ag / t_torch1:>6.2f}")
    print(f"(torch default threads: {default_threads}; ratio = autograd_lite / torch)")


if __name__ == "__main__":
    main()
