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
    "np.std": lambda x: np.std(x, axis=1), "x.std(ddof=1)": lambda x: x.std(ddof=1),
}
NUMPY_SELECTIONS = {
    "x.clip(-0.5, 0.8)": lambda x: x.clip(-0.5, 0.8), "x.clip(min=0.2)": lambda x: x.clip(min=0.2),
    "np.clip": lambda x: np.clip(x, x[0, 0], 0.6), "np.sort": lambda x: np.sort(x, axis=1),
    "np.sort(axis=None)": lambda x: np.sort(x, axis=None),
    "np.take_along_axis": lambda x: np.take_along_axis(x, np.array([[[3, 3, 0]]]), 2),
}
def _gram(x):
    """A symmetric positive definite (3, 3) matrix of x (2, 3, 4): x₀x₀ᵀ + x₁x₁ᵀ."""
    return x[0] @ x[0].T + x[1] @ x[1].T


NUMPY_PRODUCTS = {
    "x @ v": lambda x: x @ x[0, 0], "v @ x": lambda x: x[0, 0, :3] @ x[1],
    "v @ v": lambda x: x[0, 0] @ x[1, 1], "x.dot(v)": lambda x: x.dot(x[0, 0]),
    "np.dot": lambda x: np.dot(x[0], x[1].T), "np.dot(3-d)": lambda x: np.dot(x, x[0].T),
    "np.outer": lambda x: np.outer(x[0, 0], x[1]),
    "np.einsum": lambda x: np.einsum("ijk,ijk->k", x, x),
    "np.einsum(optimize)": lambda x: np.einsum("ijk,lk,jk->il", x, x[0], x[1], optimize=True),
    "np.linalg.solve": lambda x: np.linalg.solve(_gram(x), x[1]),
    "np.linalg.inv": lambda x: np.linalg.inv(_gram(x)),
    "np.linalg.det": lambda x: np.linalg.det(_gram(x)),
    "np.linalg.slogdet": lambda x: np.linalg.slogdet(_gram(x))[1],
    "np.linalg.cholesky": lambda x: np.linalg.cholesky(_gram(x)),
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
    "x.ravel()": lambda x: x.ravel(), "x.flatten()": lambda x: x.flatten(),
    "np.ravel": np.ravel, "np.vstack": lambda x: np.vstack([x[0], x[1] * 2]),
    "np.hstack": lambda x: np.hstack([x[0], x[1] * 2]),
    "np.column_stack": lambda x: np.column_stack([x[0, :, 0], x[1]]),
    "np.append": lambda x: np.append(x[0], x[1], axis=1),
    "np.array_split": lambda x: np.concatenate(np.array_split(x, 3, axis=2)[::-1], axis=2),
    "np.flip": lambda x: np.flip(x, 2), "np.fliplr": lambda x: np.fliplr(x[0]),
    "np.flipud": lambda x: np.flipud(x[1]), "np.roll": lambda x: np.roll(x, 1, axis=1),
    "np.repeat": lambda x: np.repeat(x, 2, axis=0), "x.repeat": lambda x: x.repeat(2),
    "np.tile": lambda x: np.tile(x[0], (2, 1)), "np.kron": lambda x: np.kron(x[0], x[1, :2]),
    "np.pad": lambda x: np.pad(x, ((0, 1), (1, 1), (0, 0))),
    "np.tril": lambda x: np.tril(x), "np.triu": lambda x: np.triu(x, 1),
    "np.diag": lambda x: np.diag(x[0]), "np.diagonal": lambda x: np.diagonal(x, 0, 1, 2),
    "x.diagonal": lambda x: x.diagonal(), "np.trace": lambda x: np.trace(x[0]),
    "np.tensordot": lambda x: np.tensordot(x, x[0], axes=([1, 2], [0, 1])),
    "np.gradient": lambda x: np.stack(np.gradient(x)),
    "np.gradient(axis)": lambda x: np.gradient(x, axis=1),
    "np.linspace": lambda x: np.linspace(x[0, 0, 0], x[1, 2, 3], 5),
}
