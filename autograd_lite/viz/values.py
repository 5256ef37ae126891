"""What the explorer shows of a recorded call's numbers (`values=True`): each value's
statistics, and each float input's gradient norm from one backward pass over the recorded
call itself (the same nodes, the same dropout masks) seeded with ones: the gradient of the
sum of the outputs, which is the output's when it is a scalar loss.
"""
import numpy as np

from ..core.backward import backward


def statistics(value):
    """{mean, std, min, max, zeros, nonfinite} of an array: mean, std, min and max over its
    finite entries (None when it has none), zeros the fraction of entries equal to 0,
    nonfinite the count of NaN and ±inf entries. Sums in float64, without a float64 copy
    (a parameter table is tens of MB): about 5 passes over the array."""
    a = np.asarray(value)
    if a.dtype.kind not in "biuf" or a.size == 0:
        return None
    finite = np.isfinite(a) if a.dtype.kind == "f" else None
    n_finite = a.size if finite is None else int(np.count_nonzero(finite))
    kept = a if n_finite == a.size else a[finite]
    out = {"zeros": float(np.count_nonzero(a == 0) / a.size), "nonfinite": a.size - n_finite}
    if n_finite:
        out.update(mean=float(kept.mean(dtype=np.float64)), std=float(kept.std(dtype=np.float64)),
                   min=float(kept.min()), max=float(kept.max()))
    else:
        out.update(mean=None, std=None, min=None, max=None)
    return out


def gradient_norms(recorder, output_nodes):
    """Set item.grad_norm = ‖∂(Σ outputs)/∂x‖₂ for each float input x of the recorded call
    (0.0 for an input the outputs do not depend on). The pullbacks are kept (release=False):
    the picture's measure of what they hold is taken before."""
    at_inputs = {}
    for node in output_nodes:
        seed = np.ones(node.shape, dtype=node.dtype)
        for leaf, g in backward(node, seed, release=False).items():
            at_inputs[leaf] = g if leaf not in at_inputs else at_inputs[leaf] + g
    for node, item_id in recorder.by_node.items():
        item = recorder.items[item_id]
        if item.kind in ("param", "input"):
            g = at_inputs.get(node)
            # in the gradient's own dtype: BLAS's nrm2 is scaled, so float32 does not overflow
            item.grad_norm = 0.0 if g is None else float(np.linalg.norm(np.ravel(g)))
