"""Tracing: boxes that record which primitive made them, and the `primitive` decorator.

A `Box` wraps a value (a numpy array, or a `Box` of an enclosing trace) together
with the `Node` that produced it. Every call to `gradient`/`vjp` opens a `Trace`
with a fresh, increasing level; the boxes it creates carry that trace.

A primitive is one function over plain arrays that returns `(out, pullback)`.
When it is called, the wrapper finds the innermost trace among the arguments,
unboxes only that trace's boxes and calls the body. Arguments of enclosing traces
stay boxed: the body runs on them with numpy's vocabulary (`np.exp(x)`, `x.sum()`,
`a @ b`), which traced values hand back to the library's ops. So the body and
its pullback are recorded by the enclosing trace, and `grad(grad(f))` works.
With nothing traced the body runs on plain arrays at numpy speed and nothing is
recorded.

Recording hook. A trace may carry `on_op`, a function that observes every op recorded
on it (`Trace(on_op=None)`; `gradient` and its relatives never set it; the pictures in
`viz` do). After a primitive application records its node on that trace, the wrapper
calls `trace.on_op(op, args, kwargs, box)`:

- `op`: the primitive (the wrapper), whose public attributes say what it is:
  `op.op_name` (its label), `op.parameters` (`(name, default)` of each parameter that
  may be passed by position, `inspect.Parameter.empty` where there is no default; the
  positional arguments past them belong to a `*args` parameter) and `op.body`;
- `args`: the positional arguments as the op received them, boxes included (when
  keywords were given, each positional parameter is moved to its position and the
  ones not given hold their defaults); `kwargs`: the keyword-only arguments left;
- `box`: the `Box` returned, whose `node` is the recorded `Node`.

The normal path pays two attribute tests per traced op (is the trace plain: not ended,
without weak scalars; has it a hook). Tools that follow Python calls (the pictures' scope
finder) recognise a primitive application by `PRIMITIVE_CODE`, the code object every
primitive's wrapper runs.

A trace ends when the call that opened it returns (`end_trace`). A box of an ended trace
that escaped its call (kept in a dict, a global, a closure) and reaches an op later is
an error that says so, rather than a silent constant or a wrong gradient.

Weak scalars. A Python float argument is weakly typed, as in numpy (NEP 50) and JAX: in
an op with float arrays it takes their dtype (`t * x` is float32 for a float32 x), traced
or not. Its box holds a float64 0-d array and a `WeakNode`; an op over a trace that holds
weak scalars casts them to the dtype of its other float operands before the body runs.
Its output is weak too when no operand was a float array and it is float64 (`t * 2.0`;
`t.astype(np.float32)` is an explicit cast, and strong). The backward pass casts a weak
value's cotangent back to float64 (the adjoint of that cast), and `gradient` returns it
as a Python float.
"""
import functools
import inspect
import itertools

import numpy as np

_trace_levels = itertools.count(1)


class Trace:
    """One differentiation in progress; nested calls get higher levels.

    on_op: None, or the recording hook `on_op(op, args, kwargs, box)` (module docstring).
    caller: the call that opened it ("gradient", "jvp", ...), named when a value escapes.
    active: until the call returns (`end_trace`); weak_scalars: whether a weak value was
    boxed on it (`hold_weak_scalars`); plain: active and without weak scalars, the one
    flag an op tests before it takes the usual path.
    """

    __slots__ = ("level", "on_op", "caller", "active", "weak_scalars", "plain")

    def __init__(self, on_op=None, caller="gradient"):
        self.level = next(_trace_levels)
        self.on_op = on_op
        self.caller = caller
        self.active = True
        self.weak_scalars = False
        self.plain = True


def end_trace(trace):
    """Mark `trace` ended: its boxes may no longer enter an op."""
    trace.active = trace.plain = False


def hold_weak_scalars(trace):
    """Mark `trace` as holding weak values: its ops look for weak operands."""
    trace.weak_scalars = True
    trace.plain = False


def escaped_value_error(op_name, trace):
    """The error for a box of the ended `trace` reaching `op_name`."""
    return RuntimeError(
        f"{op_name}: a traced value from an earlier ag.{trace.caller} call was used after that "
        "call returned: it escaped the function being differentiated (kept in a dict, a global, "
        "a closure or an attribute). Compute it inside the function that is differentiated, "
        "or store ag.stop_gradient(x), its plain value, instead.")


