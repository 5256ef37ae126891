"""Which arguments a transformation differentiates: `argnums`, as jax.grad reads it.

None: every argument, a tuple of gradient trees (static leaves get None). An int: that
argument, its own tree. A tuple of ints: a tuple of trees, in that order. Negative numbers
count from the end. An argument named by argnums must hold a float leaf (a zero would hide
the mistake).
"""
import numbers

import numpy as np

from .tree import children


def _as_tuple(caller, argnums):
    """argnums (an int or a sequence of ints) as a tuple of ints; anything else is refused."""
    nums = (argnums,) if isinstance(argnums, numbers.Integral) else argnums
    try:
        nums = tuple(nums)
    except TypeError:
        nums = ()
    if not nums or any(isinstance(i, bool) or not isinstance(i, numbers.Integral) for i in nums):
        raise TypeError(f"{caller}: argnums must be an int or a tuple of ints, got {argnums!r}")
    return nums


def check_argnums(caller, argnums):
    """Refuse, naming the call, an argnums that is not None, an int or a tuple of ints."""
    if argnums is not None:
        _as_tuple(caller, argnums)


def argnum_positions(caller, argnums, n_args):
    """(positions, single): the arguments argnums chooses among n_args, and whether argnums
    is an int (one gradient tree) rather than a tuple (a tuple of trees)."""
    if argnums is None:
        return tuple(range(n_args)), False
    nums = _as_tuple(caller, argnums)
    for i in nums:
        if not -n_args <= i < n_args:
            raise ValueError(f"{caller}: argnums={argnums!r} is out of range: f was called with "
                             f"{n_args} positional argument{'s' if n_args != 1 else ''}")
    positions = tuple(i % n_args for i in nums)
    if len(set(positions)) != len(positions):
        raise ValueError(f"{caller}: argnums={argnums!r} names an argument twice")
    return positions, isinstance(argnums, numbers.Integral)


def _describe(value):
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    if children(value) is not None:
        return f"a {type(value).__name__} with no float leaf"
    shown, kind = repr(value), type(value).__name__
    return shown if shown.startswith(kind) else f"{kind} {shown}"  # 'int 3', 'Hyper(0.1)'


def nothing_to_differentiate(caller, i, name, value):
    """The error for argument i (called `name`), chosen by argnums, without a float leaf."""
    return TypeError(f"{caller}: argument {i} ('{name}') has nothing to differentiate: it is "
                     f"{_describe(value)}. Pass floats (3.0, a float array) there, or leave "
                     "it out of argnums.")
