"""Gradient clipping over whole gradient trees, as torch.nn.utils.clip_grad_norm_ does over a
model's parameters."""
import math

import numpy as np

from ..core.tree import is_differentiable, tree_leaves, tree_map


def global_norm(grads):
    """√(Σ g²) over every array leaf of a gradient tree, summed in float64 where the leaves
    are (on a device, one copy to the host at the end)."""
    squares = [np.sum(np.square(g), dtype=np.float64)
               for g in tree_leaves(grads) if g is not None and is_differentiable(g)]
    return math.sqrt(float(sum(squares, 0.0)))


def clip_by_global_norm(grads, max_norm):
    """Scale all gradients by max_norm / ‖g‖ when the global norm ‖g‖ exceeds max_norm
    (torch.nn.utils.clip_grad_norm_, with its 1e-6 guard); max_norm > 0."""
    if not float(max_norm) > 0:
        raise ValueError(f"clip_by_global_norm: max_norm must be a number > 0, got {max_norm}")
    coefficient = float(max_norm) / (global_norm(grads) + 1e-6)
    if coefficient >= 1.0:
        return grads
    return tree_map(lambda g: g * coefficient if g is not None and is_differentiable(g) else g,
                    grads)
