"""Python operators, methods and numpy functions on traced values: `x + y`, `x.sum()`,
`np.exp(x)` reach the library's ops, which is how numpy-written pullbacks are recorded."""
import functools

import numpy as np

from ..core.tracer import Box, every_value, primal
from . import einsum as es, elementwise as ew
from . import indexing, linalg, matmul as mm, reductions as red, selection as sel, shape as sh
from . import sorting


def _constant(ufunc, *inputs):
    """A ufunc without a derivative on traced values: computed on their plain values."""
    return ufunc(*(primal(x) for x in inputs))


def _constant_along(function, x, axis, keepdims):
    """function(x, axis, keepdims=...) without a derivative (np.argmax) on the plain value."""
    return function(primal(x), axis=axis, keepdims=keepdims)


def _index_of_extreme(function):
    """x.argmax(axis) and np.argmax(x, axis) (argmin likewise): integers, no derivative."""
    def index_of_extreme(x, axis=None, out=None, *, keepdims=False):
        if out is not None:
            raise TypeError(f"{function.__name__}: out= cannot hold a traced or mapped result")
        return type(x).constant_along(function, x, axis, keepdims)
    return index_of_extreme


def _argsort_of(values, axis=-1, keepdims=False):
    """np.argsort in constant_along's form (keepdims is never set)."""
    return np.argsort(values, axis=axis)


def _argsort(x, axis=-1, kind=None, order=None, *, stable=None):
    """np.argsort(x, axis) and x.argsort(axis): integers, no derivative."""
    return type(x).constant_along(_argsort_of, x, axis, False)


def _round(x, decimals=0, out=None):
    """np.round(x, decimals) and x.round(decimals): a constant (derivative 0)."""
    if out is not None:
        raise TypeError("round: out= cannot hold a traced or mapped result")
    return type(x).constant_ufunc(functools.partial(np.round, decimals=decimals), x)


def _allclose(a, b, *args, **kwargs):
    """np.allclose of the values under every trace and vmap."""
    return np.allclose(every_value(a), every_value(b), *args, **kwargs)


def _comparison(ufunc):
    """A comparison: plain bool arrays (batched ones under vmap), no derivative."""
    return lambda self, other: type(self).constant_ufunc(ufunc, self, other)


def _reshape_method(self, *shape):
    one_shape = len(shape) == 1 and not isinstance(shape[0], int)  # x.reshape((2, 3))
    return sh.reshape(self, shape[0] if one_shape else shape)


def _transpose_method(self, *axes):
    if not axes:
        return sh.transpose(self)
    return sh.transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes)


def _sort_method(self, *args, **kwargs):
    raise TypeError("x.sort() sorts in place, which a traced value cannot be: write "
                    "np.sort(x, axis) (or ag.sort), which returns the sorted copy")


def _setitem(self, index, value):
    raise TypeError("x[index] = value: a traced value cannot be changed in place. Build a new "
                    "array instead: ag.where(mask, value, x) takes value where the bool array "
                    "mask is True and x elsewhere; ag.concatenate or ag.stack joins pieces")


def _clip(a, a_min=None, a_max=None, *, min=None, max=None):
    """np.clip(a, a_min, a_max) and x.clip(min, max): numpy takes the bounds by either name."""
    return sel.clip(a, min if a_min is None else a_min, max if a_max is None else a_max)


def _iterate(self):
    if not self.shape:
        raise TypeError("iteration over a 0-d traced value")
    return (indexing.getitem(self, i) for i in range(self.shape[0]))


_BOX_METHODS = {
    "__add__": ew.add, "__radd__": lambda s, o: ew.add(o, s),
    "__sub__": ew.sub, "__rsub__": lambda s, o: ew.sub(o, s),
    "__mul__": ew.mul, "__rmul__": lambda s, o: ew.mul(o, s),
    "__truediv__": ew.div, "__rtruediv__": lambda s, o: ew.div(o, s),
    "__pow__": ew.pow, "__rpow__": lambda s, o: ew.pow(o, s),
    "__matmul__": mm.matmul, "__rmatmul__": lambda s, o: mm.matmul(o, s),
    "__neg__": ew.neg, "__pos__": lambda s: s, "__abs__": ew.abs,
    "__getitem__": indexing.getitem, "__setitem__": _setitem, "__iter__": _iterate,
    "__lt__": _comparison(np.less), "__le__": _comparison(np.less_equal),
    "__gt__": _comparison(np.greater), "__ge__": _comparison(np.greater_equal),
    "__eq__": _comparison(np.equal), "__ne__": _comparison(np.not_equal),
    "reshape": _reshape_method, "transpose": _transpose_method,
    "swapaxes": sh.swapaxes, "squeeze": sh.squeeze,
    "sum": red.sum, "mean": red.mean, "max": red.max, "min": red.min, "prod": red.prod,
    "var": red.var, "cumsum": red.cumsum, "clip": _clip, "dot": mm.dot, "sort": _sort_method,
    "astype": ew.astype, "argmax": _index_of_extreme(np.argmax),
    "argmin": _index_of_extreme(np.argmin), "argsort": _argsort, "round": _round,
    "std": red.std, "ravel": sh.ravel, "flatten": sh.ravel, "repeat": sh.repeat,
    "diagonal": sh.diagonal,  # (no x.trace(): a traced value's `trace` is its Trace)
    "__mod__": ew.mod, "__rmod__": lambda s, o: ew.mod(o, s),
    "T": property(lambda s: sh.transpose(s)),
}

