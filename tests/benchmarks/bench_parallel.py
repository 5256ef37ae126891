"""Does splitting pay? Each split kernel, the split attention core and whole training steps
against their serial twins, in one process, at each thread count. A script, not a test:

    python3 tests/benchmarks/bench_parallel.py [--threads 2,4,8] [--only kernels,attention,lm]
        [--rounds 7] [--min-share N] [--quick]

At each thread count (ag.set_threads: the BLAS and the kernels' pool; the BLAS is pinned to
the largest count before numpy loads; by default the counts 2, 4, 8, 16 up to the cores: above
them the threads share cores, and OpenBLAS's spin while they wait), each case is timed in alternating blocks
(timing.alternating_blocks) with the split forced on one side (kernels.parallel.splitting:
from 1 thread on, shares of at least --min-share entries, default the library's MIN_SHARE)
and off on the other, so that both sides see the same load and the same BLAS threads.
At 2 threads this is "split at 2 threads" against today's arrangement (serial kernels, the
BLAS with both threads). Reported: ms per call of each side, the median ratio split /
serial over the rounds with its quartiles (below 1: splitting pays), and the most shares one
call handed to the pool (0: the sizes are below --min-share, so both sides ran serially).

Cases (float32, the workloads' sizes, tests/benchmarks/workloads.py): `kernels`, each split
kernel at w2's and w3's rows; `attention`, the attention core's forward and backward
(sublayers.multihead_attention_forward and _backward) at the LM's, w2's and w3's shapes; and
each workload key of `--only` (w1, w2, w3, lm), its training step. --quick: 2 rounds of short
blocks, the LM's sizes only unless --only says otherwise: checks the machinery.
"""
import argparse
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402  (standard library only: numpy is not loaded yet)


def thread_counts_from_argv():
    """--threads's counts; by default 2, 4, 8 and 16 up to the cores (above them OpenBLAS's
    spinning threads and the pool's would share the cores: figures of nothing)."""
    args = sys.argv[1:]
    if "--threads" in args:
        return [int(n) for n in args[args.index("--threads") + 1].split(",")]
    return [n for n in (2, 4, 8, 16) if n <= max(2, len(os.sched_getaffinity(0)))]


THREAD_COUNTS = thread_counts_from_argv()
timing.pin_threads(max(THREAD_COUNTS))
import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
from autograd_lite.kernels import parallel  # noqa: E402
from models.fast import sublayers  # noqa: E402
import workloads  # noqa: E402

NEVER = 10**9  # a SPLIT_FROM_THREADS no machine reaches: the serial side


def kernel_cases(rng, sizes):
    """(name, call) for each split kernel at (rows, width) of `sizes` (float32)."""
    k = ag.kernels
    cases = []
    for rows, width in sizes:
        x, y = (rng.standard_normal((rows, width)).astype(np.float32) for _ in range(2))
        scale, bias = np.ones(width, np.float32), np.zeros(width, np.float32)
        _, saved = k.layer_norm_forward(x, scale, bias, 1e-5)
        hidden = rng.standard_normal((rows, 4 * width)).astype(np.float32)
        b4 = np.zeros(4 * width, np.float32)
        logits = rng.standard_normal((rows, 8 * width)).astype(np.float32)
        labels = rng.integers(0, 8 * width, rows)
        _, _, entropy_saved = k.cross_entropy_forward(logits, labels)
        weights = np.full(rows, 1 / rows, np.float32)
        shape = f"({rows}, {width})"
        cases += [
            (f"layer_norm_forward {shape}", lambda: k.layer_norm_forward(x, scale, bias, 1e-5)),
            (f"residual_layer_norm_forward {shape}",
             lambda: k.residual_layer_norm_forward(x, y, scale, bias, 1e-5)),
            (f"layer_norm_backward {shape}", lambda: k.layer_norm_backward(y, saved, scale)),
            (f"add_bias ({rows}, {4 * width})", lambda: k.add_bias(hidden.copy(), b4)),
            (f"bias_relu_forward ({rows}, {4 * width})",
             lambda: k.bias_relu_forward(hidden.copy(), b4)),
            (f"relu_forward ({rows}, {4 * width})", lambda: k.relu_forward(hidden)),
            (f"relu_backward ({rows}, {4 * width})",
             lambda: k.relu_backward(hidden, hidden > 0)),
            (f"cross_entropy_forward ({rows}, {8 * width})",
             lambda: k.cross_entropy_forward(logits, labels)),
            (f"cross_entropy_backward ({rows}, {8 * width})",
             lambda: k.cross_entropy_backward(entropy_saved, labels, 0.0, weights)),
        ]
    return cases


