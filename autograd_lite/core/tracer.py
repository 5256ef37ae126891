"""Tracing: a `Box` wraps a value (a numpy array, or a `Box` of an enclosing trace) with the
`Node` of the primitive that produced it, on the `Trace` of one `gradient`/`vjp` call (each
call a fresh, higher level); `primitive` makes a function `body(*arrays) -> (out, pullback)`
an op. Called, the op finds the innermost trace among its arguments, unboxes only that
trace's boxes and runs the body; arguments of enclosing traces stay boxed, and the body's
numpy vocabulary (`np.exp(x)`, `x.sum()`, `a @ b`) hands them to the library's ops, so the
body and its pullback are recorded by the enclosing trace and `grad(grad(f))` works. With
nothing traced the body runs on plain arrays at numpy speed and nothing is recorded. A
trace may carry a recording hook that observes each op (`Trace`), and it ends when its call
returns: a box that escaped the call and reaches an op later is an error that says so.
"""
import functools
import inspect
import itertools

import numpy as np

_trace_levels = itertools.count(1)


class Trace:
    """One differentiation in progress; nested calls get higher levels.

    caller: the call that opened it ("gradient", "jvp", ...), named when a value escapes.
    active: until the call returns (`end_trace`).
    on_op: None, or the recording hook: after an op records its node on this trace it calls
    `on_op(op, args, kwargs, box)` (`gradient` and its relatives never set one; `viz` does):
      op: the primitive (the wrapper): `op.op_name` (its label), `op.parameters` ((name,
        default) of each parameter that may be passed by position, `inspect.Parameter.empty`
        where there is none; positional arguments past them belong to `*args`), `op.body`;
      args: the positional arguments as the op received them, boxes included (keywords given
        for positional parameters moved to their positions, defaults filled in); kwargs: the
        keyword-only arguments left;
      box: the `Box` returned, whose `node` is the recorded `Node`.
    The usual path pays two attribute tests per traced op (has the trace ended; has it a hook).
    picturing: the trace records a call for a picture or a capture (`viz` sets it), so the ops
    made with `primitive(..., pictured_as_reference=True)` run their reference on it: the
    picture shows the model's own ops rather than one fused box.
    """

    __slots__ = ("level", "on_op", "caller", "active", "picturing")

    def __init__(self, on_op=None, caller="gradient", picturing=False):
        self.level = next(_trace_levels)
        self.on_op = on_op
        self.caller = caller
        self.active = True
        self.picturing = picturing


