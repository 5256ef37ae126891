"""Recording one call for a picture, without touching the engine's normal path.

`record(f, args)` boxes the float leaves of the arguments on a fresh engine
trace (as `gradient` does) and runs `f` once under a `sys.setprofile` hook. The
hook sees every Python call and return while the picture is being made, and
only then:

- a call of a user-level function (not numpy, the standard library or this
  package) opens a scope; its return closes it. Comprehensions, lambdas and
  generators are transparent. Composite ops of this package (`ag.var`,
  `ag.dropout`, `ag.split`) open a scope named after them too.
- the return of a primitive's wrapper (the `op` closure of `tracer.primitive`)
  with a value of this trace records one op: its traced inputs, its static
  operands (integer token arrays and masks become input nodes, small constants
  are folded into the label), the current scope and the returned `Node`. So
  exactly what the engine records is pictured: a primitive's body runs on plain
  arrays, and the primitives it calls are not recorded; only when the call
  itself differentiates (a picture of `ag.grad(f)`) do bodies run on this
  trace's values, and then their ops are the ones the engine records. Scopes are
  not opened inside primitives' bodies.

Afterwards the pullback closures are inspected for the forward arrays they keep
for the backward pass. The result is plain data (`Item`s and `Scope`s); the
boxes, nodes and pullbacks are released.
"""
import inspect
import os
import sys
import sysconfig
import types

import numpy as np

from .. import ops as _ops
from ..differentiate import argument_names, box_input, is_float_leaf
from ..tracer import Box, Trace, primitive
from ..tree import tree_leaves, tree_map, tree_paths
from .labels import OPERAND_NAMES, describe, foldable
from .saved import measure_kept, owner

_OP_CODE = primitive(lambda x: (x, None)).__code__  # the wrapper code every primitive shares
_OP, _SCOPE = "op", "scope"
_TRANSPARENT_NAMES = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>", "<module>"}
_LAZY_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class Scope:
    """One call of a user-level function (or of a composite op) during the recorded call."""

    __slots__ = ("name", "parent", "children", "composite", "label", "n_ops")

    def __init__(self, name, parent, composite=False):
        self.name, self.parent, self.composite = name, parent, composite
        self.children, self.label, self.n_ops = [], name, 0

    @property
    def path(self):
        """The scopes from the outermost down to this one."""
        out, s = [], self
        while s is not None:
            out.append(s)
            s = s.parent
        return tuple(reversed(out))

    def __repr__(self):
        return "/".join(s.label for s in self.path)


class Item:
    """A node of the picture: an op, or a value that is not an op's output.

    kind: 'param' (a float leaf inside an argument's container: p.encoder[0].attn.wq),
    'input' (an argument that is itself a float array: x), 'data' (an array leaf that is
    not float: token ids, masks), 'const' (an array made inside the call), 'op'.
    inputs (ops): (item id, shape of the array passed) per array operand.
    kept: bytes of this value that pullbacks keep for the backward pass;
    residual (ops): bytes of other arrays this op's pullback keeps (x_hat, masks, ...).
    """

    __slots__ = ("id", "kind", "label", "shape", "dtype", "nbytes", "scope", "inputs",
                 "extra", "kept", "residual")

    def __init__(self, id, kind, label, shape, dtype, nbytes, scope=None):
        self.id, self.kind, self.label, self.scope = id, kind, label, scope
        self.shape, self.dtype, self.nbytes = tuple(shape), np.dtype(dtype), int(nbytes)
        self.inputs, self.extra, self.kept, self.residual = [], "", 0, 0


def _under(path, directory):
    return path.startswith(directory.rstrip(os.sep) + os.sep)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(np.__file__)
_SITE_DIRS = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
_STDLIB_DIRS = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
_COMPOSITES = {obj.__code__: name for name, obj in vars(_ops).items()
               if isinstance(obj, types.FunctionType) and not hasattr(obj, "op_name")
               and obj.__module__.startswith(_ops.__name__) and not name.startswith("_")}


