"""The models, their training and their files on a device's arrays, through the CuPy double
(helpers/device_double.py; conftest's `device_double`), which refuses every implicit
conversion to the host: the three models' losses and gradients against the same on numpy,
a `fit` run with Adam (its history, checkpoints and resume, across devices both ways), and
save and load. On the double the plain functions run (it has no kernels), on numpy the fast
rules: the two agree within float32's rounding."""
import numpy as np
import pytest

import autograd_lite as ag
from helpers.device_double import DeviceArray
from helpers.references import assert_close
from helpers.tiny_models import tiny_classifier, tiny_lm, tiny_transformer
from models import classifier, data, lm, train, transformer

RTOL = 2e-4  # float32: the fused rules on numpy against the plain functions on the device


def transformer_loss(p, src, tgt, rng=None):
    logits = transformer.apply(p, src, tgt[:, :-1], src_pad=0, training=rng is not None, rng=rng)
    return ag.cross_entropy(logits, tgt[:, 1:], ignore_index=0, label_smoothing=0.1)


def classifier_loss(p, ids, labels, rng=None):
    return ag.cross_entropy(classifier.apply(p, ids, training=rng is not None, rng=rng), labels)


def lm_loss(p, ids, rng=None):
    return ag.cross_entropy(lm.apply(p, ids[:, :-1], training=rng is not None, rng=rng),
                            ids[:, 1:])


def model_cases():
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 7, (2, 6)), rng.integers(1, 9, (2, 5))
    src[0, -2:] = 0  # padding, masked in every attention
    return {
        "transformer": (transformer_loss, tiny_transformer(dropout=0.1), (src, tgt)),
        "classifier": (classifier_loss, tiny_classifier(dropout=0.1),
                       (rng.integers(0, 20, (3, 6)), np.array([0, 2, 1]))),
        "lm": (lm_loss, tiny_lm(dropout=0.1), (rng.integers(0, 23, (2, 7)),)),
    }


def assert_on_device_like(tree, like):
    """Every float array of `like` is a DeviceArray of its dtype and shape in `tree`."""
    for got, want in zip(ag.tree_leaves(tree), ag.tree_leaves(like)):
        if isinstance(want, np.ndarray) and ag.is_differentiable(want):
            assert type(got) is DeviceArray, type(got)
            assert got.dtype == want.dtype and got.shape == want.shape


def assert_trees_close(got, want, rtol, what):
    for path, g, w in zip(ag.tree_paths(want), ag.tree_leaves(got), ag.tree_leaves(want)):
        if isinstance(w, np.ndarray) and ag.is_differentiable(w):
            assert_close(ag.to_device(g, "cpu"), w, rtol, f"{what} {path}")


@pytest.mark.parametrize("training", [False, True], ids=["inference", "dropout"])
@pytest.mark.parametrize("name", ["transformer", "classifier", "lm"])
def test_a_models_loss_and_gradient_on_the_device_match_numpys(name, training, device_double):
    loss, p, batch = model_cases()[name]
    rng = (lambda: np.random.default_rng(5)) if training else (lambda: None)
    value, grads = ag.value_and_gradient(lambda p: loss(p, *batch, rng()), p)
    on_device = ag.to_device(p, "cuda")
    device_value, device_grads = ag.value_and_gradient(
        lambda p: loss(p, *ag.to_device(batch, "cuda"), rng()), on_device)
    assert type(device_value) is DeviceArray and device_value.dtype == value.dtype
    assert_close(ag.to_device(device_value, "cpu"), value, RTOL, "loss")
    assert_on_device_like(device_grads, p)
    assert_trees_close(device_grads, grads, RTOL, "gradient")


def fit_run(params, batches, out_dir, **keywords):
    def loss_fn(p, batch, rng):
        return lm_loss(p, batch[0], rng)
    return train.fit(loss_fn, params, ag.optim.adam(1e-2), batches, epochs=2,
                     out_dir=out_dir, progress=False, health_every=2, **keywords)


def lm_batches(device):
    ids = np.random.default_rng(1).integers(0, 23, (12, 7))
    place = (lambda tree: ag.to_device(tree, "cuda")) if device else (lambda tree: tree)
    return lambda epoch: [place(b) for b in data.batches(ids, ids[:, 0], 4,
                                                         rng=np.random.default_rng([3, epoch]))]


