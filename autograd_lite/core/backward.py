"""The backward pass: cotangents from an output node back to the input leaves, in reverse
topological order found by counting consumers (no recursion: a transformer's graph has
thousands of nodes). A pullback returns one entry per argument: a cotangent, None (a zero;
a fast rule's None is an error, core/rules.py), or a function of no arguments computing it,
called only for a traced argument. Each cotangent must have its argument's shape and dtype,
and is dropped once used; with `release=True` each pullback, and what it holds, is too.
"""
from .batched import Batched
from .tracer import Box


def _consumer_counts(output):
    """For each node reachable from `output`: how many recorded uses it has."""
    counts = {output: 0}
    stack = [output]
    while stack:
        node = stack.pop()
        for _, parent in node.parents:
            if parent in counts:
                counts[parent] += 1
            else:
                counts[parent] = 1
                stack.append(parent)
    return counts


def _cotangent_mismatch(node, argnum, parent, g):
    shape, dtype = getattr(g, "shape", None), getattr(g, "dtype", None)
    got = f"{shape} {dtype}" if shape is not None else type(g).__name__
    return ValueError(f"{node.op}: the pullback's cotangent for argument {argnum} is {got}, "
                      f"but that argument is {parent.shape} {parent.dtype}")


def backward(output, seed, release):
    """Propagate `seed` (the cotangent of `output`) to the leaves: {leaf node: cotangent}."""
    pending = _consumer_counts(output)
    cotangents = {output: seed}
    ready = [output]
    at_leaves = {}
    while ready:
        node = ready.pop()
        g = cotangents.pop(node, None)
        if not node.parents:
            if g is not None:
                at_leaves[node] = g
            continue
        if g is None:
            grads = None
        elif node.rule is not None and node.rule.values is not None and \
                (type(g) is Box or type(g) is Batched):
            grads = node.rule.traced_pullback(g)  # a fast rule's: its plain function's vjp
        else:
            grads = node.pullback(g)
        if grads is not None and (type(grads) is not tuple or len(grads) <= node.parents[-1][0]
                                  or len(grads) > node.n_args):
            got = f"tuple of {len(grads)}" if type(grads) is tuple else type(grads).__name__
            raise TypeError(f"{node.op}: a pullback must return a tuple (one entry per "
                            f"argument, {node.n_args} here), got {got}")
        for argnum, parent in node.parents:
            gp = grads[argnum] if grads is not None else None
            if callable(gp):  # a lazy cotangent: computed only for arguments that are traced
                gp = gp()
            if gp is not None:
                try:
                    matches = gp.shape == parent.shape and gp.dtype == parent.dtype
                except AttributeError:
                    matches = False
                if not matches:
                    raise _cotangent_mismatch(node, argnum, parent, gp)
                previous = cotangents.get(parent)
                cotangents[parent] = gp if previous is None else previous + gp
            elif node.rule is not None and grads is not None:
                node.rule.check_missing_cotangent(node, argnum, parent, grads)
            pending[parent] -= 1
            if pending[parent] == 0:
                ready.append(parent)
        if release:
            node.pullback = None
            node.rule = None
    return at_leaves
