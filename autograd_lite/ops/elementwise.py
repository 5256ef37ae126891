"""Elementwise primitives: arithmetic with numpy broadcasting, casts, and the unary functions.

Each body computes its output and defines its pullback right below it. A binary
pullback gives each operand's cotangent as a function of no arguments, which the
engine calls only for an operand that is traced (never for a Python number or a
constant array), and hands it to `unbroadcast`.
"""
import functools
import math

import numpy as np

from .. import kernels
from ..core.devices import on_host
from ..core.dtypes import settles_weak_floats
from ..core.rules import fast_rule, fusable, is_recorded
from ..core.tracer import primal, primitive
from ..core.tree import is_python_number
from .broadcasting import broadcast_binary, shape_of, unbroadcast
from .checks import as_array, as_operands
from .linalg import square_of_norm
from .selection import where


@primitive
@settles_weak_floats
def add(a, b):
    """a + b"""
    a, b = as_operands("add", a, b)
    out = broadcast_binary("add", np.add, a, b)  # checks the operands
    a_shape, b_shape = shape_of(a), shape_of(b)

    def add_pullback(g):
        return lambda: unbroadcast(g, a_shape), lambda: unbroadcast(g, b_shape)
    return out, add_pullback


@primitive
@settles_weak_floats
def sub(a, b):
    """a - b"""
    a, b = as_operands("sub", a, b)
    out = broadcast_binary("sub", np.subtract, a, b)  # checks the operands
    a_shape, b_shape = shape_of(a), shape_of(b)

    def sub_pullback(g):
        return lambda: unbroadcast(g, a_shape), lambda: unbroadcast(-g, b_shape)
    return out, sub_pullback


@primitive(name="mul")
@settles_weak_floats
def _multiply(a, b):
    """a * b"""
    a, b = as_operands("mul", a, b)
    out = broadcast_binary("mul", np.multiply, a, b)

    def mul_pullback(g):
        return lambda: unbroadcast(g * b, a.shape), lambda: unbroadcast(g * a, b.shape)
    return out, mul_pullback


@primitive
@settles_weak_floats
def div(a, b):
    """a / b"""
    a, b = as_operands("div", a, b)
    out = broadcast_binary("div", np.true_divide, a, b)
    a_shape = shape_of(a)

    def div_pullback(g):
        return lambda: unbroadcast(g / b, a_shape), lambda: unbroadcast(-g * out / b, b.shape)
    return out, div_pullback


