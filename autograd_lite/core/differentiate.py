"""Whole-program reverse mode: gradient, value_and_gradient, grad, vjp. Each call opens a
trace, boxes every float leaf of the arguments it differentiates (a Python float as a weak
float, dtypes.py), runs the function once and sends the output's cotangent back through the
recorded nodes. Gradients come back in the arguments' structure, each leaf of its own kind
(a Python float's a float); static leaves (tree.is_differentiable) get None. `argnums` follows
jax.grad (argnums.py); `gradient` and `value_and_gradient` default to every argument. The
trace ends when the function returns: nothing is kept between calls, and a traced value that
escaped is refused.
"""
import functools
import inspect
import numbers

import numpy as np

from .argnums import argnum_positions, check_argnums, nothing_to_differentiate
from .backward import backward
from .devices import is_device_array
from .batched import Batched, active_levels, aligned, batched_over, opened_levels, peel, wrap
from .placement import array_module
from .tracer import Box, Node, Trace, end_trace, escaped_value_error
from .tree import (check_no_complex, children, is_complex, is_differentiable, tree_leaves,
                   tree_map, tree_unflatten)
from .dtypes import weak_float


def box_input(leaf, trace):
    """A float leaf (a Python float as a weak float) as an input Box of `trace`."""
    if type(leaf) is float:
        value = weak_float(leaf)
    else:
        value = leaf if isinstance(leaf, (np.ndarray, Box)) or is_device_array(leaf) \
            else np.asarray(leaf)
    return Box(value, trace, Node(None, (), "input", value.shape, value.dtype))


def argument_names(f, n):
    """A root name for each of n positional arguments: f's parameter names ('p', 'x'),
    'args[i]' under *args, 'arg{i}' where the signature says nothing."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = [p.name for p in params if p.kind is p.VAR_POSITIONAL]
    extra = [f"{var[0]}[{i}]" if var else f"arg{len(names) + i}" for i in range(n - len(names))]
    return (names + extra)[:n]


# ---------------------------------------------------------------- tracing a call

def _box_leaves(tree, trace):
    """(`tree` with each float leaf boxed as an input of `trace`, the input nodes). Under
    vmap a leaf is first batched over every vmap call in progress, and the plain array
    inside its Batched layers is boxed (core/batched.py)."""
    nodes = []

    def box(leaf):
        if not is_differentiable(leaf):
            return leaf
        if trace.batch_levels:
            leaf = batched_over(weak_float(leaf) if type(leaf) is float else leaf,
                                trace.batch_levels)
        if type(leaf) is not Batched:
            boxed = box_input(leaf, trace)
            nodes.append(boxed.node)
            return boxed
        core, layers = peel(leaf)
        boxed = box_input(core, trace)
        nodes.append(boxed.node)
        trace.batch_layers[boxed.node] = layers
        return wrap(boxed, layers)
    return tree_map(box, tree), nodes


def trace_call(caller, f, args, positions, named=False):
    """Run f with the float leaves of the arguments at `positions` boxed, on a trace that
    ends when f returns: (output, input nodes, trace). named: the positions were asked for
    by argnums, so each must hold a float leaf."""
    trace = Trace(caller=caller)
    trace.batch_levels = active_levels()
    trace.batch_layers = {}
    boxed = list(args)
    input_nodes = []
    for i in positions:
        if any(is_complex(leaf) for leaf in tree_leaves(args[i])):
            check_no_complex(caller, args[i], argument_names(f, len(args))[i])
        boxed[i], nodes = _box_leaves(args[i], trace)
        if named and not nodes:
            raise nothing_to_differentiate(caller, i, argument_names(f, len(args))[i], args[i])
        input_nodes.extend(nodes)
    try:
        return f(*boxed), input_nodes, trace
    finally:
        end_trace(trace)


def backward_of(trace, node, seed, release):
    """backward from `node` of `trace` (backward.py), with the vmap calls the trace was
    opened in counted as not running: its nodes computed on the arrays under their Batched
    layers (core/batched.opened_levels)."""
    with opened_levels(level for level, _ in trace.batch_levels):
        return backward(node, seed, release)


def batched_output(out, trace):
    """(core, layers, lengths) of an output batched over the vmap calls its trace's inputs
    were: the value under its Batched layers, the layers and {level: examples}."""
    if trace.batch_levels and is_differentiable(out):
        out = batched_over(out, trace.batch_levels)
    lengths = {}
    x = out
    while type(x) is Batched:
        lengths[x.level] = x.length
        x = x.value
    core, layers = peel(out)
    return core, layers, lengths


def output_of(caller, out, trace):
    """(value, node or None): the output seen from this trace; `caller` names the error."""
    if type(out) is Box:
        if out.trace is trace:
            return out.value, out.node
        if not out.trace.active:
            raise escaped_value_error(caller, out.trace)
        return out, None
    if isinstance(out, (np.ndarray, np.generic, numbers.Number)) or is_device_array(out):
        return out, None
    raise TypeError(f"{caller}: the differentiated function must return an array, got "
                    f"{type(out).__name__}")


# ---------------------------------------------------------------- gradient trees

def trees_of_inputs(args, positions, input_nodes, of_leaf):
    """One tree per argument at `positions`: of_leaf(leaf, input node) at each float leaf."""
    nodes = iter(input_nodes)
    return tuple(tree_map(lambda leaf: of_leaf(leaf, next(nodes))
                          if is_differentiable(leaf) else None, args[i]) for i in positions)


def _batched_gradient_leaf(node, g, seen, layers):
    """The cotangent of an input boxed inside Batched layers, wrapped in them."""
    if g is None:
        g = np.zeros(node.shape, dtype=node.dtype)
    elif type(g) is np.ndarray and (not g.flags.writeable or id(_memory_owner(g)) in seen):
        g = np.array(g)
    if type(g) is np.ndarray:
        seen.add(id(_memory_owner(g)))
    return wrap(g, layers)


def _gradient_leaf(leaf, g, seen):
    """The cotangent of one input, as the leaf's own kind (float, numpy scalar or array)."""
    if type(g) is Batched:  # a batched cotangent (vmap of a pullback)
        return g
    if g is None:
        g = array_module(leaf).zeros(np.shape(leaf) if type(leaf) is not Box else leaf.shape,
                                     dtype=leaf.dtype if hasattr(leaf, "dtype") else np.float64)
    if type(g) is Box:  # traced by an enclosing trace
        return g
    if type(leaf) is float:
        return float(g)
    if isinstance(leaf, np.floating):
        return leaf.dtype.type(g)
    if is_device_array(g):  # a view, or an array another result is, becomes a copy
        if g.base is not None or id(g) in seen:
            g = g.copy()
        seen.add(id(g))
        return g
    if not g.flags.writeable or id(_memory_owner(g)) in seen:  # a broadcast view, or memory
        g = np.array(g)                                            # another result shares
    seen.add(id(_memory_owner(g)))
    return g


