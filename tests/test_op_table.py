"""Every row of the op table (helpers/op_table.py), in float32 and float64: the untraced call gives
an array and the traced call a recorded value of the same dtype and numbers, with a
gradient of each argument's dtype and shape; first order against central differences;
second order (Hessian-vector products) against central differences of the gradient where it
is cheap; values and gradients against PyTorch where torch has the op."""
import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.core.tracer import Box
from helpers.references import (DTYPES, RTOL, assert_close, check_first_order,
                                check_second_order, compare_with_torch, is_float)
from helpers.op_table import CASES


def by_name(cases):
    return pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])


@pytest.mark.parametrize("dtype", DTYPES)
@by_name(CASES)
def test_keeps_the_dtype_and_records_what_it_computes(case, dtype, rng):
    args = case.arguments(rng, dtype)
    out = case.ours(*args)  # a numpy scalar only where numpy itself gives one (np.sum)
    assert isinstance(out, (np.ndarray, np.generic)) and out.dtype == dtype, (type(out), out)
    traced = []

    def weighted(*a):
        traced.append(case.ours(*a))
        return ag.sum(traced[0] * np.ones(out.shape, dtype))
    grads = ag.gradient(weighted, *args)
    assert type(traced[0]) is Box and traced[0].dtype == dtype and traced[0].shape == out.shape
    assert_close(traced[0].value, out, RTOL[np.dtype(dtype)], "traced value")
    for a, g in zip(args, grads):
        if is_float(a):
            assert type(g) is np.ndarray and g.dtype == dtype and g.shape == a.shape
        else:
            assert g is None


@by_name(CASES)
def test_first_order(case, rng):
    check_first_order(case.ours, *case.arguments(rng, np.float64))


@by_name([c for c in CASES if c.second_order])
def test_second_order(case, rng):
    check_second_order(lambda *a: ag.sum(ag.tanh(case.ours(*a)) ** 2),
                       *case.arguments(rng, np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
@by_name([c for c in CASES if c.theirs is not None])
def test_matches_torch(case, dtype, rng, torch):
    compare_with_torch(torch, case.ours, case.theirs, *case.arguments(rng, dtype))
