"""SGD, Adam and AdamW as pure functions over parameter trees (see the package docstring)."""
import math
from typing import Any, Callable, NamedTuple

import numpy as np

from .flat import joined, split_like, unflatten_each
from .gradient_shapes import check_gradient_shapes
from ..core.tree import is_differentiable, tree_leaves, tree_map


class Optimizer(NamedTuple):
    init: Callable
    update: Callable


class SGDState(NamedTuple):
    step: np.int64  # updates made: the step a schedule lr(step) is called with
    velocity: Any  # per differentiable leaf, the momentum buffer b; None without momentum


class AdamState(NamedTuple):
    step: np.int64  # updates made: the step a schedule lr(step) is called with
    m: Any  # per differentiable leaf, the first-moment estimate
    v: Any  # per differentiable leaf, the second-moment estimate
    leaf_steps: Any  # per differentiable leaf (np.int64), the updates it took part in: its
    #                  t in the bias correction (torch's state["step"])


def _zeros_like_floats(params):
    return tree_map(lambda p: np.zeros_like(p) if is_differentiable(p) else None, params)


def _zero_counts(params):
    return tree_map(lambda p: np.int64(0) if is_differentiable(p) else None, params)


def _learning_rate(lr, step):
    # a Python float: a numpy float64 scalar would promote float32 parameters (NEP 50)
    return float(lr(int(step)) if callable(lr) else lr)


def _moves(p, g):
    return g is not None and is_differentiable(p)


def _check_setting(optimizer, name, value, valid, expected):
    if not valid:
        raise ValueError(f"{optimizer}: {name}={value!r}, expected {expected}")


def _check_rate_and_decay(optimizer, lr, weight_decay):
    if not callable(lr):
        _check_setting(optimizer, "lr", lr, lr >= 0, "a number >= 0 or a schedule lr(step)")
    _check_setting(optimizer, "weight_decay", weight_decay, weight_decay >= 0, "a number >= 0")


def _with_weight_decay(grads, params, weight_decay, caller):
    """g + weight_decay·p for every leaf that moves (the L2 penalty's gradient)."""
    if not weight_decay:
        return grads
    return tree_map(lambda g, p: g + weight_decay * p if _moves(p, g) else g, grads, params,
                    caller=caller, names=("grads", "params"))


def sgd(lr, momentum=0.0, nesterov=False, weight_decay=0.0):
    """torch.optim.SGD with dampening 0. With d = g + weight_decay·p:

        b ← momentum·b + d        (b starts at 0, so the first b is d)
        p ← p - lr·b              (p - lr·(d + momentum·b) with nesterov)

    and p ← p - lr·d without momentum.
    """
    momentum, weight_decay = float(momentum), float(weight_decay)
    _check_rate_and_decay("sgd", lr, weight_decay)
    _check_setting("sgd", "momentum", momentum, momentum >= 0, "a number >= 0")
    _check_setting("sgd", "nesterov", nesterov, not nesterov or momentum > 0,
                   "False without momentum (Nesterov momentum needs a momentum > 0)")

    def init(params):
        return SGDState(np.int64(0), _zeros_like_floats(params) if momentum else None)

    def update(params, grads, state):
        check_gradient_shapes("sgd.update", params, grads)
        step = state.step + 1
        rate = _learning_rate(lr, step)
        directions = _with_weight_decay(grads, params, weight_decay, "sgd.update")
        if not momentum:
            return tree_map(lambda p, d: p - rate * d if _moves(p, d) else p, params, directions,
                            caller="sgd.update", names=("params", "grads")), \
                SGDState(step, None)
        velocity = tree_map(lambda b, d: momentum * b + d if d is not None and b is not None else b,
                            state.velocity, directions, caller="sgd.update",
                            names=("state.velocity", "grads"))

        def move(p, d, b):
            if not _moves(p, d):
                return p
            return p - rate * (d + momentum * b if nesterov else b)
        return tree_map(move, params, directions, velocity, caller="sgd.update",
                        names=("params", "grads", "state.velocity")), SGDState(step, velocity)
    return Optimizer(init, update)


