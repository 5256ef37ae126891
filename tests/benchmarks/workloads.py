"""The workloads of the speed comparison: a model at one size with one batch of random tokens,
our training step, and its PyTorch twin (twins.py) holding the same weights and batch.

    w1  the seed classifier: vocab 7455, D 32, 4 heads, d_ff 128, 1 block, 50 tokens, 5 labels, B 32
    w2  encoder-decoder: D 128, 4 heads, d_ff 512, 2 + 2 blocks, vocab 1000/1000, 32 tokens, B 32
    w3  the paper's base encoder-decoder: D 512, 8 heads, d_ff 2048, 6 + 6 blocks,
        vocab 8000/8000, 64 tokens, B 16
    lm  a character LM: vocab 65, D 64, 4 heads, d_ff 256, 2 pre-LN blocks, 64 tokens, B 16

A step is forward, mean cross-entropy, backward and Adam (lr 1e-4), float32, dropout 0 (the
twin has none). The encoder-decoders' sources end in padding (id 0, masked as keys): each row
keeps between half and all of its tokens. Numpy is imported here: load this module after
timing.pin_threads.

On a device (`build(key, device="cuda")`), our side's parameters and batch are moved there
by ag.to_device, from the host's draws; the twin and to_torch stay the host's (they take
host trees).
"""
import functools
from typing import Callable, NamedTuple

import numpy as np

import autograd_lite as ag
from models import classifier, lm, transformer

import twins


class Workload(NamedTuple):
    key: str  # "w1"
    title: str  # its row in the tables
    params: object  # our parameters (float32), on the workload's device
    loss: Callable  # ours: loss(params) -> scalar, over the workload's batch
    forward: Callable  # ours: forward(params) -> logits, on plain arrays (inference)
    twin: Callable  # twin(torch, params) -> twins.Twin with these weights, the same batch
    to_torch: Callable  # our tree (parameters or gradients) -> {torch name: tensor}


class OurStep:
    """Our training step over a workload: value_and_gradient, then Adam, on its own copy of
    the parameters, which Adam updates in place (in_place=True), as torch.optim does."""

    def __init__(self, workload, lr=1e-4):
        self.loss = workload.loss
        self.params = ag.tree_map(_copied, workload.params)
        self.optimizer = ag.optim.adam(lr)
        self.state = self.optimizer.init(self.params)

    def gradients(self):
        """The loss and the gradient tree at the current parameters."""
        loss, grads = ag.value_and_gradient(self.loss, self.params, argnums=0)
        return float(loss), grads

    def step(self):
        _, grads = ag.value_and_gradient(self.loss, self.params, argnums=0)
        self.params, self.state = self.optimizer.update(self.params, grads, self.state,
                                                        in_place=True)


def _copied(leaf):
    """A copy of a numpy or device array; any other leaf as it is."""
    return leaf.copy() if isinstance(leaf, np.ndarray) or ag.device_name(leaf) != "cpu" else leaf


def placed(tree, device):
    """`tree` as it is on the host ("cpu"), else moved to `device` by ag.to_device."""
    return tree if device == "cpu" else ag.to_device(tree, device)


