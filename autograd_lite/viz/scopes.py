"""The function scopes of a recorded call, found with a `sys.setprofile` hook while it runs:
which Python calls a picture shows as clusters (the ops come from the tracer's hook).

The rule: a call opens a scope named after its function, unless the function
- is transparent: a lambda, comprehension, generator or coroutine (none has a name to
  draw), or a function marked `@ag.viz.transparent` (marks.py);
- is the call that an `@ag.viz.alias` makes: the two calls are one scope, the alias's;
- is library code (`is_library`: numpy, the standard library, this package) or written by
  the standard library (`is_generated`: a dataclass's `__init__`), except this package's
  composite ops (`ag.var`, `ag.split`), which open a scope named after them;
- runs inside a primitive or a fast rule, unless it is the plain function of a fusable
  (core/rules.py), which a picture's trace runs in place of the rule.
The ops of a call that opens no scope belong to its caller's scope; the traced function
always opens the outermost one. Nothing is read from a function's name or source.
"""
import inspect
import linecache
import os
import sys
import sysconfig
import types

import numpy as np

from .. import ops as _ops
from ..core.rules import FUSABLE_CODE, PLAIN_DEFINITIONS
from ..core.tracer import PRIMITIVE_CODE
from .marks import ALIASES, TRANSPARENT
from .saved import owner

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(np.__file__)
_SITE_DIRS = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
_STDLIB_DIRS = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
_UNNAMED = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>", "<module>"}
_LAZY_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_COMPOSITES = {obj.__code__ for name, obj in vars(_ops).items()  # ag.var, ag.split, ...
               if isinstance(obj, types.FunctionType) and not hasattr(obj, "op_name")
               and obj.__module__.startswith(_ops.__name__) and not name.startswith("_")}


def _under(path, directory):
    return path.startswith(directory.rstrip(os.sep) + os.sep)


def is_library(path):
    """Code of numpy, of the standard library (not the packages installed beside it),
    of this package, or a frozen module: never a scope of its own."""
    return (path.startswith("<frozen") or _under(path, _PACKAGE_DIR) or _under(path, _NUMPY_DIR)
            or (any(_under(path, d) for d in _STDLIB_DIRS)
                and not any(_under(path, d) for d in _SITE_DIRS)))


_LIBRARY_FILES = {}  # filename -> is_library(filename), for user_source_line


