"""Reductions over an axis (int, tuple or None) with keepdims, each pullback the cotangent
reshaped to the keepdims shape and broadcast back; cumsum; the fast sums the fused rules use."""
import inspect
import math

import numpy as np

from ..core.placement import array_module
from ..core.tracer import named_body, plain, primal, primitive
from .broadcasting import broadcast_to
from .checks import as_array, normalize_axes
from ..core.dtypes import wide_sum


def keepdims_shape(shape, axes):
    """`shape` with each reduced axis set to 1: where a reduction's cotangent is reshaped."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def reduction(name, forward, share, equation):
    """The reduction `name` from its row: out = forward(x, axes, keepdims); ∂out/∂x is 1 for
    share None (a sum's), share(shape, axes) (from the shapes alone: the pullback keeps
    neither x nor out) or share(x, out, axes) (a number or an array of x's shape)."""
    from_shapes = share is not None and list(inspect.signature(share).parameters) == [
        "shape", "axes"]

    def body(x, axis=None, keepdims=False):
        x = as_array(name, x)
        axes = normalize_axes(name, axis, x.ndim)
        out = forward(x, axes, keepdims)
        x_shape = x.shape
        factor = share(x_shape, axes) if from_shapes else None
        values = (x, out) if share is not None and not from_shapes else None

        def pullback(g):
            g = g.reshape(keepdims_shape(x_shape, axes))
            if share is not None:
                g = g * (factor if from_shapes else share(*values, axes))
            return (g if g.shape == x_shape else broadcast_to(g, x_shape)), None, None
        return out, pullback
    body.__doc__ = equation
    return primitive(named_body(body, name))


def _count_share(shape, axes):
    """1/n for a mean of n elements (any scale for an empty one, whose cotangent is empty)."""
    count = math.prod(shape[a] for a in axes)
    return 1.0 / count if count else 0.0


def _nonempty(op, x, axes):
    """x, refused where a reduction over `axes` has no value (max, min of an empty axis)."""
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"{op}: cannot reduce an empty axis of {x.shape}")
    return x


def _extreme_shares(x, out, axes):
    """1/k at each of the k entries of a slice of x that equal its extreme `out`, else 0."""
    is_extreme = primal(x) == primal(out).reshape(keepdims_shape(x.shape, axes))
    return (is_extreme / is_extreme.sum(axis=axes, keepdims=True)).astype(x.dtype)


def _axes_last(x, axes):
    """(x with `axes` moved last and merged: (..., n), the function that undoes it)."""
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, rest + list(axes))
    moved_shape = moved.shape
    inverse = tuple(np.argsort(rest + list(axes)))

    def undo(y):
        return np.transpose(y.reshape(moved_shape), inverse)
    return moved.reshape(moved_shape[:len(rest)] + (-1,)), undo


def product_of_others(x, axes, kept):
    """∂ prod / ∂x_i = Π_{j ≠ i} x_j over each slice along `axes` (`kept`: the products,
    keepdims): kept / x where no slice holds a zero, else without division (torch): on a
    plain x the products before i times those after it; on a traced one, row i of a
    (..., n, n) stack is x with x_i replaced by 1 (O(n²): higher order only)."""
    if not (primal(x) == 0).any():
        return kept / x
    moved, undo = _axes_last(x, axes)  # (..., n)
    xp = array_module(moved)
    if plain(moved):
        ones = xp.ones(moved.shape[:-1] + (1,), moved.dtype)
        before = np.cumprod(np.concatenate([ones, moved[..., :-1]], axis=-1), axis=-1)
        after = np.cumprod(np.concatenate([ones, moved[..., :0:-1]], axis=-1), axis=-1)
        return undo(before * after[..., ::-1])
    n = moved.shape[-1]
    return undo(prod(np.where(xp.eye(n, dtype=bool), 1.0, moved[..., None, :]), axis=-1))


sum = reduction("sum", wide_sum, None,
                "Σ over `axis`; the cotangent is copied back to every summed element.")
