"""Training steps of the three models, autograd_lite vs PyTorch, in one process.

One step = forward, cross-entropy loss, backward, Adam update, float32, at the
sizes this project is made for (the review classifier's seed configuration, a
small character LM, a small encoder-decoder). The PyTorch side is the same
architecture: torch_bridge's module for the transformer, nn.TransformerEncoderLayer
stacks for the others, with the same weights. Reported: milliseconds per step
(median) and the median ratio autograd_lite / PyTorch over adjacent steps (the two
alternate, so a change in the machine's speed affects both). A script, not a test:

    python3 tests/benchmarks/bench_models.py [--repeats 15] [--threads 1] [--only lm]
                                             [--system-malloc]

It calls ag.memory.keep_freed_memory() first, as a training loop would; --system-malloc
leaves glibc's malloc settings alone, to measure what that call is worth.

Both libraries get the same number of threads (numpy's OpenBLAS through
OPENBLAS_NUM_THREADS, set before numpy loads; torch through set_num_threads).
Two busy-waiting thread pools in one process on a small machine slow each other
down unpredictably, so the default is one thread each: the frameworks' own costs.
"""
import argparse
import math
import os
import pathlib
import statistics
import sys
import time


def _threads_from_argv(default=1):
    args = sys.argv[1:]
    return int(args[args.index("--threads") + 1]) if "--threads" in args else default


os.environ["OPENBLAS_NUM_THREADS"] = str(_threads_from_argv())  # before numpy loads OpenBLAS
import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # the repository, uninstalled
import autograd_lite as ag  # noqa: E402
from models import classifier, layers, lm, transformer  # noqa: E402


def _seconds(step):
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def paired_ms(ours, reference, repeats, warmup=3):
    """Median step times (ms) of both, and the median of the per-pair ratios. The two steps
    alternate, so that a change in the machine's speed (other load, clock) affects both."""
    for _ in range(warmup):
        ours(), reference()
    pairs = [(_seconds(ours), _seconds(reference)) for _ in range(repeats)]
    a, b = zip(*pairs)
    return (1e3 * statistics.median(a), 1e3 * statistics.median(b),
            statistics.median(x / y for x, y in pairs))


def ag_step(loss, params):
    """A closure doing one Adam step on `params` (kept in a one-element list)."""
    opt = ag.optim.adam(1e-4)
    state = [params, opt.init(params)]

    def step():
        grads = ag.gradient(loss, state[0])[0]
        state[0], state[1] = opt.update(state[0], grads, state[1])
    return step


