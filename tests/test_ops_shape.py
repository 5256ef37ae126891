"""Shape ops (autograd_lite/ops/shape.py): reshape, transpose, swapaxes, expand_dims, squeeze,
concatenate, stack, split, against central differences and PyTorch; errors and dtypes."""
import re

import numpy as np
import pytest

import autograd_lite as ag
from torch_reference import DTYPES, check_first_order, check_second_order, compare_with_torch


def split_as_one(pieces):
    """The pieces of a split, flattened and joined, each scaled by its position (1, 2, ...),
    so that the gradient tells which piece each element went to."""
    return [p.reshape(-1) * (i + 1) for i, p in enumerate(pieces)]


# case id: (input shape, ag op, torch op taking (tensor, torch))
CASES = {
    "reshape": ((2, 3, 4), lambda x: ag.reshape(x, (4, 6)), lambda t, torch: t.reshape(4, 6)),
    "reshape-1": ((2, 3, 4), lambda x: ag.reshape(x, (3, -1)), lambda t, torch: t.reshape(3, -1)),
    "reshape-int": ((2, 3), lambda x: ag.reshape(x, 6), lambda t, torch: t.reshape(6)),
    "reshape-0d": ((1, 1), lambda x: ag.reshape(x, ()), lambda t, torch: t.reshape(())),
    "transpose": ((2, 3, 4), ag.transpose, lambda t, torch: t.permute(2, 1, 0)),
    "transpose-axes": ((2, 3, 4), lambda x: ag.transpose(x, (1, 2, 0)),
                       lambda t, torch: t.permute(1, 2, 0)),
    "transpose-negative": ((2, 3, 4), lambda x: ag.transpose(x, (-1, 0, -2)),
                           lambda t, torch: t.permute(2, 0, 1)),
    "transpose-2d": ((3, 5), ag.transpose, lambda t, torch: t.T),
    "swapaxes": ((2, 3, 4), lambda x: ag.swapaxes(x, 0, 2), lambda t, torch: t.swapaxes(0, 2)),
    "swapaxes-negative": ((2, 3, 4), lambda x: ag.swapaxes(x, -1, -2),
                          lambda t, torch: t.swapaxes(-1, -2)),
    "expand_dims0": ((2, 3), lambda x: ag.expand_dims(x, 0), lambda t, torch: t.unsqueeze(0)),
    "expand_dims1": ((2, 3), lambda x: ag.expand_dims(x, 1), lambda t, torch: t.unsqueeze(1)),
    "expand_dims-1": ((2, 3), lambda x: ag.expand_dims(x, -1), lambda t, torch: t.unsqueeze(-1)),
    "squeeze": ((1, 3, 1, 2), ag.squeeze, lambda t, torch: t.squeeze()),
    "squeeze-axis": ((1, 3, 1, 2), lambda x: ag.squeeze(x, 2), lambda t, torch: t.squeeze(2)),
    "squeeze-axes": ((1, 3, 1, 2), lambda x: ag.squeeze(x, (0, -2)),
                     lambda t, torch: t.squeeze((0, 2))),
    "concatenate0": ((4, 3), lambda x: ag.concatenate([x, x[:2] * 2, x], axis=0),
                     lambda t, torch: torch.cat([t, t[:2] * 2, t], 0)),
    "concatenate-1": ((2, 3, 2), lambda x: ag.concatenate([x, ag.tanh(x)], axis=-1),
                      lambda t, torch: torch.cat([t, t.tanh()], -1)),
    "concatenate-one": ((3,), lambda x: ag.concatenate([x]), lambda t, torch: t * 1),
    "stack0": ((2, 3), lambda x: ag.stack([x, x * x]), lambda t, torch: torch.stack([t, t * t])),
    "stack1": ((2, 3), lambda x: ag.stack([x, -x, x], axis=1),
               lambda t, torch: torch.stack([t, -t, t], 1)),
    "stack-1": ((2, 3), lambda x: ag.stack([x, x ** 3], axis=-1),
                lambda t, torch: torch.stack([t, t ** 3], -1)),
    "split-sections": ((6, 2), lambda x: ag.concatenate(split_as_one(ag.split(x, 3))),
                       lambda t, torch: torch.cat(split_as_one(t.tensor_split(3)))),
    "split-indices": ((2, 7), lambda x: ag.concatenate(split_as_one(ag.split(x, [2, 5], axis=1))),
                      lambda t, torch: torch.cat(split_as_one(t.tensor_split([2, 5], 1)))),
    "split-negative-axis": ((2, 4, 3), lambda x: ag.concatenate(split_as_one(ag.split(x, [1], -2))),
                            lambda t, torch: torch.cat(split_as_one(t.tensor_split([1], -2)))),
}


@pytest.mark.parametrize("case", CASES)
def test_first_order(case, rng):
    shape, op, _ = CASES[case]
    check_first_order(op, rng.standard_normal(shape))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_matches_torch(case, dtype, rng, torch):
    shape, op, torch_op = CASES[case]
    x = rng.standard_normal(shape).astype(dtype)
    compare_with_torch(torch, op, lambda t: torch_op(t, torch), x)


@pytest.mark.parametrize("case", ["reshape", "transpose-axes", "swapaxes", "expand_dims1",
                                  "squeeze-axes", "concatenate-1", "stack1", "split-indices"])
def test_second_order_through_the_pullback(case, rng):
    shape, op, _ = CASES[case]
    check_second_order(lambda x: ag.sum(ag.tanh(op(x)) ** 2), rng.standard_normal(shape))


