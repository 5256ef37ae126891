"""Training health (models/training/health.py through train.fit(..., health_every=N)): every recorded
number equals the one numpy computes from gradients and parameters of a hand-written loop,
recording changes no bit of the run, a resume keeps the records, and NaNs are located."""
import json

import numpy as np
import pytest

import autograd_lite as ag
from models import classifier, data, health, lm, train

CLIP = 1.0  # the gradient norms of the run below: 1.79, 0.94, 1.26, 0.83, 0.75


def tiny_lm(seed=0):
    return lm.init(np.random.default_rng(seed), 12, d_model=16, n_heads=2, d_ff=32, n_layers=2,
                   max_len=8)


def lm_loss(p, batch, rng):
    inputs, targets = batch
    return ag.cross_entropy(lm.apply(p, inputs), targets)


def lm_batches(epoch):
    text = np.random.default_rng(5).integers(0, 12, 400)
    return data.lm_batches(text, 8, 4, 7, rng=np.random.default_rng([3, epoch]))


# The groups by hand: the first level of each parameter's path in models/lm.py's tree.
LM_GROUPS = ["embed", "blocks[0]", "blocks[1]", "norm", "head"]


def group_arrays(tree, name):
    """All float arrays of group `name`, raveled into one float64 vector (numpy only)."""
    arrays = [np.asarray(leaf, np.float64).ravel()
              for path, leaf in zip(ag.tree_paths(tree), ag.tree_leaves(tree))
              if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f"
              and (path == name or path.startswith(name + "."))]
    return np.concatenate(arrays)


def rms(v):
    return np.sqrt(np.mean(np.square(v)))


def test_records_equal_numpy_on_the_gradients_of_a_hand_written_loop():
    """Steps 1, 4, 7, ...: the norms of the unclipped gradients, the clip flag, and the RMS of
    each group's update over the RMS of its parameters before it."""
    optimizer = ag.optim.adam(3e-2)
    _, history = train.fit(lm_loss, tiny_lm(), optimizer, lm_batches, 2, clip_norm=CLIP,
                           health_every=3, progress=False)
    p, state, expected = tiny_lm(), optimizer.init(tiny_lm()), []
    for epoch in range(2):
        for batch in lm_batches(epoch):
            _, (g,) = ag.value_and_gradient(lambda q: lm_loss(q, batch, None), p)
            new_p, state = optimizer.update(p, ag.optim.clip_by_global_norm(g, CLIP), state)
            step = len(expected) + 1
            if (step - 1) % 3 == 0:
                norms = {n: np.linalg.norm(group_arrays(g, n)) for n in LM_GROUPS}
                total = np.linalg.norm(np.concatenate([group_arrays(g, n) for n in LM_GROUPS]))
                ratios = {n: rms(group_arrays(new_p, n) - group_arrays(p, n)) /
                          rms(group_arrays(p, n)) for n in LM_GROUPS}
                expected.append((step, total, total > CLIP, norms, ratios))
            else:
                expected.append(None)
            p = new_p
    expected = [e for e in expected if e is not None]
    records = history["health"]
    assert [r["step"] for r in records] == [1, 4, 7, 10, 13] == [e[0] for e in expected]
    for record, (step, total, clipped, norms, ratios) in zip(records, expected):
        assert list(record["group_grad_norm"]) == LM_GROUPS == list(record["update_ratio"])
        assert record["grad_norm"] == pytest.approx(total, rel=1e-6)
        assert record["clipped"] == clipped
        assert record["nonfinite_fraction"] == 0.0
        assert record["group_grad_norm"] == pytest.approx(norms, rel=1e-6)
        assert record["update_ratio"] == pytest.approx(ratios, rel=1e-5)
    assert any(r["clipped"] for r in records) and not all(r["clipped"] for r in records)


def test_recording_health_changes_no_bit_of_the_run():
    runs = [train.fit(lm_loss, tiny_lm(), ag.optim.adam(1e-2), lm_batches, 2, clip_norm=CLIP,
                      health_every=every, progress=False) for every in (None, 1)]
    (plain, plain_history), (watched, watched_history) = runs
    for a, b in zip(ag.tree_leaves(plain), ag.tree_leaves(watched)):
        assert not isinstance(a, np.ndarray) or a.tobytes() == b.tobytes()
    assert plain_history["step_loss"] == watched_history["step_loss"]
    assert "health" not in plain_history and len(watched_history["health"]) == 14


