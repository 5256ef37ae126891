"""The public definers of new ops: `ag.primitive` (here) and `ag.fast_rule` (core/rules.py's
`fast_rule`, the library's own, re-exported here).

    @ag.primitive
    def cube(x):                      # plain arrays in, (out, pullback) out
        def cube_pullback(g):
            return (3 * g * x * x,)   # one cotangent per argument
        return x ** 3, cube_pullback

A user's op sees a differentiated Python float among float arrays cast to their dtype, as a
fast rule does, so that float32 stays float32 (core/dtypes.py's `settles_weak_floats`).
"""
import functools

from . import tracer
from .dtypes import settles_weak_floats
from .rules import fast_rule

__all__ = ["fast_rule", "primitive"]


def primitive(body=None, *, name=None):
    """`ag.primitive`: core.tracer.primitive (same options), weak floats settled."""
    if body is None:
        return functools.partial(primitive, name=name)
    return tracer.primitive(settles_weak_floats(body), name=name)
