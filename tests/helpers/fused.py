"""A fused rule against its composed reference (the same function written with the library's
smaller ops): the values, the gradients and the gradients of a gradient (second order) of
every float argument, in float64; and in float32 the outputs and gradients stay float32.
`fused_calls(f, *args)`: the names of the ops a trace of f records, to see which fused op ran."""
import numpy as np

import autograd_lite as ag
from autograd_lite.core import tracer
from helpers.references import assert_close, is_float, random_weight


def _weighted_sum(f, out_shape, dtype):
    """Σ f(*args) ⊙ w, with w fixed: a scalar whose gradient reaches every output entry."""
    weight = random_weight(out_shape, dtype)
    return lambda *args: ag.sum(f(*args) * weight)


def _gradient_norm(loss, positions):
    """Σ ‖∂loss/∂args[i]‖² over the float positions: differentiating it is second order."""
    def norm(*args):
        grads = ag.gradient(loss, *args)
        return sum(ag.sum(grads[i] * grads[i]) for i in positions)
    return norm


def assert_fused_matches_composed(fused, composed, *args, rtol=1e-12):
    """fused(*args) == composed(*args) in value, first and second order (float64 args), and
    in float32 each output and gradient is float32."""
    positions = [i for i, a in enumerate(args) if is_float(a)]
    out = fused(*args)
    assert_close(out, composed(*args), rtol, "value")
    losses = [_weighted_sum(f, np.shape(out), out.dtype) for f in (fused, composed)]
    for order, (a, b) in enumerate([losses, [_gradient_norm(f, positions) for f in losses]], 1):
        for i, g, want in zip(positions, *(ag.gradient(f, *args) for f in (a, b))):
            assert_close(g, want, rtol, f"order {order}, argument {i}")
    as32 = [a.astype(np.float32) if is_float(a) else a for a in args]
    out32 = fused(*as32)
    assert out32.dtype == np.float32, out32.dtype
    for i, g in zip(positions, ag.gradient(_weighted_sum(fused, out32.shape, np.float32), *as32)):
        assert g.dtype == np.float32, f"argument {i}: {g.dtype}"


def fused_calls(f, *args):
    """The names of the ops one gradient trace of f(*args) records (a hook, no picture)."""
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