def test_an_optimizer_updating_in_place_still_gets_its_true_ratio():
    """Adam's update(..., in_place=True) overwrites the parameter arrays: the ratio must use a
    copy of them."""
    kept = ag.optim.adam(1e-2)
    in_place = kept._replace(update=lambda p, g, s: kept.update(p, g, s, in_place=True))
    ratios = [train.fit(lm_loss, tiny_lm(), opt, lm_batches, 1, health_every=2,
                        progress=False)[1]["health"][0]["update_ratio"] for opt in (kept, in_place)]
    assert ratios[1] == pytest.approx(ratios[0], rel=1e-6) and min(ratios[0].values()) > 0


def test_groups_are_the_first_level_of_the_paths():
    p = classifier.init(np.random.default_rng(0), 20, 3, d_model=8, n_heads=2, d_ff=8,
                        n_layers=2, max_len=5)
    assert list(health.parameter_groups(p)) == ["embed", "encoder[0]", "encoder[1]", "agg",
                                                "head"]
    leaves = ag.tree_leaves(p)
    assert [leaves[i].shape for i in health.parameter_groups(p)["agg"]] == [(8, 1), (1,)]
    w = (np.ones(3), {"a": np.ones(2), "n": 3})
    assert health.parameter_groups(w) == {"[0]": [0], "[1]": [1]}
    assert health.parameter_groups(np.ones(4, np.float32)) == {"params": [0]}


def test_a_resume_after_ctrl_c_keeps_the_same_records(tmp_path):
    optimizer = ag.optim.adam(1e-2)
    _, whole = train.fit(lm_loss, tiny_lm(), optimizer, lm_batches, 2, health_every=2,
                         out_dir=tmp_path / "whole", progress=False)

    def interrupted(epoch):
        for index, batch in enumerate(lm_batches(epoch)):
            if (epoch, index) == (1, 4):
                raise KeyboardInterrupt
            yield batch
    with pytest.raises(train.TrainingInterrupted):
        train.fit(lm_loss, tiny_lm(), optimizer, interrupted, 2, health_every=2,
                  out_dir=tmp_path / "cut", progress=False)
    _, resumed = train.fit(lm_loss, tiny_lm(), optimizer, lm_batches, 2, health_every=2,
                           out_dir=tmp_path / "cut", resume=True, progress=False)
    assert resumed["health"] == whole["health"]
    saved = json.loads((tmp_path / "cut" / "history.json").read_text())
    assert [r["step"] for r in saved["health"]] == [1, 3, 5, 7, 9, 11, 13]


def test_a_non_finite_gradient_is_located_by_group_and_fraction():
    """The head's bias poisoned by √(Σ 0·b): its 12 gradient entries are NaN, no other."""
    def poisoned(p, batch, rng):
        return lm_loss(p, batch, rng) + ag.sqrt(ag.sum(p.head.b * 0.0))
    p = tiny_lm()
    n_entries = sum(leaf.size for leaf in ag.tree_leaves(p)
                    if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f")
    expected = (rf"; 12 of the gradient's {n_entries:,} entries are NaN or infinite, in head; "
                r"stopped before the update")
    with pytest.raises(train.NonFiniteError, match=expected), \
            np.errstate(divide="ignore", invalid="ignore"):
        train.fit(poisoned, p, ag.optim.adam(1e-2), lm_batches, 1, health_every=5,
                  progress=False)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_health_every_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match=r"^fit: health_every must be None or an int >= 1 "
                                         r"\(updates between health records\), got "):
        train.fit(lm_loss, tiny_lm(), ag.optim.adam(1e-2), lm_batches, 1, health_every=bad,
                  progress=False)


