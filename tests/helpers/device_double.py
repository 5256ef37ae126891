"""A test double of CuPy, for CI (which has no GPU): its own array type over a numpy array
that treats numpy as CuPy does. numpy's functions and ufuncs dispatch to it
(`__array_function__`, `__array_ufunc__`) and compute on the numpy array inside; the result
is a double again (a reduction's a 0-d array, as CuPy's). What CuPy refuses, it refuses:
`__array__` raises, so np.asarray, a numba kernel or BLAS on it fails loudly, and so does a
ufunc or function given a numpy array beside it (a host array in a device computation).
`float()`, `.item()` and `.get()` are explicit copies to the host, as in CuPy.

`DEVICE` is the double as a device (core/devices.Device, the hook CuPy's device is
registered through); the `device_double` fixture (conftest.py) registers it as "cuda".
Its module, `xp`, is what `ag.array_module` returns for its arrays: numpy's functions, with
the creation functions making doubles.
"""
import numbers

import numpy as np

from autograd_lite.core.devices import Device


class HostConversionError(TypeError):
    """An implicit conversion of a device array to a numpy array."""


class MixedArraysError(TypeError):
    """A numpy array met a device array in one ufunc or function (CuPy raises TypeError)."""


def _unwrap(x, allow_host=False):
    """x with every DeviceArray replaced by its numpy array, through lists, tuples and dicts;
    a numpy array refused unless `allow_host` (indices)."""
    t = type(x)
    if t is DeviceArray:
        return x._data
    if t is np.ndarray:
        if allow_host:
            return x
        raise MixedArraysError(f"a numpy array {x.shape} {x.dtype} in a device computation")
    if t in (list, tuple):
        return t(_unwrap(v, allow_host) for v in x)
    if t is dict:
        return {k: _unwrap(v, allow_host) for k, v in x.items()}
    return x


def _foreign(x):
    """A value of a type that neither CuPy nor numpy knows (a traced value, say)."""
    return (type(x) is not DeviceArray and not isinstance(x, (np.ndarray, np.generic))
            and not isinstance(x, numbers.Number) and x is not None)


