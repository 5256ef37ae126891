"""What the batching rules share: where a value's examples are and how to move them. A rule
gets each argument's value at its vmap level with `bdim`, the axis that holds its examples
(None: the same for every example)."""
import numpy as np

from ..core.batched import BATCHING_RULES
from ..core.tracer import is_array
from ..core.tree import is_python_number
from ..ops import broadcast_to, expand_dims, reshape, transpose
from ..ops.checks import normalize_axes


def is_operand(x):
    """An array, a numpy scalar or a Python number: what broadcasts (not a dtype, a None)."""
    return is_array(x) or isinstance(x, np.generic) or is_python_number(x)


def aligned_operands(values, bdims):
    """The operands, each batched one padded to the most axes that one example has, so that
    all broadcast as one example's would (unbatched ones broadcast from the right as they are)."""
    rank = max((ndim_of(v) - (b is not None) for v, b in zip(values, bdims) if is_operand(v)),
               default=0)
    return [v if b is None else padded(v, b, rank) for v, b in zip(values, bdims)]


def ndim_of(x):
    """The number of axes of an operand (0 for a Python number)."""
    return 0 if is_python_number(x) else np.ndim(x) if type(x) is np.ndarray else x.ndim


def shape_of(x):
    return () if is_python_number(x) else x.shape


def length_of(values, bdims):
    """The number of examples: the size of any batch axis (vmap made them agree)."""
    for v, b in zip(values, bdims):
        if b is not None:
            return shape_of(v)[b]
    raise ValueError("a batching rule was called with no batched argument")


def moveaxis(x, source, destination):
    """x with axis `source` moved to `destination` (the library's transpose)."""
    n = ndim_of(x)
    source, destination = source % n, destination % n
    if source == destination:
        return x
    order = [i for i in range(n) if i != source]
    order.insert(destination, source)
    return transpose(x, tuple(order))


def broadcast_axis(x, axis, length):
    """x with a new axis of `length` equal copies at `axis` (a broadcast view)."""
    if is_python_number(x) or isinstance(x, np.generic):
        x = np.asarray(x)
    shape = list(shape_of(x))
    axis = axis % (len(shape) + 1)
    shape.insert(axis, length)
    return broadcast_to(expand_dims(x, axis), tuple(shape))


def to_front(x, bdim):
    """x with its examples on axis 0 (bdim not None)."""
    return x if bdim == 0 else moveaxis(x, bdim, 0)


def front_or_broadcast(x, bdim, length):
    """x with its examples on axis 0, broadcast to `length` copies where bdim is None."""
    return broadcast_axis(x, 0, length) if bdim is None else to_front(x, bdim)


def padded(x, bdim, ndim):
    """A batched x with its examples on axis 0, then ones so that one example has `ndim` axes."""
    x = to_front(x, bdim)
    shape = shape_of(x)
    missing = ndim - (len(shape) - 1)
    if missing <= 0:
        return x
    return reshape(x, shape[:1] + (1,) * missing + shape[1:])


def shifted_axes(op, axis, ndim):
    """An op's axis argument (None: all, an int or a tuple) for one example of `ndim` axes
    as the axes of the batch with its examples on axis 0."""
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(a + 1 for a in normalize_axes(op, tuple(axis), ndim))
    return shifted_axis(op, axis, ndim)


def shifted_axis(op, axis, ndim):
    """One int axis of an example (negative counts from the end) as the batch's axis."""
    (a,) = normalize_axes(op, (axis,), ndim)
    return a + 1


def static(op, bdims, names, start):
    """Refuse a batched operand that must be the same for every example (an axis, a shape)."""
    for b, name in zip(bdims[start:], names):
        if b is not None:
            raise ValueError(f"vmap: {op}'s {name} cannot differ from one example to the next")


def merged_front(x):
    """x (B, a, ...) as (B * a, ...): a second vmap level's examples, or arrays of an
    example's rank for a kernel."""
    shape = shape_of(x)
    return reshape(x, (shape[0] * shape[1],) + shape[2:])


def split_front(x, length):
    """The inverse of merged_front for `length` examples."""
    shape = shape_of(x)
    return reshape(x, (length, shape[0] // length) + shape[1:])


def examples_first(*ops):
    """Register body(op, x, *rest) as the batching rule of each op whose operands after x
    must be the same for every example (axes, shapes): body gets x with its examples on axis
    0 and gives the output with them there."""
    def register(body):
        for op in ops:
            BATCHING_RULES[op] = _examples_first_rule(op, body)
        return body
    return register


def _examples_first_rule(op, body):
    names = [name for name, _ in op.parameters[1:]]

    def rule(values, bdims):
        static(op.op_name, bdims, names, start=1)
        return body(op, to_front(values[0], bdims[0]), *values[1:]), 0
    rule.__name__ = f"{op.op_name}_batching_rule"
    return rule
