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
from helpers.op_table import CASES, FUSED_CASES, FUSED_OPS


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


# ---- ops with a fast rule: the rule against the plain function -------------------------------

def with_and_without_rules(compute):
    """compute() with the fast rules, then with every rule off (the plain functions)."""
    with ag.fast_rules(True):
        fused = compute()
    with ag.fast_rules(False):
        return fused, compute()


def test_every_op_with_a_fast_rule_has_rows():
    for name in FUSED_OPS:
        assert getattr(ag, name).rules, name
        assert any(case.name.split()[0] == name for case in FUSED_CASES), name


@pytest.mark.parametrize("dtype", DTYPES)
@by_name(FUSED_CASES)
def test_the_fast_rule_matches_the_plain_function(case, dtype, rng):
    """Values and first-order gradients: the rules (and their pullbacks) against the plain
    functions."""
    args = case.arguments(rng, dtype)
    weights = rng.standard_normal(np.shape(case.ours(*args))).astype(dtype)

    def value_and_gradients():
        return ag.value_and_gradient(lambda *a: ag.sum(case.ours(*a) * weights), *args)
    (fused, fused_grads), (reference, reference_grads) = with_and_without_rules(
        value_and_gradients)
    rtol = 10 * RTOL[np.dtype(dtype)]
    assert_close(fused, reference, rtol, "value")
    for got, want in zip(fused_grads, reference_grads):
        assert (got is None) == (want is None)
        if got is not None:
            assert got.dtype == dtype
            assert_close(got, want, rtol, "gradient")


@by_name([c for c in FUSED_CASES if c.second_order])
def test_the_fast_rule_matches_the_plain_function_to_second_order(case, rng):
    """In float64: Hessian-vector products (the plain function runs: every operand is traced
    twice), the derivative of a gradient in the cotangent's weights only (the rule runs
    forward, its cotangent is traced: the rule's traced pullback runs), and jvp (the double
    vjp: the cotangent belongs to a later trace)."""
    args = case.arguments(rng, np.float64)
    floats = [i for i, a in enumerate(args) if is_float(a)]
    directions = [rng.standard_normal(np.shape(a)) if is_float(a) else None for a in args]
    weights = rng.standard_normal(np.shape(case.ours(*args)))

    def hvp():
        return ag.hvp(lambda *a: ag.sum(ag.tanh(case.ours(*a)) ** 2),
                      tuple(args), tuple(directions))

    def through_the_cotangent(w):
        def weighted(*a):
            return ag.sum(case.ours(*a) * ag.tanh(w))
        grads = ag.gradient(weighted, *args)
        return sum(ag.sum(grads[i] * directions[i]) for i in floats)

    def jvp():
        return ag.jvp(case.ours, tuple(args), tuple(directions))[1]

    for compute in (hvp, lambda: ag.grad(through_the_cotangent)(weights), jvp):
        fused, reference = with_and_without_rules(compute)
        for got, want in zip(ag.tree_leaves(fused), ag.tree_leaves(reference)):
            assert (got is None) == (want is None)
            if got is not None:
                assert_close(got, want, 1e-10, "second order")
