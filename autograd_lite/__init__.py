"""autograd_lite: reverse-mode tensor autodiff on numpy, with whole-program gradients.

    import autograd_lite as ag
    grads = ag.gradient(loss, params, batch)   # gradients in the structure of the arguments
"""
import importlib.metadata as _metadata

from . import kernels, memory, optim
from .core.differentiate import grad, gradient, value_and_gradient, vjp
from .core.remat import checkpoint
from .ops import (abs, add, add_at, astype, broadcast_to, clip, concatenate, cos, cross_entropy,
                  cumsum, div, dot, dropout, einsum, exp, expand_dims, expm1, gather, gelu,
                  getitem, layer_norm, linear, log, log1p, log_softmax, logsumexp, matmul, max,
                  maximum, mean, min, minimum, mul, neg, norm, outer, pow, prod, relu, reshape,
                  scatter_add, sigmoid, silu, sin, softmax, softplus, sort, split, sqrt, square,
                  squeeze, stack, sub, sum, swapaxes, take_along_axis, tanh, transpose,
                  unbroadcast, var, where)
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
