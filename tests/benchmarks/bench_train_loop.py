"""The training loop's own cost: train.fit against the bare steps it wraps.

On the seed classifier (classifier.init(rng, 7455, 5): D 32, 4 heads, one block, 50
tokens, dropout 0.1), batch 32, Adam. `train.fit` runs (progress bar to a null device,
history, per-step rng, NaN guard, epoch means; no out_dir) on an iterator of batches that,
before handing out each batch, runs and times one bare step on it in a separate copy of the
parameters (value_and_gradient, then update, one Generator for the dropout). So fit's steps
and bare steps alternate one to one, and each fit step is timed alone, from handing out its
batch to fit asking for the next. The loop's overhead is the median over fit's steps of
fit step / (mean of the bare steps just before and just after it) - 1: a shared machine's
load changes within seconds and affects neighbours alike. A control runs a bare loop in
fit's place: its figure, zero in a quiet machine, is the method's error. The costs that
come once an epoch (the progress bar opened and closed, the epoch's record) are reported
apart. Because a 2% difference is near that error on a busy machine, the loop's cost is
also measured by parts: fit against bare steps on a one-parameter model, whose step costs
almost nothing (everything fit adds but the NaN guard, whose cost grows with the model),
plus the NaN guard timed on the classifier's gradient. A script, not a test:

    python3 tests/benchmarks/bench_train_loop.py [--epochs 10] [--steps 50]
"""
import argparse
import contextlib
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads: the loop, not BLAS threads
import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # the repository, uninstalled
import autograd_lite as ag  # noqa: E402
from models import classifier, train  # noqa: E402


def classifier_case(steps):
    """(loss_fn, params, batches): the seed classifier and `steps` batches of 32 reviews."""
    rng = np.random.default_rng(0)
    params = classifier.init(rng, 7455, 5)
    batches = [(rng.integers(0, 7455, (32, 50)), rng.integers(0, 5, 32)) for _ in range(steps)]

    def loss_fn(p, batch, rng):
        ids, labels = batch
        return ag.cross_entropy(classifier.apply(p, ids, training=True, rng=rng), labels)
    return loss_fn, params, batches


def scalar_case(steps):
    """A one-parameter least squares: a step of a few hundred microseconds at most."""
    params = np.zeros(1, np.float32)
    batches = [(np.ones(32, np.float32), np.full(32, 2.0, np.float32)) for _ in range(steps)]

    def loss_fn(w, batch, rng):
        x, y = batch
        return ag.mean((x * w - y) ** 2)
    return loss_fn, params, batches


class BareSteps:
    """value_and_gradient, then the optimizer's update, on its own copy of the parameters."""

    def __init__(self, loss_fn, params):
        self.loss_fn, self.params, self.optimizer = loss_fn, params, ag.optim.adam(1e-3)
        self.state, self.rng = self.optimizer.init(params), np.random.default_rng(0)

    def seconds(self, batch):
        start = time.perf_counter()
        _, (grads,) = ag.value_and_gradient(lambda p: self.loss_fn(p, batch, self.rng), self.params)
        self.params, self.state = self.optimizer.update(self.params, grads, self.state)
        return time.perf_counter() - start


def bare_fit(loss_fn, params, optimizer, batches, epochs):
    """The control: fit's signature, the bare steps' work (their own timing included)."""
    bare = BareSteps(loss_fn, params)
    for epoch in range(epochs):
        for batch in batches(epoch):
            bare.seconds(batch)


def measure(trainer, case, epochs):
    """[(step seconds of trainer, mean seconds of the bare steps just before and after it)],
    and the trainer's seconds outside its steps and the bare ones."""
    loss_fn, params, batches = case
    bare, steps, bare_steps = BareSteps(loss_fn, params), [], []

    def interleaved(epoch):
        for i, batch in enumerate(batches):
            if i:
                steps.append(time.perf_counter() - handed_out)
            bare_steps.append(bare.seconds(batch))
            handed_out = time.perf_counter()
            yield batch
        steps.append(time.perf_counter() - handed_out)

    start = time.perf_counter()
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        trainer(loss_fn, params, ag.optim.adam(1e-3), interleaved, epochs)
    outside = time.perf_counter() - start - sum(steps) - sum(bare_steps)
    pairs = [(steps[i], (bare_steps[i] + bare_steps[i + 1]) / 2) for i in range(len(steps))
             if (i + 1) % len(batches)]  # an epoch's last step has no bare step after it
    return pairs, outside


def relative(pairs):
    """'median% (quartiles low%, high%)' of step / bare - 1 over the pairs."""
    low, median, high = statistics.quantiles([a / b - 1 for a, b in pairs], n=4)
    return f"{100 * median:+.2f}% (quartiles {100 * low:+.2f}%, {100 * high:+.2f}%)"


def nan_guard_microseconds(case, repeats=200):
    """fit's NaN guard on the classifier's gradient: Σ g·g, one BLAS dot a leaf."""
    loss_fn, params, batches = case
    _, (grads,) = ag.value_and_gradient(
        lambda p: loss_fn(p, batches[0], np.random.default_rng(0)), params)
    leaves = [g for g in ag.tree_leaves(grads) if isinstance(g, np.ndarray)]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        sum(float(np.vdot(g, g)) for g in leaves)
        times.append(time.perf_counter() - start)
    return 1e6 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=50, help="steps an epoch")
    args = parser.parse_args()
    measure(train.fit, scalar_case(5), 1)  # warm-up: imports, first calls
    case = classifier_case(args.steps)

    pairs, outside = measure(train.fit, case, args.epochs)
    bare_us = 1e6 * statistics.median(bare for _, bare in pairs)
    print(f"seed classifier, batch 32, {len(pairs)} steps: bare step {bare_us / 1e3:.2f} ms; "
          f"fit step / bare step - 1: {relative(pairs)}; once an epoch: "
          f"{1e3 * outside / args.epochs:.1f} ms")
    control, _ = measure(bare_fit, case, args.epochs)
    print(f"  control, a bare loop in fit's place (the method's own error): {relative(control)}")

    pairs, _ = measure(train.fit, scalar_case(args.steps), args.epochs)
    loop_us = 1e6 * statistics.median(step - bare for step, bare in pairs)
    guard_us = nan_guard_microseconds(case)
    print(f"one-parameter model: fit adds {loop_us:.1f} us a step (rng, has_aux, progress, "
          f"history); with the NaN guard on the classifier's gradient ({guard_us:.1f} us): "
          f"{100 * (loop_us + guard_us) / bare_us:.2f}% of the classifier's bare step")


if __name__ == "__main__":
    main()
