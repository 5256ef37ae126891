"""Elementwise ops with numpy broadcasting: the arithmetic written out, each body with its
pullback below it; casts; and the functions of one or two arrays as rows of a table (name,
numpy's function, cotangent, equation). A binary pullback gives each operand's cotangent as a
function of no arguments, called only for a traced operand."""
import functools
import inspect
import math

import numpy as np

from .. import kernels
from ..core.devices import on_host
from ..core.dtypes import settles_weak_floats
from ..core.rules import fast_rule, fusable, is_recorded
from ..core.tracer import RowPullback, named_body, named_pullback, primal, primitive
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


@primitive(name="astype")
def float_cast(x, dtype):
    """x converted to the float dtype `dtype`; the cotangent is converted back to x's dtype."""
    out = x.astype(dtype)
    x_dtype = x.dtype

    def astype_pullback(g):
        return g.astype(x_dtype), None
    return out, astype_pullback


def astype(x, dtype, *args, **kwargs):
    """x.astype(dtype): differentiable to a float dtype (`float_cast`), a constant to any
    other (numpy's further arguments passed on)."""
    if not hasattr(x, "astype"):
        raise TypeError(f"astype: x must be an array, got {type(x).__name__}")
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return float_cast(x, dtype)
    return primal(x).astype(dtype, *args, **kwargs)


# ---- the table: an element-wise op is a row --------------------------------------------------

ROW_OPS = {}  # numpy's function -> the op built from its row: ops/operators.py sends numpy's
# ufuncs on traced values there, and vmap gives every row the element-wise batching rule.


def unary_op(name, forward, vjp, equation):
    """The op `name` from its row: y = forward(x); vjp(x, g), vjp(y, g) or vjp(g) (keeping the
    input, the output or neither) returns the cotangent as a 1-tuple, in numpy's vocabulary
    so that a trace records it (higher order)."""
    keeps = tuple(inspect.signature(vjp).parameters)[:-1]  # ("x",), ("y",) or ()
    named_pullback(vjp, name)

    def body(x):
        x = as_array(name, x)
        y = forward(x)
        return y, RowPullback(vjp, *((x,) if keeps == ("x",) else (y,) if keeps else ()))
    body.__doc__ = equation
    ROW_OPS[forward] = op = primitive(named_body(body, name))
    return op


def binary_op(name, forward, vjp_a, vjp_b, equation):
    """The op `name` of two broadcasting operands from its row: out = forward(a, b);
    vjp_a(g, a, b, out) and vjp_b(...) give each operand's cotangent, unbroadcast, bound by a
    functools.partial (no Python call of its own) and called only for a traced operand."""
    def body(a, b):
        a, b = as_operands(name, a, b)
        out = broadcast_binary(name, forward, a, b)

        def pullback(g):
            return functools.partial(vjp_a, g, a, b, out), functools.partial(vjp_b, g, a, b, out)
        return out, pullback
    body.__doc__ = equation
    ROW_OPS[forward] = op = primitive(settles_weak_floats(named_body(body, name)))
    return op


def _stable_sigmoid(x):
    """σ(x) with e = e^-|x|: 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0, neither overflowing
    nor cancelling (σ(-20) is 2.06e-9 in float32, where (1 + tanh(x/2)) / 2 gives 0)."""
    e = np.exp(-np.abs(x))
    r = 1 / (1 + e)
    return np.where(primal(x) >= 0, r, e * r)


