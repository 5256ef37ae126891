"""The benchmarks' own machinery, small and fast: each PyTorch twin computes our model (its
loss and every gradient, in float64 and float32), the parity check fails on a twin that
differs, a workload built on a device (the CuPy double) computes the host's loss and
gradients, and the block timing alternates its sides and takes its ratios per round."""
import numpy as np
import pytest

import autograd_lite as ag
import timing
import twins
import workloads

TINY_TRANSFORMER = dict(vocab=40, d_model=16, n_heads=2, d_ff=24, blocks=2, length=7, batch=3)


def tiny(key, device="cpu"):
    rng = np.random.default_rng(3)
    if key == "transformer":
        return workloads.transformer_workload("tiny", rng, device=device, **TINY_TRANSFORMER)
    return {"w1": workloads.classifier_workload, "lm": workloads.lm_workload}[key](
        rng, batch=3, device=device)


@pytest.mark.parametrize("key", ["w1", "lm", "transformer"])
def test_the_twin_computes_our_loss_and_every_gradient(torch, key):
    results = workloads.check_parity(tiny(key), torch)
    assert results["float64"]["loss"] < 1e-12 and results["float64"]["error"] < 1e-9
    assert results["float32"]["error"] < 1e-4


def test_every_gradient_is_compared(torch):
    """The twin's names are torch_bridge's, one per array of ours (the classifier: 21 arrays;
    the packed attention holds 6 of them in 4 tensors)."""
    w = tiny("w1")
    names = set(w.twin(torch, w.params).weights)
    assert len(names) == 21 - 4
    assert names == set(w.to_torch(w.params))


def test_a_twin_one_weight_away_fails_parity(torch):
    """A twin given the weights with one entry of a bias moved by 1e-3 (a mapping off by a
    little). One entry: a shift of the whole bias would vanish in the layer norm after it."""
    w = tiny("transformer")
    norm = w.params.decoder[1].norm3
    bias = norm.bias.copy()
    bias[0] += 1e-3
    moved = w.params._replace(decoder=(w.params.decoder[0], w.params.decoder[1]._replace(
        norm3=norm._replace(bias=bias))))
    off = w._replace(twin=lambda torch, params: w.twin(torch, workloads.in_dtype(
        w._replace(params=moved), params.decoder[0].norm1.bias.dtype).params))
    with pytest.raises(AssertionError, match="in float64: the twin disagrees with ours"):
        workloads.check_parity(off, torch)


@pytest.mark.parametrize("key", ["w1", "lm", "transformer"])
def test_a_workload_on_the_device_computes_the_hosts_loss_and_gradients(key, device_double):
    host, on_device = tiny(key), tiny(key, device="cuda")
    loss, grads = workloads.OurStep(host).gradients()
    device_loss, device_grads = workloads.OurStep(on_device).gradients()
    assert device_loss == pytest.approx(loss, rel=1e-5)
    leaves, device_leaves = ag.tree_leaves(grads), ag.tree_leaves(device_grads)
    assert len(device_leaves) == len(leaves)
    arrays = [(g, d) for g, d in zip(leaves, device_leaves) if g is not None]
    assert len(arrays) > 10 and all(d is None for g, d in zip(leaves, device_leaves) if g is None)
    for g, d in arrays:
        assert ag.device_name(d) == "cuda"
        np.testing.assert_allclose(ag.to_device(d, "cpu"), g, rtol=1e-4, atol=1e-6)


def test_a_step_on_the_device_updates_its_own_copy_of_the_parameters(device_double):
    w = tiny("transformer", device="cuda")
    before = ag.to_device(w.params, "cpu")
    step = workloads.OurStep(w)
    step.step()
    for a, b in zip(ag.tree_leaves(ag.to_device(w.params, "cpu")), ag.tree_leaves(before)):
        np.testing.assert_array_equal(a, b)
    moved = [not np.array_equal(a, b) for a, b in zip(
        ag.tree_leaves(ag.to_device(step.params, "cpu")), ag.tree_leaves(before))]
    assert any(moved)


class FakeClock:
    """perf_counter advanced only by the timed functions (and sleep), so times are exact."""

    def __init__(self):
        self.now, self.calls = 0.0, []

    def perf_counter(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def costing(self, name, seconds):
        def fn():
            self.calls.append(name)
            self.now += seconds
        return fn


def test_blocks_alternate_and_ratios_are_per_round(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timing, "time", clock)
    a, b = clock.costing("a", 0.02), clock.costing("b", 0.01)
    result = timing.alternating_blocks(a, b, rounds=4, pause=0.3, block_seconds=0.1, warmup=1)
    assert result.k == 5  # 0.1 s / 0.02 s, the slower side
    blocks = clock.calls[4:]  # after the warm-up and the two calls that choose k
    assert blocks == ["a"] * 5 + ["b"] * 5 + ["b"] * 5 + ["a"] * 5 + ["a"] * 5 + ["b"] * 5 \
        + ["b"] * 5 + ["a"] * 5
    assert result.a == pytest.approx([0.02] * 4) and result.b == pytest.approx([0.01] * 4)
    summary = result.summary()
    assert summary["ratio"] == pytest.approx(2.0) and summary["ms_a"] == pytest.approx(20.0)
