"""When a model's fast rule computes what its function does: the conditions the rules'
`applies` predicates share. Anything else runs the function itself, whose ops check their
operands and say what is wrong."""
import numpy as np

import autograd_lite as ag

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def one_float_dtype(*trees):
    """Whether every float leaf of the trees (arrays, parameter NamedTuples) shares one
    dtype, float32 or float64: what the kernels compute in."""
    arrays = [a for a in ag.tree_leaves(trees) if isinstance(a, np.ndarray)]
    dtype = arrays[0].dtype
    return dtype in FLOAT_DTYPES and all(a.dtype == dtype for a in arrays)


def no_dropout(rate, rng):
    """Dropout is off: rate 0 or no rng (inference)."""
    return rate == 0 or rng is None


def mask_fits(mask, scores):
    """Whether mask is None or a plain bool array of the scores' rank that broadcasts to
    them, scores the (B, H, T_q, T_k) shape."""
    if mask is None:
        return True
    return (type(mask) is np.ndarray and mask.dtype == np.bool_ and mask.ndim == 4
            and all(m in (1, s) for m, s in zip(mask.shape, scores)))
