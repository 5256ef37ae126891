"""Optimizers over pytrees: `opt.init(params) -> state`, `opt.update(params, grads, state)
-> (params, state)`. Nothing is updated in place; state is a pytree (it saves with ag.save).

Each optimizer follows its torch.optim namesake. Only differentiable leaves
(tree.is_differentiable) with a gradient move; static leaves (n_heads, Hyper settings,
activation functions) pass through, and a leaf whose gradient is None is skipped
entirely, as torch skips a parameter whose .grad is None: it neither moves nor
advances its own step count. The learning rate is a number or a schedule `lr(step)`,
called with the number of updates made, counting from 1.

Step counts are np.int64 scalars: they save and load as arrays do (`ag.load` checks
their dtype, not their value, so a fresh state is the `like` of a saved one).
"""
import math
from typing import Any, Callable, NamedTuple

import numpy as np

from .tree import is_differentiable, tree_leaves, tree_map


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


def _adam(name, lr, betas, eps, weight_decay, decoupled):
    beta1, beta2, eps, weight_decay = float(betas[0]), float(betas[1]), float(eps), float(weight_decay)
    _check_rate_and_decay(name, lr, weight_decay)
    _check_setting(name, "betas", betas, 0 <= beta1 < 1 and 0 <= beta2 < 1, "two numbers in [0, 1)")
    _check_setting(name, "eps", eps, eps >= 0, "a number >= 0")

    def init(params):
        return AdamState(np.int64(0), _zeros_like_floats(params), _zeros_like_floats(params),
                         _zero_counts(params))

    def update(params, grads, state):
        step = state.step + 1
        rate = _learning_rate(lr, step)
        if not decoupled:  # Adam's L2 penalty: added to the gradient
            grads = _with_weight_decay(grads, params, weight_decay, f"{name}.update")
        leaf_steps = tree_map(lambda t, g: t + 1 if g is not None and t is not None else t,
                              state.leaf_steps, grads, caller=f"{name}.update",
                              names=("state.leaf_steps", "grads"))
        m = tree_map(lambda m, g: beta1 * m + (1 - beta1) * g if g is not None and m is not None
                     else m, state.m, grads, caller=f"{name}.update", names=("state.m", "grads"))
        v = tree_map(lambda v, g: beta2 * v + (1 - beta2) * (g * g) if g is not None and v is not None
                     else v, state.v, grads, caller=f"{name}.update", names=("state.v", "grads"))

        def move(p, g, m, v, t):
            """p ← p - lr/(1 - β1^t) · m / (√v / √(1 - β2^t) + eps), t the leaf's count."""
            if not _moves(p, g):
                return p
            if decoupled and weight_decay:  # AdamW: decay the weights themselves
                p = p * (1 - rate * weight_decay)
            step_size = rate / (1 - beta1 ** int(t))
            root_correction = math.sqrt(1 - beta2 ** int(t))
            return p - step_size * m / (np.sqrt(v) / root_correction + eps)
        return tree_map(move, params, grads, m, v, leaf_steps, caller=f"{name}.update",
                        names=("params", "grads", "state.m", "state.v", "state.leaf_steps")), \
            AdamState(step, m, v, leaf_steps)
    return Optimizer(init, update)


def adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """Adam (Kingma & Ba 2015) as torch.optim.Adam; weight_decay adds weight_decay·p to g."""
    return _adam("adam", lr, betas, eps, weight_decay, decoupled=False)


def adamw(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW: p ← p(1 - lr·wd) before the Adam step."""
    return _adam("adamw", lr, betas, eps, weight_decay, decoupled=True)


def warmup_schedule(d_model, warmup, factor=1.0):
    """The paper's rate (§5.3): lr(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""
    def lr(step):
        step = max(step, 1)
        return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
    return lr


def global_norm(grads):
    """√(Σ g²) over every array leaf of a gradient tree."""
    return math.sqrt(sum(float(np.sum(np.square(g), dtype=np.float64))
                         for g in tree_leaves(grads) if g is not None and is_differentiable(g)))


def clip_by_global_norm(grads, max_norm):
    """Scale all gradients by max_norm / ‖g‖ when the global norm ‖g‖ exceeds max_norm
    (torch.nn.utils.clip_grad_norm_, with its 1e-6 guard)."""
    coefficient = float(max_norm) / (global_norm(grads) + 1e-6)
    if coefficient >= 1.0:
        return grads
    return tree_map(lambda g: g * coefficient if g is not None and is_differentiable(g) else g,
                    grads)