def end_trace(trace):
    """Mark `trace` ended: its boxes may no longer enter an op."""
    trace.active = False


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
    n_args: the op's positional arguments (its pullback returns as many); 0 for an input.
    """

    __slots__ = ("pullback", "parents", "op", "shape", "dtype", "n_args")

    def __init__(self, pullback, parents, op, shape, dtype, n_args=0):
        self.pullback = pullback
        self.parents = parents
        self.op = op
        self.shape = shape
        self.dtype = dtype
        self.n_args = n_args

    def __repr__(self):
        return f"Node({self.op}, {self.shape}, {self.dtype})"


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


def plain(*values):
    """Whether every value is a plain numpy array (exactly np.ndarray) or a Python int or
    float: nothing any trace records, so numpy may work on it directly (write into it, sum
    it with einsum, hand it to BLAS). The one test of the kind outside the seam
    (`primitive`): the helpers that have a faster numpy path for plain values ask it."""
    for v in values:
        t = type(v)
        if t is not np.ndarray and t is not float and t is not int:
            return False
    return True


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


PICTURED_REFERENCES = set()  # code objects of the references run in pictures (viz/scopes.py)


def primitive(body=None, *, name=None, reference=None, pictured_as_reference=False):
    """Make `body(*arrays) -> (out, pullback)` an op that gradients flow through.

    `pullback(cotangent)` returns one cotangent per positional argument (None
    where there is none, e.g. integer indices; or a function of no arguments that
    computes it, which the engine calls only if that argument is traced). Write the body and the pullback
    with numpy functions, operators and methods, or with this library's ops: on
    traced values those are recorded, which is what makes higher order work.
    `name` (default: the body's name) labels the op in errors and pictures.
    Use as `@primitive` or `@primitive(name="...")`. The op exposes `op_name`,
    `parameters`, `body` and `reference` (see the recording hook in `Trace`). The body gets
    two arguments as one object only where the caller passed one object (one traced value,
    or one constant): two traced values or a traced value and a constant that share data
    arrive as distinct arrays, so `a is b` in a body means "the same value to differentiate".

    The seam of a fused op: `reference`, the same function composed of the library's ops.
    When an operand belongs to an enclosing trace (grad of grad, hessian) the op runs the
    reference, which the traces record; otherwise the body runs on plain arrays. Its pullback
    may be handed a traced cotangent even then (jvp's double vjp): the body returns
    `(out, kernel_pullback, composed_pullback)`, the second written with the library's ops
    over the plain values it saved, and the engine picks by the cotangent (`seam_pullback`);
    or `(out, pullback)` when the pullback is written with the library's ops alone.

    pictured_as_reference: on a trace that records a picture or a capture (`Trace.picturing`)
    the op runs its reference too, so that the picture shows the ops it is made of, in the
    scopes of the functions the reference calls (a fused op that stands for a piece of model
    code, such as a multi-head attention sublayer).
    """
    if body is None:
        return functools.partial(primitive, name=name, reference=reference,
                                 pictured_as_reference=pictured_as_reference)
    if pictured_as_reference:
        if reference is None:
            raise TypeError("primitive: pictured_as_reference needs a reference")
        PICTURED_REFERENCES.add(reference.__code__)
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
            return out if type(out) is np.ndarray else np.asanyarray(out)
        values = []
        parents = []
        for i, a in enumerate(args):
            if type(a) is Box and a.trace is top:
                values.append(a.value)
                parents.append((i, a.node))
            else:
                values.append(a)
        if len(values) > 1:
            _keep_distinct_arguments_distinct(args, values)
        if not top.active:
            raise escaped_value_error(op_name, top)
        if reference is None:
            out, pullback = body(*values, **kwargs)
        elif _holds_enclosing_boxes(values, kwargs) or (pictured_as_reference and top.picturing):
            return reference(*args, **kwargs)  # the seam: higher order records the reference
        else:  # the seam: plain operands, the fused body
            out, pullback, *composed = body(*values, **kwargs)
            if composed:
                pullback = seam_pullback(pullback, composed[0])
        if type(out) is not np.ndarray and type(out) is not Box:
            out = np.asanyarray(out)  # an array subclass (core/weak.py's) stays as it is
        box = Box(out, top, Node(pullback, tuple(parents), op_name, out.shape, out.dtype,
                                 max(len(args), len(parameters))))
        if top.on_op is not None:
            top.on_op(op, args, kwargs, box)
        return box

    op.body = body
    op.reference = reference
    op.op_name = op_name
    op.parameters = parameters
    return op


def _keep_distinct_arguments_distinct(args, values):
    """Once opened, two different arguments may hold one array: two traced values made from
    the same data (`gradient(f, x, x)`), or a traced value and its constant
    (`stop_gradient(x)`). Hand the later one a view, so that a body sees two arguments as
    one object only where its caller passed one object (a fused body may take `a is b` to
    mean "the same traced value", as self-attention does). In place, over `values`."""
    for i in range(1, len(values)):
        value = values[i]
        if isinstance(value, np.ndarray):
            for j in range(i):
                if values[j] is value and args[j] is not args[i]:
                    values[i] = value.view()
                    break


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


# One code object for every wrapper: how tools that follow Python calls (the pictures' scope
# finder) recognise a primitive application.
PRIMITIVE_CODE = primitive(lambda x: (x, None)).__code__

