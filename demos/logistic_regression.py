"""python -m demos.logistic_regression: the smallest model, trained with ag.gradient.

    python -m demos.logistic_regression           # 1,000 steps of gradient descent, a second
    python -m demos.logistic_regression --quick   # 200 steps

Points x drawn uniformly from the unit square, labelled 1 below the line x1 + x2 = 1 and
0 above it. The model is P(y = 1 | x) = σ(x·w + b); full-batch gradient descent on the
binary cross-entropy learns a w and b whose line w·x + b = 0 is that diagonal. The last
line printed is the accuracy on 1,000 fresh points (a constant guess gets about half).
Saved in --out (default runs/logistic_regression-<timestamp>/): model.npz (ag.save).
"""
if __name__ == "__main__":  # a program's choice, made before numpy loads BLAS; never on import
    from .support import program
    program.start("logistic_regression")

import sys  # noqa: E402
from typing import NamedTuple  # noqa: E402

import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402

from .support import common, program  # noqa: E402

FULL = dict(steps=1000, lr=2.0, n=1000)
QUICK = dict(steps=200, lr=2.0, n=1000)


class Logistic(NamedTuple):
    w: np.ndarray  # (2,)
    b: np.ndarray  # ()


def points(rng, n):
    """n points of the unit square and their labels: x (n, 2), y (n,) = 1.0 where x1 + x2 < 1."""
    x = rng.uniform(0.0, 1.0, size=(n, 2))  # (n, 2)
    return x, (x.sum(axis=1) < 1).astype(np.float64)  # (n,)


def logits(p, x):
    """z = x·w + b, the log-odds of label 1.  x (n, 2) -> (n,)"""
    return ag.sum(x * p.w, axis=1) + p.b


def loss(p, x, y):
    """The binary cross-entropy -y log σ(z) - (1 - y) log(1 - σ(z)), mean over the points,
    written as log(1 + e^z) - y z, with log(1 + e^z) = max(z, 0) + log(1 + e^-|z|): no
    overflow for any z."""
    z = logits(p, x)  # (n,)
    return ag.mean(ag.maximum(z, 0.0) + ag.log(1 + ag.exp(-ag.abs(z))) - y * z)


def train(p, x, y, steps, lr):
    """Gradient descent: p <- p - lr ∇loss(p), on the whole set each step. -> p"""
    for step in range(1, steps + 1):
        value, (grads, _, _) = ag.value_and_gradient(loss, p, x, y)
        p = ag.tree_map(lambda w, g: w - lr * g, p, grads)
        if step == 1 or step % (steps // 5) == 0:
            print(f"step {step:>5}/{steps}  loss {float(value):.4f}", flush=True)
    return p


def accuracy(p, x, y):
    """The fraction of points on the right side of the learned line (z > 0 predicts 1)."""
    return float(np.mean((logits(p, x) > 0) == (y == 1)))


def parse_args(argv=None):
    parser = common.argument_parser("logistic_regression", __doc__)
    parser.add_argument("--steps", type=int, default=None, help="full: 1000, --quick: 200")
    parser.add_argument("--lr", type=float, default=None, help="the step size (2.0)")
    args = parser.parse_args(argv)
    common.check_options(parser, args, rates=("lr",))
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    if args.steps < 5:
        parser.error(f"--steps must be at least 5, got {args.steps}")
    common.check_output_folder(parser, common.output_path(args, "logistic_regression"))
    return args


def main(argv=None):
    args = parse_args(argv)
    common.use_threads(args)
    out = common.output_directory(args, "logistic_regression")
    rng = np.random.default_rng(args.seed)
    x, y = points(rng, args.n)
    p = train(Logistic(np.zeros(2), np.zeros(())), x, y, args.steps, args.lr)
    try:
        ag.save(out / "model.npz", p)
    except OSError as error:  # a full disk: one line naming the file
        sys.exit(common.one_line_error("logistic_regression", error))
    a1, a2 = -p.w / p.b  # w·x + b = 0 is a·x = 1
    print(f"learned line: {a1:.3f} x1 + {a2:.3f} x2 = 1 (the labels' line: x1 + x2 = 1); "
          f"saved {out / 'model.npz'}")
    x_test, y_test = points(rng, 1000)
    common.print_result(f"test accuracy: {100 * accuracy(p, x_test, y_test):.1f}% "
                        f"(1,000 fresh points; a constant guess gets "
                        f"{100 * max(y_test.mean(), 1 - y_test.mean()):.1f}%)")


if __name__ == "__main__":
    program.run("logistic_regression", main)