def _wrap(x):
    """numpy results as doubles: arrays and numpy scalars (a reduction's) become DeviceArrays,
    tuples (named ones too) and lists of them too; anything else as it is."""
    if isinstance(x, np.ndarray):
        return DeviceArray(x)
    if isinstance(x, np.generic):
        return DeviceArray(np.asarray(x))
    if type(x) in (list, tuple):
        return type(x)(_wrap(v) for v in x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # np.linalg.slogdet's named result
        return type(x)(*(_wrap(v) for v in x))
    return x


class Flags:
    """CuPy's flags: no `writeable` among them."""

    def __init__(self, flags):
        self.c_contiguous = flags.c_contiguous
        self.f_contiguous = flags.f_contiguous
        self.owndata = flags.owndata


# methods and attributes of cupy.ndarray, forwarded to the numpy array with results wrapped
_METHODS = frozenset({
    "all", "any", "argmax", "argmin", "argsort", "astype", "clip", "copy", "cumsum", "dot",
    "fill", "flatten", "max", "mean", "min", "nonzero", "prod", "ravel", "repeat", "reshape",
    "round", "squeeze", "std", "sum", "swapaxes", "take", "trace", "transpose", "var", "view",
    "diagonal", "conj"})
_ATTRIBUTES = frozenset({"shape", "dtype", "ndim", "size", "itemsize", "nbytes", "strides"})


class DeviceArray(np.lib.mixins.NDArrayOperatorsMixin):
    """An array "on the device": operators, numpy's functions and the methods above work on
    it and give DeviceArrays; nothing turns it into a numpy array implicitly."""

    __slots__ = ("_data",)

    def __init__(self, data):
        assert type(data) is np.ndarray, type(data)
        self._data = data

    def __array__(self, dtype=None, copy=None):
        raise HostConversionError(
            f"implicit conversion of a device array {self.shape} {self.dtype} to a numpy "
            "array (CuPy refuses it too): use ag.to_device(x, 'cpu') or x.get()")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(_foreign(x) for x in inputs):
            return NotImplemented  # CuPy's rule: another array type (a traced value) decides
        out = kwargs.get("out")
        result = getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs))
        if out is not None:  # the DeviceArrays given, written into
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        if any(t is not DeviceArray and not issubclass(t, np.ndarray) for t in types):
            return NotImplemented
        out = kwargs.get("out")
        result = func(*_unwrap(args), **_unwrap(kwargs))
        if func in _SHAPE_FUNCTIONS:
            return result
        return _wrap(result) if out is None else out

    # ---- explicit copies to the host, as CuPy has them
    def get(self):
        return self._data.copy()

    def item(self):
        return self._data.item()

    def __float__(self):
        return float(self._data)

    def __int__(self):
        return int(self._data)

    def __index__(self):
        return self._data.__index__()

    def __bool__(self):
        return bool(self._data)

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        return (_wrap(row) for row in self._data)

    def __repr__(self):
        return f"DeviceArray({self._data!r})"

    def __getitem__(self, index):
        return _wrap(self._data[_unwrap(index, allow_host=True)])

    def __setitem__(self, index, value):
        self._data[_unwrap(index, allow_host=True)] = _unwrap(value)

    def __getattr__(self, name):
        if name in _ATTRIBUTES:
            return getattr(self._data, name)
        if name in _METHODS:
            method = getattr(self._data, name)
            return lambda *a, **k: _wrap(method(*_unwrap(a), **_unwrap(k)))
        raise AttributeError(f"DeviceArray has no attribute {name!r} (CuPy's arrays have not "
                             "either, or the double does not offer it)")

    @property
    def T(self):
        return DeviceArray(self._data.T)

    @property
    def base(self):
        return None if self._data.base is None else DeviceArray(self._data.base)

    @property
    def flags(self):
        return Flags(self._data.flags)


_SHAPE_FUNCTIONS = {np.shape, np.ndim, np.size, np.may_share_memory, np.shares_memory,
                    np.result_type, np.iscomplexobj, np.isrealobj}


class DoubleModule:
    """The double's `cupy`: numpy's functions, those that make arrays from shapes or host
    data making DeviceArrays. Functions on arrays dispatch through `__array_function__`."""
    ndarray = DeviceArray
    _CREATION = frozenset({"zeros", "ones", "empty", "full", "arange", "eye", "identity",
                           "linspace", "tri"})

    def __getattr__(self, name):
        attribute = getattr(np, name)
        if name in self._CREATION:
            return lambda *a, **k: DeviceArray(attribute(*_unwrap(a), **_unwrap(k)))
        return attribute

    @staticmethod
    def asarray(x, dtype=None):
        """Host data onto the device (a copy), as cupy.asarray; a DeviceArray as it is."""
        if type(x) is DeviceArray:
            return x if dtype is None or x.dtype == dtype else x.astype(dtype)
        if isinstance(x, (numbers.Number, np.generic, list, tuple, np.ndarray)):
            return DeviceArray(np.array(x, dtype=dtype))
        raise TypeError(f"asarray: {type(x).__name__}")

    @staticmethod
    def array(x, dtype=None):
        """A copy on the device, as cupy.array."""
        return DoubleModule.asarray(x.get() if type(x) is DeviceArray else x, dtype)

    @staticmethod
    def asnumpy(x):
        return x.get() if type(x) is DeviceArray else np.asarray(x)


xp = DoubleModule()
DEVICE = Device("cuda", xp, DeviceArray, xp.asarray, xp.asnumpy, None)


def on_device(tree):
    """`tree` with its numpy arrays as DeviceArrays (for building test inputs)."""
    import autograd_lite as ag
    return ag.tree_map(lambda a: DeviceArray(a.copy()) if type(a) is np.ndarray else a, tree)
