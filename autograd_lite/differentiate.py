"""Whole-program reverse mode: gradient, value_and_gradient, grad, vjp.

Each call opens a new trace, boxes every floating leaf of the arguments it
differentiates, runs the function once, and sends the output's cotangent back
through the recorded nodes. Gradients come back in the structure of the
arguments; static leaves (see tree.is_differentiable: integer arrays, None, ints,
strings, functions, Hyper settings) get None.
Nothing is kept between calls.
"""
import functools
import inspect
import numbers

import numpy as np

from .backward import backward
from .tracer import Box, Node, Trace
from .tree import is_differentiable, tree_map


def _box_leaves(tree, trace):
    """`tree` with each float leaf boxed as an input of `trace`; and the input nodes, in leaf order."""
    nodes = []

    def box(leaf):
        if not is_differentiable(leaf):
            return leaf
        boxed = box_input(leaf, trace)
        nodes.append(boxed.node)
        return boxed
    return tree_map(box, tree), nodes


def box_input(leaf, trace):
    """A float leaf as an input of `trace` (a Box over an array, whose node has no parents)."""
    value = leaf if type(leaf) is np.ndarray or type(leaf) is Box else np.asarray(leaf)
    return Box(value, trace, Node(None, (), "input", value.shape, value.dtype))


def argument_names(f, n):
    """A root name for each of n positional arguments: f's parameter names ('p', 'x'),
    'args[i]' under *args, 'arg{i}' where the signature says nothing."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                  params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        elif params and params[min(i, len(params) - 1)].kind is inspect.Parameter.VAR_POSITIONAL:
            var = params[min(i, len(params) - 1)]
            names.append(f"{var.name}[{i - params.index(var)}]")
        else:
            names.append(f"arg{i}")
    return names


def _gradient_leaf(leaf, g, seen):
    """The cotangent of one input, as the leaf's own kind (float, numpy scalar or array)."""
    if g is None:
        g = np.zeros(np.shape(leaf) if type(leaf) is not Box else leaf.shape,
                     dtype=leaf.dtype if hasattr(leaf, "dtype") else np.float64)
    if type(g) is Box:
        return g
    if type(leaf) is float:
        return float(g)
    if isinstance(leaf, np.floating):
        return leaf.dtype.type(g)
    if not g.flags.writeable or id(_memory_owner(g)) in seen:  # a broadcast view, or memory
        g = np.array(g)                                            # another result shares
    seen.add(id(_memory_owner(g)))
    return g


