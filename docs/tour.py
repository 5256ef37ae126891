# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A tour of autograd_lite
#
# From the gradient of one dense layer to a Transformer that writes numbers in English and a
# language model that writes text, in about three minutes of a laptop CPU. Every cell runs
# as it is: a test executes this notebook top to bottom (`tests/test_tour.py`), so what you
# read here is what the library does today.
#
# Open it with `pip install -e ".[tour]"`, then `jupytext --to ipynb docs/tour.py` and
# `jupyter lab docs/tour.ipynb` (or open `docs/tour.py` directly: jupytext reads it as a
# notebook). Pictures of graphs need Graphviz's `dot` program.
#
# One setting first: numpy's BLAS may use several threads, and at the sizes below a second
# thread makes a step no faster (on a busy machine, much slower). It must be set before
# numpy is imported; the demos do the same when run as programs.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pathlib
import tempfile
from typing import NamedTuple

import numpy as np
from IPython.display import SVG, Image, display

import autograd_lite as ag

OUT = pathlib.Path(tempfile.mkdtemp(prefix="tour-"))  # the pictures this tour draws

# %% [markdown]
# ## 1. The gradient of a dense layer, as a NamedTuple
#
# Parameters are plain `NamedTuple`s of numpy arrays, and a model is a function of them.
# `ag.gradient(f, *args)` runs `f` once while recording every op, walks the record
# backwards, and returns one gradient per argument **in the structure of that argument**:
# the gradient of a `Dense` is a `Dense`.

# %%
class Dense(NamedTuple):
    w: np.ndarray  # (D_in, D_out)
    b: np.ndarray  # (D_out,)


def dense(p, x):
    """x W + b.  x: (B, D_in) -> (B, D_out)"""
    return x @ p.w + p.b


def loss(p, x, y):
    """Mean squared error of the layer's output."""
    return ag.mean((dense(p, x) - y) ** 2)


rng = np.random.default_rng(0)
p = Dense(rng.standard_normal((3, 2)), np.zeros(2))
x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
dp, dx, dy = ag.gradient(loss, p, x, y)
print(type(dp).__name__, dp.w.shape, dp.b.shape)

# %% [markdown]
# The same numbers by hand: with r = x W + b - y over B·D_out = 10 entries,
# ∂loss/∂W = xᵀ (2r / 10) and ∂loss/∂b = Σ_rows 2r / 10.

# %%
r = dense(p, x) - y  # (5, 2); plain numpy: nothing is traced outside ag.gradient
assert np.allclose(dp.w, x.T @ (2 * r / r.size))
assert np.allclose(dp.b, (2 * r / r.size).sum(axis=0))
print("matches the hand derivation")

# %% [markdown]
# ## 2. A primitive of your own
#
# Every op is one function that computes its output from plain arrays and returns it with
# its **pullback**: the map from the output's cotangent ḡ to one cotangent per input. Here
# softplus, log(1 + eˣ), written so that it does not overflow for large x; its derivative is
# the sigmoid. `ag.check_gradients` compares reverse mode with central differences on
# every input and raises, naming the worst entry, when they disagree.

# %%
@ag.primitive
def softplus(x):
    """log(1 + e^x) = max(x, 0) + log(1 + e^-|x|);  d/dx = sigmoid(x)."""
    out = np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))

    def softplus_pullback(g):
        return (g * ag.sigmoid(x),)
    return out, softplus_pullback


z = np.array([-30.0, -1.0, 0.0, 2.0, 30.0])
print("softplus   ", softplus(z))
print("d/dz       ", ag.gradient(lambda z: ag.sum(softplus(z)), z)[0])
print("max errors ", ag.check_gradients(lambda z: ag.sum(softplus(z) ** 2), z))

