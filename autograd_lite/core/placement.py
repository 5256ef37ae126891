"""Placement: which device a value lies on, the module that computes on it, and trees moved
between devices. The engine dispatches on the operands' module (Chainer's
`get_array_module`): numpy for host arrays, the device's module (CuPy, whose arrays follow
numpy's API) for a device's, so the same plain functions run on both.

    xp = ag.array_module(x)                 # numpy, or cupy for a CuPy array
    params = ag.to_device(params, "cuda")   # the `gpu` extra; "cpu" brings a tree back

Traced and batched values are looked through: where a traced value lies is where its plain
array lies. Which device an array type belongs to is devices.py's registry.
"""
import numpy as np

from .devices import HOST, device, device_of_type, mixed_devices_error
from .tracer import Box, every_value, primal
from .tree import tree_map


def device_of(x):
    """The Device whose array `x` is (traced and batched values looked through), or None for
    a numpy array or anything that is no device array."""
    t = type(every_value(x))
    if t is np.ndarray:
        return None
    d = device_of_type(t)
    return None if d is HOST else d


def device_name(x):
    """Where the array `x` lies: "cpu" (numpy's arrays, and anything that is no array) or its
    device's name ("cuda"): what to_device takes to put another tree beside it."""
    d = device_of(x)
    return HOST.name if d is None else d.name


def array_module(*values):
    """The module whose functions compute on the values' arrays: numpy, or a device's (cupy)
    where any value is that device's array. Traced and batched values are looked through;
    numbers, None and the like count as numpy's."""
    for x in values:
        if type(x) is np.ndarray:
            continue
        d = device_of_type(type(every_value(x)))
        if d is not None and d is not HOST:
            return d.module
    return np


def check_one_device(op, values):
    """Raise a TypeError naming `op` where its array operands (traced and batched values
    looked through) lie on more than one device (numpy's and CuPy's)."""
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
    """`tree` (parameters, an optimizer state, a batch) with its arrays on device `name`:
    "cuda" (CuPy's arrays; the `gpu` extra) or "cpu" (numpy's). numpy scalars (an optimizer
    step count), numbers, strings, None and functions are left as they are; an array already
    there is not copied."""
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
