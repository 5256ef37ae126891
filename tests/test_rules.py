"""Fast rules (core/rules.py) as a user writes them: a plain function with `@ag.fusable`, a
rule attached with `ag.fast_rule`. The rule runs where it applies and gives each argument's
cotangent in the argument's own tree; the plain function runs under higher order, in
pictures, where no rule applies and with `ag.fast_rules(False)` (or
AUTOGRAD_LITE_FAST_RULES=0); a traced cotangent takes the plain function's vjp, or the
pullback of a rule registered `takes_traced`. Values against numpy and central differences."""
import os
import subprocess
import sys
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from helpers.fused import fused_calls, recorded_names

pytestmark = pytest.mark.usefixtures("fast_rules_on")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Affine(NamedTuple):
    w: np.ndarray  # (D, E)
    b: np.ndarray  # (E,)
    name: str


@ag.fusable
def affine_tanh(p, x, scale=1.0):
    """tanh(scale · (x W + b)).  x (N, D) -> (N, E)"""
    return ag.tanh(scale * (x @ p.w + p.b))


CALLS = []  # (x is p.w) for each call of the rule


def two_dimensional(p, x, scale):  # every argument given: the function's defaults filled in
    return x.ndim == 2


@ag.fast_rule(affine_tanh, applies=two_dimensional)
def affine_tanh_rule(p, x, scale):
    CALLS.append(x is p.w)
    z = x @ p.w + p.b
    y = np.tanh(scale * z)

    def affine_tanh_pullback(g):
        dz = g * (1 - y * y) * scale
        d_scale = lambda: (g * (1 - y * y) * z).sum()  # noqa: E731 (only where scale is traced)
        return Affine(x.T @ dz, dz.sum(0), None), dz @ p.w.T, d_scale
    return y, affine_tanh_pullback


def numpy_gradients(p, x, g):
    """The gradients of Σ affine_tanh(p, x) ⊙ g, written out."""
    y = np.tanh(x @ p.w + p.b)
    dz = g * (1 - y * y)
    return x.T @ dz, dz.sum(0), dz @ p.w.T


@pytest.fixture
def case(rng):
    p = Affine(rng.standard_normal((3, 3)) / 2, rng.standard_normal(3), "layer")
    return p, rng.standard_normal((4, 3)), rng.standard_normal((4, 3))