def _memory_owner(a):
    """The array that owns a view's memory (the array itself if it owns it)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def gradient_trees(args, positions, input_nodes, at_leaves, caller_arrays=(), layers=None):
    """One gradient tree per differentiated argument, None at every static leaf. No two
    results share memory, nor share it with `caller_arrays` (a cotangent given to vjp).
    layers: the trace's {input node: Batched layers} under vmap."""
    seen = {id(_memory_owner(a)) if isinstance(a, np.ndarray) else id(a)
            for a in caller_arrays if isinstance(a, np.ndarray) or is_device_array(a)}

    def of_leaf(leaf, node):
        if layers and node in layers:
            return _batched_gradient_leaf(node, at_leaves.get(node), seen, layers[node])
        return _gradient_leaf(leaf, at_leaves.get(node), seen)
    return trees_of_inputs(args, positions, input_nodes, of_leaf)


# ---------------------------------------------------------------- the API

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
        if type(leaf) is Batched:
            core, layers = peel(leaf)
            return wrap(unbox(core), layers)
        if type(leaf) is not Box or leaf.trace is not trace:
            return leaf
        return leaf.value[()] if isinstance(leaf.value, np.ndarray) and leaf.value.ndim == 0 \
            else leaf.value
    return tree_map(unbox, tree)


def differentiate(caller, f, args, argnums=None, has_aux=False):
    """(value, gradients), or ((value, aux), gradients): gradient and its relatives."""
    positions, single = argnum_positions(caller, argnums, len(args))
    try:
        out, input_nodes, trace = trace_call(caller, f, args, positions,
                                             named=argnums is not None)
    except TypeError as error:
        hint = _list_argument_hint(caller, f, args)
        if hint is None:
            raise
        raise TypeError(f"{hint} ({error})") from error
    if has_aux:
        out, aux = _split_aux(caller, out)
    out, out_layers, _ = batched_output(out, trace)
    value, node = output_of(caller, out, trace)
    shape = np.shape(value) if type(value) is not Box else value.shape
    if len(shape) != len(out_layers):  # each Batched layer holds one axis of examples
        logical = np.shape(wrap(value, out_layers)) if out_layers else shape
        raise ValueError(f"{caller}: f must return a scalar, got an array of shape "
                         f"{logical}; use vjp for non-scalar outputs")
    at_leaves = {}
    if node is not None:  # under vmap: a 1 for each example's output
        at_leaves = backward_of(trace, node, array_module(value).ones(node.shape, node.dtype),
                                release=True)
    if isinstance(value, np.ndarray) and not out_layers:
        value = value[()]
    value = wrap(value, out_layers)
    gradients = gradient_trees(args, positions, input_nodes, at_leaves,
                               layers=trace.batch_layers)
    gradients = gradients[0] if single else gradients
    return ((value, _untraced(aux, trace)) if has_aux else value), gradients


def _check_call(caller, f, args):
    """gradient(f, *args) computes now: f must be a function and args its arguments."""
    if not callable(f):
        raise TypeError(f"{caller}: the first argument must be the function to differentiate, "
                        f"got {type(f).__name__}")
    if not args:
        raise TypeError(f"{caller}(f) was given no arguments to differentiate at: "
                        f"{caller}(f, *args) computes the gradient at args now; for the "
                        f"function x -> gradient, as jax.grad(f)(x), write ag.grad(f)(x)")


