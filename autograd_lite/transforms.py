"""jacobian, hessian, hvp and jvp, built on reverse mode; like `gradient`, each takes and
returns pytrees in the structure of the arguments.

    jacobian(f, argnums=0)(*args)  per output leaf of shape S and argument leaf of shape L, an
        array S + L (jax.jacrev's layout), in the output's tree of the argument's tree (of
        a tuple of trees for a tuple argnums): the vjps of every one-hot cotangent, under vmap
    hessian(f, argnums=0)(*args)   jacobian(grad(f)): blocks L_i + L_j, nested as jax.hessian
        nests them (H.w.b for parameters with fields w and b)
    hvp(f, primals, tangents)      (f(*primals), H·v), H·v = ∇_x ⟨∇f(x), v⟩ without building H
    jvp(f, primals, tangents)      (f(*primals), J·v), J·v = ∇_u ⟨Jᵀu, v⟩: the pullback
        u ↦ Jᵀu is linear, so one more reverse pass, through the recorded backward pass

primals: a tuple of f's arguments; tangents: a tree per primal in its structure, each float
leaf's of that leaf's shape and dtype (a number for a Python float; a static leaf's is
ignored: pass None).
"""
import functools
import numbers

import numpy as np

from . import ops
from .core.argnums import argnum_positions, check_argnums
from .core.batched import Batched, aligned, wrap
from .core.placement import array_module
from .core.differentiate import (backward_of, batched_output, differentiate, gradient_function,
                                 output_of, trace_call, trees_of_inputs, vjp_of_tree)
from .core.tree import is_differentiable, tree_leaves, tree_map, tree_paths
from .batching import vmap


def _blocks(caller, leaf, trace, input_nodes):
    """For an output leaf of the trace, the Jacobian block (output's shape + input's) of each
    input node: one backward pass of every one-hot cotangent under vmap. Under an enclosing
    vmap each example (the Batched layers, core/batched.py) gets its own."""
    core, layers, lengths = batched_output(leaf, trace)
    value, node = output_of(caller, core, trace)
    xp = array_module(value)  # the seeds and zeros on the output's device
    shape = np.shape(leaf) if type(leaf) is not Batched else leaf.shape
    inputs = [wrap(xp.zeros(n.shape, dtype=n.dtype), trace.batch_layers.get(n, ()))
              for n in input_nodes]  # zeros of each input's (logical) shape
    size = int(np.prod(shape))
    if node is None or size == 0:
        return [xp.zeros(tuple(shape) + z.shape, z.dtype) if type(z) is not Batched
                else ops.broadcast_to(z, tuple(shape) + z.shape) for z in inputs]

    def pulled_back(seed):  # one output element's row of every block
        seed = seed.reshape(shape)
        at_leaves = backward_of(trace, node, aligned(seed, layers, lengths) if layers else seed,
                                release=False)
        return [z if n not in at_leaves else wrap(at_leaves[n], trace.batch_layers.get(n, ()))
                for n, z in zip(input_nodes, inputs)]
    rows = vmap(pulled_back, randomness="same")(xp.eye(size, dtype=node.dtype))  # each
    # (size,) + input's shape; one function's rows, so a recomputation's draws are the same
    return [ops.reshape(r, tuple(shape) + r.shape[1:]) for r in rows]


def _jacobian(caller, f, argnums):
    check_argnums(caller, argnums)

    @functools.wraps(f)
    def jacobian_of_f(*args):
        positions, single = argnum_positions(caller, argnums, len(args))
        out, input_nodes, trace = trace_call(caller, f, args, positions, named=True)

        def of_output(leaf):
            if leaf is None:  # a static leaf of a gradient tree (hessian): no derivative
                return None
            blocks = dict(zip(input_nodes, _blocks(caller, leaf, trace, input_nodes)))
            trees = trees_of_inputs(args, positions, input_nodes,
                                    lambda _, input_node: blocks[input_node])
            return trees[0] if single else trees
        return tree_map(of_output, out)
    return jacobian_of_f