def test_the_summary_line_reads_the_first_and_last_records():
    records = [{"step": 1, "grad_norm": 2.5, "clipped": True, "nonfinite_fraction": 0.0,
                "update_ratio": {"a": 1e-2, "b": 3e-2, "c": 2e-2}},
               {"step": 11, "grad_norm": 0.25, "clipped": False, "nonfinite_fraction": 0.0,
                "update_ratio": {"a": 1e-4, "b": 5e-4, "c": 9e-4}}]
    assert health.summary(records) == (
        "training health (steps 1..11, 2 records): gradient norm 2.5 -> 0.25, clipped in 1 of "
        "2; update/parameter RMS (median of groups) 0.02 -> 0.0005; no NaN or inf")
    records[1]["nonfinite_fraction"] = 0.125
    assert health.summary(records).endswith("; non-finite entries up to 0.12")
    assert health.summary(None).startswith("training health: not recorded")


def test_a_finite_gradient_past_the_float_range_is_described_by_its_largest_group():
    """Every entry finite but Σ g² overflowing float32 (or a loss that is not finite): the
    description names no NaN ("0 of the gradient's entries are NaN or infinite, in no group"
    would contradict the stop) but the group with the largest norm, measured in float64."""
    p = tiny_lm()
    groups = health.parameter_groups(p)
    grads = ag.tree_map(lambda leaf: np.full_like(leaf, 1e19) if leaf is p.head.w
                        else np.ones_like(leaf), p)
    norm = 1e19 * np.sqrt(p.head.w.size)
    assert health.describe_nonfinite(grads, groups) == (
        f"every gradient entry is finite; the largest group's norm is head's, {norm:.3g}")


def test_example_health_holds_the_quantiles_of_each_examples_gradient_norm():
    """The per-example norms (one vmap of the gradient) against each example's own gradient
    taken alone, and fit's records of them; the run's numbers are those without them."""
    p, batch = tiny_lm(), next(iter(lm_batches(0)))
    norms = health.example_gradient_norms(lm_loss, p, batch, None)
    alone = [np.sqrt(sum(np.sum(np.square(g, dtype=np.float64))
                         for g in ag.tree_leaves(ag.gradient(
                             lambda q: lm_loss(q, (batch[0][i:i + 1], batch[1][i:i + 1]), None),
                             p)[0]) if g is not None))
             for i in range(len(batch[0]))]
    np.testing.assert_allclose(norms, alone, rtol=1e-5)
    optimizer = ag.optim.adam(3e-2)
    plain_params, plain = train.fit(lm_loss, tiny_lm(), optimizer, lm_batches, 1,
                                    health_every=2, progress=False)
    params, history = train.fit(lm_loss, tiny_lm(), optimizer, lm_batches, 1, health_every=2,
                                progress=False, example_health=True)
    assert history["step_loss"] == plain["step_loss"]
    first = history["health"][0]["example_grad_norm"]
    assert list(first) == ["q05", "q25", "q50", "q75", "q95"]
    np.testing.assert_allclose(list(first.values()),
                               np.quantile(norms, [0.05, 0.25, 0.5, 0.75, 0.95]), rtol=1e-6)
    with pytest.raises(ValueError, match="example_health=True adds to the health records"):
        train.fit(lm_loss, tiny_lm(), optimizer, lm_batches, 1, progress=False,
                  example_health=True)


def test_example_health_with_dropout_draws_each_examples_masks_as_a_loop_does():
    """A loss with dropout in every layer: each example's gradient with the masks a loop over
    the examples draws from the generator, one example after the other (vmap's
    randomness="different"), and the generator left where that loop leaves it."""
    p = lm.init(np.random.default_rng(0), 12, d_model=16, n_heads=2, d_ff=32, n_layers=2,
                max_len=8, dropout=0.3, dtype=np.float64)
    batch = next(iter(lm_batches(0)))

    def loss(p, batch, rng):
        inputs, targets = batch
        return ag.cross_entropy(lm.apply(p, inputs, training=True, rng=rng), targets)
    rng = np.random.default_rng(11)
    norms = health.example_gradient_norms(loss, p, batch, rng)
    loop_rng = np.random.default_rng(11)
    alone = [np.sqrt(sum(np.sum(np.square(g)) for g in ag.tree_leaves(ag.gradient(
        lambda q: loss(q, (batch[0][i:i + 1], batch[1][i:i + 1]), loop_rng), p)[0])
        if g is not None)) for i in range(len(batch[0]))]
    np.testing.assert_allclose(norms, alone, rtol=1e-10)
    assert rng.random() == loop_rng.random()
