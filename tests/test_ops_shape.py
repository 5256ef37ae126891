"""Shape ops (autograd_lite/ops/shape.py) beyond the op table: the errors of reshape,
transpose, swapaxes, expand_dims, squeeze, concatenate, stack and split."""
import numpy as np

import autograd_lite as ag
from helpers.op_cases import assert_raises, each_error

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


@each_error(ERRORS)
def test_errors_name_the_op_and_shapes(make, error, message):
    assert_raises(make, error, message)
