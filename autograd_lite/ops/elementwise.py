"""Elementwise primitives: arithmetic with numpy broadcasting, and the unary functions.

Each body computes its output and defines its pullback right below it. Binary
pullbacks hand their cotangents to `unbroadcast`; Python numbers are constants
and get None.
"""
import math

import numpy as np

from ..tracer import primal, primitive
from .common import broadcast_binary, check_same_float_dtype, is_number, lazy, shape_of, unbroadcast


@primitive
def add(a, b):
    """a + b"""
    out = broadcast_binary("add", np.add, a, b)  # checks the operands
    a_shape, b_shape = shape_of(a), shape_of(b)

    def add_pullback(g):
        return (lazy(a_shape, lambda: unbroadcast(g, a_shape)),
                lazy(b_shape, lambda: unbroadcast(g, b_shape)))
    return out, add_pullback


@primitive
def sub(a, b):
    """a - b"""
    out = broadcast_binary("sub", np.subtract, a, b)  # checks the operands
    a_shape, b_shape = shape_of(a), shape_of(b)

    def sub_pullback(g):
        return (lazy(a_shape, lambda: unbroadcast(g, a_shape)),
                lazy(b_shape, lambda: unbroadcast(-g, b_shape)))
    return out, sub_pullback


@primitive
def mul(a, b):
    """a * b"""
    def mul_pullback(g):
        return (lazy(a, lambda: unbroadcast(g * b, a.shape)),
                lazy(b, lambda: unbroadcast(g * a, b.shape)))
    return broadcast_binary("mul", np.multiply, a, b), mul_pullback


@primitive
def div(a, b):
    """a / b"""
    out = broadcast_binary("div", np.true_divide, a, b)
    a_shape = shape_of(a)

    def div_pullback(g):
        return (lazy(a_shape, lambda: unbroadcast(g / b, a_shape)),
                lazy(b, lambda: unbroadcast(-g * out / b, b.shape)))
    return out, div_pullback


def _power_below(a, b):
    """a ** (b - 1), the factor of d(a^b)/da, taken as 0 where b == 0 (where a^(b-1) may be
    inf at a = 0 and 0 · inf would give NaN; torch does the same)."""
    if is_number(b):
        return 0.0 if b == 0 else a ** (b - 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # the inf at a = 0, b = 0 is discarded
        return np.where(b == 0, 0, a ** (b - 1))


@primitive
def pow(a, b):
    """a ** b. The derivative in b uses log(a) and is taken as 0 where a <= 0."""
    out = broadcast_binary("pow", np.power, a, b)

    def pow_pullback(g):
        da = lazy(a, lambda: unbroadcast(g * b * _power_below(a, b), a.shape))
        if is_number(b):
            return da, None
        if is_number(a):  # a Python float, so that it keeps b's dtype (2 ** x, x float32)
            log_a = math.log(a) if a > 0 else 0.0
        else:
            log_a = np.log(np.where(primal(a) > 0, a, 1))
        return da, lambda: unbroadcast(g * out * log_a, b.shape)
    return out, pow_pullback


@primitive
def neg(x):
    """-x"""
    return -x, lambda g: (-g,)


@primitive
def astype(x, dtype):
    """x converted to the float dtype `dtype`; the cotangent is converted back to x's dtype."""
    x_dtype = x.dtype
    return x.astype(dtype), lambda g: (g.astype(x_dtype), None)


@primitive
def exp(x):
    """e^x; d/dx = e^x, taken from the output."""
    y = np.exp(x)
    return y, lambda g: (g * y,)


@primitive
def log(x):
    """Natural logarithm; d/dx = 1/x."""
    return np.log(x), lambda g: (g / x,)


@primitive
def sqrt(x):
    """√x; d/dx = 1 / (2√x)."""
    y = np.sqrt(x)
    return y, lambda g: (g / (2 * y),)


@primitive
def tanh(x):
    """tanh x; d/dx = 1 - tanh²x."""
    y = np.tanh(x)
    return y, lambda g: (g * (1 - y * y),)


@primitive
def sigmoid(x):
    """σ(x) = 1 / (1 + e^-x), computed as (1 + tanh(x/2)) / 2, stable for any x; σ' = σ(1 - σ)."""
    y = (np.tanh(x * 0.5) + 1) * 0.5
    return y, lambda g: (g * y * (1 - y),)


@primitive
def relu(x):
    """max(x, 0); the derivative at 0 is 0 (as in PyTorch)."""
    positive = primal(x) > 0
    return x * positive, lambda g: (g * positive,)


_GELU_C = math.sqrt(2.0 / math.pi)


@primitive
def gelu(x):
    """GELU, tanh form (GPT-2; torch's gelu(approximate="tanh")):

        gelu(x) = x/2 · (1 + tanh(u)),  u = √(2/π) (x + 0.044715 x³)
        gelu'(x) = (1 + t)/2 + x/2 · (1 - t²) · √(2/π) (1 + 3 · 0.044715 x²),  t = tanh(u)
    """
    t = np.tanh(_GELU_C * (x + 0.044715 * x * x * x))
    out = 0.5 * x * (1 + t)

    def gelu_pullback(g):
        du = _GELU_C * (1 + 3 * 0.044715 * x * x)
        return (g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du),)
    return out, gelu_pullback


@primitive
def abs(x):
    """|x|; the derivative at 0 is 0."""
    sign = np.sign(primal(x))
    return np.abs(x), lambda g: (g * sign,)


def _tie_weights(a, b, out_dtype):
    """1 where a wins, 1/2 where a and b tie, 0 where b wins (PyTorch splits ties evenly)."""
    pa, pb = primal(a), primal(b)
    return ((pa > pb) + 0.5 * (pa == pb)).astype(out_dtype)


@primitive
def maximum(a, b):
    """Elementwise max(a, b); a tie sends half the cotangent to each side."""
    out = broadcast_binary("maximum", np.maximum, a, b)

    def maximum_pullback(g):
        wa = _tie_weights(a, b, out.dtype)
        return (lazy(a, lambda: unbroadcast(g * wa, a.shape)),
                lazy(b, lambda: unbroadcast(g * (1 - wa), b.shape)))
    return out, maximum_pullback


@primitive
def minimum(a, b):
    """Elementwise min(a, b); a tie sends half the cotangent to each side."""
    out = broadcast_binary("minimum", np.minimum, a, b)

    def minimum_pullback(g):
        wb = _tie_weights(a, b, out.dtype)
        return (lazy(a, lambda: unbroadcast(g * (1 - wb), a.shape)),
                lazy(b, lambda: unbroadcast(g * wb, b.shape)))
    return out, minimum_pullback


@primitive
def where(condition, x, y):
    """x where `condition` (a bool array) holds, else y; broadcast like np.where."""
    if getattr(condition, "dtype", None) != np.bool_:
        raise TypeError(f"where: condition must be a bool array, got "
                        f"{getattr(condition, 'dtype', type(condition).__name__)}")
    check_same_float_dtype("where", x, y)
    try:
        out = np.where(condition, x, y)
    except ValueError:
        raise ValueError(f"where: condition {condition.shape}, x {np.shape(primal(x))} and "
                         f"y {np.shape(primal(y))} do not broadcast together") from None

    x_shape, y_shape = shape_of(x), shape_of(y)

    def where_pullback(g):
        return (None,
                lazy(x_shape, lambda: unbroadcast(np.where(condition, g, 0), x_shape)),
                lazy(y_shape, lambda: unbroadcast(np.where(condition, 0, g), y_shape)))
    return out, where_pullback