def test_the_rule_runs_and_gives_cotangents_in_the_arguments_trees(case):
    p, x, g = case
    CALLS.clear()
    (dp, dx) = ag.gradient(lambda p, x: ag.sum(affine_tanh(p, x) * g), p, x)
    assert len(CALLS) == 1 and fused_calls(affine_tanh, p, x) == ["affine_tanh"]
    assert type(dp) is Affine and dp.name is None
    for got, want in zip((dp.w, dp.b, dx), numpy_gradients(p, x, g)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(affine_tanh(p, x), np.tanh(x @ p.w + p.b), rtol=1e-15)


def test_where_no_rule_applies_or_rules_are_off_the_plain_function_runs(case):
    p, x, g = case
    CALLS.clear()
    assert "affine_tanh" not in fused_calls(affine_tanh, p, x[0])  # a vector: no rule
    with ag.fast_rules(False):
        names = recorded_names(affine_tanh, p, x)
        with ag.fast_rules(True):
            assert recorded_names(affine_tanh, p, x) == ["affine_tanh"]
        (dp, dx) = ag.gradient(lambda p, x: ag.sum(affine_tanh(p, x) * g), p, x)
    assert names == ["matmul", "add", "mul", "tanh"] and len(CALLS) == 1
    for got, want in zip((dp.w, dp.b, dx), numpy_gradients(p, x, g)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_traced_float_argument_gets_its_cotangent_from_the_rule(case):
    p, x, g = case
    CALLS.clear()
    of_scale = ag.grad(lambda s: ag.sum(affine_tanh(p, x, s) * g))
    with_rule = of_scale(0.7)
    with ag.fast_rules(False):
        plain = of_scale(0.7)
    h = 1e-6
    central = (ag.sum(affine_tanh(p, x, 0.7 + h) * g) - ag.sum(affine_tanh(p, x, 0.7 - h) * g)) \
        / (2 * h)
    assert len(CALLS) == 3 and type(with_rule) is float
    np.testing.assert_allclose([with_rule, plain], [central, central], rtol=1e-7)


@ag.fusable
def shifted_tanh(x, shift):
    return ag.tanh(x + shift)


@ag.fast_rule(shifted_tanh)
def shifted_tanh_rule(x, shift):
    y = np.tanh(x + shift)

    def shifted_tanh_pullback(g):  # wrong: shift has a derivative, which None denies
        return g * (1 - y * y), None
    return y, shifted_tanh_pullback


def test_a_rules_missing_cotangent_for_a_traced_float_is_an_error_not_a_zero(case):
    """None means "no derivative" (ints, static values); for a differentiated float argument
    it is an error naming the rule and the argument, never a silent zero."""
    _, x, _ = case
    assert ag.grad(lambda x: ag.sum(shifted_tanh(x, 0.5)))(x).shape == x.shape  # shift static
    message = (r"^shifted_tanh: the fast rule shifted_tanh_rule's pullback gave no cotangent "
               r"\(None\) for argument 'shift', \(3,\) float64, which is differentiated: .* "
               r"where the derivative is zero, return zeros$")
    with pytest.raises(TypeError, match=message):
        ag.gradient(lambda x, s: ag.sum(shifted_tanh(x, s)), x, np.ones(3))
    with ag.fast_rules(False):  # the plain function: the derivative
        _, ds = ag.gradient(lambda x, s: ag.sum(shifted_tanh(x, s)), x, np.ones(3))
    np.testing.assert_allclose(ds, (1 - np.tanh(x + 1) ** 2).sum(0), rtol=1e-12)
    p, _, g = case
    with pytest.raises(TypeError, match=r"^affine_tanh: the fast rule affine_tanh_rule's "
                                        r"pullback gave no cotangent \(None\) for argument 'p' "
                                        r"\(its leaf 2 in tree order\), \(3,\) float64"):
        ag.gradient(lambda p, x: ag.sum(affine_tanh(p, x) * g),
                    Affine(p.w, p.b, np.ones(3)), x)  # a float array where the rule gives None


def test_the_switch_is_restored_after_an_error(case):
    p, x, _ = case
    with pytest.raises(RuntimeError), ag.fast_rules(False):
        raise RuntimeError
    assert fused_calls(affine_tanh, p, x) == ["affine_tanh"]


def test_higher_order_runs_the_plain_function_and_matches_central_differences(case):
    p, x, g = case
    CALLS.clear()
    gradient_of = ag.grad(lambda x: ag.sum(affine_tanh(p, x) * g))
    v = np.random.default_rng(1).standard_normal(x.shape)
    hvp = ag.grad(lambda x: ag.sum(gradient_of(x) * v))(x)
    h = 1e-5
    central = (gradient_of(x + h * v) - gradient_of(x - h * v)) / (2 * h)
    np.testing.assert_allclose(hvp, central, rtol=1e-6, atol=1e-9)
    assert CALLS == [False, False]  # only the two gradients at x ± hv, first order


def test_a_traced_cotangent_takes_the_plain_functions_vjp_in_the_traced_leaves(case):
    """jvp (the double vjp: the rule's pullback meets a traced cotangent). The rule gives
    no traced pullback, so the engine differentiates the plain function in x and p only:
    `scale`, a float it was given, stays a constant."""
    p, x, g = case
    v = np.random.default_rng(2).standard_normal(x.shape)
    loss = lambda x: ag.sum(affine_tanh(p, x, 0.5) * g)  # noqa: E731
    _, tangent = ag.jvp(loss, (x,), (v,))
    h = 1e-6
    np.testing.assert_allclose(tangent, (loss(x + h * v) - loss(x - h * v)) / (2 * h),
                               rtol=1e-7)


@ag.fusable
def cubed(x):
    return x * x * x


COTANGENTS = []  # whether each cotangent cubed_rule's pullback met was recorded


@ag.fast_rule(cubed, takes_traced=True)
def cubed_rule(x):
    square = x * x

    def cubed_pullback(g):
        COTANGENTS.append(ag.is_recorded(g))
        return (3 * square * g,)  # the library's ops where g is traced
    return square * x, cubed_pullback


def test_a_rule_that_takes_traced_cotangents_meets_them_in_its_own_pullback(case):
    """jvp (the double vjp) and jacobian (vmap over the cotangents) give the pullback a
    traced or batched cotangent, which its ops record; the values match the derivative."""
    _, x, g = case
    v = np.random.default_rng(5).standard_normal(x.shape)
    COTANGENTS.clear()
    _, tangent = ag.jvp(lambda x: ag.sum(cubed(x) * g), (x,), (v,))
    np.testing.assert_allclose(tangent, np.sum(3 * x * x * g * v), rtol=1e-12)
    jacobian = ag.jacobian(cubed)(x[0])
    np.testing.assert_allclose(jacobian, np.diag(3 * x[0] ** 2), rtol=1e-12)
    assert COTANGENTS == [True, True]


@ag.fusable
def dropped_tanh(x, rng):
    return ag.tanh(ag.dropout(x, 0.5, rng))


@ag.fast_rule(dropped_tanh)
def dropped_tanh_rule(x, rng):
    keep = ag.kernels.dropout_mask(x.shape, 0.5, rng, x.dtype)  # the draws ag.dropout makes
    y = np.tanh(x * keep)

    def dropped_tanh_pullback(g):
        return g * (1 - y * y) * keep, None
    return y, dropped_tanh_pullback


def test_a_traced_cotangent_replays_the_draws_the_rule_made(case):
    """jvp through a rule that drew from a generator: the plain function's vjp, which the
    traced cotangent takes, draws what the call drew (from a copy of the generator as it was
    before the call), not the generator's next numbers."""
    _, x, g = case
    v = np.random.default_rng(3).standard_normal(x.shape)
    loss = lambda x: ag.sum(dropped_tanh(x, np.random.default_rng(4)) * g)  # noqa: E731
    with_rule = ag.jvp(loss, (x,), (v,))
    with ag.fast_rules(False):
        plain = ag.jvp(loss, (x,), (v,))
    assert "dropped_tanh" in fused_calls(dropped_tanh, x, np.random.default_rng(4))
    np.testing.assert_allclose(with_rule, plain, rtol=1e-12)


def test_two_leaves_sharing_an_array_arrive_as_two_objects(case):
    """One traced value in two places is one object for the rule; the same array traced
    twice, or a traced value and its constant, are two."""
    p, _, _ = case
    square = Affine(p.w, p.b, "square")
    CALLS.clear()
    ag.gradient(lambda p: ag.sum(affine_tanh(p, p.w)), square)
    ag.gradient(lambda p, x: ag.sum(affine_tanh(p, x)), square, square.w)
    ag.gradient(lambda p: ag.sum(affine_tanh(p, ag.stop_gradient(p.w))), square)
    assert CALLS == [True, False, False]


@pytest.mark.parametrize("rules", [True, False])
def test_pictures_show_a_models_function_as_its_ops_and_an_op_as_one(case, rules):
    """With the rules off too: softmax is then one node computed by its plain definition."""
    p, x, _ = case
    with ag.fast_rules(rules):
        graph = ag.viz.trace(lambda p, x: ag.softmax(affine_tanh(p, x)), p, x, values=True)
        (weights,) = ag.viz.capture(lambda p, x: ag.softmax(affine_tanh(p, x)), p, x)
    assert [(op.label, op.scope.name) for op in graph.ops] == [
        ("matmul", "affine_tanh"), ("add", "affine_tanh"), ("mul", "affine_tanh"),
        ("tanh", "affine_tanh"), ("softmax", "lambda")]
    e = np.exp(np.tanh(x @ p.w + p.b))
    np.testing.assert_allclose(weights, e / e.sum(-1, keepdims=True), rtol=1e-13)


def test_a_rule_for_a_function_that_is_not_fusable_is_refused():
    with pytest.raises(TypeError, match="fast_rule: 'tanh_of' is not a fusable function; "
                                        "define it with @ag.fusable"):
        def tanh_of(x):
            return ag.tanh(x)
        ag.fast_rule(tanh_of)


@ag.fusable
def scaled(x, s):
    return x * s


@ag.fast_rule(scaled)
def scaled_rule(x, s):
    assert type(s) is not float and s.dtype == x.dtype  # a weak float, cast to x's dtype

    def scaled_pullback(g):
        return g * s, (g * x).sum()
    return x * s, scaled_pullback


def test_a_traced_python_float_reaches_a_rule_in_the_arrays_dtype():
    x = np.arange(3, dtype=np.float32)
    dx, ds = ag.gradient(lambda x, s: ag.sum(scaled(x, s)), x, 2.0)
    assert dx.dtype == np.float32 and type(ds) is float
    np.testing.assert_allclose(dx, [2, 2, 2]) and np.testing.assert_allclose(ds, 3.0)


@pytest.mark.parametrize("setting, expected", [("0", "plain"), ("1", "rule"), ("", "rule")])
def test_the_environment_variable_turns_every_rule_off_for_a_process(setting, expected):
    """softmax's rule records one op; its plain definition records an exp among others."""
    script = ("import numpy as np\n"
              "import autograd_lite as ag\n"
              "from helpers.fused import recorded_names\n"
              "names = recorded_names(ag.softmax, np.ones((2, 3)))\n"
              "print('rule' if names == ['softmax'] else 'plain')\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=os.path.join(ROOT, "tests"),
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "AUTOGRAD_LITE_FAST_RULES": setting,
                              "PYTHONPATH": ROOT})
    assert out.stdout.split() == [expected]


def test_an_unknown_setting_is_refused_by_name():
    out = subprocess.run([sys.executable, "-c", "import autograd_lite"], cwd=ROOT,
                         capture_output=True, text=True,
                         env={**os.environ, "AUTOGRAD_LITE_FAST_RULES": "off"})
    assert out.returncode != 0
    assert ("AUTOGRAD_LITE_FAST_RULES='off': expected 0 (every fast rule off) or 1 (on)"
            in out.stderr)