def _memory_owner(a):
    """The array that owns a view's memory (the array itself if it owns it)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _gradient_trees(args, argnums, input_nodes, at_leaves, caller_arrays=()):
    """One gradient tree per differentiated argument, None at every static leaf. No two
    results share memory, nor share it with `caller_arrays` (a cotangent given to vjp)."""
    nodes = iter(input_nodes)
    seen = {id(_memory_owner(a)) for a in caller_arrays if isinstance(a, np.ndarray)}
    trees = []
    for i in argnums:
        trees.append(tree_map(
            lambda leaf: _gradient_leaf(leaf, at_leaves.get(next(nodes)), seen)
            if is_differentiable(leaf) else None, args[i]))
    return tuple(trees)


def _trace_call(f, args, argnums):
    """Run f with the arguments at `argnums` boxed: (output, input nodes, trace)."""
    trace = Trace()
    boxed = list(args)
    input_nodes = []
    for i in argnums:
        boxed[i], nodes = _box_leaves(args[i], trace)
        input_nodes.extend(nodes)
    return f(*boxed), input_nodes, trace


def _output_of(caller, out, trace):
    """(value, node or None): the output seen from this trace; `caller` names the error."""
    if type(out) is Box and out.trace is trace:
        return out.value, out.node
    if type(out) is Box or isinstance(out, (np.ndarray, np.generic, numbers.Number)):
        return out, None
    raise TypeError(f"{caller}: the differentiated function must return an array, got "
                    f"{type(out).__name__}")


def _split_aux(caller, out):
    """(output, aux) from what an f with has_aux=True returned: exactly a pair."""
    if not isinstance(out, tuple) or len(out) != 2:
        got = f"a tuple of {len(out)}" if isinstance(out, tuple) else type(out).__name__
        raise TypeError(f"{caller}: with has_aux=True the differentiated function must return "
                        f"a pair (scalar, aux), got {got}")
    return out


def _untraced(tree, trace):
    """`tree` with every value traced by `trace` replaced by its plain value (0-d arrays as
    numpy scalars, as the output's value): aux leaves never carry the graph out of a call."""
    def unbox(leaf):
        if type(leaf) is not Box or leaf.trace is not trace:
            return leaf
        return leaf.value[()] if type(leaf.value) is np.ndarray and leaf.value.ndim == 0 \
            else leaf.value
    return tree_map(unbox, tree)


def _value_and_gradient(caller, f, args, argnums, has_aux=False):
    """(value, gradients), or ((value, aux), gradients) with has_aux."""
    out, input_nodes, trace = _trace_call(f, args, argnums)
    if has_aux:
        out, aux = _split_aux(caller, out)
    value, node = _output_of(caller, out, trace)
    if np.shape(value) != () if type(value) is not Box else value.shape != ():
        raise ValueError(f"{caller}: f must return a scalar, got an array of shape "
                         f"{value.shape}; use vjp for non-scalar outputs")
    at_leaves = {}
    if node is not None:
        at_leaves = backward(node, np.ones((), dtype=node.dtype), release=True)
    if type(value) is np.ndarray:
        value = value[()]
    gradients = _gradient_trees(args, argnums, input_nodes, at_leaves)
    return ((value, _untraced(aux, trace)) if has_aux else value), gradients


def value_and_gradient(f, *args, has_aux=False):
    """(f(*args), gradients): one gradient tree per positional argument. f returns a scalar.

    With has_aux=True, f returns (scalar, aux) and the result is ((value, aux), gradients):
    aux (metrics, say) is any tree, returned with its traced values as plain values."""
    return _value_and_gradient("value_and_gradient", f, args, range(len(args)), has_aux)


def gradient(f, *args):
    """The gradient of scalar f at args: a tuple with one tree per argument, in its structure."""
    return _value_and_gradient("gradient", f, args, range(len(args)))[1]


def grad(f, argnums=0):
    """The function x -> ∇f(x) (argnums an int), or -> (∇_i f, ...) (argnums a tuple).
    Composes: grad(grad(f)) is the second derivative."""
    single = isinstance(argnums, numbers.Integral)
    nums = (argnums,) if single else tuple(argnums)

    @functools.wraps(f)  # keeps f's name and signature: argument names in reports and pictures
    def gradient_of_f(*args):
        grads = _value_and_gradient("grad", f, args, nums)[1]
        return grads[0] if single else grads
    return gradient_of_f


def vjp(f, *args):
    """(f(*args), pullback): pullback(cotangent) -> one gradient tree per argument.

    The pullback may be called many times (e.g. once per row of a Jacobian).
    """
    out, input_nodes, trace = _trace_call(f, args, range(len(args)))
    value, node = _output_of("vjp", out, trace)
    if type(value) is not Box:
        value = np.asarray(value)
    shape, dtype = value.shape, value.dtype

    def pullback(cotangent):
        if shape == () and isinstance(cotangent, numbers.Number):
            cotangent = np.asarray(cotangent, dtype=dtype)
        c_shape, c_dtype = getattr(cotangent, "shape", None), getattr(cotangent, "dtype", None)
        if c_shape != shape or c_dtype != dtype:
            raise ValueError(f"vjp: the cotangent is {c_shape} {c_dtype}, but the output "
                             f"is {shape} {dtype}")
        at_leaves = backward(node, cotangent, release=False) if node is not None else {}
        return _gradient_trees(args, range(len(args)), input_nodes, at_leaves, (cotangent,))
    return value[()] if type(value) is np.ndarray and shape == () else value, pullback