def padded_source(rng, vocab, batch, length, pad=0):
    """Tokens 1..vocab-1, each row ending in pads; between length/2 and length real tokens."""
    src = rng.integers(1, vocab, (batch, length))
    for row, keep in zip(src, rng.integers(length // 2, length + 1, batch)):
        row[keep:] = pad
    return src


def classifier_workload(rng, batch=32, device="cpu"):
    p = classifier.init(rng, 7455, 5, dropout=0.0)  # D 32, 4 heads, d_ff 128, 1 block, 50 tokens
    ids, labels = rng.integers(0, 7455, (batch, 50)), rng.integers(0, 5, batch)
    ours, ids_on, labels_on = placed((p, ids, labels), device)

    def twin(torch, params):
        from models import torch_bridge
        logits = functools.partial(twins.classifier_logits, torch, ids=torch.from_numpy(ids),
                                   n_heads=4, n_layers=1, max_len=50)
        return twins.Twin(torch, torch_bridge.classifier_to_torch(params), logits, labels)

    return Workload("w1", f"review classifier (seed: vocab 7455, D 32, 1 block, 50 tokens), "
                    f"B {batch}", ours,
                    lambda p: ag.cross_entropy(classifier.apply(p, ids_on), labels_on),
                    lambda p: classifier.apply(p, ids_on), twin, _bridge("classifier_to_torch"))


def transformer_workload(key, rng, vocab, d_model, n_heads, d_ff, blocks, length, batch,
                         device="cpu"):
    p = transformer.init(rng, vocab, vocab, d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                         n_encoder=blocks, n_decoder=blocks, max_len=length + 1, dropout=0.0)
    src = padded_source(rng, vocab, batch, length)
    tgt = rng.integers(1, vocab, (batch, length + 1))
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    ours, src_on, tgt_in_on, tgt_out_on = placed((p, src, tgt_in, tgt_out), device)

    def twin(torch, params):
        from models import torch_bridge
        logits = functools.partial(
            twins.transformer_logits, torch, src=torch.from_numpy(src),
            tgt=torch.from_numpy(np.ascontiguousarray(tgt_in)), src_pad=0, n_heads=n_heads,
            n_encoder=blocks, n_decoder=blocks, max_len=length + 1)
        return twins.Twin(torch, torch_bridge.to_torch(params), logits, tgt_out)

    title = (f"encoder-decoder D {d_model}, {n_heads} heads, d_ff {d_ff}, {blocks} + {blocks} "
             f"blocks, vocab {vocab}, {length} tokens, B {batch}")
    return Workload(key, title, ours,
                    lambda p: ag.cross_entropy(transformer.apply(p, src_on, tgt_in_on, src_pad=0),
                                               tgt_out_on),
                    lambda p: transformer.apply(p, src_on, tgt_in_on, src_pad=0), twin,
                    _bridge("to_torch"))


def lm_workload(rng, batch=16, device="cpu"):
    p = lm.init(rng, 65, 64, 4, 256, 2, 64)
    ids = rng.integers(0, 65, (batch, 65))
    x, y = ids[:, :-1], ids[:, 1:]
    ours, x_on, y_on = placed((p, x, y), device)

    def twin(torch, params):
        from models import torch_bridge
        logits = functools.partial(twins.lm_logits, torch,
                                   ids=torch.from_numpy(np.ascontiguousarray(x)), n_heads=4,
                                   n_layers=2, max_len=64)
        return twins.Twin(torch, torch_bridge.lm_to_torch(params), logits, y)

    return Workload("lm", f"character LM (vocab 65, D 64, 2 pre-LN blocks, 64 tokens), B {batch}",
                    ours, lambda p: ag.cross_entropy(lm.apply(p, x_on), y_on),
                    lambda p: lm.apply(p, x_on), twin, _bridge("lm_to_torch"))


def _bridge(name):
    """models.torch_bridge.<name>, imported when called (it needs torch)."""
    def mapped(tree):
        from models import torch_bridge
        return getattr(torch_bridge, name)(tree)
    return mapped


BUILDERS = {
    "w1": classifier_workload,
    "w2": functools.partial(transformer_workload, "w2", vocab=1000, d_model=128, n_heads=4,
                            d_ff=512, blocks=2, length=32, batch=32),
    "w3": functools.partial(transformer_workload, "w3", vocab=8000, d_model=512, n_heads=8,
                            d_ff=2048, blocks=6, length=64, batch=16),
    "lm": lm_workload,
}


def build(key, seed=0, device="cpu"):
    """The workload named `key` ("w1", "w2", "w3", "lm"), its weights and batch from `seed`;
    our side's on `device` ("cpu", or "cuda": ag.to_device)."""
    if key not in BUILDERS:
        raise ValueError(f"workloads.build: no workload {key!r}; there are {sorted(BUILDERS)}")
    return BUILDERS[key](np.random.default_rng(seed), device=device)


def in_dtype(workload, dtype):
    """The workload with its float parameters cast to dtype (the batch is integer tokens)."""
    params = ag.tree_map(lambda a: a.astype(dtype) if ag.is_differentiable(a) else a,
                         workload.params)
    return workload._replace(params=params)


# (relative tolerance of the loss, of each gradient norm-wise) by dtype
PARITY_TOLERANCES = {"float64": (1e-9, 1e-6), "float32": (1e-5, 1e-2)}


def check_parity(workload, torch):
    """Our loss and every gradient against the twin's, from the same weights, in float64 and
    in float32; raises AssertionError naming the worst parameter, else returns
    {dtype: {"loss": relative error, "worst": name, "error": its norm-wise error}}.

    float64 shows that the twin computes our function (they agree to ~1e-15). float32 is
    what is timed, and there the tolerance must allow for relu: a pre-activation within
    float32 rounding of zero can fall on the other side in one library (with 2 BLAS threads
    the order of the sums changes). On w2 at 2 threads one of the 512 × 1024 of a decoder
    feed-forward layer does, in our float32 run against float64, which moves that layer's
    weight gradient by 1.4e-3 norm-wise; on w3 the twin's float32 run has such a flip."""
    results = {}
    for dtype, (loss_rtol, rtol) in PARITY_TOLERANCES.items():
        w = in_dtype(workload, np.dtype(dtype))
        loss, grads = OurStep(w).gradients()
        twin_loss, twin_grads = w.twin(torch, w.params).gradients()
        loss_error = abs(loss - twin_loss) / abs(twin_loss)
        ours = {name: t.numpy() for name, t in w.to_torch(grads).items()}
        errors = twins.gradient_errors(ours, twin_grads)
        worst = max(errors, key=errors.get)
        if loss_error > loss_rtol or errors[worst] > rtol:
            raise AssertionError(
                f"{w.key} in {dtype}: the twin disagrees with ours: loss {loss:.8g} vs "
                f"{twin_loss:.8g} (relative {loss_error:.2g}, tolerance {loss_rtol:g}); worst "
                f"gradient {worst}: relative {errors[worst]:.2g} (tolerance {rtol:g})")
        results[dtype] = {"loss": loss_error, "worst": worst, "error": errors[worst]}
    return results
