"""The vocabulary of the op table (helpers/op_table.py): a row (`Case`), the domains its float
arguments are drawn from, constants (masks, labels, indices) and the torch counterparts
that need more than a lambda; and the form of the op families' error tables."""
import math
import re
from typing import Callable, NamedTuple

import numpy as np
import pytest


class LazyTorch:
    """torch, imported when a torch function of the table first runs (the `torch` fixture
    has made sure it is there by then): the table itself loads without torch."""

    def __getattr__(self, name):
        import torch as torch_module
        return getattr(torch_module, name)


torch = LazyTorch()


class Float(NamedTuple):
    """A float argument: its shape, and how its values are drawn (the op's domain)."""
    shape: tuple
    draw: Callable  # (rng, shape) -> float64 values


class Case(NamedTuple):
    """One row: our function of the arguments, torch's function of the same arguments as
    tensors (None where torch has no counterpart), the arguments (Float, or a constant
    passed as it is), and whether the second-order check is cheap enough to run."""
    name: str
    ours: Callable
    theirs: Callable | None
    args: tuple
    second_order: bool = True

    def arguments(self, rng, dtype):
        """The arguments, each Float drawn from rng and cast to dtype."""
        return [np.asarray(a.draw(rng, a.shape), dtype) if isinstance(a, Float) else a
                for a in self.args]


def normal(*shape):
    return Float(shape, lambda rng, s: rng.standard_normal(s))


def positive(*shape):
    return Float(shape, lambda rng, s: rng.uniform(0.5, 2.0, s))


def uniform(low, high, *shape):
    return Float(shape, lambda rng, s: rng.uniform(low, high, s))


def given(values):
    """These values (zeros of a product, say), in the row's dtype."""
    values = np.asarray(values, dtype=np.float64)
    return Float(values.shape, lambda rng, s: values)


def well_conditioned(*shape):
    """Square matrices (..., n, n) near the identity: invertible, far from singular."""
    return Float(shape, lambda rng, s: np.eye(s[-1]) + rng.uniform(-0.3, 0.3, s))


def off_kinks(*shape):
    """Normal numbers at least 0.1 from 0, where relu and abs have their kink."""
    def draw(rng, s):
        x = rng.standard_normal(s)
        return np.where(np.abs(x) < 0.1, 0.1 + np.abs(x), x) * np.sign(x + (x == 0))
    return Float(shape, draw)


def distinct(*shape):
    """Numbers without ties (for max), away from 0 and from 0.3 (where thresholds)."""
    def draw(rng, s):
        x = off_kinks(*s).draw(rng, s) + 1e-3 * np.arange(math.prod(s)).reshape(s)
        return np.where(np.abs(x - 0.3) < 0.1, x + 0.2, x)
    return Float(shape, draw)


def keep_mask(shape, axis=-1, seed=0):
    """A random bool mask (True = keep) that keeps the first entry of every row along axis."""
    mask = np.random.default_rng(seed).random(shape) > 0.4
    mask[(slice(None),) * (axis % len(shape)) + (0,)] = True
    return mask


def class_labels(shape, n_classes, ignore_index, seed=0):
    """Random labels; with an ignore_index, every third position holds it."""
    labels = np.random.default_rng(seed).integers(0, n_classes, shape)
    if ignore_index is not None and labels.size > 1:
        labels.flat[::3] = ignore_index
    return labels


def pieces(parts):
    """The pieces of a split, flattened, each scaled by its position (1, 2, ...), so that the
    gradient tells which piece each element went to."""
    return [p.reshape(-1) * (i + 1) for i, p in enumerate(parts)]


def dims(axis, ndim):
    """torch's dim for numpy's axis (None: every axis)."""
    return tuple(range(ndim)) if axis is None else axis


def torch_flat(f):
    """torch's f(tensor, dim) for numpy's axis None too (None: of the flattened tensor)."""
    return lambda t, axis: f(t.flatten(), 0) if axis is None else f(t, axis)


def torch_prod(t, dims, keepdim):
    """t's product over the axes dims (torch.prod takes one dim at a time)."""
    dims = (dims,) if isinstance(dims, int) else dims
    for d in sorted((d % t.ndim for d in dims), reverse=True):
        t = t.prod(d, keepdim=keepdim)
    return t


def torch_clamp_broadcast(x, low, high):
    """torch.clamp of x broadcast to the bounds' shape (torch keeps x's shape otherwise)."""
    return torch.clamp(x.expand(torch.broadcast_shapes(x.shape, low.shape, high.shape)), low, high)


def torch_dot(a, b):
    """np.dot: a product with a scalar, else a sum over a's last axis and b's second to last."""
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return torch.tensordot(a, b, ([-1], [-2 % b.ndim]))


def torch_index(index):
    """The same index for a tensor: integer arrays as int64 tensors, bool masks as bool."""
    if isinstance(index, tuple):
        return tuple(torch_index(i) for i in index)
    if isinstance(index, np.ndarray):
        return torch.from_numpy(index if index.dtype == np.bool_ else index.astype(np.int64))
    return index


def torch_cross_entropy(ignore_index, smoothing):
    """torch's cross entropy on our layout (class axis last); ignore_index None: none ignored."""
    def f(logits, labels):
        logits = logits.movedim(-1, 1) if logits.ndim > 2 else logits
        return torch.nn.functional.cross_entropy(
            logits, labels, ignore_index=-100 if ignore_index is None else ignore_index,
            label_smoothing=smoothing)
    return f


def torch_scatter_add(values, indices, n):
    """Rows of values summed into n rows by index_add (our scatter_add)."""
    rows = values.reshape((-1,) + tuple(values.shape[indices.ndim:]))
    out = torch.zeros((n,) + tuple(rows.shape[1:]), dtype=values.dtype)
    return out.index_add(0, torch.from_numpy(indices.reshape(-1).astype(np.int64)), rows)


def each_error(errors):
    """Parametrize a test over rows (make, error type, message), each row named after the op
    its message starts with."""
    names = [f"{message.split(':')[0]}{i}" for i, (_, _, message) in enumerate(errors)]
    return pytest.mark.parametrize("make, error, message", errors, ids=names)


def assert_raises(make, error, message):
    """make() raises `error` with exactly `message` in it."""
    with pytest.raises(error, match=re.escape(message)):
        make()
