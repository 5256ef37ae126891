"""Placement: which device a value (traced and batched ones looked through) lies on, the
module that computes on it (Chainer's `get_array_module`), and trees moved between devices.

    xp = ag.array_module(x)                 # numpy, or cupy for a CuPy array
    params = ag.to_device(params, "cuda")   # the `gpu` extra; "cpu" brings a tree back
"""
import numpy as np

from .devices import HOST, device, device_of_type, mixed_devices_error
from .tracer import Box, every_value, primal
from .tree import tree_map


def device_of(x):
    """The Device whose array `x` is, or None for a numpy array or anything else."""
    t = type(every_value(x))
    if t is np.ndarray:
        return None
    d = device_of_type(t)
    return None if d is HOST else d


def device_name(x):
    """Where the array `x` lies, as to_device takes it: "cpu" (numpy's arrays, and anything
    that is no array) or its device's name ("cuda")."""
    d = device_of(x)
    return HOST.name if d is None else d.name


def array_module(*values):
    """The module that computes on the values' arrays: numpy, or a device's (cupy)."""
    for x in values:
        if type(x) is np.ndarray:
            continue
        d = device_of_type(type(every_value(x)))
        if d is not None and d is not HOST:
            return d.module
    return np


def check_one_device(op, values):
    """Raise a TypeError naming `op` where its array operands lie on several devices."""
    error = mixed_devices_error(op, values, every_value)
    if error is not None:
        raise error


def _to_host_leaf(leaf):
    d = device_of(leaf)
    return leaf if d is None else d.to_host(primal(leaf))


def to_host(tree):
    """`tree` with every device array copied to a numpy array; everything else as it is."""
    return tree_map(_to_host_leaf, tree)


def to_device(tree, name):
    """`tree` with its arrays on device `name`: "cuda" (CuPy's; the `gpu` extra) or "cpu".
    Anything but an array (a numpy scalar too) is left as it is; an array already there is
    not copied."""
    if not isinstance(name, str):
        raise ValueError(f"to_device: the device must be 'cuda' or 'cpu', got {name!r}")
    target = device(name)
    if target is HOST:
        return to_host(tree)

    def move(leaf):
        value = leaf
        if type(value) is Box:
            raise TypeError("to_device: a traced value would lose its gradient; move the "
                            "arguments before differentiating, not inside the function")
        if type(value) is target.array_type:
            return value
        if isinstance(value, np.ndarray):
            return target.to_device(value)
        other = device_of(value)
        return value if other is None else target.to_device(other.to_host(value))
    return tree_map(move, tree)
