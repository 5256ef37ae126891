"""The two markers with which model code tells pictures how to draw a function's calls (the
rule they take part in is in scopes.py, examples in docs/pictures.md). Each registers the
function's code object and returns the function itself: a marked function is called exactly
as before, at no cost, and a model that marks its functions loads little more than this.
"""
import inspect
import types

TRANSPARENT = set()  # code objects of the functions marked @transparent
ALIASES = set()  # code objects of the functions marked @alias


def _marked(fn, marks, marker):
    """Add the code of the function `fn` (under any functools.wraps decorator, such as
    ag.fusable) to `marks`; returns `fn` itself."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if not isinstance(code, types.CodeType):
        raise TypeError(f"ag.viz.{marker}: expected a Python function, got "
                        f"{type(fn).__name__} {fn!r}")
    marks.add(code)
    return fn


def transparent(fn):
    """Mark `fn` transparent in pictures: its calls open no scope, its ops (and the scopes
    of the functions it calls) are drawn in its caller's scope. For wiring whose arguments
    are what the picture should show (a residual connection around a sublayer)."""
    return _marked(fn, TRANSPARENT, "transparent")


def alias(fn):
    """Mark `fn` as another name for the function it calls: a call of `fn` and the first
    call it makes of a function that opens a scope are one scope, named `fn` (its ops and
    the scopes of the functions it calls are drawn there); `ag.viz.capture(scope=...)`
    finds that scope by `fn`'s name."""
    return _marked(fn, ALIASES, "alias")
