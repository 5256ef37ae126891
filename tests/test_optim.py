"""Optimizers against torch.optim, step by step, with fixed gradients (one leaf's gradient
None for the first steps, as torch's .grad = None); schedules; clipping; static leaves;
optimizer state saved, loaded and resumed."""
from typing import Callable, NamedTuple

import numpy as np
import pytest

import autograd_lite as ag


class Params(NamedTuple):
    w: np.ndarray
    b: np.ndarray
    n_heads: int
    act: Callable
    extra: object


N_STEPS = 5


def make_params(rng, dtype):
    return Params(rng.standard_normal((3, 2)).astype(dtype), rng.standard_normal(2).astype(dtype),
                  4, np.tanh, None)


def make_gradients(rng, params, b_from=1):
    """One fixed gradient tree per step (static leaves get None, as from ag.gradient); b's
    gradient is None before step b_from."""
    return [Params(rng.standard_normal(params.w.shape).astype(params.w.dtype),
                   rng.standard_normal(params.b.shape).astype(params.b.dtype) if step >= b_from
                   else None, None, None, None)
            for step in range(1, N_STEPS + 1)]


class TorchRun(NamedTuple):
    history: list  # per step, [w, b] as numpy arrays
    optimizer: object
    tensors: list


def torch_run(torch, make_optimizer, params, grads, scheduler=None):
    tensors = [torch.tensor(params.w.copy(), requires_grad=True),
               torch.tensor(params.b.copy(), requires_grad=True)]
    optimizer = make_optimizer(tensors)
    lr_scheduler = scheduler(optimizer) if scheduler else None
    history = []
    for g in grads:
        for tensor, gradient in zip(tensors, (g.w, g.b)):
            tensor.grad = None if gradient is None else torch.tensor(gradient)
        optimizer.step()
        if lr_scheduler:
            lr_scheduler.step()
        history.append([t.detach().numpy().copy() for t in tensors])
    return TorchRun(history, optimizer, tensors)


def our_run(optimizer, params, grads, state=None):
    state = optimizer.init(params) if state is None else state
    history = []
    for g in grads:
        params, state = optimizer.update(params, g, state)
        history.append(params)
    return history, state


# float32: elements near 0 come from cancellation in O(1) values, hence an absolute tolerance
TOLERANCES = [(np.float64, 1e-12, 1e-14), (np.float32, 2e-6, 1e-6)]


def assert_matches(history, reference, dtype, rtol, atol):
    for step, (p, (w, b)) in enumerate(zip(history, reference), start=1):
        assert type(p) is Params
        assert p.w.dtype == dtype and p.b.dtype == dtype, f"step {step} changed the dtype"
        np.testing.assert_allclose(p.w, w, rtol=rtol, atol=atol, err_msg=f"step {step}")
        np.testing.assert_allclose(p.b, b, rtol=rtol, atol=atol, err_msg=f"step {step}")
        # static leaves pass through untouched
        assert p.n_heads == 4 and p.act is np.tanh and p.extra is None


CASES = {
    "sgd": (lambda: ag.optim.sgd(lr=0.1),
            lambda torch: lambda ps: torch.optim.SGD(ps, lr=0.1)),
    "sgd_momentum": (lambda: ag.optim.sgd(lr=0.1, momentum=0.9),
                     lambda torch: lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
    "sgd_weight_decay": (lambda: ag.optim.sgd(lr=0.1, weight_decay=0.3),
                         lambda torch: lambda ps: torch.optim.SGD(ps, lr=0.1, weight_decay=0.3)),
    "sgd_nesterov": (lambda: ag.optim.sgd(lr=0.1, momentum=0.8, nesterov=True),
                     lambda torch: lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.8,
                                                              nesterov=True)),
    "sgd_nesterov_weight_decay": (
        lambda: ag.optim.sgd(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.2),
        lambda torch: lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                                 weight_decay=0.2)),
    "sgd_momentum_weight_decay": (
        lambda: ag.optim.sgd(lr=0.05, momentum=0.5, weight_decay=0.2),
        lambda torch: lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.5, weight_decay=0.2)),
    "adam": (lambda: ag.optim.adam(lr=0.01, betas=(0.8, 0.95), eps=1e-6),
             lambda torch: lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.8, 0.95), eps=1e-6)),
    "adam_weight_decay": (lambda: ag.optim.adam(lr=0.01, weight_decay=0.1),
                          lambda torch: lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.1)),
    "adamw": (lambda: ag.optim.adamw(lr=0.01),
              lambda torch: lambda ps: torch.optim.AdamW(ps, lr=0.01)),
    "adamw_strong_decay": (lambda: ag.optim.adamw(lr=0.05, betas=(0.5, 0.9), weight_decay=0.5),
                           lambda torch: lambda ps: torch.optim.AdamW(ps, lr=0.05, betas=(0.5, 0.9),
                                                                      weight_decay=0.5)),
}
ADAM_CASES = [name for name in CASES if name.startswith("adam")]


