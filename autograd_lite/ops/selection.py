"""Elementwise selections, where and clip: each output element's cotangent goes to the
operand it was taken from (at a tie, as each op states)."""
import numpy as np

from ..core.tracer import primal, primitive
from .broadcasting import shape_of, unbroadcast
from ..core.dtypes import check_same_float_dtype, settles_weak_floats
from .checks import as_array, as_operand, as_operands


@primitive
@settles_weak_floats
def where(condition, x, y):
    """x where `condition` (a bool array) holds, else y; broadcast like np.where."""
    condition = as_array("where", condition, "condition")
    x, y = as_operands("where", x, y, ("x", "y"))
    if condition.dtype != np.bool_:
        raise TypeError(f"where: condition must be a bool array, got {condition.dtype}")
    check_same_float_dtype("where", x, y)
    try:
        out = np.where(condition, x, y)
    except ValueError:
        raise ValueError(f"where: condition {condition.shape}, x {shape_of(x)} and "
                         f"y {shape_of(y)} do not broadcast together") from None
    x_shape, y_shape = shape_of(x), shape_of(y)

    def where_pullback(g):
        return (None,
                lambda: unbroadcast(np.where(condition, g, 0), x_shape),
                lambda: unbroadcast(np.where(condition, 0, g), y_shape))
    return out, where_pullback


def _clip_routes(x, a_min, a_max):
    """Where x, a_min and a_max each receive the cotangent (bounds moved apart by an
    infinitesimal):

        x      where a_min ≤ x ≤ a_max (a tie with a bound counts as inside)
        a_min  where x < a_min ≤ a_max (below equal bounds too)
        a_max  where x > a_max ≥ a_min, or where a_max < a_min (crossed bounds: the output
               is a_max, as np.clip makes it)

    A missing bound (None) is -∞ or +∞."""
    x = primal(x)
    low = -np.inf if a_min is None else primal(a_min)
    high = np.inf if a_max is None else primal(a_max)
    to_x = (x >= low) & (x <= high)
    to_min = (x < low) & (low <= high)
    to_max = (x > high) | (high < low)
    return to_x, to_min, to_max


def _shape_or_none(bound):
    return None if bound is None else shape_of(bound)


@primitive
@settles_weak_floats
def clip(x, a_min, a_max):
    """np.clip: min(max(x, a_min), a_max), a bound None for none; the cotangent goes where
    the output was taken from, x's at a tie with a bound (`_clip_routes`)."""
    x = as_array("clip", x)
    bounds = [None if b is None else as_operand("clip", b, name)
              for b, name in ((a_min, "a_min"), (a_max, "a_max"))]
    for bound in bounds:
        if bound is not None:
            check_same_float_dtype("clip", x, bound)
    a_min, a_max = bounds
    try:
        out = np.clip(x, a_min, a_max)
    except ValueError:
        raise ValueError(f"clip: x {x.shape}, a_min {_shape_or_none(a_min)} and a_max "
                         f"{_shape_or_none(a_max)} do not broadcast together") from None
    x_shape, min_shape, max_shape = x.shape, shape_of(a_min), shape_of(a_max)

    def clip_pullback(g):
        to_x, to_min, to_max = _clip_routes(x, a_min, a_max)
        return (lambda: unbroadcast(g * to_x, x_shape),
                lambda: unbroadcast(g * to_min, min_shape),
                lambda: unbroadcast(g * to_max, max_shape))
    return out, clip_pullback