def torch_step(torch, module, loss):
    opt = torch.optim.Adam(module.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        loss().backward()
        opt.step()
    return step


class TorchEncoderStack:
    """Embedding (optionally × √D) + PE, nn.TransformerEncoderLayer blocks, built lazily
    so that torch is imported only here."""

    @staticmethod
    def build(torch, vocab, d, heads, d_ff, n_layers, norm_first, max_len, scale):
        nn = torch.nn

        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(vocab, d)
                self.blocks = nn.ModuleList(
                    nn.TransformerEncoderLayer(d, heads, d_ff, 0.0, batch_first=True,
                                               norm_first=norm_first) for _ in range(n_layers))
                pe = np.array(layers.position_encoding(max_len, d, np.float32))
                self.register_buffer("pe", torch.from_numpy(pe))
                self.scale = math.sqrt(d) if scale else 1.0

            def forward(self, ids, mask=None, pad=None):
                x = self.embed(ids) * self.scale + self.pe[:ids.shape[1]]
                for block in self.blocks:
                    x = block(x, src_mask=mask, src_key_padding_mask=pad)
                return x
        return Stack()


def classifier_case(torch, rng, batch):
    """The posts' model: vocab 7455, D 32, 4 heads, d_ff 128, 1 block, 50 tokens, 5 labels."""
    p = classifier.init(rng, 7455, 5, dropout=0.0)
    ids = rng.integers(0, 7455, (batch, 50))
    labels = rng.integers(0, 5, batch)
    ours = ag_step(lambda p: ag.cross_entropy(classifier.apply(p, ids), labels), p)

    nn = torch.nn
    stack = TorchEncoderStack.build(torch, 7455, 32, 4, 128, 1, False, 50, scale=False)
    agg, head = nn.Linear(32, 1), nn.Linear(50, 5)
    module = nn.ModuleList([stack, agg, head])
    ids_t, labels_t = torch.from_numpy(ids), torch.from_numpy(labels)
    reference = torch_step(torch, module, lambda: nn.functional.cross_entropy(
        head(agg(stack(ids_t)).squeeze(-1)), labels_t))
    return ours, reference


def lm_case(torch, rng, batch):
    """A character LM: vocab 65, D 64, 4 heads, d_ff 256, 2 pre-LN blocks, 64 tokens."""
    p = lm.init(rng, 65, 64, 4, 256, 2, 64)
    ids = rng.integers(0, 65, (batch, 65))
    x, y = ids[:, :-1], ids[:, 1:]
    ours = ag_step(lambda p: ag.cross_entropy(lm.apply(p, x), y), p)

    nn = torch.nn
    stack = TorchEncoderStack.build(torch, 65, 64, 4, 256, 2, True, 64, scale=True)
    norm, head = nn.LayerNorm(64), nn.Linear(64, 65)
    module = nn.ModuleList([stack, norm, head])
    causal = torch.triu(torch.ones(64, 64, dtype=torch.bool), 1)
    x_t, y_t = torch.from_numpy(x), torch.from_numpy(y)
    reference = torch_step(torch, module, lambda: nn.functional.cross_entropy(
        head(norm(stack(x_t, mask=causal))).reshape(-1, 65), y_t.reshape(-1)))
    return ours, reference


def transformer_case(torch, rng, batch):
    """A small encoder-decoder: vocabularies 64, D 64, 4 heads, d_ff 256, 2 + 2 blocks, 24 tokens."""
    from models import torch_bridge
    p = transformer.init(rng, 64, 64, d_model=64, n_heads=4, d_ff=256, n_encoder=2, n_decoder=2,
                         max_len=32, dropout=0.0)
    src = rng.integers(1, 64, (batch, 24))
    src[:, 20:] = 0
    tgt = rng.integers(1, 64, (batch, 25))
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    ours = ag_step(lambda p: ag.cross_entropy(transformer.apply(p, src, tgt_in, src_pad=0),
                                              tgt_out), p)

    module = torch_bridge.torch_module_for(p)
    src_t, tin_t, tout_t = (torch.from_numpy(a) for a in (src, tgt_in, tgt_out))
    reference = torch_step(torch, module, lambda: torch.nn.functional.cross_entropy(
        module(src_t, tin_t, src_pad=0).reshape(-1, 64), tout_t.reshape(-1)))
    return ours, reference


CASES = {"classifier (B=32)": (classifier_case, 32), "lm (B=16)": (lm_case, 16),
         "transformer (B=16)": (transformer_case, 16)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="threads for each library")
    parser.add_argument("--only", choices=[name.split()[0] for name in CASES],
                        help="run one model only")
    parser.add_argument("--system-malloc", action="store_true",
                        help="do not call ag.memory.keep_freed_memory()")
    args = parser.parse_args()
    if not args.system_malloc:
        ag.memory.keep_freed_memory()
    import torch
    torch.set_num_threads(args.threads)
    print(f"{'model':22s} {'autograd_lite':>14s} {'PyTorch':>10s} {'ratio':>7s}")
    for name, (case, batch) in CASES.items():
        if args.only and not name.startswith(args.only + " "):
            continue
        ours, reference = case(torch, np.random.default_rng(0), batch)
        a, b, ratio = paired_ms(ours, reference, args.repeats)
        print(f"{name:22s} {a:11.2f} ms {b:7.2f} ms {ratio:7.2f}")


if __name__ == "__main__":
    main()
