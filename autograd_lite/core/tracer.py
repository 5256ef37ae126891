"""Tracing: a `Box` wraps a value (an array, or a `Box` of an enclosing trace) with the `Node`
of the primitive that produced it, on the `Trace` of one `gradient`/`vjp` call (each a higher
level). `primitive` makes `body(*arrays) -> (out, pullback)` an op: called, it unboxes only
the innermost trace's boxes and runs the body, whose numpy vocabulary (`np.exp(x)`, `a @ b`)
hands the enclosing traces' boxes to the library's ops, so that `grad(grad(f))` works. With
nothing traced the body runs on plain arrays and nothing is recorded. A trace ends when its
call returns: a box that escaped it and reaches an op later is an error that says so.
"""
import functools
import inspect
import types

import numpy as np

from .batched import Batched, batched_call, new_level, peel, wrap
from .devices import as_op_output, is_device_array, mixed_devices_error


class Trace:
    """One differentiation in progress; nested calls get higher levels.

    caller: the call that opened it ("gradient", "jvp", ...), named when a value escapes.
    active: until the call returns (`end_trace`).
    on_op: None, or the recording hook (`viz` sets one): after an op records its node it
    calls `on_op(op, args, kwargs, box)`: the op's wrapper (`op_name`, `parameters`: (name,
    default) of each positional parameter, `inspect.Parameter.empty` where it has none, any
    arguments past them being `*args`; `body`), its positional arguments (boxes included;
    keywords moved to their positions, defaults filled in), the keyword-only ones, and the
    `Box` returned, whose `node` is the recorded one.
    picturing: a picture records the call, so a model's fusable functions run their plain
    definitions (core/rules.py).
    batch_layers, batch_levels: what a trace opened inside vmap keeps to batch its inputs,
    seeds and gradients (core/batched.py).
    """

    __slots__ = ("level", "on_op", "caller", "active", "picturing", "batch_layers",
                 "batch_levels")

    def __init__(self, on_op=None, caller="gradient", picturing=False):
        self.level = new_level()
        self.on_op = on_op
        self.caller = caller
        self.active = True
        self.picturing = picturing
        self.batch_layers = None  # under vmap: {input node: its Batched layers} (differentiate.py)
        self.batch_levels = ()  # the vmap calls running when the trace began


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
    rule: None, or a fast rule's `RuleCall` (core/rules.py), which refuses a None cotangent
    for a traced argument, where a primitive's None is a zero.
    """

    __slots__ = ("pullback", "parents", "op", "shape", "dtype", "n_args", "rule")

    def __init__(self, pullback, parents, op, shape, dtype, n_args=0, rule=None):
        self.pullback = pullback
        self.parents = parents
        self.op = op
        self.shape = shape
        self.dtype = dtype
        self.n_args = n_args
        self.rule = rule

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
            "inside a differentiated function: np.array([...]) and np.asarray of traced values "
            "are ag.array([...]) (or ag.stack); other numpy functions, autograd_lite's ops; "
            "ag.stop_gradient(x) treats x as a constant")

    def __float__(self):
        raise TypeError(
            f"float() of a traced value {self.shape} would cut it from the gradient; "
            "use ag.stop_gradient(x) first if that is what you mean")


def primal(x):
    """The plain value under every Box layer (a Batched value stays as it is)."""
    while type(x) is Box:
        x = x.value
    return x


def is_array(x):
    """An array: numpy's or a device's (CuPy's), traced or batched."""
    return isinstance(x, (np.ndarray, Box, Batched)) or is_device_array(x)


def every_value(x):
    """The plain array under every Batched and Box layer of x: all of its examples."""
    while type(x) is Batched:
        x = x.value
    while type(x) is Box:
        x = x.value
    return x


def stop_gradient(x):
    """`x` as a constant for every trace (under vmap, its examples stay mapped)."""
    if type(x) is not Batched:
        return primal(x)
    core, layers = peel(x)
    return wrap(primal(core), layers)


def is_traced(x):
    return type(x) is Box


def plain(*values):
    """Whether every value is exactly np.ndarray or a Python int or float: nothing a trace
    records, so numpy may work on it directly (write into it, hand it to BLAS)."""
    for v in values:
        t = type(v)
        if t is not np.ndarray and t is not float and t is not int:
            return False
    return True


def positional_parameters(body):
    """(name, default) for each parameter that may be passed by position."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple((p.name, p.default) for p in inspect.signature(body).parameters.values()
                 if p.kind in kinds)


def move_keywords_to_positions(op_name, parameters, args, kwargs):
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


def check_keyword_only(op_name, kwargs, top):
    """Keyword-only arguments are never unboxed, so none may be traced at the op's level."""
    for key, value in kwargs.items():
        if type(value) is Box and (top is None or value.trace.level >= top.level):
            raise TypeError(f"{op_name}: the keyword-only argument '{key}' is a traced value; "
                            "make it a positional parameter of the primitive to differentiate it")


def primitive(body=None, *, name=None):
    """Make `body(*arrays) -> (out, pullback)` an op that gradients flow through.

    `pullback(cotangent)` returns one cotangent per positional argument: None where there is
    none (integer indices), or a function of no arguments computing it, called only if that
    argument is traced. Written with numpy's functions, operators and methods or the
    library's ops, body and pullback are recorded on traced values: higher order works.
    `name` (default: the body's name) labels the op in errors and pictures. The op exposes
    `op_name`, `parameters` and `body`. `a is b` in a body means "one value to
    differentiate" (keep_distinct_arguments_distinct).
    """
    if body is None:
        return functools.partial(primitive, name=name)
    op_name = name or body.__name__
    parameters = positional_parameters(body)

    @functools.wraps(body)
    def op(*args, **kwargs):
        if kwargs:
            args, kwargs = move_keywords_to_positions(op_name, parameters, args, kwargs)
        top = None
        for a in args:
            t = type(a)
            if t is Box:
                if top is None or a.trace.level > top.level:
                    top = a.trace
            elif t is Batched:  # under vmap: the op's batching rule (core/batched.py)
                return batched_call(op, args, kwargs)
            elif t is tuple or t is list:
                inside = traced_entry(a)
                if inside is Batched and t is tuple:  # an index with mapped entries
                    return batched_call(op, args, kwargs)
                if inside is not None and one_shape(a):  # [x, x + 2]: one array, as
                    return op(*lists_as_arrays(args), **kwargs)  # numpy makes one
        if kwargs:
            check_keyword_only(op_name, kwargs, top)
        if top is None:
            try:
                out = body(*args, **kwargs)[0]
            except TypeError:
                raise_if_mixed_devices(op_name, args)
                raise
            return out if type(out) is np.ndarray else as_op_output(out)
        values, parents = opened(args, top)
        if not top.active:
            raise escaped_value_error(op_name, top)
        try:
            out, pullback = body(*values, **kwargs)
        except TypeError:
            raise_if_mixed_devices(op_name, args)
            raise
        if type(out) is not np.ndarray and type(out) is not Box:
            out = as_op_output(out)  # an array subclass (core/dtypes.py's) stays as it is
        box = Box(out, top, Node(pullback, tuple(parents), op_name, out.shape, out.dtype,
                                 max(len(args), len(parameters))))
        if top.on_op is not None:
            top.on_op(op, args, kwargs, box)
        return box

    op.body = body
    op.op_name = op_name
    op.parameters = parameters
    return op


def named_body(body, name):
    """`body` (built from a table's row, defining one nested `pullback`) with its code named
    `name` and the pullback's `<name>_pullback`, as a written-out op's: tracebacks and
    pictures say which op ran."""
    pullback_name = f"{name}_pullback"
    consts = tuple(c.replace(co_name=pullback_name, co_qualname=pullback_name)
                   if isinstance(c, types.CodeType) else c for c in body.__code__.co_consts)
    body.__code__ = body.__code__.replace(co_name=name, co_qualname=name, co_consts=consts)
    body.__name__ = body.__qualname__ = name
    return body


class RowPullback(functools.partial):
    """A table row's cotangent function with its values bound (no Python call of its own),
    named as the op's pullback (`named_pullback`)."""
    __slots__ = ()
    __name__ = property(lambda self: self.func.__name__)


def named_pullback(vjp, name):
    """A row's cotangent function `vjp` named `<name>_pullback`, its code too (tracebacks)."""
    vjp.__name__ = f"{name}_pullback"
    vjp.__code__ = vjp.__code__.replace(co_name=vjp.__name__, co_qualname=vjp.__name__)
    return vjp


# ops/shape.array (set by autograd_lite.ops: core imports no op): np.array of a list or a
# tuple that holds traced or mapped values, stacked.
array_of_list = None


def traced_entry(entries):
    """Batched, else Box, else None: what traced values a (nested) list or tuple holds."""
    found = None
    for entry in entries:
        t = type(entry)
        if t is list or t is tuple:  # a nested list: [[x, 1.0], [2.0, y]]
            t = traced_entry(entry)
        if t is Batched:
            return Batched
        if t is Box:
            found = Box
    return found


def one_shape(entries):
    """Whether the entries of a list or tuple have one shape (numbers: ()), as an array's
    rows: an index such as (0, x) is left to its op."""
    shapes = {getattr(entry, "shape", ()) for entry in entries}
    return len(shapes) == 1


def lists_as_arrays(args):
    """The arguments with each list or tuple that holds traced values made one array, as
    numpy makes an array of a list of numbers (np.mean([x, x + 2]))."""
    return [array_of_list(a) if type(a) in (list, tuple) and traced_entry(a) is not None
            and one_shape(a) else a for a in args]


def raise_if_mixed_devices(op_name, args):
    """After a body failed with a TypeError: where its operands lie on different devices,
    raise the error that says so by the op's name instead (only a failure pays the look)."""
    error = mixed_devices_error(op_name, args, every_value)
    if error is not None:
        raise error from None


def opened(args, top):
    """(values, parents): the arguments with `top`'s boxes opened, and (index, node) of each."""
    values = []
    parents = []
    for i, a in enumerate(args):
        if type(a) is Box and a.trace is top:
            values.append(a.value)
            parents.append((i, a.node))
        else:
            values.append(a)
    if len(values) > 1:
        keep_distinct_arguments_distinct(args, values)
    return values, parents


def keep_distinct_arguments_distinct(args, values):
    """Once opened, two different arguments may hold one array (`gradient(f, x, x)`, or x
    and `stop_gradient(x)`): hand the later one a view, so that a body sees one object only
    where its caller passed one (self-attention's rule reads `a is b`). In place."""
    for i in range(1, len(values)):
        value = values[i]
        t = type(value)
        if t is float or t is int or t is Box:
            continue
        if isinstance(value, np.ndarray) or is_device_array(value):
            for j in range(i):
                if values[j] is value and args[j] is not args[i]:
                    values[i] = value.view()
                    break


# One code object for every wrapper: how the pictures' scope finder recognises a primitive.
PRIMITIVE_CODE = primitive(lambda x: (x, None)).__code__

