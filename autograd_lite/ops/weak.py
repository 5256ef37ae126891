"""Weak floats (core/weak.py) meeting float arrays in an op with several operands: the op's
body sees the weak operand cast to the arrays' dtype, as numpy casts a Python float, and the
engine receives its cotangent cast back to a weak float64, the adjoint of that cast. A traced
weak operand is cast by a recorded `astype`, so higher order sees both casts. The library's
ops with several float operands say so with `@settles_weak_floats`; `ag.primitive` and
`ag.fast_rule` (`user_primitive` and `user_fast_rule` here) give it to every op and rule a
user defines."""
import functools

import numpy as np

from ..core.batched import Batched
from ..core.rules import fast_rule
from ..core.tracer import Box, primitive
from ..core.weak import is_weak, strong_float_dtype, weak_float


def settles_weak_floats(body):
    """`body(*operands) -> (out, pullback)` (or a fused body's (out, pullback, composed
    pullback)) with each weak operand cast to the dtype of its
    float array operands (if it has any) and its cotangent returned as a weak float64."""
    @functools.wraps(body)
    def settled_body(*args, **kwargs):
        weak = [i for i, a in enumerate(args) if type(a) is not np.ndarray and is_weak(a)]
        dtype = strong_float_dtype(args) if weak else None
        if dtype is None:
            return body(*args, **kwargs)
        args = list(args)
        for i in weak:
            args[i] = args[i].astype(dtype)
        out, *pullbacks = body(*args, **kwargs)  # (out, pullback) or a fused op's three
        return (out, *(_weak_operands_pullback(pullback, weak) for pullback in pullbacks))
    return settled_body


def _weak_operands_pullback(pullback, weak):
    """pullback with the cotangents of the operands at positions `weak` as weak float64s."""
    @functools.wraps(pullback)
    def weak_operands_pullback(g):
        cotangents = list(pullback(g))
        for i in weak:
            cotangents[i] = _as_weak_cotangent(cotangents[i])
        return tuple(cotangents)
    return weak_operands_pullback


def _as_weak_cotangent(g):
    """A weak operand's cotangent (None, an array, or a function computing it) as a weak float64."""
    if g is None:
        return None
    if callable(g):
        return lambda: _as_weak_cotangent(g())
    return weak_cotangent(g) if type(g) is Box or type(g) is Batched else weak_float(g)


@primitive(name="weak")
def weak_cotangent(g):
    """g as a weak float64 (recorded where g is traced); its adjoint casts back to g's dtype."""
    dtype = g.dtype

    def weak_pullback(c):
        return (c.astype(dtype),)
    return _as_weak_cotangent(g), weak_pullback


def user_primitive(body=None, **options):
    """`ag.primitive`: core.tracer.primitive (same options) for a body that may meet a weak
    float among float arrays, which it sees cast as `settles_weak_floats` casts it."""
    if body is None:
        return functools.partial(user_primitive, **options)
    return primitive(settles_weak_floats(body), **options)


def user_fast_rule(function, applies=None):
    """`ag.fast_rule`: core.rules.fast_rule (same arguments) for a rule that may meet a weak
    float among float arrays, which it sees cast as `settles_weak_floats` casts it."""
    register = fast_rule(function, applies)

    def register_settled(rule):
        register(settles_weak_floats(rule))
        return rule
    return register_settled
