"""check_gradients: reverse mode against central differences, in float64, leaf by leaf.

    ∂f/∂x_i ≈ (f(x + h e_i) - f(x - h e_i)) / 2h          (small leaves: every coordinate)
    ⟨∇f, d⟩ ≈ (f(x + h d) - f(x - h d)) / 2h               (large leaves: random unit directions d)
"""
import numpy as np

from .core.differentiate import argument_names, gradient
from .core.tracer import primal
from .core.tree import is_differentiable, tree_leaves, tree_map, tree_paths, tree_unflatten


def _as_float64(leaf):
    return np.asarray(leaf, dtype=np.float64) if is_differentiable(leaf) else leaf


def _kind(leaf):
    """'int64 array (3,)', 'str', ...: what a leaf is, for a message."""
    if isinstance(leaf, np.ndarray):
        return f"{leaf.dtype} array {leaf.shape}"
    return type(leaf).__name__


def _directions(leaf, max_coordinates, n_directions, rng):
    """Unit coordinate vectors for a small leaf, random unit vectors for a large one."""
    if leaf.size <= max_coordinates:
        for i in range(leaf.size):
            d = np.zeros(leaf.size)
            d[i] = 1.0
            yield d.reshape(leaf.shape)
    else:
        for _ in range(n_directions):
            d = rng.standard_normal(leaf.shape)
            yield d / np.linalg.norm(d)


def check_gradients(f, *args, eps=1e-6, rtol=1e-5, atol=1e-8, max_coordinates=16,
                    n_directions=3, seed=0):
    """Compare ag.gradient(f, *args), args in float64, with central differences for every
    float leaf: {leaf path: largest absolute error}, or an AssertionError naming the worst
    leaf where an error exceeds atol + rtol·|numerical|. No float leaf at all is a
    ValueError: an empty result would read as a pass."""
    args = tuple(tree_map(_as_float64, a) for a in args)
    leaves = tree_leaves(args)
    if not any(is_differentiable(leaf) for leaf in leaves):
        raise ValueError(f"check_gradients: nothing to check: no argument holds a float leaf "
                         f"(they hold {', '.join(_kind(leaf) for leaf in leaves) or 'nothing'}, "
                         f"which have no gradient); pass the floats to differentiate")
    grads = gradient(f, *args)
    grad_leaves = tree_leaves(grads)
    paths = [p for name, a in zip(argument_names(f, len(args)), args) for p in tree_paths(a, name)]

    def f_at(i, value):
        moved = list(leaves)
        moved[i] = value
        return float(primal(f(*tree_unflatten(args, moved))))

    rng = np.random.default_rng(seed)
    errors, worst = {}, None
    for i, (leaf, g, path) in enumerate(zip(leaves, grad_leaves, paths)):
        if not is_differentiable(leaf):
            continue
        leaf_error = 0.0
        for d in _directions(leaf, max_coordinates, n_directions, rng):
            numerical = (f_at(i, leaf + eps * d) - f_at(i, leaf - eps * d)) / (2 * eps)
            analytic = float(np.sum(g * d))
            error = abs(analytic - numerical)
            leaf_error = max(leaf_error, error)
            excess = error / (atol + rtol * abs(numerical))
            if np.isnan(excess):  # NaN on either side is no agreement
                excess = np.inf
            if excess > 1 and (worst is None or excess > worst[0]):
                worst = (excess, path, analytic, numerical)
        errors[path] = leaf_error
    if worst is not None:
        _, path, analytic, numerical = worst
        raise AssertionError(
            f"check_gradients: worst leaf '{path}': reverse mode {analytic:.10g}, central "
            f"differences {numerical:.10g} (difference {abs(analytic - numerical):.3g}, "
            f"tolerance {atol + rtol * abs(numerical):.3g}). Largest error per leaf: "
            + ", ".join(f"{p}: {e:.3g}" for p, e in errors.items()))
    return errors