# %% [markdown]
# ## 3. Grad of grad, and a Hessian-vector product
#
# The pullback above is written with the library's own ops (`ag.sigmoid`, `*`), so when the
# backward pass itself is traced it is recorded like any forward computation: `ag.grad`
# composes. Element by element, the gradient of Σ softplus is softplus'(x) = σ(x), and the
# gradient of Σ σ(x) is the second derivative, σ(x)(1 - σ(x)):

# %%
first = ag.grad(lambda t: ag.sum(softplus(t)))  # z -> σ(z), as a traceable function
d2 = ag.grad(lambda t: ag.sum(first(t)))(z)
s = 1 / (1 + np.exp(-z))
print(d2)
assert np.allclose(d2, s * (1 - s))

# %% [markdown]
# `ag.hvp(f, primals, tangents)` gives H·v without building H, as the gradient of
# ⟨∇f(x), v⟩. For f(x) = ½ xᵀ A x + Σ softplus(x) the Hessian is A (made symmetric) plus
# diag(σ(x)(1 - σ(x))), so H·v is known exactly:

# %%
A = rng.standard_normal((5, 5))
A = (A + A.T) / 2
v = rng.standard_normal(5)
value, (Hv,) = ag.hvp(lambda x: 0.5 * x @ (A @ x) + ag.sum(softplus(x)), (z,), (v,))
print(Hv)
assert np.allclose(Hv, A @ v + s * (1 - s) * v)

# %% [markdown]
# ## 4. The picture of one attention call
#
# `ag.viz.draw(f, *args, path=...)` records one call and draws it with Graphviz: one node per
# op with its output shape, the parameters named by their tree path, and the functions the
# ops ran in as boxes (`depth` collapses the deeper ones). Here one multi-head
# self-attention of the models package, on a batch of 2 sequences of 5 vectors of width 8
# with 2 heads.

# %%
from models import attention

attn = attention.multihead_attention_init(np.random.default_rng(1), d_model=8, n_heads=2)
h = np.random.default_rng(2).standard_normal((2, 5, 8)).astype(np.float32)  # (B, T, D)
ag.viz.draw(lambda p, x: attention.multihead_attention(p, x, x), attn, h,
            path=OUT / "attention.svg", depth=2)
display(SVG(filename=OUT / "attention.svg"))

# %% [markdown]
# The same call as a page to walk through: `ag.viz.explore` writes one HTML file (no server,
# no network) and shows it here. Click a box to open that call, search for `softmax`, click
# a node for its shape, the line of code that made it and the bytes its pullback keeps; with
# `values=True` each node also carries its statistics and each parameter its gradient norm.

# %%
ag.viz.explore(lambda p, x: attention.multihead_attention(p, x, x), attn, h,
               path=OUT / "attention.html", values=True)

# %% [markdown]
# ## 5. Attention, from the paper's equation to `multihead_attention`
#
# §3.2 of "Attention is all you need":
#
# Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V,
# MultiHead(X) = Concat(head_1, …, head_H) W_O with head_i = Attention(X W_Q^i, X W_K^i, X W_V^i).
#
# Batch first, the shapes are: X (B, T, D); each projection (B, T, D), split into H heads
# of d_k = D / H as (B, H, T, d_k); scores and weights (B, H, T, T); heads (B, H, T, d_k),
# put back side by side as (B, T, D); and W_O maps that to (B, T, D). Written out with
# numpy alone:

# %%
def by_hand(p, x):
    B, T, D = x.shape
    H = p.n_heads
    d_k = D // H

    def heads(w):  # (B, T, D) -> (B, H, T, d_k)
        return (x @ w.w + w.b).reshape(B, T, H, d_k).transpose(0, 2, 1, 3)
    q, k, v = heads(p.wq), heads(p.wk), heads(p.wv)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k)  # (B, H, T, T)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)  # each row sums to 1
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T, D)  # Concat(head_1..head_H)
    return out @ p.wo.w + p.wo.b  # (B, T, D)


