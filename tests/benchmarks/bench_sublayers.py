"""The forward of each fused sublayer alone against the PyTorch twin's (twins.py), at a
workload's shapes, inference on plain arrays against torch.no_grad(): where a forward's time
goes when the whole forward is near parity. A script, not a test:

    python3 tests/benchmarks/bench_sublayers.py [--threads 2] [--only w2,w3] [--rounds 9]

Cases, float32, each checked against the twin before it is timed:
    self-attention      padding mask, and causal (ours: a (1, 1, T, T) mask; the twin:
                        is_causal=True); multihead_attention against in-projection,
                        scaled_dot_product_attention, out-projection
    cross-attention     padding mask over a memory of T rows
    attention core      scores, softmax, product with V on the projections' heads (ours:
                        models/fast/sublayers.py's _attend) against scaled_dot_product_attention
    projection          the packed (D, 3D) product and its bias against F.linear
    feed-forward        feed_forward against F.linear, relu, F.linear
    add and norm        add_and_norm against F.layer_norm(x + y)
Reported: ms per call of each side and the median ratio ours / PyTorch over the rounds, with
its quartiles, timed in alternating blocks (timing.alternating_blocks). Attention weights are
drawn with the query's 1/√d_head folded in, so that the scores have the spread of a model's.
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402  (standard library only: numpy is not loaded yet)

THREADS = timing.pin_threads(timing.threads_from_argv())
import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
import twins  # noqa: E402
from models import attention, layers  # noqa: E402
from models.fast import sublayers  # noqa: E402

SHAPES = {"w2": (32, 32, 128, 4, 512), "w3": (16, 64, 512, 8, 2048),
          "lm": (16, 64, 64, 4, 256)}  # B, T, D, heads, d_ff of workloads.py


def attention_weights(rng, d_model, n_heads):
    """multihead_attention_init's weights, with the biases drawn too (init makes them 0)."""
    p = attention.multihead_attention_init(rng, d_model, n_heads)
    dense = [attention.Dense(w, (0.1 * rng.standard_normal(b.shape)).astype(np.float32))
             for w, b in (p.wq, p.wk, p.wv, p.wo)]
    return p._replace(wq=dense[0], wk=dense[1], wv=dense[2], wo=dense[3])


def twin_weights(torch, p, pf, norm):
    """Our sublayers' weights under the names twins.py reads (Linear's (d_out, d_in))."""
    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a))
    return {"a.in_proj_weight": t(np.concatenate([p.wq.w, p.wk.w, p.wv.w], axis=1).T),
            "a.in_proj_bias": t(np.concatenate([p.wq.b, p.wk.b, p.wv.b])),
            "a.out_proj.weight": t(p.wo.w.T), "a.out_proj.bias": t(p.wo.b),
            "f.linear1.weight": t(pf.linear1.w.T), "f.linear1.bias": t(pf.linear1.b),
            "f.linear2.weight": t(pf.linear2.w.T), "f.linear2.bias": t(pf.linear2.b),
            "n.weight": t(norm.scale), "n.bias": t(norm.bias)}