_UFUNCS = {  # and every row of elementwise.py's table (ew.ROW_OPS)
    np.add: ew.add, np.subtract: ew.sub, np.multiply: ew.mul, np.true_divide: ew.div,
    np.power: ew.pow, np.positive: lambda x: x, np.matmul: mm.matmul, np.square: ew.square,
    np.radians: ew.deg2rad, np.degrees: ew.rad2deg,
    **ew.ROW_OPS,
}

# Ufuncs without a derivative (or with derivative 0): computed on the plain values.
_CONSTANT_UFUNCS = {
    np.sign, np.floor, np.ceil, np.rint, np.isfinite, np.isnan, np.isinf, np.signbit,
    np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
    np.logical_and, np.logical_or, np.logical_not, np.logical_xor,
}


def _take(a, indices, axis=None):
    if axis != 0:
        raise TypeError("np.take on a traced value supports axis=0 only (ag.gather)")
    return indexing.gather(a, indices)


def _like(fill):
    def like(a, dtype=None, *args, **kwargs):
        return fill(a.shape, dtype=dtype or a.dtype)
    return like


_FUNCTIONS = {
    np.sum: red.sum, np.mean: red.mean, np.max: red.max, np.amax: red.max, np.var: red.var,
    np.min: red.min, np.amin: red.min, np.prod: red.prod, np.cumsum: red.cumsum,
    np.clip: _clip, np.einsum: es.einsum, np.dot: mm.dot, np.outer: mm.outer,
    np.linalg.norm: linalg.norm, np.sort: sorting.sort,
    np.take_along_axis: sorting.take_along_axis,
    np.reshape: sh.reshape, np.transpose: sh.transpose, np.swapaxes: sh.swapaxes,
    np.expand_dims: sh.expand_dims, np.squeeze: sh.squeeze, np.concatenate: sh.concatenate,
    np.stack: sh.stack, np.split: sh.split, np.where: sel.where, np.broadcast_to: red.broadcast_to,
    np.take: _take, np.argmax: _index_of_extreme(np.argmax),
    np.argmin: _index_of_extreme(np.argmin),
    np.argsort: _argsort, np.round: _round, np.around: _round, np.allclose: _allclose,
    np.std: red.std, np.ravel: sh.ravel, np.vstack: sh.vstack, np.hstack: sh.hstack,
    np.column_stack: sh.column_stack, np.append: sh.append, np.array_split: sh.array_split,
    np.flip: sh.flip, np.fliplr: lambda x: sh.flip(x, 1), np.flipud: lambda x: sh.flip(x, 0),
    np.roll: sh.roll, np.repeat: sh.repeat, np.tile: sh.tile, np.kron: sh.kron, np.pad: sh.pad,
    np.tril: sh.tril, np.triu: sh.triu, np.diag: sh.diag, np.diagonal: sh.diagonal,
    np.trace: sh.trace, np.tensordot: mm.tensordot, np.linalg.solve: linalg.solve,
    np.linalg.inv: linalg.inv, np.linalg.det: linalg.det, np.linalg.slogdet: linalg.slogdet,
    np.linalg.cholesky: linalg.cholesky, np.atleast_1d: sh.atleast_1d,
    np.atleast_2d: sh.atleast_2d, np.atleast_3d: sh.atleast_3d, np.moveaxis: sh.moveaxis,
    np.rollaxis: sh.rollaxis, np.rot90: sh.rot90, np.diff: sh.diff, np.select: sh.select,
    np.nan_to_num: sh.nan_to_num, np.hsplit: sh.hsplit, np.vsplit: sh.vsplit,
    np.dsplit: sh.dsplit, np.inner: mm.inner, np.partition: sorting.partition, np.sinc: ew.sinc,
    np.gradient: sh.central_differences, np.linspace: sh.linspace,
    np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim, np.size: lambda a: a.size,
    np.zeros_like: _like(np.zeros), np.ones_like: _like(np.ones),
}


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if method == "__call__" and not kwargs:
        if ufunc in _UFUNCS:
            return _UFUNCS[ufunc](*inputs)
        if ufunc in _CONSTANT_UFUNCS:
            return type(self).constant_ufunc(ufunc, *inputs)
    raise TypeError(f"autograd_lite has no rule for numpy's {ufunc.__name__}"
                    f"{'' if method == '__call__' else '.' + method}"
                    f"{' with ' + ', '.join(kwargs) if kwargs else ''} on {self.described}; "
                    "define one with ag.primitive")


def _array_function(self, func, types, args, kwargs):
    if func not in _FUNCTIONS:
        raise TypeError(f"autograd_lite has no rule for np.{func.__name__} on "
                        f"{self.described}; define one with ag.primitive")
    return _FUNCTIONS[func](*args, **kwargs)


def install(cls=Box, constant_ufunc=_constant, constant_along=_constant_along,
            described="traced values"):
    """Give Box (or vmap's Batched, with its own `constant_ufunc` and `constant_along`) its
    operators, methods and numpy protocol; `described` names its values in errors."""
    for name, method in _BOX_METHODS.items():
        setattr(cls, name, method)
    cls.__hash__ = None  # __eq__ compares elementwise, so traced values cannot be dict keys
    cls.__array_ufunc__ = _array_ufunc
    cls.__array_function__ = _array_function
    cls.constant_ufunc = staticmethod(constant_ufunc)
    cls.constant_along = staticmethod(constant_along)
    cls.described = described
