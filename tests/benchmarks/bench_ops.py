"""Per-op overhead: forward + backward through a chain of tiny ops, autograd_lite vs PyTorch.

A chain of N_OPS ops (alternating x * 0.9, x + 0.1, tanh x) on a (4, 4) and a (64, 64)
float64 array, ended by a sum, differentiated once. Reported as microseconds per op
(the whole forward + backward divided by the number of ops), with numpy's bare forward
chain for reference, and the ratio autograd_lite / PyTorch over alternating runs (one
thread each). A script, not a test:

    python3 tests/benchmarks/bench_ops.py [--repeats 41]
"""
import argparse
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS: one thread each
import numpy as np  # noqa: E402

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


def _seconds(fn, x):
    start = time.perf_counter()
    fn(x)
    return time.perf_counter() - start


def paired_seconds(ours, reference, x, repeats, warmup=3):
    """Median seconds of each, and the median of the per-pair ratios ours / reference. The
    two alternate, so that a change in the machine's speed (other load, clock) affects both."""
    for _ in range(warmup):
        ours(x), reference(x)
    pairs = [(_seconds(ours, x), _seconds(reference, x)) for _ in range(repeats)]
    a, b = zip(*pairs)
    return statistics.median(a), statistics.median(b), statistics.median(p / q for p, q in pairs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=41)
    args = parser.parse_args()
    ag.memory.keep_freed_memory()  # as a training loop would: freed blocks are reused
    import torch

    torch.set_num_threads(1)  # tiny arrays: threads only add overhead; bench_models does the same
    torch_step = make_torch_step(torch)
    rng = np.random.default_rng(0)
    print(f"chain of {N_OPS} ops (mul, add, tanh), float64, forward + backward; "
          f"median of {args.repeats} alternating pairs, one thread; numpy {np.__version__}, "
          f"torch {torch.__version__}")
    print(f"{'shape':>9} {'numpy fwd':>10} {'autograd_lite':>14} {'torch':>8} {'ratio':>6}")
    print(f"{'':>9} {'us/op':>10} {'us/op':>14} {'us/op':>8}")
    per_op = 1e6 / N_OPS
    for shape in ((4, 4), (64, 64)):
        x = rng.standard_normal(shape)
        g_ag = ag.gradient(chain_ag, x)[0]
        np.testing.assert_allclose(g_ag, torch_step(x).numpy(), rtol=1e-10)  # same computation
        t_numpy = statistics.median(_seconds(chain_numpy, x) for _ in range(args.repeats))
        t_ag, t_torch, ratio = paired_seconds(lambda x: ag.gradient(chain_ag, x), torch_step, x,
                                              args.repeats)
        print(f"{str(shape):>9} {t_numpy * per_op:>10.2f} {t_ag * per_op:>14.2f} "
              f"{t_torch * per_op:>8.2f} {ratio:>6.2f}")
    print("(ratio = the median over alternating pairs of autograd_lite / torch)")


if __name__ == "__main__":
    main()