@pytest.mark.parametrize("b_from", [1, 3])
@pytest.mark.parametrize("dtype, rtol, atol", TOLERANCES)
@pytest.mark.parametrize("name", list(CASES))
def test_optimizer_matches_torch(name, dtype, rtol, atol, b_from, torch, rng):
    """b_from=3: b has no gradient for two steps, then moves like a fresh torch parameter
    (Adam's bias correction counts b's own steps, not the optimizer's)."""
    ours, theirs = CASES[name]
    params = make_params(rng, dtype)
    grads = make_gradients(rng, params, b_from)
    history, state = our_run(ours(), params, grads)
    reference = torch_run(torch, theirs(torch), params, grads)
    assert_matches(history, reference.history, dtype, rtol, atol)
    for p in history[:b_from - 1]:
        assert p.b is params.b  # no gradient yet: not moved at all
    assert not np.allclose(history[-1].w, params.w)  # the parameters did move
    assert not np.allclose(history[-1].b, params.b)
    assert state.step == N_STEPS and state.step.dtype == np.int64


@pytest.mark.parametrize("name", ADAM_CASES)
def test_adam_counts_the_steps_of_each_leaf_as_torch_does(name, torch, rng):
    ours, theirs = CASES[name]
    params = make_params(rng, np.float64)
    grads = make_gradients(rng, params, b_from=3)
    _, state = our_run(ours(), params, grads)
    reference = torch_run(torch, theirs(torch), params, grads)
    w, b = (float(reference.optimizer.state[t]["step"]) for t in reference.tensors)
    assert (w, b) == (N_STEPS, N_STEPS - 2)
    assert (state.leaf_steps.w, state.leaf_steps.b) == (w, b)
    assert type(state.leaf_steps.b) is np.int64 and state.leaf_steps.n_heads is None


def test_sgd_by_hand(rng):
    params = make_params(rng, np.float64)
    grads = make_gradients(rng, params)
    history, _ = our_run(ag.optim.sgd(lr=0.1, momentum=0.5), params, grads)
    w, b = params.w, np.zeros_like(params.w)
    for g, p in zip(grads, history):
        b = 0.5 * b + g.w
        w = w - 0.1 * b
        np.testing.assert_allclose(p.w, w, rtol=1e-14)