def _classify(code):
    """_OP for a primitive's wrapper, _SCOPE for a user-level function, a name for a
    composite op, None for frames that are not scopes."""
    if code is _OP_CODE:
        return _OP
    if code in _COMPOSITES:
        return _COMPOSITES[code]
    name, path = code.co_name, code.co_filename
    if (name in _TRANSPARENT_NAMES or code.co_flags & _LAZY_FLAGS
            or (path == "<string>" and name.startswith("__"))  # NamedTuple.__new__ and the like
            or path.startswith("<frozen") or _under(path, _PACKAGE_DIR) or _under(path, _NUMPY_DIR)
            or any(_under(path, d) for d in _STDLIB_DIRS)
            and not any(_under(path, d) for d in _SITE_DIRS)):
        return None
    return _SCOPE


class Recorder:
    """The profile hook's state while `f` runs: the scope stack and the recorded ops."""

    def __init__(self, trace):
        self.trace = trace
        self.items = []
        self.by_node = {}    # Node -> item id
        self.by_owner = {}   # id(owning array) -> item id, for arguments' arrays and op outputs
        self.by_view = {}    # (owner, offset, shape, strides, dtype) -> item id, for constants
        self.const_owner = {}  # id(owning array) -> the first constant item over its memory
        self.made_by = {}    # id(array) -> the first user-level function that returned it
        self.made_over = {}  # id(owning array) -> the first that returned a view of its memory
        self.keep = []       # every array seen, so that ids stay unique while recording
        self.nodes = []      # (item id, Node) of each recorded op, for the saved-array analysis
        self.stack, self.scope, self.op_depth, self.root = [], None, 0, None

    def new_item(self, kind, label, value, scope=None):
        nbytes = int(np.prod(value.shape)) * np.dtype(value.dtype).itemsize  # value may be a Box
        item = Item(len(self.items), kind, label, value.shape, value.dtype, nbytes, scope)
        self.items.append(item)
        return item

    def add_argument_array(self, label, value):
        """A data item for an array leaf of the arguments (token ids, masks), one per owning
        array: a slice of it passed to an op is an edge from it, labelled with its shape."""
        base = owner(value)
        if id(base) not in self.by_owner:
            self.keep.append(base)
            self.by_owner[id(base)] = self.new_item("data", label, value).id
        return self.by_owner[id(base)]

    def operand_item(self, frame, name, a):
        """The item of a plain array operand: the argument or op output whose memory it is,
        else a constant made during the call, one item per view (two slices of a position
        table are two constants, each of its own shape). Named by the variable that holds it
        in user code, else by the user function that returned it, else by the parameter."""
        source = self.by_owner.get(id(owner(a)))
        if source is not None:
            return source
        key = (id(owner(a)), a.__array_interface__["data"][0], a.shape, a.strides, a.dtype)
        if key not in self.by_view:
            self.keep.append(a)
            label = (_bound_name(frame.f_back, a) or self.made_by.get(id(a))
                     or self.made_over.get(id(owner(a)))
                     or ("const" if name in OPERAND_NAMES else name))
            self.by_view[key] = self.new_item("const", label, a).id
            self.const_owner.setdefault(id(owner(a)), self.by_view[key])
        return self.by_view[key]

    def hook(self, frame, event, arg):
        if event == "call":
            kind = _classify(frame.f_code)
            if kind is _OP:
                self.op_depth += 1
                self.stack.append(_OP)
            elif self.op_depth == 0 and (kind is not None or self.root is None):
                name = frame.f_code.co_name.strip("<>")
                if name == "__call__":  # a callable object: named by its class
                    name = _instance_class_name(frame) or name
                self.scope = Scope(name, self.scope, kind is not _SCOPE and kind is not None)
                if self.root is None:
                    self.root = self.scope
                else:
                    self.scope.parent.children.append(self.scope)
                self.stack.append(self.scope)
            else:
                self.stack.append(None)
        elif event == "return" and self.stack:
            entry = self.stack.pop()
            if entry is _OP:
                if type(arg) is Box and arg.trace is self.trace:
                    self.record_op(frame, arg)
                self.op_depth -= 1
            elif entry is not None:
                if type(arg) is np.ndarray:  # a constant's name, if an op uses it unbound
                    self.keep.append(arg)
                    self.made_by.setdefault(id(arg), entry.name)
                    self.made_over.setdefault(id(owner(arg)), entry.name)
                self.scope = entry.parent

    def record_op(self, frame, box):
        """One op from the wrapper's locals at its return: `args` (keywords moved to
        their positions), `parameters` of the body, and the returned box."""
        local, node = frame.f_locals, box.node
        op = self.new_item("op", node.op, box.value, self.scope)
        self.keep.append(box.value)
        self.by_node[node] = op.id
        self.by_owner.setdefault(id(owner(box.value)), op.id)
        self.nodes.append((op.id, node))
        traced = dict(node.parents)
        parameters = local.get("parameters", [])
        positional, options = [], []
        for i, a in enumerate(local.get("args", ())):
            name, default = parameters[i] if i < len(parameters) else ("xs", inspect.Parameter.empty)
            if i in traced:
                source = self.by_node.get(traced[i])
                if source is None:  # made where the hook could not see it
                    source = self.new_item("const", "untracked", a.value).id
                op.inputs.append((source, a.shape))
                positional.append("·")
            elif isinstance(a, np.ndarray) and (id(owner(a)) in self.by_owner or not foldable(a)):
                op.inputs.append((self.operand_item(frame, name, a), a.shape))
                positional.append("·")
            else:
                shown = describe(name, default, a)
                if shown is not None:
                    (positional if shown[0] == "operand" else options).append(shown[1])
        text = f"({', '.join(positional)})" if any(p != "·" for p in positional) else ""
        op.extra = (text + " " + " ".join(options)).strip()