class Node:
    """A recorded primitive application (or an input leaf when `parents` is empty).

    parents: tuple of (argument index, Node) for the arguments traced at this level.
    shape, dtype: of the value the node produced; every cotangent must match them.
    """

    __slots__ = ("pullback", "parents", "op", "shape", "dtype")

    def __init__(self, pullback, parents, op, shape, dtype):
        self.pullback = pullback
        self.parents = parents
        self.op = op
        self.shape = shape
        self.dtype = dtype

    weak = False  # a class attribute, not a slot: a Node is built as before

    def __repr__(self):
        return f"Node({self.op}, {self.shape}, {self.dtype})"


class WeakNode(Node):
    """The node of a weak value (a Python float, or an op over weak values only): its value
    is float64, and in an op with float arrays it takes their dtype."""

    __slots__ = ()
    weak = True


class Box:
    """A traced value. Arithmetic, indexing and numpy functions on it are recorded."""

    __slots__ = ("value", "trace", "node")
    __array_priority__ = 1000.0

    def __init__(self, value, trace, node):
        self.value = value
        self.trace = trace
        self.node = node

    shape = property(lambda self: self.value.shape)
    dtype = property(lambda self: self.value.dtype)
    ndim = property(lambda self: self.value.ndim)
    size = property(lambda self: self.value.size)

    def __len__(self):
        return len(self.value)

    def __bool__(self):
        return bool(self.value)

    def __repr__(self):
        return f"Box(level={self.trace.level}, op={self.node.op}, {primal(self).__repr__()})"

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            f"a traced value ({self.shape}, {self.dtype}) cannot become a plain numpy array "
            "inside a differentiated function: use autograd_lite ops, or ag.stop_gradient(x) "
            "to treat it as a constant")

    def __float__(self):
        raise TypeError(
            f"float() of a traced value {self.shape} would cut it from the gradient; "
            "use ag.stop_gradient(x) first if that is what you mean")


def primal(x):
    """The plain value under every level of boxing (a constant for all traces)."""
    while type(x) is Box:
        x = x.value
    return x


def stop_gradient(x):
    """`x` as a constant: no trace, at any level, differentiates through it."""
    return primal(x)


def is_traced(x):
    return type(x) is Box


def _positional_parameters(body):
    """(name, default) for each parameter that may be passed by position."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple((p.name, p.default) for p in inspect.signature(body).parameters.values()
                 if p.kind in kinds)


def _move_keywords_to_positions(op_name, parameters, args, kwargs):
    """Pass positional-or-keyword parameters by position, so that any of them may be traced."""
    args = list(args)
    for name, default in parameters[len(args):]:
        if name in kwargs:
            args.append(kwargs.pop(name))
        elif default is inspect.Parameter.empty:
            raise TypeError(f"{op_name}: missing argument '{name}'")
        else:
            args.append(default)
    return args, kwargs


def _check_keyword_only(op_name, kwargs, top):
    """Keyword-only arguments are never unboxed, so none may be traced at the op's level."""
    for key, value in kwargs.items():
        if type(value) is Box and (top is None or value.trace.level >= top.level):
            raise TypeError(f"{op_name}: the keyword-only argument '{key}' is a traced value; "
                            "make it a positional parameter of the primitive to differentiate it")


def _cast_weak_operands(values, parents):
    """Cast each weak traced operand in `values` (in place) to the dtype of the op's float
    array operands, as numpy does a Python float (NEP 50). Whether the output is weak: some
    operand is weak and none is a float array (constants included)."""
    weak_positions = [i for i, node in parents if node.weak]
    if not weak_positions:
        return False
    strong = []  # the float dtypes of the other operands (a Python number has none)
    for i, v in enumerate(values):
        dtype = getattr(v, "dtype", None)
        if (i not in weak_positions and not (type(v) is Box and v.node.weak)
                and isinstance(dtype, np.dtype) and dtype.kind == "f"):
            strong.append(dtype)
    if not strong:
        return True
    dtype = np.result_type(*strong)
    for i in weak_positions:
        if values[i].dtype != dtype:
            values[i] = values[i].astype(dtype)  # on an enclosing trace's box: recorded there
    return False


