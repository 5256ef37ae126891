"""vmap against Python loops: per-example gradients of the seed classifier (vocab 7455, D 32,
4 heads, d_ff 128, one block, 50 tokens, B 32; float32) through ag.vmap(ag.grad(loss)), beside
one batched gradient and a loop of 32 single-example gradients; and the Jacobians of a
64 -> 64 MLP at each of 32 examples through ag.vmap(ag.jacobian) against the loop over the
examples of the loop of one vjp per output element that ag.jacobian was before. Alternating blocks (timing.alternating_blocks); the figures
are ratios of medians, with quartiles. A script, not a test:

    python3 tests/benchmarks/bench_vmap.py [--threads 1] [--rounds 7]
"""
import argparse
import json

import timing

timing.pin_threads(timing.threads_from_argv(default=1))

import numpy as np  # noqa: E402  (after pin_threads)

import autograd_lite as ag  # noqa: E402
from models import classifier  # noqa: E402


def classifier_sides(batch=32):
    rng = np.random.default_rng(0)
    p = classifier.init(rng, 7455, 5, dropout=0.0)
    ids, labels = rng.integers(0, 7455, (batch, 50)), rng.integers(0, 5, batch)

    def loss(p, ids, labels):
        return ag.cross_entropy(classifier.apply(p, ids), labels)

    def example_loss(p, ids, label):
        return loss(p, ids[None], label[None])
    per_example = ag.vmap(ag.grad(example_loss), in_axes=(None, 0, 0))
    one = ag.grad(example_loss)
    return {"batched": lambda: ag.grad(loss)(p, ids, labels),
            "vmap": lambda: per_example(p, ids, labels),
            "loop": lambda: [one(p, ids[i], labels[i]) for i in range(batch)]}


def mlp_sides(batch=32, width=64):
    """Each example's Jacobian of a 64 -> 64 MLP, (32, 64, 64): ag.vmap of ag.jacobian (its
    rows one batched backward pass, the examples another axis of it) against the loop over
    the examples of the loop of one vjp per output element that ag.jacobian was before."""
    rng = np.random.default_rng(1)
    w1, w2 = rng.standard_normal((2, width, width)) / np.sqrt(width)

    def mlp(x):  # (64,) -> (64,)
        return ag.tanh(ag.tanh(x @ w1) @ w2)
    xs = rng.standard_normal((batch, width))

    def jacobian_by_vjps(x):
        out, pullback = ag.vjp(mlp, x)
        rows = []
        for k in range(out.size):
            seed = np.zeros(out.size)
            seed[k] = 1
            rows.append(pullback(seed.reshape(out.shape))[0])
        return np.stack(rows).reshape(out.shape + x.shape)
    per_example = ag.vmap(ag.jacobian(mlp))
    assert np.allclose(per_example(xs), [jacobian_by_vjps(x) for x in xs], rtol=1e-10)
    return {"jacobian": lambda: per_example(xs),
            "loop": lambda: [jacobian_by_vjps(x) for x in xs]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    env = timing.environment()
    c, m = classifier_sides(), mlp_sides()
    results = {
        "vmap / batched gradient": timing.alternating_blocks(c["vmap"], c["batched"], args.rounds),
        "loop / vmap": timing.alternating_blocks(c["loop"], c["vmap"], args.rounds),
        "jacobian loop / vmap": timing.alternating_blocks(m["loop"], m["jacobian"], args.rounds),
    }
    print(timing.describe_environment(env))
    for name, block in results.items():
        s = block.summary()
        print(f"{name}: {s['ratio']:.2f} (quartiles {s['ratio_q1']:.2f} – {s['ratio_q3']:.2f}); "
              f"{s['ms_a']:.1f} ms against {s['ms_b']:.1f} ms, {s['rounds']} rounds of {s['k']}")
    print(json.dumps({name: b.summary() for name, b in results.items()}))


if __name__ == "__main__":
    main()
