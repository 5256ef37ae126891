"""Devices: the one registry of where arrays live. Each array type the engine computes on has
a `Device`: numpy's arrays (a subclass of np.ndarray too) are the host's, `HOST` ("cpu");
a registered device's arrays follow numpy's API through the device's module (CuPy's on a
CUDA GPU, "cuda"; the tests' double of it). Every question about an array's type is asked
here, by the engine (`array_module`, the operand checks, an op's output), by the ops' fast
rules (`kernels_of`: whose kernels apply) and by the kernels (`kernels.backend`):

    device_of_type(type(x))    # HOST, a registered Device, or None: no array (a number, None)

The registry is a table, array type -> Device, filled by `register_device` and answering
each other type once, on first sight. Where a value is exactly `np.ndarray` the callers test
that first, so the numpy path pays one type test and no call.

A device is registered once: CuPy's on the first use of "cuda" (`device("cuda")`), or on the
first CuPy array met, so an array the user made with CuPy itself works without
`ag.to_device` first; the tests register a double of it the same way. CuPy is imported
lazily: importing the library imports nothing of it. Nothing moves between devices behind
the user's back: an op that meets a numpy and a device array refuses them by name
(`mixed_devices_error`); moving a tree is placement.py's `to_device`.
"""
from typing import Any, Callable, NamedTuple

import numpy as np


class Device(NamedTuple):
    """A device the engine can compute on. name: what `to_device` takes ("cuda"); module:
    numpy's functions for its arrays (cupy); array_type: its arrays' type (cupy.ndarray);
    to_device, to_host: a numpy array onto it and one of its arrays back; kernels: the
    name of its kernel backend (autograd_lite/kernels: "host" for numpy's, "cupy"), or None
    where the ops' and models' fast rules do not apply to its arrays (the plain functions
    run)."""
    name: str
    module: Any
    array_type: type
    to_device: Callable
    to_host: Callable
    kernels: str | None


HOST = Device("cpu", np, np.ndarray, np.asarray, np.asarray, "host")
CUPY_PACKAGE = "cupy"  # the top-level package whose arrays load CuPy's device on first sight

_DEVICE_OF = {np.ndarray: HOST}  # array type -> its Device, or None: no array type


def device_of_type(t):
    """The Device of arrays of type `t`: HOST for numpy's (a subclass of np.ndarray too), a
    registered device's for its array type, None where `t` is no array type the engine
    knows. A type of CuPy's package registers CuPy's device first. Each type is looked at
    once: the answer is kept until a device is registered or forgotten."""
    try:
        return _DEVICE_OF[t]
    except KeyError:
        pass
    answer = None
    if isinstance(t, type) and issubclass(t, np.ndarray):
        answer = HOST
    elif getattr(t, "__module__", "").partition(".")[0] == CUPY_PACKAGE:
        _load_cupy()
        answer = _DEVICE_OF.get(t)
    _DEVICE_OF[t] = answer
    return answer


def registered():
    """{name: Device} of every device registered, HOST ("cpu") among them."""
    return {d.name: d for t, d in _DEVICE_OF.items() if d is not None and d.array_type is t}


def _keep_registered_only(dropped=None):
    """Forget every answer device_of_type gave but the registered devices' own (and drop the
    device `dropped`): a registration changed."""
    for t, d in list(_DEVICE_OF.items()):
        if d is None or d.array_type is not t or d is dropped:
            del _DEVICE_OF[t]


def register_device(device):
    """Make `device` the one its name stands for: its arrays are recognised by every op from
    now on. -> the device replaced, or None (so a test can put it back)."""
    previous = registered().get(device.name)
    _keep_registered_only(dropped=previous)
    _DEVICE_OF[device.array_type] = device
    return previous


def unregister_device(name, previous=None):
    """Forget the device `name` (and put `previous` back, where given)."""
    _keep_registered_only(dropped=registered().get(name))
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


def device(name):
    """The registered Device called `name` ("cpu": HOST; "cuda": CuPy's, loaded on first
    use)."""
    if name == "cuda" and name not in registered():
        _load_cupy()
    found = registered().get(name)
    if found is None:
        raise ValueError(f"to_device: unknown device {name!r}; expected 'cuda' or 'cpu'")
    return found


def is_device_array(x):
    """Whether `x` is an array of a device module (not numpy's)."""
    t = type(x)
    if t is np.ndarray:
        return False
    d = device_of_type(t)
    return d is not None and d is not HOST


def as_op_output(out):
    """An op's output as an array: a numpy or device array as it is, a numpy scalar (or
    anything else numpy takes) through np.asanyarray (core/dtypes.py's subclass stays)."""
    t = type(out)
    if t is np.ndarray or device_of_type(t) is not None:
        return out
    return np.asanyarray(out)


def _operands(values):
    """The values, and the items of those that are lists or tuples (concatenate's arrays)."""
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from v
        else:
            yield v


def mixed_devices_error(op, values, unbox):
    """A TypeError naming `op` when its array operands (each seen through `unbox`: a traced
    value's plain value) lie on more than one device, else None."""
    found = {}
    for v in _operands(values):
        value = unbox(v)
        d = device_of_type(type(value))
        if d is not None:
            found.setdefault("numpy" if d is HOST else d.name, value)
    if len(found) < 2:
        return None
    shown = ", ".join(f"{name} {tuple(value.shape)}" for name, value in found.items())
    return TypeError(f"{op}: operands on different devices ({shown}); nothing moves between "
                     "them implicitly: move the tree with ag.to_device(tree, 'cuda' or 'cpu')")


# ---------------------------------------------------------------- where a fast rule applies

def kernels_of(values):
    """The kernel backend for the arrays among `values` (plain arrays: a fast rule's): "host"
    where none is a device's (numpy's or numba's kernels), the device's backend ("cupy")
    where all are one device's and it has kernels, None otherwise (mixed arrays, or a device
    without kernels: the plain functions run, and an op among them names a mixed pair)."""
    found = None
    for v in values:
        t = type(v)
        if t is np.ndarray:
            d = HOST
        elif v is None:
            continue
        else:
            d = device_of_type(t)
            if d is None:
                continue
        if found is None:
            found = d
        elif d is not found:
            return None
    return HOST.kernels if found is None else found.kernels


def on_host(*args, **kwargs):
    """A fast rule's `applies`: no argument is a device's array (the rule's kernels are the
    host's)."""
    return kernels_of(args) == "host"


def has_kernels(*args, **kwargs):
    """A fast rule's `applies` for an op whose kernels exist for the host and for a device's
    backend (cupy): the arguments' arrays lie on one of them."""
    return kernels_of(args) is not None