def _power_below(a, b):
    """a ** (b - 1), the factor of d(a^b)/da, taken as 0 where b == 0 (where a^(b-1) may be
    inf at a = 0 and 0 · inf would give NaN; torch does the same)."""
    if is_python_number(b):
        return 0.0 if b == 0 else a ** (b - 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # the inf at a = 0, b = 0 is discarded
        return np.where(b == 0, 0, a ** (b - 1))


def _log_base(a):
    """log(a), the factor of d(a^b)/db, taken as 0 where a <= 0. A Python float for a
    Python number a, so that it keeps b's dtype (2 ** x, x float32)."""
    if is_python_number(a):
        return math.log(a) if a > 0 else 0.0
    return np.log(np.where(primal(a) > 0, a, 1))


@primitive(name="pow")
@settles_weak_floats
def _power(a, b):
    """a ** b. The derivative in b uses log(a) and is taken as 0 where a <= 0."""
    a, b = as_operands("pow", a, b)
    out = broadcast_binary("pow", np.power, a, b)

    def pow_pullback(g):
        return (lambda: unbroadcast(g * b * _power_below(a, b), a.shape),
                lambda: unbroadcast(g * out * _log_base(a), b.shape))
    return out, pow_pullback


@functools.wraps(_multiply)
def mul(a, b):
    """a * b; the square of a traced norm, n * n, is differentiated as Σ x² (linalg)."""
    squared = square_of_norm(a, b)
    return _multiply(a, b) if squared is None else squared


@functools.wraps(_power)
def pow(a, b):
    """a ** b; the square of a traced norm, n ** 2, is differentiated as Σ x² (linalg)."""
    squared = square_of_norm(a, a) if is_python_number(b) and b == 2 else None
    return _power(a, b) if squared is None else squared


@primitive
def neg(x):
    """-x"""
    x = as_array("neg", x)
    out = -x

    def neg_pullback(g):
        return (-g,)
    return out, neg_pullback


@primitive(name="astype")
def float_cast(x, dtype):
    """x converted to the float dtype `dtype`; the cotangent is converted back to x's dtype."""
    out = x.astype(dtype)
    x_dtype = x.dtype

    def astype_pullback(g):
        return g.astype(x_dtype), None
    return out, astype_pullback


def astype(x, dtype):
    """x converted to `dtype` (x.astype(dtype) on a traced value). To a float dtype the
    conversion is differentiable, its cotangent converted back to x's dtype; to an integer,
    bool or complex dtype the result is a constant (no gradient flows through it)."""
    if not hasattr(x, "astype"):
        raise TypeError(f"astype: x must be an array, got {type(x).__name__}")
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return float_cast(x, dtype)
    return primal(x).astype(dtype)


@primitive
def exp(x):
    """e^x; d/dx = e^x, taken from the output."""
    x = as_array("exp", x)
    y = np.exp(x)

    def exp_pullback(g):
        return (g * y,)
    return y, exp_pullback


@primitive
def log(x):
    """Natural logarithm; d/dx = 1/x."""
    x = as_array("log", x)
    out = np.log(x)

    def log_pullback(g):
        return (g / x,)
    return out, log_pullback


@primitive
def sqrt(x):
    """√x; d/dx = 1 / (2√x)."""
    x = as_array("sqrt", x)
    y = np.sqrt(x)

    def sqrt_pullback(g):
        return (g / (2 * y),)
    return y, sqrt_pullback


@primitive
def tanh(x):
    """tanh x; d/dx = 1 - tanh²x."""
    x = as_array("tanh", x)
    y = np.tanh(x)

    def tanh_pullback(g):
        return (g * (1 - y * y),)
    return y, tanh_pullback


@primitive
def sigmoid(x):
    """σ(x) = 1 / (1 + e^-x); σ' = σ(1 - σ), from the output.

    With e = e^-|x| in (0, 1]: σ = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, neither
    of which overflows or cancels, so σ keeps its relative precision on both sides (σ(-20)
    is 2.06e-9 in float32, where (1 + tanh(x/2)) / 2 gives 0)."""
    x = as_array("sigmoid", x)
    e = np.exp(-np.abs(x))
    r = 1 / (1 + e)
    y = np.where(primal(x) >= 0, r, e * r)

    def sigmoid_pullback(g):
        return (g * y * (1 - y),)
    return y, sigmoid_pullback


@fusable(drawn_as_op=True)
def relu(x):
    """max(x, 0); the derivative at 0 is 0 (as in PyTorch). Not x times its mask: -inf · 0
    would be NaN and -1 · 0 would be -0. Written out: x selected where it is positive, else 0."""
    x = as_array("relu", x)
    return where(primal(x) > 0, x, 0)


@fast_rule(relu, applies=on_host, takes_traced=True)
def relu_rule(x):
    """relu by kernels.relu_forward / relu_backward."""
    x = as_array("relu", x)
    out, saved = kernels.relu_forward(x)
    shape, dtype = out.shape, out.dtype  # (the pullback keeps these, not out)

    def relu_pullback(g):
        if is_recorded(g):  # a traced g: times the plain derivative, 1 or 0
            return (g * kernels.relu_backward(np.ones(shape, dtype), saved),)
        return (kernels.relu_backward(g, saved),)
    return out, relu_pullback


@fusable(drawn_as_op=True)
def gelu(x):
    """GELU, tanh form (GPT-2; torch's gelu(approximate="tanh")):

        gelu(x) = x/2 · (1 + tanh(u)),  u = √(2/π) (x + 0.044715 x³)
        gelu'(x) = (1 + t)/2 + x/2 · (1 - t²) · √(2/π) (1 + 3 · 0.044715 x²),  t = tanh(u)
    """
    x = as_array("gelu", x)
    c, cubic = kernels.numpy_kernels.GELU_C, kernels.numpy_kernels.GELU_CUBIC
    return 0.5 * x * (1 + tanh(c * (x + cubic * x * x * x)))


@fast_rule(gelu, applies=on_host, takes_traced=True)
def gelu_rule(x):
    """gelu by kernels.gelu_forward / gelu_backward."""
    x = as_array("gelu", x)
    out, saved = kernels.gelu_forward(x)
    shape, dtype = out.shape, out.dtype  # (the pullback keeps these, not out)

    def gelu_pullback(g):
        if is_recorded(g):  # a traced g: times the plain derivative
            return (g * kernels.gelu_backward(np.ones(shape, dtype), saved),)
        return (kernels.gelu_backward(g, saved),)
    return out, gelu_pullback


@primitive
def abs(x):
    """|x|; the derivative at 0 is 0."""
    x = as_array("abs", x)
    out = np.abs(x)
    sign = np.sign(primal(x))

    def abs_pullback(g):
        return (g * sign,)
    return out, abs_pullback


@primitive
def sin(x):
    """sin x; d/dx = cos x."""
    x = as_array("sin", x)
    out = np.sin(x)

    def sin_pullback(g):
        return (g * np.cos(x),)
    return out, sin_pullback


@primitive
def cos(x):
    """cos x; d/dx = -sin x."""
    x = as_array("cos", x)
    out = np.cos(x)

    def cos_pullback(g):
        return (-g * np.sin(x),)
    return out, cos_pullback


@primitive
def log1p(x):
    """log(1 + x), exact for tiny x; d/dx = 1 / (1 + x)."""
    x = as_array("log1p", x)
    out = np.log1p(x)

    def log1p_pullback(g):
        return (g / (1 + x),)
    return out, log1p_pullback


@primitive
def expm1(x):
    """eˣ - 1, exact for tiny x; d/dx = eˣ, taken from the output as y + 1."""
    x = as_array("expm1", x)
    y = np.expm1(x)

    def expm1_pullback(g):
        return (g * (y + 1),)
    return y, expm1_pullback


@primitive
def softplus(x):
    """log(1 + eˣ), computed as max(x, 0) + log1p(e^-|x|): no overflow for large x and no
    rounding to 0 for very negative x; d/dx = σ(x)."""
    x = as_array("softplus", x)
    out = np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))

    def softplus_pullback(g):
        return (g * sigmoid(x),)
    return out, softplus_pullback


def silu(x):
    """x · σ(x) (the swish of Ramachandran et al.; torch's silu)."""
    x = as_array("silu", x)
    return mul(x, sigmoid(x))


def square(x):
    """x², as x · x."""
    x = as_array("square", x)
    return mul(x, x)
