"""SGD, Adam and AdamW as pure functions over parameter trees (the package docstring): the
moving leaves joined in 1-D chunks (flat.py: a dozen numpy calls a chunk, the bits of the
leaf-by-leaf rule), each updated by a kernel (autograd_lite/kernels)."""
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import kernels
from ..core.devices import is_device_array, kernels_of
from ..core.placement import array_module, check_one_device
from .flat import unflatten_each, update_in_chunks
from .gradient_shapes import check_gradient_shapes
from ..core.tree import is_differentiable, tree_map


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


def _leaves(optimizer, trees, names):
    """Per leaf, the tuple of the trees' leaves there, in tree order (the trees checked to
    share a structure)."""
    leaves = []
    tree_map(lambda *leaf: leaves.append(leaf), *trees, caller=f"{optimizer}.update",
             names=names)
    return leaves


def _like(original, value):
    """value (an array) as the kind of leaf `original` was: a number becomes a numpy scalar
    (as numpy arithmetic on a Python float gives)."""
    if isinstance(original, np.ndarray) or is_device_array(original):
        return value
    return value.reshape(())[()]


def _as_array(leaf):
    """A leaf as an array for the flat buffers: a device's array as it is, a number 0-d."""
    if type(leaf) is np.ndarray:  # the common case, without asking about devices
        return leaf
    return leaf if is_device_array(leaf) else np.asarray(leaf)


def _chunk_kernels(caller, arrays):
    """The update kernels for one chunk's arrays: the host's (numba's or numpy's), a device's
    (cupy_kernels), or, for a device without kernels of its own, numpy's, whose ufuncs its
    module takes. A chunk that mixes numpy's and a device's arrays is refused by name."""
    if all(type(a) is np.ndarray or a is None for a in arrays):
        return kernels  # the host's: the backend kernels.select chose
    check_one_device(caller, arrays)
    backend = kernels_of(arrays)
    return kernels.numpy_kernels if backend is None else kernels.of(backend)


def _updated(leaves, moving, new, n_buffers):
    """Per tree (p, then n_buffers buffers), its leaves: `new` for the moving leaves (p given
    back the kind of leaf it was), as they were elsewhere. leaves: (p, g, buffers...)."""
    rows = [[leaf[0], *leaf[2:2 + n_buffers]] for leaf in leaves]
    for i, values in zip(moving, new):
        rows[i] = [_like(leaves[i][0], values[0]), *values[1:]] + rows[i][len(values):]
    return [list(tree) for tree in zip(*rows)] if rows else [[] for _ in range(1 + n_buffers)]


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

    def update(params, grads, state, *, in_place=False):
        """in_place=True writes the new p (and b) into the arrays given (as torch.optim)."""
        step = state.step + 1
        rate = _learning_rate(lr, step)
        velocity = state.velocity if momentum else tree_map(lambda p: None, params)
        leaves = _leaves("sgd", (params, grads, velocity), ("params", "grads", "state.velocity"))
        check_gradient_shapes("sgd.update", params, leaves, ("state.velocity",))
        moving = [i for i, (p, g, b) in enumerate(leaves)
                  if _moves(p, g) and (b is not None or not momentum)]
        columns = [[_as_array(a) for a in leaves[i] if a is not None]  # a number: 0-d
                   for i in moving]

        def kernel(key, p, g, *buffers_and_outputs):
            b, out_p, out_b = (buffers_and_outputs if momentum
                               else (None, *buffers_and_outputs, None))
            _chunk_kernels("sgd.update", (p, g, b)).sgd_update(
                p, g, b, out_p, out_b, rate, momentum, nesterov, weight_decay)
        new = update_in_chunks(kernel, columns,
                               [(c[0].dtype, array_module(c[0])) for c in columns], in_place)
        p, b = unflatten_each(params, _updated(leaves, moving, new, 1))
        return p, SGDState(step, b if momentum else None)
    return Optimizer(init, update)


def _adam(name, lr, betas, eps, weight_decay, decoupled):
    beta1, beta2 = float(betas[0]), float(betas[1])
    eps, weight_decay = float(eps), float(weight_decay)
    _check_rate_and_decay(name, lr, weight_decay)
    _check_setting(name, "betas", betas, 0 <= beta1 < 1 and 0 <= beta2 < 1,
                   "two numbers in [0, 1)")
    _check_setting(name, "eps", eps, eps >= 0, "a number >= 0")

    def init(params):
        return AdamState(np.int64(0), _zeros_like_floats(params), _zeros_like_floats(params),
                         _zero_counts(params))

    def update(params, grads, state, *, in_place=False):
        """in_place=True writes the new p, m and v into the arrays given (as torch.optim; no
        second copy of them, and the old values are gone). A leaf's t (its bias correction)
        counts the updates it moved in."""
        step = state.step + 1
        rate = _learning_rate(lr, step)
        leaves = _leaves(name, (params, grads, state.m, state.v, state.leaf_steps),
                         ("params", "grads", "state.m", "state.v", "state.leaf_steps"))
        check_gradient_shapes(f"{name}.update", params, leaves, ("state.m", "state.v"))
        moving = [i for i, (p, g, m, v, t) in enumerate(leaves)
                  if _moves(p, g) and m is not None and v is not None and t is not None]
        columns = [[_as_array(a) for a in leaves[i][:4]] for i in moving]
        counts = [leaves[i][4] + 1 for i in moving]  # the count this update brings

        def kernel(key, p, g, m, v, out_p, out_m, out_v):
            _chunk_kernels(f"{name}.update", (p, g, m, v)).adam_update(
                p, g, m, v, out_p, out_m, out_v, rate, beta1, beta2, eps, weight_decay,
                decoupled, int(key[1]))
        new = update_in_chunks(kernel, columns, [(c[0].dtype, t, array_module(c[0]))
                                                 for c, t in zip(columns, counts)], in_place)
        t = [leaf[4] for leaf in leaves]
        for i, count in zip(moving, counts):
            t[i] = count
        p, m, v, t = unflatten_each(params, _updated(leaves, moving, new, 2) + [t])
        return p, AdamState(step, m, v, t)
    return Optimizer(init, update)


def adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """Adam (Kingma & Ba 2015) as torch.optim.Adam; weight_decay adds weight_decay·p to g."""
    return _adam("adam", lr, betas, eps, weight_decay, decoupled=False)


def adamw(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW: p ← p(1 - lr·wd), then Adam."""
    return _adam("adamw", lr, betas, eps, weight_decay, decoupled=True)
