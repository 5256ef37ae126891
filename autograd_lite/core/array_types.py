"""The array types the engine computes on: numpy's (the host), and a device module's that
follows numpy's API (CuPy's on a CUDA GPU; the tests' double). One table, `MODULE_OF`, maps
each array type to its module; devices.py fills it in. It is read only where a value is not
exactly `np.ndarray`, so the numpy path pays one type test, as it did before devices.

A device's arrays are recognised before its module is loaded too: a type whose top-level
package has a loader (`LOADERS`, "cupy" -> load CuPy's device) loads it on first sight, so
an array the user made with CuPy itself works without `ag.to_device` first.
"""
import numpy as np

MODULE_OF = {np.ndarray: np}  # array type -> the numpy-like module of its functions
DEVICE_NAME_OF = {}  # a device's array type -> the device's name ("cuda")
LOADERS = {}  # a package's name ("cupy") -> a function that registers its device (devices.py)


_SEEN = {}  # every type module_of_type answered for, and its answer (forgotten on a change)


def module_of_type(t):
    """The module of arrays of type `t`, or None where `t` is no array type the engine knows
    (a subclass of np.ndarray is numpy's). Each type is looked at once: the answer is kept
    until a device is registered or forgotten (`forget_answers`)."""
    try:
        return _SEEN[t]
    except KeyError:
        pass
    module = MODULE_OF.get(t)
    if module is None and isinstance(t, type) and issubclass(t, np.ndarray):
        module = np
    elif module is None:
        loader = LOADERS.get(getattr(t, "__module__", "").partition(".")[0])
        if loader is not None:
            loader()
            module = MODULE_OF.get(t)
    _SEEN[t] = module
    return module


def forget_answers():
    """Forget what module_of_type answered (a device was registered or forgotten)."""
    _SEEN.clear()


def is_device_array(x):
    """Whether `x` is an array of a device module (not numpy's)."""
    t = type(x)
    if t is np.ndarray:
        return False
    module = module_of_type(t)
    return module is not None and module is not np


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
        if isinstance(value, np.ndarray):
            found.setdefault("numpy", value)
        elif module_of_type(type(value)) not in (None, np):
            found.setdefault(DEVICE_NAME_OF[type(value)], value)
    if len(found) < 2:
        return None
    shown = ", ".join(f"{name} {tuple(value.shape)}" for name, value in found.items())
    return TypeError(f"{op}: operands on different devices ({shown}); nothing moves between "
                     "them implicitly: move the tree with ag.to_device(tree, 'cuda' or 'cpu')")


def as_op_output(out):
    """An op's output as an array: a numpy or device array as it is, a numpy scalar (or
    anything else numpy takes) through np.asanyarray (core/dtypes.py's subclass stays)."""
    t = type(out)
    if t is np.ndarray or module_of_type(t) is not None:
        return out
    return np.asanyarray(out)