class _AdamSettings(NamedTuple):
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    decoupled: bool  # AdamW: the weights decay themselves; Adam: weight_decay·p joins g


def _adam_leaf(s, rate, p, g, m, v, t):
    """One leaf's update, the reference that the chunked path (_adam_chunk) matches bit for bit:

        g ← g + wd·p (Adam's L2 penalty),   m ← β1·m + (1 - β1)·g,   v ← β2·v + (1 - β2)·g²,
        p ← p·(1 - lr·wd) (AdamW),   p ← p - lr/(1 - β1^t) · m / (√v / √(1 - β2^t) + eps)

    t: the leaf's own count, this update included. A leaf without a gradient, or a static
    one, keeps p, m, v and t. -> (p, m, v, t)"""
    moves = _moves(p, g)
    if moves and s.weight_decay and not s.decoupled:
        g = g + s.weight_decay * p
    if g is not None and t is not None:
        t = t + 1
    if g is not None and m is not None:
        m = s.beta1 * m + (1 - s.beta1) * g
    if g is not None and v is not None:
        v = s.beta2 * v + (1 - s.beta2) * (g * g)
    if not moves:
        return p, m, v, t
    if s.decoupled and s.weight_decay:
        p = p * (1 - rate * s.weight_decay)
    step_size = rate / (1 - s.beta1 ** int(t))
    root_correction = math.sqrt(1 - s.beta2 ** int(t))
    return p - step_size * m / (np.sqrt(v) / root_correction + s.eps), m, v, t


def _adam_chunk(s, rate, t, p, g, m, v, in_place=False):
    """_adam_leaf over 1-D arrays of one dtype that join leaves moving at the same new count t:
    the same operations in the same order (the same bits), a dozen numpy calls for any number
    of leaves, into fresh arrays (the inputs are left as they were), or with in_place into
    p, m and v themselves. -> (p, m, v)"""
    def into(a):  # the `out=` of an update of a: a itself in place, else a fresh array
        return a if in_place else None
    if s.weight_decay and not s.decoupled:
        g = g + s.weight_decay * p
    scratch = np.multiply(g, 1 - s.beta1)
    m = np.multiply(m, s.beta1, out=into(m))
    m += scratch  # β1·m + (1 - β1)·g
    np.multiply(g, g, out=scratch)
    scratch *= 1 - s.beta2
    v = np.multiply(v, s.beta2, out=into(v))
    v += scratch  # β2·v + (1 - β2)·g²
    np.sqrt(v, out=scratch)
    scratch /= math.sqrt(1 - s.beta2 ** int(t))
    scratch += s.eps  # √v / √(1 - β2^t) + eps
    step = np.multiply(m, rate / (1 - s.beta1 ** int(t)))
    step /= scratch
    if s.decoupled and s.weight_decay:
        p = np.multiply(p, 1 - rate * s.weight_decay, out=into(p))
    return np.subtract(p, step, out=p if in_place else step), m, v


def _write_back(flat_arrays, leaves):
    """After an in-place chunk update: copy each of the chunk's new 1-D arrays into its
    leaves, unless it is already a view of them (joined found them back to back)."""
    for new, originals in zip(flat_arrays, leaves):
        if not np.may_share_memory(new, originals[0]):
            for original, value in zip(originals, split_like(new, originals)):
                np.copyto(original, value)


def _fits_chunk(p, g, m, v, t):
    """Whether a leaf takes the chunked path: a moving float array whose gradient and moments
    are arrays of its shape and dtype (anything else, e.g. a Python float, takes _adam_leaf)."""
    return (type(p) is np.ndarray and type(g) is np.ndarray and type(m) is np.ndarray
            and type(v) is np.ndarray and t is not None and p.dtype.kind == "f"
            and p.shape == g.shape == m.shape == v.shape
            and p.dtype == g.dtype == m.dtype == v.dtype)