def primitive(body=None, *, name=None, reference=None):
    """Make `body(*arrays) -> (out, pullback)` an op that gradients flow through.

    `pullback(cotangent)` returns one cotangent per positional argument (None
    where there is none, e.g. integer indices; or a function of no arguments that
    computes it, which the engine calls only if that argument is traced). Write the body and the pullback
    with numpy functions, operators and methods, or with this library's ops: on
    traced values those are recorded, which is what makes higher order work.
    `name` (default: the body's name) labels the op in errors and pictures.
    Use as `@primitive` or `@primitive(name="...")`. The op exposes `op_name`,
    `parameters`, `body` and `reference` (see the recording hook in the module docstring).

    The seam of a fused op: `reference`, the same function composed of the library's ops.
    When an operand belongs to an enclosing trace (grad of grad, hessian) the op runs the
    reference, which the traces record; otherwise the body runs on plain arrays. Its pullback
    may be handed a traced cotangent even then (jvp's double vjp): the body returns
    `(out, kernel_pullback, composed_pullback)`, the second written with the library's ops
    over the plain values it saved, and the engine picks by the cotangent (`seam_pullback`);
    or `(out, pullback)` when the pullback is written with the library's ops alone.
    """
    if body is None:
        return functools.partial(primitive, name=name, reference=reference)
    op_name = name or body.__name__
    parameters = _positional_parameters(body)

    @functools.wraps(body)
    def op(*args, **kwargs):
        if kwargs:
            args, kwargs = _move_keywords_to_positions(op_name, parameters, args, kwargs)
        top = None
        for a in args:
            if type(a) is Box and (top is None or a.trace.level > top.level):
                top = a.trace
        if kwargs:
            _check_keyword_only(op_name, kwargs, top)
        if top is None:
            out = body(*args, **kwargs)[0]
            return out if type(out) is np.ndarray else np.asarray(out)
        values = []
        parents = []
        for i, a in enumerate(args):
            if type(a) is Box and a.trace is top:
                values.append(a.value)
                parents.append((i, a.node))
            else:
                values.append(a)
        weak = False
        if not top.plain:  # an ended trace, or one holding weak scalars: the rare paths
            if not top.active:
                raise escaped_value_error(op_name, top)
            weak = _cast_weak_operands(values, parents)
        if reference is None:
            out, pullback = body(*values, **kwargs)
        elif _holds_enclosing_boxes(values, kwargs):  # the seam: higher order records the reference
            return reference(*args, **kwargs)
        else:  # the seam: plain operands, the fused body
            out, pullback, *composed = body(*values, **kwargs)
            if composed:
                pullback = seam_pullback(pullback, composed[0])
        if type(out) is not np.ndarray and type(out) is not Box:
            out = np.asarray(out)
        node_type = WeakNode if weak and out.dtype == np.float64 else Node
        box = Box(out, top, node_type(pullback, tuple(parents), op_name, out.shape, out.dtype))
        if top.on_op is not None:
            top.on_op(op, args, kwargs, box)
        return box

    op.body = body
    op.reference = reference
    op.op_name = op_name
    op.parameters = parameters
    return op


def _holds_enclosing_boxes(values, kwargs):
    """Whether an operand, once this trace's boxes are opened, is still traced (by an
    enclosing trace: grad of grad, jvp, hessian)."""
    return any(type(v) is Box for v in values) or any(type(v) is Box for v in kwargs.values())


def seam_pullback(kernel_pullback, composed_pullback):
    """A fused op's pullback: the kernel's for a plain cotangent; for a traced one (a trace
    opened around the backward pass, as jvp's double vjp, or one that differentiates what
    the cotangent was made from) the composed one, written with the library's ops from the
    plain values the forward saved, which that trace records."""
    @functools.wraps(kernel_pullback)  # named as the op's pullback, in tracebacks too
    def fused_pullback(g):
        return kernel_pullback(g) if type(g) is not Box else composed_pullback(g)
    return fused_pullback


PRIMITIVE_CODE = primitive(lambda x: (x, None)).__code__  # one code object for every wrapper


@primitive(name="weak")
def _weak_identity(x):
    def weak_pullback(g):
        return (g,)
    return x, weak_pullback


def as_weak(x):
    """A traced value as a weak one (an identity op whose node is a WeakNode): the gradient
    of a Python float, computed under an enclosing trace, is as weak as the float was."""
    box = _weak_identity(x)
    box.node.__class__ = WeakNode  # the same slots: only the class attribute `weak` changes
    hold_weak_scalars(box.trace)
    return box
