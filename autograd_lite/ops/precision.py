"""float16: the sums that must not run in float16 itself.

float16 holds integers exactly only up to 2048 and nothing above 65504, so a running sum
in float16 stalls (2048 + 1 = 2048) or overflows. torch's CPU kernels accumulate float16
in float32 and round the result once; so do the ops here that sum: `wide_sum` for the
plain sums (numpy adds float16 in float16 along every axis but the last), and
`computed_in_float32` for the fused rules (softmax, layer norm, cross entropy), whose
exponentials and variances are summed too. Other dtypes pass through unchanged.
"""
import functools

import numpy as np

from ..core.tracer import plain

HALF = np.dtype(np.float16)


def wide_sum(x, axis, keepdims):
    """x.sum(axis, keepdims=keepdims), a float16 x summed in float32 and rounded back. A
    traced float16 x (`plain` is False) sums through the recorded op, in float16."""
    if plain(x) and x.dtype == HALF:
        return x.sum(axis=axis, keepdims=keepdims, dtype=np.float32).astype(HALF)
    return x.sum(axis=axis, keepdims=keepdims)


def _is_float_array(a):
    return getattr(getattr(a, "dtype", None), "kind", None) == "f"


def _to_float32(a):
    return a.astype(np.float32) if _is_float_array(a) else a


def _to_half(cotangent):
    """A cotangent of the float32 computation (None, an array or a function that computes
    one: see tracer.primitive) rounded to float16."""
    if cotangent is None:
        return None
    if callable(cotangent):
        return lambda: cotangent().astype(HALF)
    return cotangent.astype(HALF)


def defined_in_float32(function):
    """A plain definition `function(x, ...)` that computes in float32 when its float array
    operands are all float16, with the library's casts (recorded, so differentiable): the
    operands cast up, the output cast back, as computed_in_float32 does for a rule's body.
    Any other dtype calls `function` as it is."""
    @functools.wraps(function)
    def float32_definition(*args, **kwargs):
        if getattr(args[0], "dtype", None) != HALF:
            return function(*args, **kwargs)
        if any(_is_float_array(a) and a.dtype != HALF for a in args):
            return function(*args, **kwargs)
        up = [a.astype(np.float32) if _is_float_array(a) else a for a in args]
        return function(*up, **kwargs).astype(HALF)
    return float32_definition


def computed_in_float32(body):
    """A primitive's body `body(x, ...) -> (out, pullback)` that runs in float32 when its float
    operands are all float16: they are converted, and the output and every cotangent are
    rounded back to float16 (as torch's CPU softmax, layer norm and cross entropy do). The
    first argument is the op's main operand; any other dtype calls `body` as it is, mixed
    float dtypes included (the body's own check names them)."""
    @functools.wraps(body)
    def in_float32(*args):
        if getattr(args[0], "dtype", None) != HALF:
            return body(*args)
        if any(_is_float_array(a) and a.dtype != HALF for a in args):
            return body(*args)
        out, *pullbacks = body(*(_to_float32(a) for a in args))  # a fused op's may be two
        return (out.astype(HALF), *map(_in_float32, pullbacks))
    return in_float32


def _in_float32(pullback):
    """A pullback of the float32 computation, taking and giving float16 cotangents."""
    def pullback_in_float32(g):
        return tuple(_to_half(c) for c in pullback(g.astype(np.float32)))
    return pullback_in_float32
