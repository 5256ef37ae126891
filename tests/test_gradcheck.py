"""check_gradients: passes on correct gradients with a per-leaf report, and on a wrong
pullback raises naming the worst leaf's path and both numbers."""
import re
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag


class P(NamedTuple):
    w: np.ndarray
    b: np.ndarray
    n: int


@ag.primitive
def wrong_cube(x):
    """x³ with a deliberately wrong pullback: 2x² instead of 3x²."""
    return x ** 3, lambda g: (g * 2 * x * x,)


def loss(p, x):
    return ag.sum(ag.tanh(x @ p.w + p.b)) * p.n


def test_passes_and_reports_each_leaf(rng):
    p = P(rng.standard_normal((3, 2)), rng.standard_normal(2), 2)
    x = rng.standard_normal((4, 3))
    errors = ag.check_gradients(loss, p, x)
    assert list(errors) == ["p.w", "p.b", "x"]
    assert all(0 <= e < 1e-7 for e in errors.values())


def test_float32_arguments_are_checked_in_float64(rng):
    p = P(rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal(2).astype(np.float32), 1)
    errors = ag.check_gradients(loss, p, rng.standard_normal((4, 3)).astype(np.float32))
    assert all(e < 1e-7 for e in errors.values())


def test_wrong_pullback_names_the_worst_leaf_and_both_numbers():
    w = np.array([[0.5, -1.2], [2.0, 0.3]])
    p = P(w, np.array([0.1, 0.2]), 1)
    x = np.array([1.0, -1.0])

    def f(p, x):
        return ag.sum(wrong_cube(p.w)) + ag.sum(p.b * x)

    with pytest.raises(AssertionError) as info:
        ag.check_gradients(f, p, x)
    message = str(info.value)
    assert "'p.w'" in message
    # the worst coordinate, found independently: reverse mode gives 2w², the truth is 3w²
    excess = np.abs(w ** 2) / (1e-8 + 1e-5 * np.abs(3 * w ** 2))
    i = np.unravel_index(np.argmax(excess), w.shape)
    number = r"(-?[\d.]+(?:e[-+]?\d+)?)"
    match = re.search(rf"reverse mode {number}, central differences {number}", message)
    assert match, message
    assert float(match.group(1)) == pytest.approx(2 * w[i] ** 2, rel=1e-9)
    assert float(match.group(2)) == pytest.approx(3 * w[i] ** 2, rel=1e-6)
    assert "p.b: " in message and "x: " in message  # the per-leaf report


def test_wrong_pullback_inside_a_large_leaf_is_found_by_random_directions(rng):
    x = rng.uniform(0.5, 1.5, 100)
    calls = []

    def f(x):
        calls.append(1)
        return ag.sum(wrong_cube(x))

    with pytest.raises(AssertionError, match="worst leaf 'x'"):
        ag.check_gradients(f, x, n_directions=3)
    # one traced call, then two evaluations per random direction (not two per coordinate)
    assert len(calls) == 1 + 2 * 3


def test_large_leaf_passes_with_few_evaluations(rng):
    a = rng.standard_normal((20, 20))
    calls = []

    def f(a, b):
        calls.append(1)
        return ag.sum(ag.tanh(a) * b)

    b = rng.standard_normal(20)
    errors = ag.check_gradients(f, a, b, n_directions=4, max_coordinates=16)
    assert set(errors) == {"a", "b"} and max(errors.values()) < 1e-7
    assert len(calls) == 1 + 2 * 4 + 2 * 4  # b has 20 > 16 elements: random directions too


def scaled_exp(factor):
    """exp with its pullback scaled by `factor` (1 is the true derivative)."""
    @ag.primitive(name=f"exp_times_{factor}")
    def op(x):
        y = np.exp(x)
        return y, lambda g: (g * y * factor,)
    return op


@pytest.mark.parametrize("factor", [1.01, 1.0001, 0.999])
def test_a_gradient_wrong_by_a_small_fraction_fails(factor):
    """The default tolerance (rtol 1e-5) catches relative errors of 1e-4 and more."""
    op = scaled_exp(factor)
    with pytest.raises(AssertionError, match="worst leaf 'x'"):
        ag.check_gradients(lambda x: ag.sum(op(x)), np.array([0.3, -0.7, 1.1]))


def test_the_tolerance_is_what_the_caller_sets():
    op = scaled_exp(1.01)
    x = np.array([0.3, -0.7, 1.1])
    errors = ag.check_gradients(lambda x: ag.sum(op(x)), x, rtol=0.02)
    # the error is 1% of exp(x) for the largest coordinate, analytically
    assert errors["x"] == pytest.approx(0.01 * np.exp(1.1), rel=1e-6)
    with pytest.raises(AssertionError):
        ag.check_gradients(lambda x: ag.sum(op(x)), x, rtol=0.005)
    assert ag.check_gradients(lambda x: ag.sum(scaled_exp(1 + 1e-9)(x)), x)["x"] < 1e-7


def test_a_nan_gradient_fails():
    """NaN is no error below the tolerance: a pullback giving NaN is reported."""
    nan_pullback = ag.primitive(lambda x: (x * 1.0, lambda g: (g * np.nan,)))
    with pytest.raises(AssertionError, match="reverse mode nan"):
        ag.check_gradients(lambda x: ag.sum(nan_pullback(x)), np.ones(3))


@pytest.mark.parametrize("args, held", [
    ((np.ones(3, np.int64),), r"int64 array \(3,\)"),
    ((np.arange(2), "text", None), r"int64 array \(2,\), str, NoneType"),
    (((), {}), "nothing")])
def test_nothing_to_check_is_an_error_naming_what_the_arguments_hold(args, held):
    """An empty result would read as a pass: with no float leaf, check_gradients says so."""
    with pytest.raises(ValueError, match=rf"^check_gradients: nothing to check: no argument "
                                         rf"holds a float leaf \(they hold {held}, which have "
                                         rf"no gradient\); pass the floats to differentiate$"):
        ag.check_gradients(lambda *a: ag.sum(np.ones(2)), *args)
