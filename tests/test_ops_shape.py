"""Shape ops (autograd_lite/ops/shape.py) beyond the op table: the errors of reshape,
transpose, swapaxes, expand_dims, squeeze, concatenate, stack and split."""
import numpy as np
import pytest

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
    (lambda: ag.array_split(np.ones(5), 0), ValueError,
     "array_split: sections must be at least 1, got 0"),
    (lambda: ag.pad(np.ones((2, 3)), 1, mode="reflect"), ValueError,
     "pad: mode 'reflect' is not supported: autograd_lite pads with a constant"),
    (lambda: ag.pad(np.ones((2, 3)), ((1, 1), (1, 1), (1, 1))), ValueError,
     "pad: pad_width ((1, 1), (1, 1), (1, 1)) must be one (before, after) pair or one per "
     "axis of (2, 3)"),
    (lambda: ag.repeat(np.ones((2, 3)), [1, 2], axis=1), ValueError,
     "repeat: repeats (2,) must be one count or one per entry of axis 1 of (2, 3)"),
    (lambda: ag.tril(np.ones(3)), ValueError, "tril: x must have at least 2 dimensions, got (3,)"),
    (lambda: ag.diag(np.ones((2, 2, 2))), ValueError,
     "diag: v must be a vector or a matrix, got (2, 2, 2)"),
    (lambda: ag.diagonal(np.ones((2, 2)), 0, 1, -1), ValueError,
     "diagonal: axis1 and axis2 must differ, got 1 and -1"),
    (lambda: ag.roll(np.ones((2, 3)), 1, axis=2), ValueError,
     "roll: axis 2 is out of range for an array of 2 dimensions"),
    (lambda: ag.vstack([np.ones((2, 3)), np.ones(2)]), ValueError,
     "concatenate: shapes [(2, 3), (1, 2)] must agree on every axis but 0"),
    (lambda: ag.kron(np.ones(2, np.float32), np.ones(2)), TypeError,  # untraced, as traced
     "kron: operands float32 (2,) and float64 (2,) have different dtypes"),
    (lambda: ag.linspace(np.float32(0), np.float64(1), 3), TypeError,
     "linspace: operands float32 () and float64 () have different dtypes"),
]


@each_error(ERRORS)
def test_errors_name_the_op_and_shapes(make, error, message):
    assert_raises(make, error, message)


def test_array_stacks_traced_values_with_numbers_in_their_dtype(rng):
    """ag.array([...]) of traced 0-d values and Python numbers: a float32 array whose
    gradient is the stacked one's; without traced values, np.array's (float32 arrays keep
    their dtype beside Python numbers)."""
    x = rng.standard_normal(3).astype(np.float32)

    def f(x):
        a = ag.array([[x[0], 2.0], [x[1] * x[2], 1]])
        assert a.dtype == np.float32 and a.shape == (2, 2)
        return ag.sum(a * np.array([[1.0, 10.0], [100.0, 1000.0]], np.float32))
    np.testing.assert_allclose(ag.grad(f)(x), [1, 100 * x[2], 100 * x[1]], rtol=1e-6)
    np.testing.assert_allclose(f(x), x[0] + 20 + 100 * x[1] * x[2] + 1000, rtol=1e-6)
    np.testing.assert_array_equal(ag.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]]))


def test_np_array_of_traced_values_names_ag_array():
    with pytest.raises(TypeError, match=r"np.array\(\[...\]\) and np.asarray of traced "
                                        r"values are ag.array\(\[...\]\)"):
        ag.grad(lambda t: ag.sum(np.array([t, t])))(np.ones(2))
