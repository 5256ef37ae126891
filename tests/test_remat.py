"""ag.checkpoint: the same numbers as without it, f's forward values not kept but
recomputed in the backward pass, dropout replayed from the generator's saved state, and
second order through a checkpointed function."""
import gc
import weakref
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from models import blocks


class MLP(NamedTuple):
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    activation: object  # static: a function


def mlp(p, x, rate=0.0, rng=None):
    h = p.activation(x @ p.w1 + p.b1)  # (B, H)
    return ag.dropout(h, rate, rng) @ p.w2  # (B, D)


@pytest.fixture
def problem(rng):
    p = MLP(rng.standard_normal((3, 8)), rng.standard_normal(8), rng.standard_normal((8, 3)),
            ag.tanh)
    return p, rng.standard_normal((5, 3))


def loss_of(block):
    def loss(p, x, rng=None):
        h = block(p, x, 0.5 if rng is not None else 0.0, rng)
        h = block(p, ag.tanh(h), 0.5 if rng is not None else 0.0, rng)  # applied twice
        return ag.sum(h * h)
    return loss


def assert_same(a, b):
    for u, v in zip(ag.tree_leaves(a), ag.tree_leaves(b)):
        if u is None or callable(u):
            assert u is v
        else:
            np.testing.assert_array_equal(u, v)


def test_the_same_gradients_bit_for_bit_and_against_central_differences(problem):
    p, x = problem
    plain, checkpointed = loss_of(mlp), loss_of(ag.checkpoint(mlp))
    value, grads = ag.value_and_gradient(checkpointed, p, x)
    expected_value, expected = ag.value_and_gradient(plain, p, x)
    assert value == expected_value
    assert_same(grads, expected)
    assert grads[0].activation is None
    ag.check_gradients(checkpointed, p, x)


def test_f_runs_again_in_the_backward_pass_and_its_values_are_not_kept(problem):
    p, x = problem
    calls, hidden = [], []

    def block(p, x):
        h = ag.tanh(x @ p.w1 + p.b1)
        calls.append(type(h).__name__)
        hidden.append(weakref.ref(ag.stop_gradient(h)))  # the array under any boxing
        return h @ p.w2

    for wrap, kept in ((lambda f: f, True), (ag.checkpoint, False)):
        calls.clear()
        hidden.clear()
        alive = []

        def loss(p, x):
            out = wrap(block)(p, x)
            gc.collect()
            alive.append(hidden[0]() is not None)  # after f returned, before the backward pass
            return ag.sum(out * out)
        ag.gradient(loss, p, x)
        assert alive == [kept]
        # checkpointed: a plain forward (nothing recorded at this level), a traced recomputation
        assert calls == (["Box"] if kept else ["ndarray", "Box"])


def test_untraced_a_checkpointed_function_is_f(problem):
    p, x = problem
    calls = []

    def block(p, x):
        calls.append(1)
        return mlp(p, x)
    out = ag.checkpoint(block)(p, x)
    assert type(out) is np.ndarray and calls == [1]
    np.testing.assert_array_equal(out, mlp(p, x))
    assert ag.checkpoint(block).__name__ == "block"


def test_dropout_is_replayed_from_the_generators_state_at_call_time(problem):
    p, x = problem
    plain, checkpointed = loss_of(mlp), loss_of(ag.checkpoint(mlp))
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    value, grads = ag.value_and_gradient(checkpointed, p, x, rng_a)
    expected_value, expected = ag.value_and_gradient(plain, p, x, rng_b)
    assert value == expected_value
    assert_same(grads[:2], expected[:2])
    # the caller's generator advanced exactly as without checkpoint
    assert rng_a.random() == rng_b.random()
    # and the masks did drop: the loss differs from the one without dropout
    assert value != ag.value_and_gradient(plain, p, x)[0]


def test_a_generator_held_by_two_arguments_draws_as_one_when_recomputed():
    """checkpoint(f)(x, (g, g)): f's second draw follows its first in the recomputation too,
    as in f itself (a copy per leaf would draw the first mask twice)."""
    def f(x, pair):
        return ag.dropout(ag.sin(x), 0.5, pair[0]) + ag.dropout(ag.cos(x), 0.5, pair[1])

    def loss(f, seed):
        g = np.random.default_rng(seed)
        return lambda x: ag.sum(f(x, (g, g)) ** 2)
    x = np.random.default_rng(8).standard_normal(16)
    assert_same(ag.grad(loss(ag.checkpoint(f), 5))(x), ag.grad(loss(f, 5))(x))


def test_second_order_through_a_checkpointed_function(problem):
    p, x = problem
    v = MLP(*(np.ones_like(a) for a in p[:3]), None)
    _, (product, _) = ag.hvp(loss_of(ag.checkpoint(mlp)), (p, x), (v, np.zeros_like(x)))
    _, (expected, _) = ag.hvp(loss_of(mlp), (p, x), (v, np.zeros_like(x)))
    for field in ("w1", "b1", "w2"):
        np.testing.assert_allclose(getattr(product, field), getattr(expected, field), rtol=1e-12)
    cube = ag.checkpoint(lambda t: t * t * t)
    assert ag.grad(ag.grad(cube))(2.0) == pytest.approx(12.0)
    assert ag.grad(ag.grad(ag.grad(cube)))(2.0) == pytest.approx(6.0)