def _instance_class_name(frame):
    """The class of the object whose __call__ runs in `frame` (its first argument, whatever
    it is called), or None for a __call__ that is not a method (a staticmethod)."""
    code = frame.f_code
    if not code.co_argcount:
        return None
    instance = frame.f_locals.get(code.co_varnames[0])
    method = getattr(type(instance), "__call__", None)
    return type(instance).__name__ if getattr(method, "__code__", None) is code else None


def _bound_name(frame, value):
    """The name a constant has in the outermost user-level function that holds it
    (`self_mask` rather than the `mask` it is called further down), or None."""
    name = None
    while frame is not None and frame.f_code is not _RECORD_CODE:
        if _classify(frame.f_code) is _SCOPE:
            for var, v in frame.f_locals.items():
                if v is value:
                    name = var
        frame = frame.f_back
    return name


def record(f, args):
    """Run f(*args) once with its float leaves traced: (items, root scope, outputs).

    outputs: (label, item id) for each traced leaf of the result.
    """
    trace = Trace()
    recorder = Recorder(trace)
    boxed = []
    for name, arg in zip(argument_names(f, len(args)), args):
        paths = iter(tree_paths(arg, root=name))  # in the order tree_map visits the leaves

        def box(leaf):
            path = next(paths)
            if is_float_leaf(leaf):
                boxed = box_input(leaf, trace)
                value, node = boxed.value, boxed.node
                kind = "param" if path != name else "input"  # a leaf inside a container, or a bare array
                item = recorder.new_item(kind, path, value)
                recorder.by_node[node] = item.id
                if type(value) is np.ndarray:
                    recorder.keep.append(value)
                    recorder.by_owner[id(owner(value))] = item.id
                return boxed
            if isinstance(leaf, np.ndarray):
                recorder.add_argument_array(path, leaf)
            return leaf
        boxed.append(tree_map(box, arg))
    previous = sys.getprofile()
    sys.setprofile(recorder.hook)
    try:
        out = f(*boxed)
    finally:
        sys.setprofile(previous)
    outputs = []
    for leaf, path in zip(tree_leaves(out), tree_paths(out, root="output")):
        if type(leaf) is Box and leaf.trace is trace and leaf.node in recorder.by_node:
            outputs.append((path, recorder.by_node[leaf.node]))
    measure_kept(recorder)
    return recorder.items, recorder.root, outputs


_RECORD_CODE = record.__code__
