"""A fast rule against its plain function (the same function with every fast rule off, op by
op): the values, the gradients and the gradients of a gradient (second order) of every float
argument, in float64; and in float32 the outputs and gradients stay float32.
`fused_calls(f, *args)`: the names of the ops a trace of f records with the rules on, to see
which rule ran (`recorded_names`: with the rules as they are set);
`rules_off(f)`: f run under `ag.fast_rules(False)`."""
import numpy as np

import autograd_lite as ag
from autograd_lite.core import tracer
from helpers.references import assert_close, is_float, random_weight


def rules_off(f):
    """f, called with every fast rule off: its plain definition, op by op."""
    def plain(*args, **kwargs):
        with ag.fast_rules(False):
            return f(*args, **kwargs)
    return plain


def _weighted_sum(f, out_shape, dtype):
    """Σ f(*args) ⊙ w, with w fixed: a scalar whose gradient reaches every output entry."""
    weight = random_weight(out_shape, dtype)
    return lambda *args: ag.sum(f(*args) * weight)


def _gradient_norm(loss):
    """Σ ‖∂loss/∂leaf‖² over every float leaf of every argument: differentiating it is
    second order."""
    def norm(*args):
        return sum(ag.sum(g * g) for g in ag.tree_leaves(ag.gradient(loss, *args))
                   if g is not None)
    return norm


def _float_paths(args):
    """(path, leaf) of every float array leaf of the arguments (trees too)."""
    return [(path, leaf) for path, leaf in zip(ag.tree_paths(args), ag.tree_leaves(args))
            if is_float(leaf)]


def assert_fused_matches_composed(fused, composed, *args, rtol=1e-12):
    """fused(*args) == composed(*args) in value, first and second order, in every float leaf
    of the arguments (trees of float64 arrays: parameter NamedTuples too), and in float32
    each output and gradient is float32."""
    out = fused(*args)
    assert_close(out, composed(*args), rtol, "value")
    losses = [_weighted_sum(f, np.shape(out), out.dtype) for f in (fused, composed)]
    for order, (a, b) in enumerate([losses, [_gradient_norm(f) for f in losses]], 1):
        got, wanted = (_float_paths(ag.gradient(f, *args)) for f in (a, b))
        scale = max(float(np.max(np.abs(w))) for _, w in wanted if w.size)
        for (path, g), (_, want) in zip(got, wanted):
            assert_close(g, want, rtol, f"order {order}, {path}", scale=scale)
    as32 = ag.tree_map(lambda a: a.astype(np.float32) if is_float(a) else a, args)
    out32 = fused(*as32)
    assert out32.dtype == np.float32, out32.dtype
    for path, g in _float_paths(ag.gradient(_weighted_sum(fused, out32.shape, np.float32), *as32)):
        assert g.dtype == np.float32, f"{path}: {g.dtype}"


def fused_calls(f, *args):
    """The names of the ops one gradient trace of f(*args) records with the fast rules on (a
    hook, no picture)."""
    with ag.fast_rules(True):
        return recorded_names(f, *args)


def recorded_names(f, *args):
    """The names of the ops one gradient trace of f(*args) records, with the rules as they
    are set."""
    names = []
    trace = tracer.Trace(on_op=lambda op, a, k, box: names.append(op.op_name))
    def box(leaf):
        if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f":
            return tracer.Box(leaf, trace, tracer.Node(None, (), "input", leaf.shape, leaf.dtype))
        return leaf
    boxed = [ag.tree_map(box, a) for a in args]
    f(*boxed)
    tracer.end_trace(trace)
    return names
