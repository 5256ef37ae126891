"""When a model's fast rule computes what its function does: the conditions the rules'
`applies` predicates share. Anything else runs the function itself, whose ops check their
operands and say what is wrong."""
import numbers

import numpy as np

import autograd_lite as ag


FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def one_float_dtype(*trees):
    """Whether every array of the trees (arrays, parameter NamedTuples) is a numpy array of
    one dtype, float32 or float64: what the kernels compute in. A device's array (CuPy's)
    has no kernel here: its model runs the plain functions."""
    dtype = None
    for leaf in ag.tree_leaves(trees):
        if type(leaf) is np.ndarray:
            if dtype is None:
                dtype = leaf.dtype
            elif leaf.dtype is not dtype and leaf.dtype != dtype:
                return False
        elif hasattr(leaf, "dtype") and not isinstance(leaf, np.generic):
            return False  # a device's array
    return dtype is not None and dtype in FLOAT_DTYPES


def none_empty(*arrays):
    """Whether every array holds a number: the kernels take rows of at least one; a sequence
    of length 0 (or a batch of none) is left to the function, whose ops take it."""
    return all(a.size > 0 for a in arrays)


def dropout_fits(rate, rng):
    """Dropout is off (rate 0 or no rng: inference), or its rate is a plain number in (0, 1)
    that the rule can draw its mask with; a traced or out-of-range rate is left to ag.dropout,
    which says what is wrong."""
    if rng is None or (isinstance(rate, numbers.Real) and rate == 0):
        return True
    return isinstance(rate, numbers.Real) and 0 < rate < 1


def dropout_keep(shape, dtype, rate, rng):
    """The scaled mask ag.dropout(x, rate, rng) multiplies an x of `shape` and `dtype` by:
    the same draws from rng (ag.kernels.dropout_mask); None where dropout is off."""
    if rate == 0 or rng is None:
        return None
    return ag.kernels.dropout_mask(shape, rate, rng, np.dtype(dtype))


def mask_fits(mask, scores):
    """Whether mask is None or a plain bool array of the scores' rank that broadcasts to
    them, scores the (B, H, T_q, T_k) shape."""
    if mask is None:
        return True
    return (type(mask) is np.ndarray and mask.dtype == np.bool_ and mask.ndim == 4
            and all(m in (1, s) for m, s in zip(mask.shape, scores)))