def jacobian(f, argnums=0):
    """The function args -> ∂f/∂args[argnums] (module docstring: layout and trees).
    Composes: jacobian(grad(f)) is the Hessian, grad of a function of it works."""
    return _jacobian("jacobian", f, argnums)


def hessian(f, argnums=0):
    """The function args -> ∂²f/∂x² for scalar f, x = args[argnums]: jacobian(grad(f))."""
    return _jacobian("hessian", gradient_function("hessian", f, argnums), argnums)


def _describe(x):
    return f"{np.shape(x)} {getattr(x, 'dtype', type(x).__name__)}"


def _check_tangent(caller, path, leaf, tangent):
    if type(leaf) is float:
        ok = isinstance(tangent, numbers.Real) and not isinstance(tangent, bool)
    else:
        ok = np.shape(tangent) == np.shape(leaf) and getattr(tangent, "dtype", None) == leaf.dtype
    if not ok:
        raise ValueError(f"{caller}: the tangent of {path} is {_describe(tangent)}, but "
                         f"{path} is {_describe(leaf)}: a tangent has its primal's shape and "
                         "dtype")


def _primals_and_tangents(caller, primals, tangents):
    """primals and tangents as tuples of one length, each tangent tree in its primal's
    structure, each float leaf's tangent of that leaf's shape and dtype."""
    if not (isinstance(primals, (tuple, list)) and isinstance(tangents, (tuple, list))
            and len(primals) == len(tangents)):
        got = [f"{type(x).__name__} of {len(x)}" if isinstance(x, (tuple, list))
               else type(x).__name__ for x in (primals, tangents)]
        raise TypeError(f"{caller}: primals and tangents must be tuples of one length (f's "
                        f"arguments, and a tangent tree for each), got {got[0]} and {got[1]}")
    for i, (primal, tangent) in enumerate(zip(primals, tangents)):
        pairs = []
        tree_map(lambda p, t: pairs.append((p, t)), primal, tangent, caller=caller,
                 names=(f"primals[{i}]", f"tangents[{i}]"))
        for path, (leaf, t) in zip(tree_paths(primal, f"primals[{i}]"), pairs):
            if is_differentiable(leaf):
                _check_tangent(caller, path, leaf, t)
    return tuple(primals), tuple(tangents)


def _inner_product(gradients, tangents):
    """Σ ⟨g, v⟩ over the float leaves of gradient trees (None at static leaves) and the
    tangent trees of the same structure."""
    total = 0.0
    for g, v in zip(tree_leaves(gradients), tree_leaves(tangents)):
        if g is not None:
            total = total + ops.sum(g * v)
    return total


def hvp(f, primals, tangents):
    """(f(*primals), H·v) for scalar f: H·v = ∇_x ⟨∇f(x), v⟩, a tuple of trees like primals."""
    primals, tangents = _primals_and_tangents("hvp", primals, tangents)

    def directional_derivative(*xs):
        value, gradients = differentiate("hvp", f, xs)
        return _inner_product(gradients, tangents), value
    (_, value), products = differentiate("hvp", directional_derivative, primals, has_aux=True)
    return value, products


def _zero_cotangent(value):
    """A zero of an output leaf's kind: the point the pullback is differentiated at (any
    point would do: the pullback is linear in its cotangent)."""
    if value is None:  # a static leaf of the output (a gradient tree's)
        return None
    if isinstance(value, (numbers.Number, np.generic)):
        return type(value)(0)
    return array_module(value).zeros(value.shape, dtype=value.dtype)


def jvp(f, primals, tangents):
    """(f(*primals), J·v): the output and its derivative along the tangents, in the
    output's structure (the double-vjp trick, module docstring)."""
    primals, tangents = _primals_and_tangents("jvp", primals, tangents)
    out, pullback = vjp_of_tree("jvp", f, primals)

    def transposed(u):  # ⟨Jᵀu, v⟩, linear in u: its gradient in u is J·v
        return _inner_product(pullback(u), tangents)
    (tangent_out,) = differentiate("jvp", transposed, (tree_map(_zero_cotangent, out),))[1]
    return out, tangent_out
