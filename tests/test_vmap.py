"""vmap (autograd_lite/batching): every row of the op table under vmap equals a Python loop
over the examples (values, first and second order; float32 and float64; the examples on
axis 0, on the last axis, and beside unmapped arguments); the compositions with the other
transformations; the errors."""
import numpy as np
import pytest

import autograd_lite as ag
from helpers.op_cases import Float
from helpers.op_table import CASES
from helpers.references import DTYPES, RTOL, assert_close, is_float

EXAMPLES = 3
# rows with two float arguments or more also run with the first mapped and the others not
ROWS = [(c, layout) for c in CASES for layout in ("axis 0", "last axis")] + \
    [(c, "unmapped") for c in CASES if sum(isinstance(a, Float) for a in c.args) >= 2]


def examples(case, dtype, seed=0):
    """EXAMPLES draws of the row's arguments (constants, such as masks, the same in each)."""
    rng = np.random.default_rng(seed)
    return [case.arguments(rng, dtype) for _ in range(EXAMPLES)]


def first_float(args):
    return next(k for k, a in enumerate(args) if is_float(a))


def batched_arguments(draws, layout):
    """The vmap call's arguments and in_axes for one layout: every float argument stacked on
    axis 0 or on its last axis; or the first float one stacked and the others unmapped
    (example 0's)."""
    args, axes = [], []
    mapped_alone = first_float(draws[0])
    for k, first in enumerate(draws[0]):
        if not is_float(first) or (layout == "unmapped" and k != mapped_alone):
            args.append(first)
            axes.append(None)
            continue
        stacked = np.stack([d[k] for d in draws])
        if layout == "last axis":
            stacked = np.moveaxis(stacked, 0, -1)
        args.append(stacked)
        axes.append(0 if layout != "last axis" else -1)
    return args, tuple(axes)


def per_example(draws, layout):
    """Each example's arguments as the loop sees them: with the layout "unmapped", its first
    float argument and example 0's others."""
    if layout != "unmapped":
        return draws
    k = first_float(draws[0])
    return [[d[k] if i == k else a for i, a in enumerate(draws[0])] for d in draws]


def first_order(case):
    """A scalar function of the row's arguments and its gradient in its float ones."""
    def scalar(*a):
        return ag.sum(ag.tanh(case.ours(*a)) ** 2)

    def gradients(*a):
        positions = tuple(k for k, x in enumerate(a) if ag.is_differentiable(x))
        return ag.gradient(scalar, *a, argnums=positions)
    return gradients


def second_order(case):
    """Gradients of Σ tanh(first-order gradients)²: second derivatives of the row's op."""
    gradients = first_order(case)

    def squared(*a):
        return sum(ag.sum(ag.tanh(g) ** 2) for g in gradients(*a))

    def of_squared(*a):
        positions = tuple(k for k, x in enumerate(a) if ag.is_differentiable(x))
        return ag.gradient(squared, *a, argnums=positions)
    return of_squared


def assert_equals_loop(f, draws, layout, dtype, what):
    args, axes = batched_arguments(draws, layout)
    batched = ag.vmap(f, in_axes=axes)(*args)
    looped = [f(*a) for a in per_example(draws, layout)]
    batched_leaves, looped_leaves = ag.tree_leaves(batched), [ag.tree_leaves(x) for x in looped]
    assert len(batched_leaves) == len(looped_leaves[0]), what
    for i, leaf in enumerate(batched_leaves):
        want = np.stack([np.asarray(x[i]) for x in looped_leaves])
        assert isinstance(leaf, np.ndarray), (what, type(leaf))
        assert leaf.dtype == want.dtype == dtype, (what, leaf.dtype, want.dtype)
        assert_close(leaf, want, 10 * RTOL[np.dtype(dtype)], f"{what}, leaf {i}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case, layout", ROWS, ids=[f"{c.name} {layout}" for c, layout in ROWS])
def test_op_table_row_equals_a_loop(case, layout, dtype):
    draws = examples(case, dtype)
    assert_equals_loop(case.ours, draws, layout, dtype, "value")
    assert_equals_loop(first_order(case), draws, layout, dtype, "first order")
    if case.second_order:
        assert_equals_loop(second_order(case), draws, layout, dtype, "second order")
