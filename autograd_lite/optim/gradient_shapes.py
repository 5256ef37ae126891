"""The check every optimizer's update makes first: each gradient leaf has its parameter's
shape and dtype, where numpy would broadcast or promote without a word."""
import numpy as np

from ..core.devices import is_device_array
from ..core.tree import tree_paths


def check_gradient_shapes(caller, params, leaves):
    """Raise a ValueError naming the first float parameter (its path in params) whose gradient
    is not an array of its shape and dtype. leaves: per leaf of params, (p, g, ...)."""
    for position, (p, g, *_) in enumerate(leaves):
        if g is None or not (isinstance(p, np.ndarray) or is_device_array(p)) \
                or p.dtype.kind != "f":
            continue
        g_shape, g_dtype = np.shape(g), getattr(g, "dtype", type(g).__name__)
        if g_shape != p.shape or g_dtype != p.dtype:
            path = tree_paths(params)[position]  # walked only to name a wrong leaf
            raise ValueError(f"{caller}: the gradient of params.{path} is {g_shape} {g_dtype}, "
                             f"but that parameter is {p.shape} {p.dtype}: a gradient must "
                             f"have its parameter's shape and dtype")
