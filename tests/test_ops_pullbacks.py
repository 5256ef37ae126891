"""Every primitive of the catalogue (autograd_lite/ops, and core/dtypes.py's cast of a weak
float's cotangent), and every fast rule of an op, names
its pullback after its op (`softmax_pullback`), so that tracebacks and graph pictures say
which rule ran."""
import importlib
import inspect
import pkgutil

import numpy as np
import pytest

from autograd_lite import ops

MODULES = [f"autograd_lite.ops.{m.name}" for m in pkgutil.iter_modules(ops.__path__)] + [
    "autograd_lite.core.dtypes"]  # every module of the package, and the dtype policy's

x, y = np.ones((2, 3)), np.full((2, 3), 2.0)
ids = np.array([0, 1])

# op name: arguments of one call of its body (a rule gets every argument, defaults filled in)
CALLS = {
    "add": (x, y), "sub": (x, y), "mul": (x, y), "div": (x, y), "pow": (x, y), "neg": (x,),
    "astype": (x, np.dtype(np.float32)), "exp": (x,), "log": (x,), "sqrt": (x,), "tanh": (x,),
    "sigmoid": (x,), "relu": (x,), "gelu": (x,), "abs": (x,), "maximum": (x, y),
    "minimum": (x, y), "where": (x > 0, x, y), "clip": (x, 0.0, y),
    "sin": (x,), "cos": (x,), "log1p": (x,), "expm1": (x,), "softplus": (x,),
    "getitem": (x, 0), "add_at": (np.ones(3), 0, (2, 3)), "gather": (x, ids),
    "scatter_add": (x, ids, 2),
    "matmul": (x, x.T), "linear": (x, x.T, x[:, 0]),
    "softmax": (x, -1, None), "log_softmax": (x, -1), "logsumexp": (x,),
    "layer_norm": (x, x[0], x[0], 1e-5), "cross_entropy": (x, ids, None, 0.0),
    "broadcast_to": (x, (4, 2, 3)), "sum": (x,), "mean": (x,), "max": (x,), "min": (x,),
    "prod": (x,), "cumsum": (x,), "norm": (x,), "einsum": ("ij,kj", x, y),
    "squared_norm": (x, np.linalg.norm(x, axis=1), (1,), False),
    "sort": (x,), "take_along_axis": (x, np.zeros((2, 1), int), 1),
    "reshape": (x, (3, 2)), "transpose": (x,), "swapaxes": (x, 0, 1), "expand_dims": (x, 0),
    "squeeze": (x[None],), "concatenate": (0, x, y), "stack": (0, x, y),
    "weak": (np.ones((), np.float32),),
    **{name: (x / 4,) for name in ("exp2", "log2", "log10", "tan", "arcsin", "arccos", "arctan",
                                   "sinh", "cosh", "arcsinh", "arctanh", "deg2rad", "rad2deg",
                                   "reciprocal", "fabs", "sinc")},
    "arccosh": (y,),
    **{name: (x, y) for name in ("logaddexp", "logaddexp2", "mod", "arctan2", "hypot", "fmax",
                                 "fmin")},
    "solve": (np.eye(2), x), "inv": (np.eye(2),), "det": (np.eye(2),),
    "slogdet": (np.eye(2),), "cholesky": (np.eye(2),),
}


def catalogue():
    """{op name: the function computing (out, pullback)}: the body of every primitive, and
    the fast rule of every fusable op, defined in the op modules."""
    found = {}
    for name in MODULES:  # by import_module: ops.matmul is the op, not its module
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module):
            if hasattr(value, "op_name") and value.__module__ == module.__name__:
                found[value.op_name] = (value.body if hasattr(value, "body")
                                        else value.rules[0].body)
    return found


def test_the_table_covers_every_primitive_and_op_with_a_fast_rule():
    assert sorted(catalogue()) == sorted(CALLS)
    assert ops.softmax.rules[0].body is catalogue()["softmax"]


@pytest.mark.parametrize("name", CALLS)
def test_the_pullback_is_named_after_the_op(name):
    _, pullback = catalogue()[name](*CALLS[name])
    assert pullback.__name__ == f"{name}_pullback"