ours = attention.multihead_attention(attn, h, h)
print(ours.shape, ours.dtype, "largest difference:", np.abs(ours - by_hand(attn, h)).max())
assert np.allclose(ours, by_hand(attn, h), atol=1e-5)

# %% [markdown]
# `models/attention.py` is the same computation in the same order, one line per step with
# its shape in a comment, plus what a real model needs: boolean masks (True = may attend) for
# padding and for the decoder's causality, and dropout on the weights.

# %% [markdown]
# ## 6. Training the translate model, and looking at its attention
#
# `demos/translate.py` teaches the paper's encoder-decoder to write numbers in English:
# 4721 → "four thousand seven hundred twenty one". Its full run takes about four minutes to
# reach 100% on numbers it never saw; to stay within the tour's three minutes, this one
# trains a smaller model for 600 steps (about 40 seconds here), which gets most of the way.
# `train.fit` does the loop: the progress bar, the validation loss, gradient clipping, and,
# with `health_every`, the training health of every 10th step.

# %%
from demos.support import number_words as nw
from demos import translate
from models import plots

args = translate.parse_args(["--quick", "--epochs", "6", "--epoch-size", "100", "--lr", "5e-3",
                             "--d-model", "64", "--d-ff", "128", "--held-out", "200"])
held_out = nw.held_out_values(args.held_out, translate.HELD_OUT_SEED)
model = translate.build_model(args, np.random.default_rng(0))
model, history = translate.train_model(model, args, held_out, OUT / "translate")
print(f"exact match on {len(held_out)} held-out numbers: "
      f"{100 * translate.exact_match(model, held_out):.0f}%")
for value in held_out[:3]:
    print(f"{int(value):>12,} -> {' '.join(translate.translate(model, [value])[0])}")

# %% [markdown]
# Where does the decoder look while it writes each word? The last decoder layer's attention
# over the digits (mean over the heads): each word should draw on the digit it names.

# %%
translate.draw_attention(OUT / "translate-attention.png", model, held_out[2])
display(Image(filename=OUT / "translate-attention.png"))

# %% [markdown]
# And the training health: each parameter group's gradient norm (before clipping; red where
# clipping fired) and the size of its updates relative to its parameters. The ratio rises
# with the warm-up of the learning rate and falls with its cosine decay; a group far below
# the others would be one that hardly learns.

# %%
plots.training_health(history, OUT / "health.png")
display(Image(filename=OUT / "health.png"))

# %% [markdown]
# ## 7. Generating text from a small language model
#
# `models.lm` is a decoder-only Transformer: the encoder block with a causal mask, predicting
# each next character. Trained here on the first 90% of Python's own help text (which ships
# with Python) for 500 steps, about half a minute, it is scored in bits per character on the
# last 10% and then continues a prompt. Half a minute buys far better guesses than chance
# (compare the 6.7 bits of a uniform guess) but not yet English: `python -m demos.generate`
# trains a larger one for four minutes (1.71 bits per character, where a Kneser-Ney 6-gram
# gets 1.73).

# %%
from demos import generate
from models import data, lm, text, train

_, corpus = generate.read_corpus(None)
tokenizer = text.CharTokenizer.from_text(corpus)
train_ids, held_out_ids = generate.split_text(tokenizer.encode(corpus), 64)
small = lm.init(np.random.default_rng(0), len(tokenizer), d_model=64, n_heads=4, d_ff=256,
                n_layers=2, max_len=64)
small, _ = train.fit(generate.loss_fn, small, ag.optim.adam(3e-3),
                     lambda epoch: data.lm_batches(train_ids, 64, 16, 100,
                                                   rng=np.random.default_rng(epoch)),
                     epochs=5, clip_norm=1.0, progress=False)
bits = generate.held_out_bits(small, held_out_ids[:20_000])
print(f"{bits:.2f} bits per character on 20,000 held-out characters "
      f"(uniform over {len(tokenizer)} characters: {np.log2(len(tokenizer)):.2f})")

