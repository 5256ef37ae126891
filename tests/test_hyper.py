"""ag.Hyper: a float setting inside a parameter tree is static, like an int."""
from typing import NamedTuple

import numpy as np

import autograd_lite as ag


class Layer(NamedTuple):
    w: np.ndarray
    rate: float


def test_hyper_is_a_float_that_gets_no_gradient():
    p = Layer(np.array([1.0, -2.0, 3.0]), ag.Hyper(0.25))
    (g,) = ag.gradient(lambda p: ag.sum(p.w * p.w) * (1 - p.rate), p)
    assert g.rate is None
    np.testing.assert_allclose(g.w, 2 * p.w * 0.75)  # d/dw of 0.75 Σ w²
    assert p.rate + 0.5 == 0.75 and isinstance(p.rate, float)


def test_a_plain_float_in_the_same_place_is_differentiated():
    p = Layer(np.array([1.0, 2.0]), 0.25)
    (g,) = ag.gradient(lambda p: ag.sum(p.w) * p.rate, p)
    assert g.rate == 3.0  # d/drate of rate · Σ w


def test_optimizers_leave_hyper_untouched_even_with_weight_decay():
    p = Layer(np.ones(2), ag.Hyper(0.1))
    (g,) = ag.gradient(lambda p: ag.sum(p.w * p.w), p)
    opt = ag.optim.adamw(lr=0.1, weight_decay=0.5)
    state = opt.init(p)
    # no moments or step count kept for a setting
    assert state.m.rate is None and state.v.rate is None and state.leaf_steps.rate is None
    moved, _ = opt.update(p, g, state)
    assert type(moved.rate) is ag.Hyper and moved.rate == 0.1
    # AdamW's first step: decay then a unit step of size lr against the gradient's sign
    np.testing.assert_allclose(moved.w, 1 * (1 - 0.1 * 0.5) - 0.1, rtol=1e-6)


def test_save_and_load_keep_the_type(tmp_path):
    p = Layer(np.arange(3.0), ag.Hyper(0.3))
    ag.save(tmp_path / "p.npz", p)
    for loaded in (ag.load(tmp_path / "p.npz"), ag.load(tmp_path / "p.npz", like=p)):
        assert type(loaded.rate) is ag.Hyper and loaded.rate == 0.3
    assert ag.check_gradients(lambda p: ag.sum(ag.tanh(p.w)) * p.rate, p).keys() == {"p.w"}
