"""The cost of training health (models/training/health.py): one health record against one training
step, on the models of the three demos at their full-run sizes.

A record is what fit adds on a step where health is due: the gradient norms by group,
a copy of the parameters, and the update ratios. Each side is timed in alternation, the
step (value_and_gradient, clipping, Adam) then the record on that step's gradients, and
the medians are compared: the cost per step at health_every=N is record / (N · step).
A script, not a test:

    python3 tests/benchmarks/bench_health.py [--rounds 30] [--every 10]
"""
import argparse
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the demos run
import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # the repository, uninstalled
import autograd_lite as ag  # noqa: E402
from models import classifier, health, lm, transformer  # noqa: E402


def cases(rng):
    """{name: (params, loss of params)} at the demos' full-run sizes."""
    translate = transformer.init(rng, 13, 40, d_model=64, n_heads=4, d_ff=256, n_encoder=2,
                                 n_decoder=2, max_len=12, norm="pre")
    src, tgt = rng.integers(3, 13, (64, 10)), rng.integers(3, 40, (64, 12))
    generate = lm.init(rng, 80, d_model=96, n_heads=4, d_ff=384, n_layers=2, max_len=128)
    text = rng.integers(0, 80, (16, 129))
    classify = classifier.init(rng, 7455, 5)
    ids, labels = rng.integers(0, 7455, (32, 50)), rng.integers(0, 5, 32)
    return {
        "translate": (translate, lambda p: ag.cross_entropy(
            transformer.apply(p, src, tgt[:, :-1]), tgt[:, 1:])),
        "generate": (generate, lambda p: ag.cross_entropy(lm.apply(p, text[:, :-1]),
                                                          text[:, 1:])),
        "classify": (classify, lambda p: ag.cross_entropy(classifier.apply(p, ids), labels)),
    }


def measure(params, loss, rounds):
    """(median step seconds, median record seconds) over `rounds` alternations."""
    optimizer = ag.optim.adam(1e-3)
    state, groups = optimizer.init(params), health.parameter_groups(params)
    steps, records = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        _, (grads) = ag.value_and_gradient(loss, params)
        grads = grads[0]
        clipped = ag.optim.clip_by_global_norm(grads, 1.0)
        new_params, state = optimizer.update(params, clipped, state)
        steps.append(time.perf_counter() - start)
        start = time.perf_counter()
        record = health.gradient_health(grads, groups, 1.0)
        before = health.snapshot(params, groups)
        record["update_ratio"] = health.update_ratios(before, new_params, groups)
        records.append(time.perf_counter() - start)
        params = new_params
    return statistics.median(steps), statistics.median(records)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--every", type=int, default=10, help="health_every")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, (params, loss) in cases(np.random.default_rng(0)).items():
        step, record = measure(params, loss, args.rounds)
        print(f"{name:10s} step {1000 * step:7.1f} ms, record {1000 * record:6.2f} ms: "
              f"{100 * record / step:5.2f}% of a step at every step, "
              f"{100 * record / (args.every * step):5.3f}% at health_every={args.every}")


if __name__ == "__main__":
    main()