def test_fit_with_adam_on_the_device_matches_numpy_and_resumes_across_devices(
        device_double, tmp_path):
    p = tiny_lm(dropout=0.1)
    host_params, host_history = fit_run(p, lm_batches(False), tmp_path / "host")
    device_params, device_history = fit_run(ag.to_device(p, "cuda"), lm_batches(True),
                                            tmp_path / "device")
    assert_on_device_like(device_params, p)
    assert_trees_close(device_params, host_params, 1e-3, "params after 6 steps")
    np.testing.assert_allclose(device_history["step_loss"], host_history["step_loss"],
                               rtol=1e-4)
    assert [r["step"] for r in device_history["health"]] == [1, 3, 5]
    for a, b in zip(device_history["health"], host_history["health"]):
        assert a["group_grad_norm"].keys() == b["group_grad_norm"].keys()
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-3)
    # a run saved on the device resumes on the host, and one saved on the host on the device
    for saved, start, on_device in (("device", p, False), ("host", ag.to_device(p, "cuda"), True)):
        resumed, history = fit_run(start, lm_batches(on_device), tmp_path / saved, resume=True)
        assert (type(ag.tree_leaves(resumed)[0]) is DeviceArray) == on_device
        assert history["step_loss"] == (device_history if saved == "device"
                                        else host_history)["step_loss"]
    checkpoint = ag.load(tmp_path / "device" / "last.npz")  # the file holds host arrays
    assert all(type(a) is not DeviceArray for a in ag.tree_leaves(checkpoint))


def test_save_writes_host_arrays_and_load_places_them_like_the_tree(device_double, tmp_path):
    p = tiny_classifier()
    state = ag.optim.adam().init(p)
    tree = {"params": ag.to_device(p, "cuda"), "state": ag.to_device(state, "cuda")}
    ag.save(tmp_path / "run.npz", tree)
    with np.load(tmp_path / "run.npz") as archive:  # plain numpy arrays in the file
        assert all(archive[k].dtype != object for k in archive.files)
    on_device = ag.load(tmp_path / "run.npz", like=tree)
    assert_on_device_like(on_device["params"], p)
    assert type(on_device["state"].step) is np.int64  # a numpy scalar stays one
    on_host = ag.load(tmp_path / "run.npz", like={"params": p, "state": state})
    for a, b, c in zip(ag.tree_leaves(on_device), ag.tree_leaves(on_host),
                       ag.tree_leaves({"params": p, "state": state})):
        if isinstance(c, np.ndarray):
            assert type(b) is np.ndarray and np.array_equal(b, c)
            assert np.array_equal(ag.to_device(a, "cpu"), c)


def test_an_optimizer_refuses_a_gradient_on_another_device(device_double):
    p = {"w": ag.to_device(np.ones(3, np.float32), "cuda")}
    opt = ag.optim.adam()
    with pytest.raises(TypeError, match="^adam.update: operands on different devices"):
        opt.update(p, {"w": np.ones(3, np.float32)}, opt.init(p))


def test_decoding_a_model_on_the_device_chooses_numpys_tokens(device_double):
    """The searches run on the host; a model on the device gets its tokens there and gives its
    logits back (decoding.on_host): greedy, beam and sampled ids equal numpy's."""
    p, q = tiny_transformer(scale=1.0), tiny_lm()
    src, prompt = np.random.default_rng(0).integers(1, 7, (3, 5)), np.array([[1, 2, 3]])
    searches = [
        (p, lambda p: transformer.greedy_decode(p, src, 1, 2, 8, src_pad=0)),
        (p, lambda p: transformer.beam_search(p, ag.to_device(src, ag.device_name(p.out.b)),
                                              1, 2, 8, 3, src_pad=0)),
        (q, lambda q: lm.beam_search(q, prompt, 5, 3)),
        (q, lambda q: lm.generate(q, prompt, 5, rng=np.random.default_rng(1))),
    ]
    for params, search in searches:
        want, got = search(params), search(ag.to_device(params, "cuda"))
        assert type(got) is np.ndarray and np.array_equal(got, want)