def _list_argument_hint(caller, f, args):
    """When f failed on a list (or tuple) of numbers: what was differentiated, and the fix."""
    names = argument_names(f, len(args))
    for name, arg in zip(names, args):
        if isinstance(arg, (list, tuple)) and arg and \
                all(isinstance(x, numbers.Number) for x in arg):
            return (f"{caller}: argument {name} is a {type(arg).__name__} of {len(arg)} "
                    f"numbers, which is differentiated as {len(arg)} separate scalars; where f "
                    f"expects an array, pass np.array({name})")
    return None


def value_and_gradient(f, *args, argnums=None, has_aux=False):
    """(f(*args), gradients) for scalar f: one gradient tree per positional argument, or
    for those argnums chooses (an int: that argument's tree; a tuple: a tuple of trees).
    With has_aux=True, f returns (scalar, aux), any tree, and the result is
    ((value, aux), gradients), aux's traced values as plain values."""
    _check_call("value_and_gradient", f, args)
    return differentiate("value_and_gradient", f, args, argnums, has_aux)


def gradient(f, *args, argnums=None, has_aux=False):
    """The gradient of scalar f at args: a tuple with one tree per argument, in its structure
    (argnums: as value_and_gradient). With has_aux=True: (gradients, aux)."""
    _check_call("gradient", f, args)
    out, gradients = differentiate("gradient", f, args, argnums, has_aux)
    return (gradients, out[1]) if has_aux else gradients


def gradient_function(caller, f, argnums, has_aux=False):
    """The function args -> gradients of f (as `gradient` with argnums), errors named by caller."""
    if not callable(f):
        raise TypeError(f"{caller}: the first argument must be the function to differentiate, "
                        f"got {type(f).__name__}")
    check_argnums(caller, argnums)

    @functools.wraps(f)  # keeps f's name and signature: argument names in reports and pictures
    def gradient_of_f(*args):
        out, gradients = differentiate(caller, f, args, argnums, has_aux)
        return (gradients, out[1]) if has_aux else gradients
    return gradient_of_f


def grad(f, argnums=0, *, has_aux=False):
    """The function x -> ∇f(x) (argnums an int), or -> (∇_i f, ...) (argnums a tuple);
    with has_aux=True, -> (gradients, aux). Composes: grad(grad(f)) is the second derivative."""
    return gradient_function("grad", f, argnums, has_aux)


def _checked_cotangent(caller, value, cotangent):
    """A cotangent for an output `value`: its shape and dtype (a number for a scalar)."""
    shape = value.shape if type(value) is Batched else np.shape(value)
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    if shape == () and isinstance(cotangent, numbers.Number):
        cotangent = array_module(value).asarray(cotangent, dtype=dtype)
    c_shape, c_dtype = getattr(cotangent, "shape", None), getattr(cotangent, "dtype", None)
    if c_shape != shape or c_dtype != dtype:
        raise ValueError(f"{caller}: the cotangent is {c_shape} {c_dtype}, but the output "
                         f"is {shape} {dtype}")
    return cotangent


def vjp_of_tree(caller, f, args):
    """(f(*args), pullback) for f returning a tree of arrays: pullback(cotangent tree, in
    the output's structure) -> one gradient tree per argument. Both may be traced."""
    positions = tuple(range(len(args)))
    out, input_nodes, trace = trace_call(caller, f, args, positions)
    outputs = []  # (value, node, Batched layers, their lengths) of each output leaf
    for leaf in tree_leaves(out):
        if leaf is None:  # static
            outputs.append((None, None, (), {}))
            continue
        core, layers, lengths = batched_output(leaf, trace)
        value, node = output_of(caller, core, trace)
        outputs.append((wrap(value, layers), node, layers, lengths))
    values = [v if not isinstance(v, np.ndarray) or v.shape else v[()] for v, *_ in outputs]
    value_tree = tree_unflatten(out, values)

    def pullback(cotangent):
        cotangents = tree_leaves(tree_map(lambda v, c: c, value_tree, cotangent, caller=caller,
                                          names=("the output", "the cotangent")))
        at_leaves = {}
        for (value, node, layers, lengths), c in zip(outputs, cotangents):
            if value is None:
                continue
            c = _checked_cotangent(caller, value, c)
            if node is not None:
                seed = aligned(c, layers, lengths) if layers else c
                for leaf, g in backward_of(trace, node, seed, release=False).items():
                    at_leaves[leaf] = g if leaf not in at_leaves else at_leaves[leaf] + g
        return gradient_trees(args, positions, input_nodes, at_leaves, cotangents,
                              layers=trace.batch_layers)
    return value_tree, pullback


def vjp(f, *args):
    """(f(*args), pullback): pullback(cotangent) -> one gradient tree per argument.
    f returns an array; the pullback may be called many times (once per row of a Jacobian).
    """
    out, pullback = vjp_of_tree("vjp", f, args)
    if out is None or children(out) is not None:
        raise TypeError(f"vjp: the differentiated function must return an array, got "
                        f"{type(out).__name__}")
    return out, pullback
