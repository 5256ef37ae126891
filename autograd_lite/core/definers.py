"""The public definers of new ops: `ag.primitive` (here) and `ag.fast_rule` (core/rules.py's
`fast_rule`, the library's own, re-exported here).

    @ag.primitive
    def cube(x):                      # plain arrays in, (out, pullback) out
        def cube_pullback(g):
            return (3 * g * x * x,)   # one cotangent per argument
        return x ** 3, cube_pullback

`primitive` is the engine's (core/tracer.py) over a body that sees a weak float among float
arrays cast to their dtype (core/dtypes.py's `settles_weak_floats`), as every fast rule
does: a user's op, as the library's binary ops, keeps float32 float32 where a
differentiated Python float meets it.
"""
import functools

from . import tracer
from .dtypes import settles_weak_floats
from .rules import fast_rule

__all__ = ["fast_rule", "primitive"]


def primitive(body=None, *, name=None):
    """`ag.primitive`: core.tracer.primitive (same options) for a body that may meet a weak
    float among float arrays, which it sees cast as `settles_weak_floats` casts it."""
    if body is None:
        return functools.partial(primitive, name=name)
    return tracer.primitive(settles_weak_floats(body), name=name)