def user_source_line():
    """(file, line number, line text) of the innermost user code running (the caller's
    frames up to the first that is not library code), or None when there is none."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        library = _LIBRARY_FILES.get(path)
        if library is None:
            library = _LIBRARY_FILES[path] = is_library(path) or path == "<string>"
        if not library:
            return path, frame.f_lineno, linecache.getline(path, frame.f_lineno).strip()
        frame = frame.f_back
    return None


def is_generated(code):
    """A method the standard library writes from a string (a dataclass's `__init__`): a
    dunder name in a file called '<string>' (a user's `exec` gives ordinary names)."""
    return code.co_filename == "<string>" and code.co_name.startswith("__")


def is_transparent(code):
    """A lambda, comprehension, generator or coroutine, or a function marked @transparent:
    its ops belong to its caller's scope."""
    return code.co_name in _UNNAMED or bool(code.co_flags & _LAZY_FLAGS) or code in TRANSPARENT


def is_user_level(code):
    """User code that opens a scope: neither transparent, generated nor library code."""
    return not (is_transparent(code) or is_generated(code) or is_library(code.co_filename))


class Scope:
    """One call of a user-level function (or of a composite op) during the recorded call."""

    __slots__ = ("name", "parent", "path", "children", "composite", "label", "n_ops", "alias")

    def __init__(self, name, parent, composite=False, alias=False):
        self.name, self.parent, self.composite = name, parent, composite
        self.path = (parent.path if parent is not None else ()) + (self,)  # outermost first
        self.children, self.label, self.n_ops = [], name, 0
        self.alias = alias  # an @alias's call: the next user-level call inside is this one

    def walk(self):
        """This scope and every scope under it, depth first in call order."""
        out, stack = [], [self]
        while stack:
            scope = stack.pop()
            out.append(scope)
            stack.extend(reversed(scope.children))
        return out

    def __repr__(self):
        return "/".join(s.label for s in self.path)


_PRIMITIVE = object()  # a stack entry: a primitive application is running


class ScopeTracker:
    """The profile hook's state while the recorded call runs.

    scope: the innermost open scope (ops recorded now belong to it); root: the outermost.
    Also kept for naming constants: the user-level functions running (`bound_name`),
    and the first user-level function that returned each array (`returned_name`).
    """

    def __init__(self):
        self.root, self.scope = None, None
        # per running Python call: its Scope (or None), _PRIMITIVE, or (primitive depth to
        # return to, its Scope or None) for a fusable's plain function inside its wrapper
        self.stack = []
        self.primitive_depth = 0
        self.user_frames = []   # frames of the user-level functions running, outermost first
        self.made_by = {}       # id(array) -> name of the first scope that returned it
        self.made_over = {}     # id(owning array) -> of the first that returned a view of it
        self.keep = []          # the arrays named above, so that their ids stay unique
        self.kinds = {}         # id(code) -> (code, composite op, user level)

    def __enter__(self):
        self.previous = sys.getprofile()
        sys.setprofile(self.hook)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self.previous)

    def unobserved(self, fn):
        """`fn` run with the profiler off: the recorder's own work (`on_op`) is no scope,
        and its Python calls would cost a profile event each."""
        def run_unobserved(*args):
            previous = sys.getprofile()
            sys.setprofile(None)
            try:
                return fn(*args)
            finally:
                sys.setprofile(previous)
        return run_unobserved

    def hook(self, frame, event, arg):
        if event == "call":
            self.enter(frame)
        elif event == "return" and self.stack:
            self.leave(frame, arg)

    def enter(self, frame):
        code = frame.f_code
        if code is PRIMITIVE_CODE or code is FUSABLE_CODE:
            self.primitive_depth += 1
            self.stack.append(_PRIMITIVE)
            return
        restore = None
        if code in PLAIN_DEFINITIONS and self.primitive_depth:
            restore, self.primitive_depth = self.primitive_depth, 0  # model code again
        scope = self.entered(frame, code)
        self.stack.append(scope if restore is None else (restore, scope))

    def entered(self, frame, code):
        """The scope a call opens (None for none), by the module docstring's rule."""
        composite, user_level = self.kind(code)
        if self.primitive_depth or not (composite or user_level or self.root is None):
            return None
        if user_level and self.root is not None and self.scope.alias:
            self.scope.alias = False  # the call an alias makes: the alias's own scope
            return None
        if user_level:
            self.user_frames.append(frame)
        name = code.co_name.strip("<>")
        if name == "__call__":  # a callable object: named by its class
            name = _instance_class_name(frame) or name
        self.scope = Scope(name, self.scope, composite, alias=code in ALIASES)
        if self.root is None:
            self.root = self.scope
        else:
            self.scope.parent.children.append(self.scope)
        return self.scope

    def kind(self, code):
        """(composite op, user level) for a function's code, worked out once per code."""
        known = self.kinds.get(id(code))
        if known is None or known[0] is not code:
            composite = code in _COMPOSITES
            known = self.kinds[id(code)] = (code, composite, not composite and is_user_level(code))
        return known[1:]

    def leave(self, frame, value):
        entry = self.stack.pop()
        if self.user_frames and self.user_frames[-1] is frame:
            self.user_frames.pop()
        if entry is _PRIMITIVE:
            self.primitive_depth -= 1
            return
        if type(entry) is tuple:
            self.primitive_depth, entry = entry
        if entry is not None:
            if type(value) is np.ndarray:  # a constant's name, if an op uses it unbound
                self.keep.append(value)
                self.made_by.setdefault(id(value), entry.name)
                self.made_over.setdefault(id(owner(value)), entry.name)
            self.scope = entry.parent

    def bound_name(self, value):
        """The name `value` has in the outermost user-level function running (`self_mask`
        rather than the `mask` it is called further down), or None."""
        for frame in self.user_frames:
            names = [var for var, v in frame.f_locals.items() if v is value]
            if names:
                return names[-1]
        return None

    def returned_name(self, value):
        """The first scope that returned `value`, or a view of its memory (`position_rows`)."""
        return self.made_by.get(id(value)) or self.made_over.get(id(owner(value)))


def _instance_class_name(frame):
    """The class of the object whose __call__ runs in `frame` (its first argument, whatever
    it is called), or None for a __call__ that is not a method (a staticmethod)."""
    code = frame.f_code
    if not code.co_argcount:
        return None
    instance = frame.f_locals.get(code.co_varnames[0])
    method = getattr(type(instance), "__call__", None)
    return type(instance).__name__ if getattr(method, "__code__", None) is code else None