def _softplus(x):
    """log(1 + eˣ) as max(x, 0) + log1p(e^-|x|): no overflow, no rounding to 0."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _tie_weights(a, b, out_dtype):
    """1 where a wins, 1/2 at a tie (the mean of the one-sided derivatives), 0 where b wins."""
    pa, pb = primal(a), primal(b)
    return ((pa > pb) + 0.5 * (pa == pb)).astype(out_dtype)


def _sinc_slope(x):
    """d sinc/dx = (cos(πx) - sinc x) / x, taken as 0 at x = 0 (where it is)."""
    zero = primal(x) == 0
    safe = np.where(zero, 1.0, x)
    return np.where(zero, 0.0, (np.cos(np.pi * safe) - np.sinc(safe)) / safe)


_LN2, _LN10, _DEGREE = math.log(2), math.log(10), math.pi / 180

neg = unary_op("neg", np.negative, lambda g: (-g,), "-x")
exp = unary_op("exp", np.exp, lambda y, g: (g * y,), "e^x; d/dx = e^x, taken from the output.")
exp2 = unary_op("exp2", np.exp2, lambda y, g: (g * y * _LN2,), "2^x; d/dx = 2^x ln 2.")
expm1 = unary_op("expm1", np.expm1, lambda y, g: (g * (y + 1),),
                 "eˣ - 1, exact for tiny x; d/dx = eˣ, taken from the output as y + 1.")
log = unary_op("log", np.log, lambda x, g: (g / x,), "Natural logarithm; d/dx = 1/x.")
log2 = unary_op("log2", np.log2, lambda x, g: (g / (x * _LN2),), "log₂ x; d/dx = 1 / (x ln 2).")
log10 = unary_op("log10", np.log10, lambda x, g: (g / (x * _LN10),),
                 "log₁₀ x; d/dx = 1 / (x ln 10).")
log1p = unary_op("log1p", np.log1p, lambda x, g: (g / (1 + x),),
                 "log(1 + x), exact for tiny x; d/dx = 1 / (1 + x).")
sqrt = unary_op("sqrt", np.sqrt, lambda y, g: (g / (2 * y),), "√x; d/dx = 1 / (2√x).")
sin = unary_op("sin", np.sin, lambda x, g: (g * np.cos(x),), "sin x; d/dx = cos x.")
cos = unary_op("cos", np.cos, lambda x, g: (-g * np.sin(x),), "cos x; d/dx = -sin x.")
tan = unary_op("tan", np.tan, lambda y, g: (g * (1 + y * y),), "tan x; d/dx = 1 + tan²x.")
arcsin = unary_op("arcsin", np.arcsin, lambda x, g: (g / np.sqrt(1 - x * x),),
                  "arcsin x; d/dx = 1 / √(1 - x²).")
arccos = unary_op("arccos", np.arccos, lambda x, g: (-g / np.sqrt(1 - x * x),),
                  "arccos x; d/dx = -1 / √(1 - x²).")
arctan = unary_op("arctan", np.arctan, lambda x, g: (g / (1 + x * x),),
                  "arctan x; d/dx = 1 / (1 + x²).")
sinh = unary_op("sinh", np.sinh, lambda x, g: (g * np.cosh(x),), "sinh x; d/dx = cosh x.")
cosh = unary_op("cosh", np.cosh, lambda x, g: (g * np.sinh(x),), "cosh x; d/dx = sinh x.")
tanh = unary_op("tanh", np.tanh, lambda y, g: (g * (1 - y * y),), "tanh x; d/dx = 1 - tanh²x.")
arcsinh = unary_op("arcsinh", np.arcsinh, lambda x, g: (g / np.sqrt(x * x + 1),),
                   "arsinh x; d/dx = 1 / √(x² + 1).")
arccosh = unary_op("arccosh", np.arccosh, lambda x, g: (g / np.sqrt(x * x - 1),),
                   "arcosh x (x ≥ 1); d/dx = 1 / √(x² - 1).")
arctanh = unary_op("arctanh", np.arctanh, lambda x, g: (g / (1 - x * x),),
                   "artanh x (|x| < 1); d/dx = 1 / (1 - x²).")
deg2rad = unary_op("deg2rad", np.deg2rad, lambda g: (g * _DEGREE,), "x · π/180; d/dx = π/180.")
rad2deg = unary_op("rad2deg", np.rad2deg, lambda g: (g / _DEGREE,), "x · 180/π; d/dx = 180/π.")
reciprocal = unary_op("reciprocal", np.reciprocal, lambda y, g: (-g * y * y,),
                      "1/x; d/dx = -1/x², from the output.")
fabs = unary_op("fabs", np.fabs, lambda x, g: (g * np.sign(primal(x)),),
                "|x| (np.fabs); the derivative at 0 is 0.")
sinc = unary_op("sinc", np.sinc, lambda x, g: (g * _sinc_slope(x),),
                "sin(πx) / (πx), 1 at 0; d/dx = (cos(πx) - sinc x) / x, 0 at 0.")
abs = unary_op("abs", np.absolute, lambda x, g: (g * np.sign(primal(x)),),
               "|x|; the derivative at 0 is 0.")
sigmoid = unary_op("sigmoid", _stable_sigmoid, lambda y, g: (g * y * (1 - y),),
                   "σ(x) = 1 / (1 + e^-x), stable on both sides (`_stable_sigmoid`); "
                   "σ' = σ(1 - σ), from the output.")
softplus = unary_op("softplus", _softplus, lambda x, g: (g * sigmoid(x),),
                    "log(1 + eˣ), without overflow (`_softplus`); d/dx = σ(x).")
# the cotangents of max(a, b) and min(a, b): to the operand taken, halved at a tie
_TO_LARGER = (
    lambda g, a, b, out: unbroadcast(g * _tie_weights(a, b, out.dtype), shape_of(a)),
    lambda g, a, b, out: unbroadcast(g * (1 - _tie_weights(a, b, out.dtype)), shape_of(b)))
_TO_SMALLER = (
    lambda g, a, b, out: unbroadcast(g * (1 - _tie_weights(a, b, out.dtype)), shape_of(a)),
    lambda g, a, b, out: unbroadcast(g * _tie_weights(a, b, out.dtype), shape_of(b)))
maximum = binary_op("maximum", np.maximum, *_TO_LARGER,
                    "Elementwise max(a, b); a tie sends half the cotangent to each side.")
minimum = binary_op("minimum", np.minimum, *_TO_SMALLER,
                    "Elementwise min(a, b); a tie sends half the cotangent to each side.")
fmax = binary_op("fmax", np.fmax, *_TO_LARGER,
                 "Elementwise max(a, b) ignoring NaN (np.fmax); a tie splits the cotangent.")
fmin = binary_op("fmin", np.fmin, *_TO_SMALLER,
                 "Elementwise min(a, b) ignoring NaN (np.fmin); a tie splits the cotangent.")
logaddexp = binary_op(
    "logaddexp", np.logaddexp,
    lambda g, a, b, out: unbroadcast(g * np.exp(a - out), shape_of(a)),
    lambda g, a, b, out: unbroadcast(g * np.exp(b - out), shape_of(b)),
    "log(eᵃ + eᵇ) without overflow; d/da = e^(a - out), d/db = e^(b - out).")
logaddexp2 = binary_op(
    "logaddexp2", np.logaddexp2,
    lambda g, a, b, out: unbroadcast(g * np.exp2(a - out), shape_of(a)),
    lambda g, a, b, out: unbroadcast(g * np.exp2(b - out), shape_of(b)),
    "log₂(2ᵃ + 2ᵇ); d/da = 2^(a - out), d/db = 2^(b - out).")
mod = binary_op(
    "mod", np.mod, lambda g, a, b, out: unbroadcast(g, shape_of(a)),
    lambda g, a, b, out: unbroadcast(-g * np.floor(primal(a) / primal(b)), shape_of(b)),
    "a mod b = a - ⌊a/b⌋ b, the sign of b (np.mod); d/da = 1, d/db = -⌊a/b⌋.")
arctan2 = binary_op(
    "arctan2", np.arctan2,
    lambda g, a, b, out: unbroadcast(g * b / (a * a + b * b), shape_of(a)),
    lambda g, a, b, out: unbroadcast(-g * a / (a * a + b * b), shape_of(b)),
    "The angle of the point (b, a); d/da = b / (a² + b²), d/db = -a / (a² + b²).")
hypot = binary_op(
    "hypot", np.hypot, lambda g, a, b, out: unbroadcast(g * a / out, shape_of(a)),
    lambda g, a, b, out: unbroadcast(g * b / out, shape_of(b)),
    "√(a² + b²); d/da = a / out, d/db = b / out.")


@fusable(drawn_as_op=True)
def relu(x):
    """max(x, 0); the derivative at 0 is 0 (as in PyTorch). Not x times its mask: -inf · 0
    would be NaN and -1 · 0 would be -0. Written out: x selected where it is positive, else 0."""
    x = as_array("relu", x)
    return where(primal(x) > 0, x, 0)


@fast_rule(relu, applies=on_host, takes_traced=True)
def relu_rule(x):
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
    x = as_array("gelu", x)
    out, saved = kernels.gelu_forward(x)
    shape, dtype = out.shape, out.dtype  # (the pullback keeps these, not out)

    def gelu_pullback(g):
        if is_recorded(g):  # a traced g: times the plain derivative
            return (g * kernels.gelu_backward(np.ones(shape, dtype), saved),)
        return (kernels.gelu_backward(g, saved),)
    return out, gelu_pullback


def silu(x):
    """x · σ(x) (the swish of Ramachandran et al.; torch's silu)."""
    x = as_array("silu", x)
    return mul(x, sigmoid(x))


def square(x):
    x = as_array("square", x)
    return mul(x, x)
