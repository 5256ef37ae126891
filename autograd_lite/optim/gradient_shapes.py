"""The check every optimizer's update makes first: each gradient leaf has its parameter's
shape and dtype, and each of the state's buffers its parameter's shape, where numpy would
broadcast or promote, or the chunks join mismatched sizes, without a word."""
import numpy as np

from ..core.devices import is_device_array
from ..core.tree import tree_paths


def check_gradient_shapes(caller, params, leaves, buffers=()):
    """Raise a ValueError naming the first float parameter (its path in params) whose gradient
    is not an array of its shape and dtype, or one of whose state buffers (named in `buffers`:
    "state.m", ...) is not of its shape. leaves: per leaf of params, (p, g, *buffers, ...)."""
    for position, (p, g, *rest) in enumerate(leaves):
        if not (isinstance(p, np.ndarray) or is_device_array(p)) or p.dtype.kind != "f":
            continue
        if g is not None:
            g_shape, g_dtype = np.shape(g), getattr(g, "dtype", type(g).__name__)
            if g_shape != p.shape or g_dtype != p.dtype:
                raise ValueError(f"{caller}: the gradient of params.{_path(params, position)} "
                                 f"is {g_shape} {g_dtype}, but that parameter is {p.shape} "
                                 f"{p.dtype}: a gradient must have its parameter's shape and "
                                 "dtype")
        for name, buffer in zip(buffers, rest):
            if buffer is not None and np.shape(buffer) != p.shape:
                raise ValueError(f"{caller}: {name} holds {np.shape(buffer)} for "
                                 f"params.{_path(params, position)}, which is {p.shape}: the "
                                 "state was made for other parameters (init(params) makes "
                                 "one for these)")


def _path(params, position):
    return tree_paths(params)[position]  # walked only to name a wrong leaf