def paper_rate(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def test_warmup_schedule_values():
    lr = ag.optim.warmup_schedule(512, 4000)
    for step in (1, 2, 100, 3999, 4000, 4001, 10_000, 100_000):
        assert lr(step) == pytest.approx(paper_rate(step, 512, 4000), rel=1e-14)
    # rises linearly, peaks at `warmup`, then decays as step^-0.5
    assert lr(2000) == pytest.approx(lr(1000) * 2)
    assert lr(16000) == pytest.approx(lr(4000) / 2)
    assert lr(4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert ag.optim.warmup_schedule(64, 10, factor=2.0)(5) == pytest.approx(2 * paper_rate(5, 64, 10))


def test_warmup_schedule_with_a_peak_warms_up_then_decays_as_a_cosine():
    lr = ag.optim.warmup_schedule(peak=1e-3, warmup=10, steps=100)
    assert [lr(s) for s in (1, 5, 10)] == pytest.approx([1e-4, 5e-4, 1e-3])
    assert lr(55) == pytest.approx(5e-4) and lr(100) == pytest.approx(0, abs=1e-12)
    assert lr(32.5) == pytest.approx(1e-3 * (1 + np.cos(np.pi / 4)) / 2)
    lr = ag.optim.warmup_schedule(peak=1e-3, warmup=100, steps=1100, final=0.05)
    assert lr(50) == pytest.approx(5e-4) and lr(100) == pytest.approx(1e-3)
    assert lr(600) == pytest.approx(1e-3 * (0.05 + 0.95 * 0.5))  # halfway: cos(π/2) = 0
    assert lr(1100) == pytest.approx(5e-5) and lr(5000) == pytest.approx(5e-5)


@pytest.mark.parametrize("settings", [dict(), dict(d_model=64, peak=1e-3, steps=10),
                                      dict(peak=1e-3)])
def test_warmup_schedule_takes_d_model_or_a_peak_and_steps(settings):
    with pytest.raises(ValueError, match="warmup_schedule: give d_model .* or peak= and steps="):
        ag.optim.warmup_schedule(warmup=10, **settings)


SCHEDULED = {  # (ours given the schedule, torch's optimizer with lr=1.0 that LambdaLR scales)
    "adam": (lambda lr: ag.optim.adam(lr=lr, betas=(0.9, 0.98), eps=1e-9),
             lambda torch: lambda ps: torch.optim.Adam(ps, lr=1.0, betas=(0.9, 0.98), eps=1e-9)),
    "adamw": (lambda lr: ag.optim.adamw(lr=lr, weight_decay=0.5),
              lambda torch: lambda ps: torch.optim.AdamW(ps, lr=1.0, weight_decay=0.5)),
    "sgd_nesterov_weight_decay": (
        lambda lr: ag.optim.sgd(lr=lr, momentum=0.9, nesterov=True, weight_decay=0.1),
        lambda torch: lambda ps: torch.optim.SGD(ps, lr=1.0, momentum=0.9, nesterov=True,
                                                 weight_decay=0.1)),
}


@pytest.mark.parametrize("name", list(SCHEDULED))
def test_schedule_drives_the_optimizer_like_torch_lambda_lr(name, torch, rng):
    """The schedule counts the optimizer's updates, even those in which b has no gradient."""
    d_model, warmup = 16, 3
    ours, theirs = SCHEDULED[name]
    params = make_params(rng, np.float64)
    grads = make_gradients(rng, params, b_from=3)
    history, state = our_run(ours(ag.optim.warmup_schedule(d_model, warmup)), params, grads)
    assert state.step == N_STEPS
    # torch counts the scheduler's epochs from 0; our steps count from 1
    reference = torch_run(torch, theirs(torch), params, grads,
                          scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(
                              opt, lambda epoch: paper_rate(epoch + 1, d_model, warmup)))
    assert_matches(history, reference.history, np.float64, *TOLERANCES[0][1:])


def test_sgd_with_a_schedule_by_hand(rng):
    params = make_params(rng, np.float64)
    grads = make_gradients(rng, params)
    history, _ = our_run(ag.optim.sgd(lr=lambda step: 0.1 / step), params, grads)
    w = params.w
    for k, (g, p) in enumerate(zip(grads, history), start=1):
        w = w - 0.1 / k * g.w
        np.testing.assert_allclose(p.w, w, rtol=1e-14)


@pytest.mark.parametrize("max_norm", [0.5, 3.0, 100.0])
def test_clip_by_global_norm_matches_torch(max_norm, torch, rng):
    grads = Params(rng.standard_normal((3, 2)), rng.standard_normal(2), None, None, None)
    clipped = ag.optim.clip_by_global_norm(grads, max_norm)
    tensors = [torch.zeros(3, 2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)]
    tensors[0].grad, tensors[1].grad = torch.tensor(grads.w), torch.tensor(grads.b)
    total = torch.nn.utils.clip_grad_norm_(tensors, max_norm)
    assert float(total) == pytest.approx(np.sqrt(np.sum(grads.w ** 2) + np.sum(grads.b ** 2)))
    assert type(clipped) is Params and clipped.n_heads is None
    np.testing.assert_allclose(clipped.w, tensors[0].grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(clipped.b, tensors[1].grad.numpy(), rtol=1e-14)


def test_clip_by_global_norm_in_float32_keeps_the_dtype(rng):
    grads = [rng.standard_normal(4).astype(np.float32) * 10, None, 3]
    clipped = ag.optim.clip_by_global_norm(grads, 1.0)
    assert clipped[0].dtype == np.float32 and clipped[1] is None and clipped[2] == 3
    assert np.linalg.norm(clipped[0].astype(np.float64)) == pytest.approx(1.0, rel=1e-5)


def test_leaves_without_a_gradient_do_not_move(rng):
    params = make_params(rng, np.float64)
    grads = Params(np.ones((3, 2)), None, None, None, None)
    for optimizer in (ag.optim.sgd(0.1, momentum=0.9), ag.optim.adam(0.1), ag.optim.adamw(0.1)):
        new, _ = optimizer.update(params, grads, optimizer.init(params))
        assert new.b is params.b and new.n_heads == 4 and new.act is np.tanh
        assert not np.allclose(new.w, params.w)


@pytest.mark.parametrize("name", list(CASES))
def test_state_saved_and_loaded_resumes_identically(name, tmp_path, rng):
    """As the training loop resumes: the state saved after 2 steps (b has had no gradient
    yet), loaded with a fresh state as `like`, continues bit for bit like the unbroken run."""
    optimizer = CASES[name][0]()
    params = make_params(rng, np.float32)
    grads = make_gradients(rng, params, b_from=3)
    unbroken, final_state = our_run(optimizer, params, grads)
    before, state = our_run(optimizer, params, grads[:2])
    ag.save(tmp_path / "state.npz", state)
    loaded = ag.load(tmp_path / "state.npz", like=optimizer.init(params))
    assert type(loaded) is type(state) and loaded.step == 2
    for path, a, b in zip(ag.tree_paths(loaded), ag.tree_leaves(loaded), ag.tree_leaves(state)):
        assert type(a) is type(b), path
        if isinstance(b, (np.ndarray, np.generic)):
            assert a.dtype == b.dtype, path
        np.testing.assert_array_equal(a, b, err_msg=path)
    after, resumed_state = our_run(optimizer, before[-1], grads[2:], state=loaded)
    for ours, theirs in zip(after, unbroken[2:]):
        np.testing.assert_array_equal(ours.w, theirs.w)
        np.testing.assert_array_equal(ours.b, theirs.b)
    for a, b in zip(ag.tree_leaves(resumed_state), ag.tree_leaves(final_state)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("optimizer, settings, message", [
    ("sgd", dict(lr=0.1, nesterov=True), r"sgd: nesterov=True, expected False without momentum"),
    ("sgd", dict(lr=-0.1), r"sgd: lr=-0.1, expected a number >= 0 or a schedule"),
    ("sgd", dict(lr=0.1, momentum=-0.9), r"sgd: momentum=-0.9, expected a number >= 0"),
    ("sgd", dict(lr=0.1, weight_decay=-1), r"sgd: weight_decay=-1.0, expected a number >= 0"),
    ("adam", dict(betas=(0.9, 1.0)), r"adam: betas=\(0.9, 1.0\), expected two numbers in \[0, 1\)"),
    ("adamw", dict(eps=-1e-8), r"adamw: eps=-1e-08, expected a number >= 0"),
])
def test_settings_torch_refuses_are_refused_by_name(optimizer, settings, message, torch):
    torch_optimizer = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    with pytest.raises(ValueError):
        torch_optimizer[optimizer]([torch.zeros(2, requires_grad=True)], **settings)
    with pytest.raises(ValueError, match=message):
        getattr(ag.optim, optimizer)(**settings)


@pytest.mark.parametrize("with_numpy_scalars, with_python_floats", [
    (lambda: ag.optim.sgd(np.float64(0.1)), lambda: ag.optim.sgd(0.1)),
    (lambda: ag.optim.sgd(0.1, momentum=np.float64(0.9)), lambda: ag.optim.sgd(0.1, momentum=0.9)),
    (lambda: ag.optim.sgd(lambda step: np.float64(0.1) / step), lambda: ag.optim.sgd(lambda step: 0.1 / step)),
    (lambda: ag.optim.adam(np.float64(0.01), betas=(np.float64(0.9), np.float64(0.99)),
                           weight_decay=np.float64(0.1)),
     lambda: ag.optim.adam(0.01, betas=(0.9, 0.99), weight_decay=0.1)),
    (lambda: ag.optim.adamw(0.01, eps=np.float64(1e-8), weight_decay=np.float64(0.1)),
     lambda: ag.optim.adamw(0.01, eps=1e-8, weight_decay=0.1)),
])
def test_numpy_scalar_hyperparameters_keep_float32(with_numpy_scalars, with_python_floats, rng):
    """numpy scalars are not weak in numpy 2's promotion: they must not turn float32 into float64."""
    params = make_params(rng, np.float32)
    grads = make_gradients(rng, params)
    history, state = our_run(with_numpy_scalars(), params, grads)
    reference, _ = our_run(with_python_floats(), params, grads)  # checked against torch above
    for p, r in zip(history, reference):
        assert p.w.dtype == np.float32 and p.b.dtype == np.float32
        np.testing.assert_allclose(p.w, r.w, rtol=1e-6)
    assert all(leaf.dtype == np.float32 for leaf in ag.tree_leaves(state)
               if isinstance(leaf, np.ndarray))


def test_clip_with_a_numpy_max_norm_keeps_float32(rng):
    grads = [rng.standard_normal(4).astype(np.float32) * 10]
    clipped = ag.optim.clip_by_global_norm(grads, np.float64(1.0))
    assert clipped[0].dtype == np.float32
    assert np.linalg.norm(clipped[0].astype(np.float64)) == pytest.approx(1.0, rel=1e-5)


class Dense(NamedTuple):
    w: np.ndarray
    b: np.ndarray


class Block(NamedTuple):
    layers: list


@pytest.mark.parametrize("name, optimizer", [
    ("sgd", ag.optim.sgd(0.1)), ("sgd", ag.optim.sgd(0.1, momentum=0.9)),
    ("adam", ag.optim.adam(1e-3)), ("adamw", ag.optim.adamw(1e-3))])
def test_an_update_refuses_a_gradient_of_another_shape_or_dtype_naming_its_path(name, optimizer):
    params = Block([Dense(np.ones((2, 2), np.float32), np.zeros(2, np.float32)),
                    Dense(np.ones((3, 2), np.float32), np.zeros(2, np.float32))])
    state = optimizer.init(params)
    right = ag.tree_map(np.ones_like, params)
    broadcast = right._replace(layers=[right.layers[0], Dense(np.ones(2, np.float32),
                                                              np.ones(2, np.float32))])
    with pytest.raises(ValueError, match=rf"^{name}\.update: the gradient of params\.layers\[1\]"
                                         r"\.w is \(2,\) float32, but that parameter is "
                                         r"\(3, 2\) float32"):
        optimizer.update(params, broadcast, state)
    promoted = right._replace(layers=[Dense(np.ones((2, 2)), right.layers[0].b),
                                      right.layers[1]])
    with pytest.raises(ValueError, match=r"params\.layers\[0\]\.w is \(2, 2\) float64, but "
                                         r"that parameter is \(2, 2\) float32"):
        optimizer.update(params, promoted, state)
    # the right gradient updates: sgd moves w by -lr·g, Adam's first step by -lr·sign(g)
    new, _ = optimizer.update(params, right, state)
    assert new.layers[1].w.shape == (3, 2) and new.layers[1].w.dtype == np.float32
    assert np.all(new.layers[1].w < 1)


@pytest.mark.parametrize("name, optimizer, buffer", [
    ("sgd", ag.optim.sgd(0.1, momentum=0.9), "velocity"), ("adam", ag.optim.adam(1e-3), "m"),
    ("adamw", ag.optim.adamw(1e-3), "m")])
def test_an_update_refuses_a_state_made_for_other_parameters(name, optimizer, buffer):
    """A state whose buffers have other shapes (a run resumed after the model changed) is
    refused by name: joined in chunks, its entries would move other parameters."""
    before = Dense(np.ones((4, 2), np.float32), np.zeros(2, np.float32))
    _, state = optimizer.update(before, ag.tree_map(np.ones_like, before), optimizer.init(before))
    params = Dense(np.ones((3, 2), np.float32), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match=rf"^{name}\.update: state\.{buffer} holds \(4, 2\) "
                                         r"for params\.w, which is \(3, 2\): the state was "
                                         r"made for other parameters"):
        optimizer.update(params, ag.tree_map(np.ones_like, params), state)


@pytest.mark.parametrize("max_norm", [0.0, -1.0, float("nan")])
def test_clip_by_global_norm_refuses_a_max_norm_that_is_not_positive(max_norm):
    with pytest.raises(ValueError, match=r"^clip_by_global_norm: max_norm must be a number > "
                                         rf"0, got {max_norm}"):
        ag.optim.clip_by_global_norm([np.ones(2)], max_norm)
