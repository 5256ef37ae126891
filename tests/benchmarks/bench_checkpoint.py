"""What ag.checkpoint saves: peak memory of one training step of the paper's base
encoder-decoder (d_model 512, 8 heads, d_ff 2048, 6 + 6 blocks, dropout 0.1; vocabularies
8000 and 8000, source and target 64 tokens, batch 16; float32, Adam), with every encoder
and decoder block checkpointed against without.

The blocks are wrapped here, not in models/: models.transformer's encoder_block and
decoder_block are replaced by ag.checkpoint of themselves. Each variant runs in a fresh
process (one thread): one step timed, then one step measured with tracemalloc (numpy
reports its array allocations to it): the peak of what the step allocates on top of the
parameters and Adam state it starts from; and the process's peak RSS over the timed step
(/proc/self/clear_refs, Linux). A script, not a test:

    python3 tests/benchmarks/bench_checkpoint.py [--batch 16] [--length 64]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MIB = 2 ** 20


class TrainingStep:
    """One training step of the base transformer, in two parts: forward, cross-entropy and
    backward (`gradient`), then Adam (`update`)."""

    def __init__(self, checkpointed, batch, length, vocab=8000):
        import numpy as np

        import autograd_lite as ag
        from models import blocks, transformer

        if checkpointed:
            transformer.encoder_block = ag.checkpoint(blocks.encoder_block)
            transformer.decoder_block = ag.checkpoint(blocks.decoder_block)
        rng = np.random.default_rng(0)
        self.params = transformer.init(rng, vocab, vocab, max_len=length + 1, **transformer.BASE)
        src = rng.integers(1, vocab, (batch, length))
        tgt = rng.integers(1, vocab, (batch, length + 1))
        dropout_rng = np.random.default_rng(1)
        self.optimizer = ag.optim.adam(1e-4)
        self.state = self.optimizer.init(self.params)

        def loss(p):
            logits = transformer.apply(p, src, tgt[:, :-1], src_pad=0, training=True,
                                       rng=dropout_rng)  # (B, T, vocab)
            return ag.cross_entropy(logits, tgt[:, 1:])
        self.loss = loss
        self.ag = ag

    def held_bytes(self):
        """The arrays the step starts from: parameters and Adam state."""
        return sum(leaf.nbytes for leaf in self.ag.tree_leaves((self.params, self.state))
                   if hasattr(leaf, "nbytes"))

    def gradient(self):
        return self.ag.value_and_gradient(self.loss, self.params, argnums=0)

    def update(self, grads):
        self.params, self.state = self.optimizer.update(self.params, grads, self.state)


def measure(checkpointed, batch, length):
    """A first step timed, with the process's peak RSS over it; then the tracemalloc peaks
    of a second one (MiB)."""
    import gc
    import time
    import tracemalloc

    from timing import peak_rss_mib, reset_peak_rss

    step = TrainingStep(checkpointed, batch, length)
    gc.collect()
    rss = reset_peak_rss()
    start = time.perf_counter()
    loss, grads = step.gradient()
    gradient_rss = peak_rss_mib() if rss else float("nan")
    step.update(grads)
    seconds = time.perf_counter() - start
    step_rss = peak_rss_mib() if rss else float("nan")
    del grads
    gc.collect()
    held = step.held_bytes()
    tracemalloc.start()  # sees what is allocated from here on: the step's own arrays
    _, grads = step.gradient()
    gradient_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    step.update(grads)
    update_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"seconds": seconds, "loss": float(loss), "held_mib": held / MIB,
            "gradient_peak_mib": gradient_peak / MIB,
            "step_peak_mib": max(gradient_peak, update_peak) / MIB,
            "gradient_rss_mib": gradient_rss, "step_rss_mib": step_rss}


def run_child(checkpointed, batch, length):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--child", str(int(checkpointed)),
                          "--batch", str(batch), "--length", str(length)], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(measure(bool(args.child), args.batch, args.length)))
        return
    print(f"base transformer (d 512, 6 + 6 blocks, vocab 8000), batch {args.batch}, "
          f"{args.length} tokens, float32, one thread; one training step")
    print(f"{'':>13} {'held':>9} {'gradient peak':>14} {'step peak':>10} "
          f"{'gradient RSS':>13} {'step RSS':>9} {'seconds':>8} {'loss':>7}")
    for checkpointed in (False, True):
        r = run_child(checkpointed, args.batch, args.length)
        name = "checkpointed" if checkpointed else "plain"
        print(f"{name:>13} {r['held_mib']:>5.0f} MiB {r['gradient_peak_mib']:>10.0f} MiB "
              f"{r['step_peak_mib']:>6.0f} MiB {r['gradient_rss_mib']:>9.0f} MiB "
              f"{r['step_rss_mib']:>5.0f} MiB "
              f"{r['seconds']:>8.1f} {r['loss']:>7.4f}")
    print("held: parameters and Adam state before the step. gradient peak: the most memory "
          "allocated at once\nduring forward + backward (tracemalloc, the gradients "
          "included), on top of what is held;\nstep peak: the same over the whole step, "
          "where Adam's update (new parameters and moments)\nmay set it. gradient RSS, step RSS: the "
          "process's peak resident memory over the\nforward + backward and over the whole of "
          "the first (timed) step, all memory included.")


if __name__ == "__main__":
    main()
