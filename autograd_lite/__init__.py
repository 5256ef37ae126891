"""autograd_lite: reverse-mode tensor autodiff on numpy, with whole-program gradients.

    import autograd_lite as ag
    grads = ag.gradient(loss, params, batch)   # gradients in the structure of the arguments
"""
import importlib.metadata as _metadata

from . import kernels, memory, optim
from .core.differentiate import grad, gradient, value_and_gradient, vjp
from .core.remat import checkpoint
from .ops import (abs, add, add_at, allclose, append, arccos, arccosh, arcsin, arcsinh, arctan,
                  arctan2, arctanh, argmax, argmin, argsort, array, array_split, asarray, astype,
                  atleast_1d, atleast_2d, atleast_3d, broadcast_to, c_, cholesky, clip,
                  column_stack, concatenate, cos, cosh, cross_entropy, cumsum, deg2rad, det, diag,
                  diagonal, diff, div, dot, dropout, dsplit, einsum, exp, exp2, expand_dims, expm1,
                  fabs, flip, fmax, fmin, gather, gelu, getitem, hsplit, hstack, hypot, inner, inv,
                  kron, layer_norm, linear, linspace, log, log10, log1p, log2, log_softmax,
                  logaddexp, logaddexp2, logsumexp, matmul, max, maximum, mean, min, minimum, mod,
                  moveaxis, mul, nan_to_num, neg, norm, outer, pad, partition, pow, prod, r_,
                  rad2deg, ravel, reciprocal, relu, repeat, reshape, roll, rollaxis, rot90, round,
                  row_stack, scatter_add, select, sigmoid, silu, sin, sinc, sinh, slogdet, softmax,
                  softplus, solve, sort, split, sqrt, square, squeeze, stack, std, sub, sum,
                  swapaxes, take_along_axis, tan, tanh, tensordot, tile, trace, transpose, tril,
                  triu, unbroadcast, var, vsplit, vstack, where)
from .ops import deg2rad as radians, rad2deg as degrees  # numpy's other names
from .core.placement import array_module, device_name, to_device
from .core.rules import fast_rules, fusable, is_recorded
from .core.tracer import stop_gradient
from .core.definers import fast_rule, primitive
from .transforms import hessian, hvp, jacobian, jvp
from .batching import vmap
from .core.tree import Hyper, is_differentiable, tree_leaves, tree_map, tree_paths, tree_unflatten
from .gradcheck import check_gradients
from .io.serialization import load, save
from .threads import set_threads, thread_count

try:
    __version__ = _metadata.version("autograd-lite")  # setup.cfg's version, as installed
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"


def __getattr__(name):
    if name == "viz":  # graphviz is optional: import the pictures module on first use
        import importlib  # not `from . import viz`: its hasattr check would call back here
        return importlib.import_module(".viz", __name__)
    raise AttributeError(f"module 'autograd_lite' has no attribute '{name}'")
