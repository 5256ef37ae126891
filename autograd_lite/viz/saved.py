"""What the backward pass keeps: the forward arrays each pullback holds (in a closure's
cells or a table row's functools.partial, in tuples, in closures of closures), each counted
once, by the array that owns its memory (a view keeps its base alive).
"""
import functools
import types

import numpy as np


def owner(a):
    """The array that owns the memory of `a` (a view's base, followed to the end);
    `a` itself if it is not an array (a value traced by an enclosing differentiation)."""
    while isinstance(getattr(a, "base", None), np.ndarray):
        a = a.base
    return a


def kept_arrays(pullback):
    """The numpy arrays a pullback holds (through nested closures, bound arguments of a
    functools.partial, tuples, lists, dicts)."""
    out, seen, stack = [], set(), [pullback]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if type(obj) is np.ndarray:
            out.append(obj)
        elif isinstance(obj, (tuple, list)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, functools.partial):
            stack.extend((obj.func, obj.args, obj.keywords))
        elif isinstance(obj, types.FunctionType) and obj.__closure__:
            for cell in obj.__closure__:
                try:
                    stack.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
    return out


def measure_kept(recorder):
    """Which values the pullbacks keep (item.kept) and their other arrays (op.residual)."""
    counted = set()
    for op_id, node in recorder.nodes:
        for a in kept_arrays(node.pullback):
            base = owner(a)
            if id(base) in counted:
                continue
            counted.add(id(base))
            source = recorder.by_owner.get(id(base), recorder.const_owner.get(id(base)))
            if source is not None:
                recorder.items[source].kept = base.nbytes
            else:
                recorder.items[op_id].residual += base.nbytes