def cases(torch, key, rng):
    """{name: (ours, twin's)}, each pair checked to agree."""
    F = torch.nn.functional
    batch, length, d_model, n_heads, d_ff = SHAPES[key]
    p = attention_weights(rng, d_model, n_heads)
    scale = np.float32(1 / np.sqrt(d_model // n_heads))
    p = p._replace(wq=attention.Dense(p.wq.w * scale, p.wq.b * scale))  # spread of a model's
    pf = layers.feed_forward_init(rng, d_model, d_ff)
    norm = layers.layer_norm_init(d_model)
    w = twin_weights(torch, p, pf, norm)
    x, y, memory = (rng.standard_normal((batch, length, d_model)).astype(np.float32)
                    for _ in range(3))
    tx, ty, tmemory = (torch.from_numpy(a) for a in (x, y, memory))
    keep = np.ones((batch, length), bool)
    keep[:, 3 * length // 4:] = False
    padding = keep[:, None, None, :]
    t_padding, causal = torch.from_numpy(padding), attention.causal_mask(length)
    # the attention core's operands: the scaled packed projection's heads, as both sides see them
    projected = sublayers._project(x.reshape(-1, d_model),
                                   np.concatenate([p.wq.w, p.wk.w, p.wv.w], axis=1),
                                   np.concatenate([p.wq.b, p.wk.b, p.wv.b]))
    q, k, v = sublayers._heads(projected, batch, length, 3, n_heads)
    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(a)) for a in (q, k, v))
    # the twin's attention scales the scores itself: hand it the unscaled query
    tq_unscaled = tq / float(scale)
    packed_w, packed_b = (np.concatenate([p.wq.w, p.wk.w, p.wv.w], axis=1),
                          np.concatenate([p.wq.b, p.wk.b, p.wv.b]))
    return {
        "self-attention, padding": (
            lambda: attention.multihead_attention(p, x, x, padding),
            lambda: twins.attention(torch, w, "a.", n_heads, tx, mask=t_padding)),
        "self-attention, causal": (
            lambda: attention.multihead_attention(p, x, x, causal),
            lambda: twins.attention(torch, w, "a.", n_heads, tx, causal=True)),
        "cross-attention, padding": (
            lambda: attention.cross_attention(p, x, memory, padding),
            lambda: twins.attention(torch, w, "a.", n_heads, tx, tmemory, mask=t_padding)),
        "attention core, padding": (
            lambda: sublayers._attend(q, k, v, padding)[0],
            lambda: F.scaled_dot_product_attention(tq_unscaled, tk, tv, attn_mask=t_padding)),
        "attention core, causal": (
            lambda: sublayers._attend(q, k, v, causal)[0],
            lambda: F.scaled_dot_product_attention(tq_unscaled, tk, tv, is_causal=True)),
        "projection (D, 3D)": (
            lambda: sublayers._project(x.reshape(-1, d_model), packed_w, packed_b),
            lambda: F.linear(tx, w["a.in_proj_weight"], w["a.in_proj_bias"])),
        "feed-forward": (
            lambda: layers.feed_forward(pf, x),
            lambda: twins.feed_forward(F, w, "f.", tx)),
        "add and norm": (
            lambda: layers.add_and_norm(norm, x, y),
            lambda: twins.layer_norm(F, w, "n.", tx + ty)),
    }


def comparable(ours, theirs):
    """Both sides' results as (B, T, D) numpy arrays (the core's are in different layouts)."""
    theirs = theirs.numpy()
    if theirs.ndim == 4:  # scaled_dot_product_attention's (B, H, T, d_head)
        theirs = theirs.transpose(0, 2, 1, 3).reshape(theirs.shape[0], theirs.shape[2], -1)
    return np.asarray(ours).reshape(theirs.shape), theirs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for each library")
    parser.add_argument("--only", default="w2,w3", help=f"comma-separated, of {list(SHAPES)}")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    ag.memory.keep_freed_memory()
    import torch
    timing.torch_threads(torch, THREADS)
    print(timing.describe_environment(timing.environment(torch)))
    print(f"{'':36s} {'ours ms':>9s} {'torch ms':>9s} {'ratio':>6s} (quartiles)")
    with torch.no_grad():
        for key in args.only.split(","):
            for name, (ours, theirs) in cases(torch, key, np.random.default_rng(0)).items():
                np.testing.assert_allclose(*comparable(ours(), theirs()), rtol=2e-3, atol=2e-4)
                r = timing.alternating_blocks(ours, theirs, rounds=args.rounds, pause=0.2,
                                              block_seconds=0.3).summary()
                print(f"{key:3s} {name:32s} {r['ms_a']:9.3f} {r['ms_b']:9.3f} {r['ratio']:6.2f} "
                      f"({r['ratio_q1']:.2f} - {r['ratio_q3']:.2f})", flush=True)
    print(f"load average at the end: {timing.load_average():.2f}")


if __name__ == "__main__":
    main()