def test_a_vjp_pullback_through_a_checkpoint_can_run_twice(problem):
    p, x = problem
    rng = np.random.default_rng(3)
    out, pullback = ag.vjp(lambda p, x: ag.checkpoint(mlp)(p, x, 0.5, rng), p, x)
    c = np.ones_like(out)
    first, second = pullback(c), pullback(c)
    assert_same(first, second)
    _, expected_pullback = ag.vjp(lambda p, x: mlp(p, x, 0.5, np.random.default_rng(3)), p, x)
    assert_same(first, expected_pullback(c))


def test_python_float_and_float32_arguments():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    scaled = ag.checkpoint(lambda t, x: ag.tanh(x * t))
    gt, gx = ag.gradient(lambda t, x: ag.sum(scaled(t, x)), 1.5, x)
    assert type(gt) is float and gx.dtype == np.float32
    et, ex = ag.gradient(lambda t, x: ag.sum(ag.tanh(x * t)), 1.5, x)
    assert gt == pytest.approx(et, rel=1e-6)
    np.testing.assert_array_equal(gx, ex)


def test_f_must_return_one_array():
    with pytest.raises(TypeError, match=r"^checkpoint: pair must return an array, got tuple"):
        def pair(x):
            return x, x
        ag.gradient(lambda x: ag.sum(ag.checkpoint(pair)(x)[0]), np.ones(2))


def test_a_checkpointed_encoder_block_matches_the_block(rng, fast_rules_on):
    """The benchmark's wrapping, on a small block: every gradient equal, dropout included
    (the same bits with the fast rules, which compute the key bias's gradient, 0 up to
    rounding, as one sum either way)."""
    p = blocks.encoder_block_init(rng, d_model=8, n_heads=2, d_ff=16)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    mask = np.ones((2, 1, 1, 5), bool)

    def loss_with(block):
        def loss(p, x):
            return ag.sum(block(p, x, mask, "post", 0.1, np.random.default_rng(0)) ** 2)
        return loss
    got = ag.gradient(loss_with(ag.checkpoint(blocks.encoder_block)), p, x)
    expected = ag.gradient(loss_with(blocks.encoder_block), p, x)
    assert_same(got, expected)
    assert got[1].dtype == np.float32


@pytest.mark.parametrize("not_a_function", [42, "f", None, np.ones(3)])
def test_anything_but_a_function_is_refused_when_checkpoint_is_called(not_a_function):
    with pytest.raises(TypeError, match=rf"^checkpoint: expected the function to recompute, "
                                        rf"got {type(not_a_function).__name__} "):
        ag.checkpoint(not_a_function)


@pytest.mark.parametrize("rules", [True, False], ids=["rules on", "rules off"])
def test_a_generator_in_a_closure_draws_again_what_it_drew(rng, rules):
    """A generator f closes over (not an argument) is copied before its first draw, and the
    recomputation draws from a copy of that: the gradient without checkpoint, through the op
    and the fast rule alike, and the caller's generator advanced once, as without it."""
    p = blocks.encoder_block_init(rng, d_model=8, n_heads=2, d_ff=16)
    x, mask = rng.standard_normal((2, 5, 8)).astype(np.float32), np.ones((2, 1, 1, 5), bool)

    def gradient_with(wrap, seed):
        closed_over = np.random.default_rng(seed)
        block = wrap(lambda p, x: blocks.encoder_block(p, x, mask, "post", 0.3, closed_over))
        return ag.gradient(lambda p: ag.sum(block(p, x) ** 2), p), closed_over.random()
    with ag.fast_rules(rules):
        (got, after), (expected, after_plain) = (gradient_with(w, 4)
                                                 for w in (ag.checkpoint, lambda f: f))
    for u, v in zip(ag.tree_leaves(got), ag.tree_leaves(expected)):  # float32; rules off,
        if isinstance(u, np.ndarray):  # the key bias's 0 rounds apart
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)
    assert after == after_plain


def test_generators_made_inside_or_closed_over_in_nested_checkpoints():
    """A generator made inside f draws afresh in each run; one in a closure of an inner
    checkpointed function, recomputed inside the outer's recomputation, draws what it drew."""
    g = np.random.default_rng(1)
    inner = ag.checkpoint(lambda x: ag.dropout(ag.sin(x), 0.5, g))
    made_inside = ag.checkpoint(lambda x: ag.dropout(x, 0.5, np.random.default_rng(2)))

    def f(wrap_outer):
        outer = wrap_outer(lambda x: ag.tanh(inner(x) * made_inside(x)) + inner(ag.cos(x)))
        return lambda x: ag.sum(outer(x) ** 2)
    x = np.random.default_rng(3).standard_normal(6)
    g = np.random.default_rng(1)
    got = ag.grad(f(ag.checkpoint))(x)
    g = np.random.default_rng(1)
    inner = lambda x: ag.dropout(ag.sin(x), 0.5, g)  # noqa: E731 (the same, not checkpointed)
    made_inside = lambda x: ag.dropout(x, 0.5, np.random.default_rng(2))  # noqa: E731
    np.testing.assert_array_equal(got, ag.grad(f(lambda h: h))(x))