mean = reduction("mean", lambda x, axes, keep: x.mean(axis=axes, keepdims=keep), _count_share,
                 "Σ over `axis` divided by the number n of elements summed; d/dx = 1/n.")
max = reduction("max", lambda x, axes, keep: _nonempty("max", x, axes).max(axes, keepdims=keep),
                _extreme_shares, "Largest element over `axis`; tied maxima share the cotangent "
                "equally (like torch.amax).")
min = reduction("min", lambda x, axes, keep: _nonempty("min", x, axes).min(axes, keepdims=keep),
                _extreme_shares, "Smallest element over `axis`; tied minima share the cotangent "
                "equally (like torch.amin).")
prod = reduction("prod", lambda x, axes, keep: x.prod(axis=axes, keepdims=keep),
                 lambda x, out, axes: product_of_others(
                     x, axes, out.reshape(keepdims_shape(x.shape, axes))),
                 "Π over `axis`; d/dx_i = Π_{j ≠ i} x_j (`product_of_others`), exact where x "
                 "has zeros.")


def var(x, axis=None, keepdims=False, ddof=0):
    """Variance over `axis`: Σ (x - mean)² / (n - ddof)."""
    x = as_array("var", x)
    axes = normalize_axes("var", axis, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    if ddof and count - ddof <= 0:
        raise ValueError(f"var: ddof={ddof} leaves no degrees of freedom for {count} elements")
    centered = x - mean(x, axes, keepdims=True)
    squares = centered * centered
    if ddof:  # scale before the mean: a 0-d array times a number would be a numpy scalar
        squares = squares * (count / (count - ddof))
    return mean(squares, axes, keepdims)


def root_of_squares(s):
    """√s for a sum of squares s >= 0, taken of 1 where s = 0 and replaced by 0: under an
    enclosing trace (second order) the sqrt pullback never divides 0 by 0. A nan stays nan."""
    zero = primal(s) == 0
    return np.where(zero, 0, np.sqrt(np.where(zero, 1, s)))


def std(x, axis=None, keepdims=False, ddof=0):
    """Standard deviation over `axis`: √var (`root_of_squares`: derivative 0 where var = 0)."""
    return root_of_squares(var(x, axis, keepdims, ddof))


@primitive
def cumsum(x, axis=None):
    """np.cumsum: running sums along `axis`; dx = reverse(cumsum(reverse(g)))."""
    x = as_array("cumsum", x)
    x_shape = x.shape
    if axis is None:
        x, axis = x.reshape(-1), 0
    (axis,) = normalize_axes("cumsum", axis, x.ndim)
    out = np.cumsum(x, axis)
    backwards = (slice(None),) * axis + (slice(None, None, -1),)

    def cumsum_pullback(g):
        return cumsum(g[backwards], axis)[backwards].reshape(x_shape), None
    return out, cumsum_pullback


def sum_last(x):
    """Σ over the last axis, keepdims: np.einsum on plain arrays (faster than x.sum(-1) on
    short rows), the recorded op on traced ones."""
    if plain(x):
        return np.einsum("...i->...", x)[..., None]
    return x.sum(axis=-1, keepdims=True)


def sum_keepdims(x, axis):
    """Σ over one axis, keepdims (the fast path when it is the last)."""
    return sum_last(x) if axis == x.ndim - 1 else x.sum(axis=axis, keepdims=True)


def mean_last(x):
    """Mean over the last axis, keepdims (see sum_last); NaN over an empty axis (as np.mean)."""
    return sum_last(x) * (1.0 / x.shape[-1] if x.shape[-1] else np.nan)


def mean_of_products_last(a, b):
    """mean_last(a ⊙ b), on plain arrays without making a ⊙ b."""
    if plain(a, b):
        return np.einsum("...i,...i->...", a, b)[..., None] * (
            1.0 / a.shape[-1] if a.shape[-1] else np.nan)
    return mean_last(a * b)