def test_concatenate_and_stack_of_several_traced_arrays(rng, torch):
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 1)), rng.standard_normal((2, 4))
    compare_with_torch(torch, lambda a, b, c: ag.concatenate([a, b, c], axis=1),
                       lambda a, b, c: torch.cat([a, b, c], 1), a, b, c)
    check_first_order(lambda a, b, c: ag.concatenate([c, a, b], axis=-1), a, b, c)
    d = rng.standard_normal((2, 3))
    compare_with_torch(torch, lambda a, d: ag.stack([a, d, a], axis=2),
                       lambda a, d: torch.stack([a, d, a], 2), a, d)


@pytest.mark.parametrize("dtype", DTYPES)
def test_untraced_results_are_plain_arrays(dtype, rng):
    x = rng.standard_normal((2, 1, 4)).astype(dtype)
    outs = [ag.reshape(x, (8,)), ag.transpose(x), ag.swapaxes(x, 0, 1), ag.expand_dims(x, 0),
            ag.squeeze(x), ag.concatenate([x, x]), ag.stack([x, x]), *ag.split(x, 2, axis=2)]
    for out in outs:
        assert type(out) is np.ndarray and out.dtype == dtype


ERRORS = [
    (lambda: ag.reshape(np.ones((2, 3)), (4,)), ValueError,
     "reshape: cannot reshape (2, 3) (size 6) into (4,)"),
    (lambda: ag.reshape(np.ones((2, 3)), 5), ValueError,
     "reshape: cannot reshape (2, 3) (size 6) into (5,)"),
    (lambda: ag.transpose(np.ones((2, 3, 4)), (0, 0, 1)), ValueError,
     "transpose: axes (0, 0, 1) are not a permutation of the 3 axes of (2, 3, 4)"),
    (lambda: ag.transpose(np.ones((2, 3)), (0, 2)), ValueError,
     "transpose: axes (0, 2) are not a permutation of the 2 axes of (2, 3)"),
    (lambda: ag.swapaxes(np.ones((2, 3)), 0, 2), ValueError,
     "swapaxes: axis 2 is out of range for an array of 2 dimensions"),
    (lambda: ag.expand_dims(np.ones((2, 3)), 3), ValueError,
     "expand_dims: axis 3 is out of range for (2, 3)"),
    (lambda: ag.expand_dims(np.ones((2, 3)), -4), ValueError,
     "expand_dims: axis -4 is out of range for (2, 3)"),
    (lambda: ag.squeeze(np.ones((2, 1)), 0), ValueError,
     "squeeze: axis 0 of (2, 1) does not have length 1"),
    (lambda: ag.squeeze(np.ones((2, 1)), 2), ValueError,
     "squeeze: axis 2 is out of range for an array of 2 dimensions"),
    (lambda: ag.concatenate([np.ones((2, 3)), np.ones((3, 2))], axis=0), ValueError,
     "concatenate: shapes [(2, 3), (3, 2)] must agree on every axis but 0"),
    (lambda: ag.concatenate([np.ones((2, 3)), np.ones(3)], axis=0), ValueError,
     "concatenate: shapes [(2, 3), (3,)] must agree on every axis but 0"),
    (lambda: ag.concatenate([np.ones((2, 3))], axis=2), ValueError,
     "concatenate: axis 2 is out of range for an array of 2 dimensions"),
    (lambda: ag.concatenate([]), ValueError, "concatenate: needs at least one array"),
    (lambda: ag.concatenate([np.ones(2, np.float32), np.ones(3)]), TypeError,
     "concatenate: operands float32 (2,) and float64 (3,) have different dtypes"),
    (lambda: ag.stack([np.ones((2, 3)), np.ones((3, 2))]), ValueError,
     "stack: all arrays must have the same shape, got [(2, 3), (3, 2)]"),
    (lambda: ag.stack([np.ones((2, 3))], axis=3), ValueError,
     "stack: axis 3 is out of range for 3 dimensions"),
    (lambda: ag.stack([]), ValueError, "stack: needs at least one array"),
    (lambda: ag.stack([np.ones(2), np.ones(2, np.float32)]), TypeError,
     "stack: operands float64 (2,) and float32 (2,) have different dtypes"),
    (lambda: ag.split(np.ones((2, 5)), 2, axis=1), ValueError,
     "split: axis 1 of (2, 5) (length 5) does not divide into 2 equal sections"),
    (lambda: ag.split(np.ones((2, 5)), 2, axis=2), ValueError,
     "split: axis 2 is out of range for an array of 2 dimensions"),
]


@pytest.mark.parametrize("make, error, message", ERRORS,
                         ids=[f"{m.split(':')[0]}{i}" for i, (_, _, m) in enumerate(ERRORS)])
def test_errors_name_the_op_and_shapes(make, error, message):
    with pytest.raises(error, match=re.escape(message)):
        make()


def test_mixed_dtypes_raise_under_tracing_too():
    a, b = np.ones((2, 3), np.float32), np.ones((2, 3))
    for join in (ag.concatenate, ag.stack):
        with pytest.raises(TypeError, match="float32 .* float64"):
            ag.gradient(lambda a, b: ag.sum(join([a, b])), a, b)


def test_expand_dims_takes_a_tuple_of_axes_like_numpy():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ag.expand_dims(x, (0, 3)), np.expand_dims(x, (0, 3)))
    (g,) = ag.gradient(lambda x: ag.sum(ag.expand_dims(x, (0, -1)) * 2.0), x)
    np.testing.assert_array_equal(g, np.full((2, 3), 2.0))
