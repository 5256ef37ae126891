"""Does a fused attention core pay? The forward of softmax(Q Kᵀ · scale + mask) V for each
(batch, head), written as one compiled numba loop per query row (scores, running maximum, exp,
sum and the weighted sum of V, without materialising the score matrix), against the library's
path: a batched matmul, the softmax kernel and a second batched matmul. A script, not a test:

    python3 tests/benchmarks/bench_attention_core.py [--threads 2] [--rounds 7]

At the workloads' shapes (the LM: B 16, 4 heads, 64 tokens, d_head 16, causal; w2: B 32, 4
heads, 32 tokens, d_head 32; w3: B 16, 8 heads, 64 tokens, d_head 64), float32; reported: the
median ms of each and their ratio, fused / library (below 1: the fused kernel pays). The fused
loop checks its output against the library's first. Forward only: a fused backward would
recompute the scores, so if the forward does not pay, neither does the pair.
"""
import argparse
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402

THREADS = timing.pin_threads(timing.threads_from_argv())
import numba  # noqa: E402
import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402

SHAPES = {"lm": (16, 4, 64, 16, True), "w2": (32, 4, 32, 32, False),
          "w3": (16, 8, 64, 64, False)}


@numba.njit(cache=True, fastmath={"reassoc"})
def fused_attention(q, k, v, scale, causal, out):
    """out[b, h, i] = Σ_j p_j v[b, h, j], p = softmax_j(q_i · k_j · scale), j <= i if causal:
    one query row at a time, the scores in a row buffer, two passes over the keys."""
    batch, heads, t, d = q.shape
    scores = np.empty(t, q.dtype)
    for b in range(batch):
        for h in range(heads):
            for i in range(t):
                last = i + 1 if causal else t
                top = q.dtype.type(-np.inf)
                for j in range(last):
                    s = q.dtype.type(0)
                    for c in range(d):
                        s += q[b, h, i, c] * k[b, h, j, c]
                    s *= scale
                    scores[j] = s
                    top = max(top, s)
                total = q.dtype.type(0)
                for j in range(last):
                    e = np.exp(scores[j] - top)
                    scores[j] = e
                    total += e
                for c in range(d):
                    out[b, h, i, c] = 0
                for j in range(last):
                    w = scores[j] / total
                    for c in range(d):
                        out[b, h, i, c] += w * v[b, h, j, c]


def library_attention(q, k, v, scale, mask):
    """The library's path on plain arrays: matmul, the softmax kernel, matmul."""
    return ag.softmax((q @ np.swapaxes(k, -1, -2)) * scale, mask=mask) @ v


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(timing.describe_environment(timing.environment()))
    rng = np.random.default_rng(0)
    print(f"{'shape':8s} {'fused ms':>9s} {'library ms':>11s} {'fused / library':>16s}")
    for name, (b, h, t, d, causal) in SHAPES.items():
        q, k, v = (rng.standard_normal((b, h, t, d)).astype(np.float32) for _ in range(3))
        scale = np.float32(1 / math.sqrt(d))
        mask = np.tril(np.ones((t, t), bool)) if causal else None
        out = np.empty_like(q)
        fused_attention(q, k, v, scale, causal, out)
        np.testing.assert_allclose(out, library_attention(q, k, v, scale, mask), rtol=1e-4,
                                   atol=1e-5)
        fused = lambda: fused_attention(q, k, v, scale, causal, out)  # noqa: E731
        library = lambda: library_attention(q, k, v, scale, mask)  # noqa: E731
        summary = timing.alternating_blocks(fused, library, rounds=args.rounds, pause=0.2,
                                            block_seconds=0.3).summary()
        print(f"{name:8s} {summary['ms_a']:9.3f} {summary['ms_b']:11.3f} "
              f"{summary['ratio']:16.2f}")
    print(f"load average at the end: {timing.load_average():.2f}")


if __name__ == "__main__":
    main()
