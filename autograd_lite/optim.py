"""Optimizers over pytrees: `opt.init(params) -> state`, `opt.update(params, grads, state)
-> (params, state)`. Nothing is updated in place; state is a pytree (it saves with ag.save).

Only differentiable leaves (tree.is_differentiable) with a gradient move; static
leaves (n_heads, Hyper settings, activation functions) and leaves whose gradient is
None pass through. The learning rate is a number or a schedule `lr(step)`, step
counting from 1.
"""
import math
from typing import Any, Callable, NamedTuple

import numpy as np

from .tree import is_differentiable, tree_leaves, tree_map


class Optimizer(NamedTuple):
    init: Callable
    update: Callable


class SGDState(NamedTuple):
    step: int
    velocity: Any


class AdamState(NamedTuple):
    step: int
    m: Any
    v: Any


def _zeros_like_floats(params):
    return tree_map(lambda p: np.zeros_like(p) if is_differentiable(p) else None, params)


def _learning_rate(lr, step):
    # a Python float: a numpy float64 scalar would promote float32 parameters (NEP 50)
    return float(lr(step) if callable(lr) else lr)


def _moves(p, g):
    return g is not None and is_differentiable(p)


def sgd(lr, momentum=0.0):
    """p ← p - lr·b,  b ← momentum·b + g  (PyTorch's SGD; b = g without momentum)."""
    momentum = float(momentum)

    def init(params):
        return SGDState(0, _zeros_like_floats(params) if momentum else None)

    def update(params, grads, state):
        step = state.step + 1
        rate = _learning_rate(lr, step)
        if not momentum:
            return tree_map(lambda p, g: p - rate * g if _moves(p, g) else p, params, grads), \
                SGDState(step, None)
        velocity = tree_map(lambda b, g: momentum * b + g if g is not None and b is not None else b,
                            state.velocity, grads)
        params = tree_map(lambda p, b, g: p - rate * b if _moves(p, g) else p,
                          params, velocity, grads)
        return params, SGDState(step, velocity)
    return Optimizer(init, update)


def _adam(lr, betas, eps, weight_decay, decoupled):
    beta1, beta2, eps, weight_decay = float(betas[0]), float(betas[1]), float(eps), float(weight_decay)

    def init(params):
        return AdamState(0, _zeros_like_floats(params), _zeros_like_floats(params))

    def update(params, grads, state):
        step = state.step + 1
        rate = _learning_rate(lr, step)
        if weight_decay and not decoupled:  # Adam's L2 penalty: added to the gradient
            grads = tree_map(lambda g, p: g + weight_decay * p if _moves(p, g) else g, grads, params)
        m = tree_map(lambda m, g: beta1 * m + (1 - beta1) * g if g is not None and m is not None
                     else m, state.m, grads)
        v = tree_map(lambda v, g: beta2 * v + (1 - beta2) * (g * g) if g is not None and v is not None
                     else v, state.v, grads)
        step_size = rate / (1 - beta1 ** step)
        root_correction = math.sqrt(1 - beta2 ** step)

        def move(p, m, v, g):
            if not _moves(p, g):
                return p
            if decoupled and weight_decay:  # AdamW: decay the weights themselves
                p = p * (1 - rate * weight_decay)
            return p - step_size * m / (np.sqrt(v) / root_correction + eps)
        return tree_map(move, params, m, v, grads), AdamState(step, m, v)
    return Optimizer(init, update)


def adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """Adam (Kingma & Ba 2015) as torch.optim.Adam; weight_decay adds weight_decay·p to g."""
    return _adam(lr, betas, eps, weight_decay, decoupled=False)


def adamw(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW: p ← p(1 - lr·wd) before the Adam step."""
    return _adam(lr, betas, eps, weight_decay, decoupled=True)


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
