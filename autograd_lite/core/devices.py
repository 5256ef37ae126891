"""Devices: where a tree's arrays live, and which module computes on them. The engine
dispatches on the operands' module (Chainer's `get_array_module`): numpy for host arrays, the
device's module (CuPy, whose arrays follow numpy's API) for a device's, so the same plain
functions run on both.

    xp = ag.array_module(x)                 # numpy, or cupy for a CuPy array
    params = ag.to_device(params, "cuda")   # the `gpu` extra; "cpu" brings a tree back

A device is registered once, through `register_device` (CuPy's on the first use of "cuda",
or on the first CuPy array an op meets; the tests register a double of it the same way).
Nothing here converts behind the user's back: moving is `to_device`, and an op that meets
a numpy and a device array refuses them by name (`check_one_device`). CuPy is imported
lazily: importing the library imports nothing of it.
"""
from typing import Any, Callable, NamedTuple

import numpy as np

from .array_types import (DEVICE_NAME_OF, LOADERS, MODULE_OF, forget_answers,
                          mixed_devices_error, module_of_type)
from .tracer import Box, every_value, primal
from .tree import tree_map


class Device(NamedTuple):
    """A device the engine can compute on. name: what `to_device` takes ("cuda"); module:
    numpy's functions for its arrays (cupy); array_type: its arrays' type (cupy.ndarray);
    to_device, to_host: a numpy array onto it and one of its arrays back; kernels: the
    name of its kernel backend (autograd_lite/kernels: "cupy"), or None where the ops' and
    models' fast rules do not apply to its arrays (the plain functions run)."""
    name: str
    module: Any
    array_type: type
    to_device: Callable
    to_host: Callable
    kernels: str | None


HOST_NAMES = ("cpu",)
_DEVICES = {}  # name -> Device


def register_device(device):
    """Make `device` the one its name stands for: its arrays are recognised by every op from
    now on. -> the device replaced, or None (so a test can put it back)."""
    previous = _DEVICES.get(device.name)
    if previous is not None:
        MODULE_OF.pop(previous.array_type, None)
        DEVICE_NAME_OF.pop(previous.array_type, None)
    _DEVICES[device.name] = device
    MODULE_OF[device.array_type] = device.module
    DEVICE_NAME_OF[device.array_type] = device.name
    forget_answers()
    return previous


def unregister_device(name, previous=None):
    """Forget the device `name` (and put `previous` back, where given)."""
    device = _DEVICES.pop(name, None)
    if device is not None:
        MODULE_OF.pop(device.array_type, None)
        DEVICE_NAME_OF.pop(device.array_type, None)
        forget_answers()
    if previous is not None:
        register_device(previous)


def _load_cupy():
    """Register CuPy's CUDA device, or raise an ImportError saying what to install."""
    try:
        import cupy
    except ImportError as error:
        raise ImportError(
            f"device 'cuda' needs CuPy, which does not import ({error}): install the `gpu` "
            "extra with the CuPy package for your CUDA version, e.g. "
            "pip install cupy-cuda12x (CUDA 12) or cupy-cuda13x (CUDA 13); see the README"
        ) from None
    register_device(Device("cuda", cupy, cupy.ndarray, cupy.asarray, cupy.asnumpy, "cupy"))


LOADERS["cupy"] = _load_cupy


def device(name):
    """The registered Device called `name` ("cuda": CuPy's, loaded on first use)."""
    if name in _DEVICES:
        return _DEVICES[name]
    if name == "cuda":
        _load_cupy()
        return _DEVICES[name]
    raise ValueError(f"to_device: unknown device {name!r}; expected 'cuda' or 'cpu'")


def device_of(x):
    """The Device whose array `x` is (traced and batched values looked through), or None for
    a numpy array or anything that is no device array."""
    t = type(every_value(x))
    if t is np.ndarray:
        return None
    module = module_of_type(t)
    if module is None or module is np:
        return None
    for d in _DEVICES.values():
        if d.array_type is t:
            return d
    return None


def device_name(x):
    """Where the array `x` lies: "cpu" (numpy's arrays, and anything that is no array) or its
    device's name ("cuda"): what to_device takes to put another tree beside it."""
    d = device_of(x)
    return "cpu" if d is None else d.name


def array_module(*values):
    """The module whose functions compute on the values' arrays: numpy, or a device's (cupy)
    where any value is that device's array. Traced and batched values are looked through;
    numbers, None and the like count as numpy's."""
    for x in values:
        t = type(x)
        if t is np.ndarray:
            continue
        module = module_of_type(type(every_value(x)))
        if module is not None and module is not np:
            return module
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
    if name in HOST_NAMES:
        return to_host(tree)
    target = device(name)

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


# ---------------------------------------------------------------- where a fast rule applies

def kernels_of(values):
    """The kernel backend for the arrays among `values`: "host" where none is a device's
    (numpy's or numba's kernels), the device's backend ("cupy") where all are one device's
    and it has kernels, None otherwise (mixed arrays, or a device without kernels: the plain
    functions run, and an op among them names a mixed pair)."""
    found = "host"
    for v in values:
        t = type(v)
        if t is np.ndarray or v is None:
            continue
        module = module_of_type(t)
        if module is None or module is np:
            continue
        d = device_of(v)
        if found == "host":
            found = d
        elif d is not found:
            return None
    if found == "host":
        return found
    if found.kernels is None or any(isinstance(v, np.ndarray) for v in values):
        return None
    return found.kernels


def on_host(*args, **kwargs):
    """A fast rule's `applies`: no argument is a device's array (the rule's kernels are the
    host's)."""
    return kernels_of(args) == "host"


def has_kernels(*args, **kwargs):
    """A fast rule's `applies` for an op whose kernels exist for the host and for a device's
    backend (cupy): the arguments' arrays lie on one of them."""
    return kernels_of(args) is not None
