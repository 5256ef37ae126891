"""Devices: the one registry of where arrays live, array type -> `Device`. numpy's arrays are
`HOST`'s ("cpu"); a registered device's follow numpy's API through its module (CuPy's,
"cuda"; the tests' double of it). The engine, the ops' fast rules (`kernels_of`) and the
kernels ask it:

    device_of_type(type(x))    # HOST, a registered Device, or None: no array (a number, None)

CuPy is imported lazily and registered on the first use of "cuda" or the first CuPy array
met. Nothing moves between devices implicitly: an op that meets a numpy and a device array
refuses them by name (`mixed_devices_error`).
"""
from typing import Any, Callable, NamedTuple

import numpy as np


class Device(NamedTuple):
    """A device the engine can compute on. name: what `to_device` takes ("cuda"); module:
    numpy's functions for its arrays (cupy); array_type (cupy.ndarray); to_device, to_host:
    a numpy array onto it and back; kernels: its kernel backend ("host", "cupy"), or None
    where the fast rules do not apply to its arrays."""
    name: str
    module: Any
    array_type: type
    to_device: Callable
    to_host: Callable
    kernels: str | None


HOST = Device("cpu", np, np.ndarray, np.asarray, np.asarray, "host")
CUPY_PACKAGE = "cupy"  # the top-level package whose arrays load CuPy's device on first sight

_REGISTERED = {HOST.name: HOST}  # name -> Device
_DEVICE_OF = {}  # array type -> its Device, or None: each type answered once per registration


def device_of_type(t):
    """The Device of arrays of type `t` (HOST for np.ndarray's subclasses too), or None where
    `t` is no array type the engine knows. A type of CuPy's package loads CuPy's device."""
    try:
        return _DEVICE_OF[t]
    except KeyError:
        pass
    cupy_type = getattr(t, "__module__", "").partition(".")[0] == CUPY_PACKAGE
    if cupy_type and "cuda" not in _REGISTERED:
        _load_cupy()
    answer = next((d for d in _REGISTERED.values() if d.array_type is t), None)
    if answer is None and isinstance(t, type) and issubclass(t, np.ndarray):
        answer = HOST
    _DEVICE_OF[t] = answer
    return answer


def registered():
    """{name: Device} of every device registered, HOST ("cpu") among them."""
    return dict(_REGISTERED)


def register_device(device):
    """Make `device` the one its name stands for. -> the device replaced, or None."""
    previous = _REGISTERED.get(device.name)
    _REGISTERED[device.name] = device
    _DEVICE_OF.clear()
    return previous


def unregister_device(name, previous=None):
    """Forget the device `name` (and put `previous` back, where given)."""
    _REGISTERED.pop(name, None)
    _DEVICE_OF.clear()
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
    """The registered Device called `name` ("cuda": CuPy's, loaded on first use)."""
    if name == "cuda" and name not in _REGISTERED:
        _load_cupy()
    found = _REGISTERED.get(name)
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
    """An op's output as an array: a numpy scalar through np.asanyarray (which keeps an
    array subclass), an array as it is."""
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
    """A TypeError naming `op` when its (unboxed) array operands lie on several devices."""
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
    """The kernel backend for the plain arrays among `values`: "host" where none is a
    device's, the device's ("cupy") where all are one device's, None for mixed arrays or a
    device without kernels (the plain functions run)."""
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
    """A fast rule's `applies`: no argument is a device's array."""
    return kernels_of(args) == "host"


def has_kernels(*args, **kwargs):
    """A fast rule's `applies`: the arguments' arrays lie on one device that has kernels, and
    the first (the op's input) is a float array: the kernels compute in its dtype, where the
    plain function promotes an int or bool input as numpy does."""
    dtype = getattr(args[0], "dtype", None) if args else None
    return dtype is not None and dtype.kind == "f" and kernels_of(args) is not None
