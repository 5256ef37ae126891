"""Numpy's vocabulary on traced values, for the op table (helpers/op_table.py): Python operators
with numbers and plain arrays, and numpy's functions and methods, each a function of one
array x. Its reference is numpy's own untraced call; the rows check that each form reaches
its op (ops/operators.py) with numpy's numbers."""
import numpy as np

NUMBERS = {  # Python numbers are constants of the operand's dtype
    "x + 2.0": lambda x: x + 2.0, "2.0 + x": lambda x: 2.0 + x, "x - 1": lambda x: x - 1,
    "3.0 - x": lambda x: 3.0 - x, "2 * x": lambda x: 2 * x, "x * 5": lambda x: x * 5,
    "x / 4.0": lambda x: x / 4.0, "1.5 / x": lambda x: 1.5 / x, "x ** 2": lambda x: x ** 2,
    "x ** 0.5": lambda x: x ** 0.5, "2.0 ** x": lambda x: 2.0 ** x, "-x": lambda x: -x,
    "+x": lambda x: +x, "abs(x)": abs, "2 ** x": lambda x: 2 ** x,
}
CONSTANTS = {  # plain arrays of x's dtype on either side of a traced x (2, 3)
    "plain * x": lambda x: np.full(3, 2.0, x.dtype) * x,
    "plain - x": lambda x: np.arange(3, dtype=x.dtype) - x,
    "plain / x": lambda x: np.arange(1, 4, dtype=x.dtype) / x,
    "plain ** x": lambda x: np.arange(1, 4, dtype=x.dtype) ** x,
    "x ** plain": lambda x: x ** np.arange(1, 4, dtype=x.dtype),
    "plain @ x": lambda x: np.ones((4, 2), x.dtype) @ x,
    "x @ plain": lambda x: x @ np.ones((3, 2), x.dtype),
}
NUMPY_REDUCTIONS = {
    "np.sum": np.sum, "np.sum(axis)": lambda x: np.sum(x, axis=(0, 2)),
    "x.sum(keepdims)": lambda x: x.sum(axis=1, keepdims=True), "x.mean()": lambda x: x.mean(),
    "np.mean": lambda x: np.mean(x, axis=-1), "np.max": lambda x: np.max(x, axis=1),
    "np.amax": lambda x: np.amax(x, axis=(0, 1)), "x.max()": lambda x: x.max(),
    "np.var": lambda x: np.var(x, axis=0), "x.var(ddof=1)": lambda x: x.var(axis=2, ddof=1),
    "x.min()": lambda x: x.min(), "x.min(keepdims)": lambda x: x.min(axis=-1, keepdims=True),
    "np.min": lambda x: np.min(x, axis=1), "np.amin": lambda x: np.amin(x, axis=(0, 2)),
    "x.prod()": lambda x: x.prod(axis=2), "np.prod": lambda x: np.prod(x, axis=(0, 1)),
    "x.cumsum()": lambda x: x.cumsum(), "np.cumsum": lambda x: np.cumsum(x, axis=1),
    "np.linalg.norm": np.linalg.norm, "np.linalg.norm(axis)": lambda x: np.linalg.norm(x, axis=-1),
    "np.linalg.norm(fro)": lambda x: np.linalg.norm(x[0], "fro"),
}
NUMPY_SELECTIONS = {
    "x.clip(-0.5, 0.8)": lambda x: x.clip(-0.5, 0.8), "x.clip(min=0.2)": lambda x: x.clip(min=0.2),
    "np.clip": lambda x: np.clip(x, x[0, 0], 0.6), "np.sort": lambda x: np.sort(x, axis=1),
    "np.sort(axis=None)": lambda x: np.sort(x, axis=None),
    "np.take_along_axis": lambda x: np.take_along_axis(x, np.array([[[3, 3, 0]]]), 2),
}
NUMPY_PRODUCTS = {
    "x @ v": lambda x: x @ x[0, 0], "v @ x": lambda x: x[0, 0, :3] @ x[1],
    "v @ v": lambda x: x[0, 0] @ x[1, 1], "x.dot(v)": lambda x: x.dot(x[0, 0]),
    "np.dot": lambda x: np.dot(x[0], x[1].T), "np.dot(3-d)": lambda x: np.dot(x, x[0].T),
    "np.outer": lambda x: np.outer(x[0, 0], x[1]),
    "np.einsum": lambda x: np.einsum("ijk,ijk->k", x, x),
    "np.einsum(optimize)": lambda x: np.einsum("ijk,lk,jk->il", x, x[0], x[1], optimize=True),
}
NUMPY_SHAPES = {
    "x.T": lambda x: x.T, "x.transpose()": lambda x: x.transpose(),
    "x.transpose(1, 0, 2)": lambda x: x.transpose(1, 0, 2),
    "x.transpose((2, 0, 1))": lambda x: x.transpose((2, 0, 1)),
    "np.transpose": lambda x: np.transpose(x, (0, 2, 1)),
    "x.reshape(6, 4)": lambda x: x.reshape(6, 4),
    "x.reshape((4, -1))": lambda x: x.reshape((4, -1)),
    "np.reshape": lambda x: np.reshape(x, (-1,)), "x.swapaxes": lambda x: x.swapaxes(0, 2),
    "np.swapaxes": lambda x: np.swapaxes(x, 1, 2), "np.expand_dims": lambda x: np.expand_dims(x, 1),
    "np.squeeze": lambda x: np.squeeze(x[:, :1], axis=1), "x.squeeze": lambda x: x[None].squeeze(0),
    "np.broadcast_to": lambda x: np.broadcast_to(x[:, :1], (2, 5, 4)),
    "np.concatenate": lambda x: np.concatenate([x, x[:, :1] * 2.0], axis=1),
    "np.concatenate(plain)": lambda x: np.concatenate([np.ones((1, 3, 4), x.dtype), x]),
    "np.stack": lambda x: np.stack([x[0], x[1] ** 2], axis=-1),
    "np.split": lambda x: np.concatenate(np.split(x, [1, 3], axis=2)[::-1], axis=2),
    "np.where": lambda x: np.where(x > 0, x, 0.5 * x),
    "np.where(plain)": lambda x: np.where(x < 0.3, np.ones((3, 4), x.dtype), x ** 2),
    "np.take": lambda x: np.take(x, np.array([[1, 0], [1, 1]]), axis=0),
    "x[1]": lambda x: x[1], "x[:, ::-1, 1:3]": lambda x: x[:, ::-1, 1:3],
    "x[[0, 0, 1]]": lambda x: x[[0, 0, 1]],
    "iteration": lambda x: np.stack([row * (i + 1) for i, row in enumerate(x)]),
    "unpacking": lambda x: (lambda a, b: a * b)(*x),
}
