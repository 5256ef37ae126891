"""The check every optimizer's update makes first: each gradient leaf has its parameter's
shape and dtype. numpy would broadcast a (2,) gradient into a (3, 2) parameter without a
word, and promote a float32 parameter by a float64 gradient; the update refuses both, naming
the leaf's tree path, so a wrong gradient is found where it enters, not epochs later.
"""
import numpy as np

from ..core.devices import is_device_array
from ..core.tree import tree_leaves, tree_paths


def check_gradient_shapes(caller, params, grads):
    """Raise a ValueError naming the first leaf (its path in params) whose gradient is not an
    array of the parameter's shape and dtype. Only float array parameters with a gradient are
    checked; trees of different structure are left to tree_map, which names where they
    differ."""
    p_leaves, g_leaves = tree_leaves(params), tree_leaves(grads)
    if len(p_leaves) != len(g_leaves):
        return
    for position, (p, g) in enumerate(zip(p_leaves, g_leaves)):
        if g is None or not (isinstance(p, np.ndarray) or is_device_array(p)) \
                or p.dtype.kind != "f":
            continue
        g_shape, g_dtype = np.shape(g), getattr(g, "dtype", type(g).__name__)
        if g_shape != p.shape or g_dtype != p.dtype:
            path = tree_paths(params)[position]  # walked only to name a wrong leaf
            raise ValueError(f"{caller}: the gradient of params.{path} is {g_shape} {g_dtype}, "
                             f"but that parameter is {p.shape} {p.dtype}: a gradient must "
                             f"have its parameter's shape and dtype")