CHUNK_SIZE = 2**16  # entries: a chunk's arrays stay in the cache; a larger leaf is a chunk alone


def _chunks(leaves, positions):
    """The leaves at `positions` in runs of one dtype and one new count t, each of at most
    CHUNK_SIZE entries (or one larger leaf). -> [[position, ...], ...]"""
    chunks, key, size = [], None, 0
    for i in positions:
        p, t = leaves[i][0], leaves[i][4]
        if not chunks or (p.dtype, t) != key or size + p.size > CHUNK_SIZE:
            chunks.append([])
            key, size = (p.dtype, t), 0
        chunks[-1].append(i)
        size += p.size
    return chunks


def _adam(name, lr, betas, eps, weight_decay, decoupled):
    beta1, beta2, eps, weight_decay = float(betas[0]), float(betas[1]), float(eps), float(weight_decay)
    _check_rate_and_decay(name, lr, weight_decay)
    _check_setting(name, "betas", betas, 0 <= beta1 < 1 and 0 <= beta2 < 1, "two numbers in [0, 1)")
    _check_setting(name, "eps", eps, eps >= 0, "a number >= 0")
    settings = _AdamSettings(beta1, beta2, eps, weight_decay, decoupled)

    def init(params):
        return AdamState(np.int64(0), _zeros_like_floats(params), _zeros_like_floats(params),
                         _zero_counts(params))

    def update(params, grads, state, *, in_place=False):
        """Leaves that fit (_fits_chunk) are updated in chunks; the new p, m and v of a chunk
        are views of one fresh array each, so that the next update finds them joined.
        in_place=True (as torch.optim does) writes the new p, m and v of those leaves into
        the arrays of params and state and returns them: the step then holds no second copy
        of the parameters and moments, and the caller must not keep using the old values.
        Other leaves (a Python float, say) get new values as without it."""
        check_gradient_shapes(f"{name}.update", params, grads)
        step = state.step + 1
        rate = _learning_rate(lr, step)
        leaves = []  # (p, g, m, v, t) per leaf, in tree order
        tree_map(lambda *leaf: leaves.append(leaf), params, grads, state.m, state.v,
                 state.leaf_steps, caller=f"{name}.update",
                 names=("params", "grads", "state.m", "state.v", "state.leaf_steps"))
        new = [None] * len(leaves)  # (p, m, v, t) per leaf
        in_chunks = []
        for i, leaf in enumerate(leaves):
            if _fits_chunk(*leaf):
                in_chunks.append(i)
                leaves[i] = leaf[:4] + (leaf[4] + 1,)  # the count this update brings
            else:
                new[i] = _adam_leaf(settings, rate, *leaf)
        for chunk in _chunks(leaves, in_chunks):
            p, g, m, v = ([leaves[i][k] for i in chunk] for k in range(4))
            t = leaves[chunk[0]][4]
            flat = _adam_chunk(settings, rate, t, joined(p), joined(g), joined(m), joined(v),
                               in_place)
            if in_place:
                _write_back(flat, (p, m, v))
                for i in chunk:
                    new[i] = (*(leaves[i][k] for k in (0, 2, 3)), leaves[i][4])
                continue
            for i, *leaf in zip(chunk, *(split_like(a, p) for a in flat)):
                new[i] = (*leaf, leaves[i][4])
        p, m, v, t = unflatten_each(params, list(zip(*new)) if new else [[]] * 4)
        return p, AdamState(step, m, v, t)
    return Optimizer(init, update)


def adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """Adam (Kingma & Ba 2015) as torch.optim.Adam; weight_decay adds weight_decay·p to g."""
    return _adam("adam", lr, betas, eps, weight_decay, decoupled=False)


def adamw(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW: p ← p(1 - lr·wd) before the Adam step."""
    return _adam("adamw", lr, betas, eps, weight_decay, decoupled=True)