def optimizer_case(key):
    """Adam over the workload's parameters, in place (its chunks in shares)."""
    workload = workloads.build(key)
    params = ag.tree_map(lambda a: a.copy() if isinstance(a, np.ndarray) else a,
                         workload.params)
    grads = ag.tree_map(lambda a: np.full_like(a, 1e-3) if ag.is_differentiable(a) else None,
                        params)
    adam = ag.optim.adam(1e-4)
    state = adam.init(params)
    return f"adam in place, {key}'s parameters", lambda: adam.update(params, grads, state,
                                                                     in_place=True)


ATTENTION_SHAPES = {  # (B, H, T, d_head, causal)
    "lm": (16, 4, 64, 16, True), "w2": (32, 4, 32, 32, False), "w3": (16, 8, 64, 64, False)}


def attention_case(key, rng):
    """The self-attention sublayer's forward and backward at a workload's shape."""
    batch, n_heads, length, d_head, causal = ATTENTION_SHAPES[key]
    d = n_heads * d_head
    x = rng.standard_normal((batch, length, d)).astype(np.float32)
    weights = tuple(rng.standard_normal(shape).astype(np.float32) / np.sqrt(d)
                    for _ in range(4) for shape in ((d, d), (d,)))
    mask = np.tril(np.ones((1, 1, length, length), bool)) if causal else None
    g = rng.standard_normal(x.shape).astype(np.float32)

    def forward_and_backward():
        _, saved = sublayers.multihead_attention_forward(x, x, weights, n_heads, mask)
        return sublayers.multihead_attention_backward(g, saved)
    return (f"attention {key} (B {batch}, {n_heads} heads, {length} tokens, d_head {d_head}) "
            f"fwd+bwd", forward_and_backward)


def step_case(key):
    step = workloads.OurStep(workloads.build(key))
    return f"{key} training step", step.step


def cases(only, quick):
    rng = np.random.default_rng(0)
    found = []
    if "kernels" in only:
        sizes = [(16 * 64, 64)] if quick else [(32 * 32, 128), (16 * 64, 512)]
        found += kernel_cases(rng, sizes)
        found.append(optimizer_case("lm" if quick else "w2"))
    if "attention" in only:
        found += [attention_case(key, rng) for key in (["lm"] if quick else ATTENTION_SHAPES)]
    found += [step_case(key) for key in only if key in workloads.BUILDERS]
    return found


def most_shares(call, min_share):
    """The most shares one hand-off to the pool carried during a call with the split forced."""
    handed, real = [0], parallel.Pool.run

    def counting(pool, calls):
        handed[0] = max(handed[0], len(calls))
        return real(pool, calls)
    parallel.Pool.run = counting
    try:
        with parallel.splitting(1, min_share):
            call()
    finally:
        parallel.Pool.run = real
    return handed[0]


def measure(name, call, args):
    """Split against serial at the current thread count -> the summary, with the shares."""
    def split():
        with parallel.splitting(1, args.min_share):
            call()

    def serial():
        with parallel.splitting(NEVER):
            call()
    summary = timing.alternating_blocks(split, serial, rounds=args.rounds, pause=args.pause,
                                        block_seconds=args.block_seconds).summary()
    return {"case": name, "shares": most_shares(call, args.min_share), **summary}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default=",".join(map(str, THREAD_COUNTS)),
                        help="thread counts, comma-separated (default: 2, 4, 8, 16 up to the "
                             "cores)")
    parser.add_argument("--only", default=None,
                        help="comma-separated: kernels, attention, and workloads (w1, w2, w3, "
                             "lm) for their training steps (default: kernels,attention,w2,lm; "
                             "--quick: kernels,attention,lm)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pause", type=float, default=0.2)
    parser.add_argument("--block-seconds", type=float, default=0.3)
    parser.add_argument("--min-share", type=int, default=parallel.MIN_SHARE,
                        help="the split side's shares hold at least this many entries")
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds of short blocks at the LM's sizes: checks the machinery")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.pause, args.block_seconds = 2, 0.05, 0.05
    only = (args.only or ("kernels,attention,lm" if args.quick
                          else "kernels,attention,w2,lm")).split(",")
    ag.memory.keep_freed_memory()
    found = cases(only, args.quick)
    rows = []
    for n in THREAD_COUNTS:
        ag.set_threads(n)
        print(timing.describe_environment(timing.environment()), flush=True)
        print(f"\n{n} threads: split / serial\n| case | shares | split ms | serial ms | "
              f"split / serial (quartiles) |\n|---|---|---|---|---|")
        for name, call in found:
            row = {"threads": n, **measure(name, call, args)}
            rows.append(row)
            print(f"| {name} | {row['shares']} | {row['ms_a']:.3f} | {row['ms_b']:.3f} | "
                  f"{row['ratio']:.2f} ({row['ratio_q1']:.2f} - {row['ratio_q3']:.2f}) |",
                  flush=True)
    end_load = timing.load_average()
    print(f"load average at the end: {end_load:.2f}")
    timing.emit({"thread_counts": THREAD_COUNTS, "min_share": args.min_share,
                 "end_load": end_load, "rows": rows})


if __name__ == "__main__":
    main()