# %%
prompt = tokenizer.encode("The for statement is used to ")
continued = lm.generate(small, prompt[None], 34, temperature=0.6,
                        rng=np.random.default_rng(0))
print(tokenizer.decode(continued[0]))

# %% [markdown]
# ## 8. Per-example gradients: DP-SGD
#
# `ag.vmap(f)` runs a function of one example on many at once, and composes with `ag.grad`:
# `ag.vmap(ag.grad(loss), in_axes=(None, 0, 0))` gives every example its own gradient in
# one call, at about the cost of one batched gradient. DP-SGD (Abadi et al., 2016) needs
# exactly that: it clips each example's gradient to a norm C, adds Gaussian noise of scale
# σC to their sum and steps along the noisy mean, so that no single example can move the
# model much. Here a small classifier learns whether a sequence of 12 tokens holds more low
# tokens (below 10) than high ones, with plain Adam and with DP-SGD's clipped, noisy
# gradients fed to the same Adam, on the same batches.

# %%
from models import classifier

data_rng = np.random.default_rng(0)
sequences = data_rng.integers(0, 20, (2400, 12))
majority = ((sequences < 10).sum(1) > 6).astype(np.int64)  # 1: more low tokens
train_x, train_y, test_x, test_y = sequences[:2000], majority[:2000], sequences[2000:], majority[2000:]


def example_loss(p, ids, label):  # one sequence (12,) and its label
    return ag.cross_entropy(classifier.apply(p, ids[None]), label[None])


per_example_gradients = ag.vmap(ag.grad(example_loss), in_axes=(None, 0, 0))


def private_gradient(p, ids, labels, rng, clip=1.0, noise=0.5):
    """DP-SGD's gradient: each example's clipped to norm `clip`, summed, Gaussian noise of
    scale noise * clip added, divided by the batch size."""
    grads = per_example_gradients(p, ids, labels)  # each leaf (B, ...)
    leaves = [g for g in ag.tree_leaves(grads) if g is not None]
    norms = np.sqrt(sum(np.square(g).reshape(len(g), -1).sum(1) for g in leaves))  # (B,)
    scale = np.minimum(1.0, clip / (norms + 1e-12))
    return ag.tree_map(lambda g: None if g is None else (
        np.tensordot(scale, g, 1) + rng.normal(0, noise * clip, g.shape[1:])
    ).astype(g.dtype) / len(ids), grads)


def train_classifier(private, steps=250, batch=32):
    rng = np.random.default_rng(1)
    p = classifier.init(np.random.default_rng(2), 20, 2, d_model=16, n_heads=2, d_ff=32,
                        max_len=12, dropout=0.0)
    optimizer = ag.optim.adam(3e-3)
    state = optimizer.init(p)
    for step in range(steps):
        rows = rng.choice(len(train_x), batch, replace=False)
        if private:
            grads = private_gradient(p, train_x[rows], train_y[rows], rng)
        else:
            grads = ag.grad(lambda p: ag.cross_entropy(classifier.apply(p, train_x[rows]),
                                                       train_y[rows]))(p)
        p, state = optimizer.update(p, grads, state)
    return np.mean(classifier.apply(p, test_x).argmax(-1) == test_y)


print(f"held-out accuracy: Adam {train_classifier(False):.1%}, "
      f"DP-SGD (clip 1, noise 0.5) {train_classifier(True):.1%}")

# %% [markdown]
# ## Where to go next
#
# - `README.md`: the demos, their measured results, and training a classifier on your own
#   CSV file with `python -m demos.classify --data FILE`; `docs/results.md`, the results on
#   real data and how to reproduce them; `docs/transformations.md`, jacobian, hessian, jvp,
#   checkpoint and fast rules.
# - `autograd_lite/ops/`: every op with its pullback right below it.
# - `models/`: the layers, attention, blocks and the three models, each in the order of the
#   paper, with the shape of every tensor in a comment.
