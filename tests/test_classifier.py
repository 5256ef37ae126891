"""models.classifier: the seed model's size by hand, logits and every gradient against
PyTorch, padding, dropout, gradient check, and errors."""
import numpy as np
import pytest

import autograd_lite as ag
from models import classifier
from helpers.references import float_leaves, paper_position_encoding, relative_error, to_tensor
from helpers.tiny_models import assert_dropout_in_training_only_and_seeded
from helpers.torch_models import assert_model_gradients_match, torch_block

SMALL = dict(vocab_size=40, n_labels=3, d_model=16, n_heads=4, d_ff=24, n_layers=2, max_len=7)
PAD = 0


def test_seed_configuration_has_21_arrays_and_251552_parameters():
    p = classifier.init(np.random.default_rng(0), 7455, 5)  # d 32, 4 heads, d_ff 128, 1 block, 50
    V, D, F, T, L = 7455, 32, 128, 50, 5
    by_layer = {"embed": (V * D, 1),
                "self_attn q, k, v, o": (4 * (D * D + D), 8),
                "norm1, norm2": (2 * (D + D), 4),
                "ff": (D * F + F + F * D + D, 4),
                "agg Dense(D -> 1)": (D * 1 + 1, 2),
                "head Dense(max_len -> labels)": (T * L + L, 2)}
    assert by_layer["embed"][0] == 238_560 and by_layer["ff"][0] == 8_352
    arrays = list(float_leaves(p).values())
    assert len(arrays) == sum(n for _, n in by_layer.values()) == 21
    assert sum(a.size for a in arrays) == sum(c for c, _ in by_layer.values()) == 251_552


def make_ids(rng, batch, length, vocab, pad=PAD):
    """Tokens 1..vocab-1 with a tail of pads of random length (each row keeps >= 2 tokens)."""
    ids = rng.integers(1, vocab, size=(batch, length))
    for row, n_real in zip(ids, rng.integers(2, length + 1, size=batch)):
        row[n_real:] = pad
    return ids


def torch_classifier(torch, p, ids):
    """Logits, the leaf tensors of the embedding and head, and the encoder layers of an
    independent torch model holding p's weights."""
    t = {path: to_tensor(torch, x, requires_grad=True) for path, x in float_leaves(p).items()
         if not path.startswith("encoder[")}
    x = torch.nn.functional.embedding(torch.from_numpy(ids), t["embed.table"])  # (B, T, D)
    pe = paper_position_encoding(ids.shape[1], x.shape[-1])
    x = x + torch.from_numpy(pe).to(x.dtype)  # (B, T, D), no √D scaling
    layers = [torch_block(torch, block, "post") for block in p.encoder]
    pad_mask = torch.from_numpy(ids == p.pad)  # (B, T) True = ignore
    for layer in layers:
        x = layer(x, src_key_padding_mask=pad_mask)  # (B, T, D)
    if p.pool == "flatten":
        scores = (x @ t["agg.w"] + t["agg.b"])[..., 0]  # (B, T)
        return scores @ t["head.w"] + t["head.b"], t, layers
    keep = torch.from_numpy(ids != p.pad).to(x.dtype)[..., None]  # (B, T, 1)
    mean = (x * keep).sum(1) / keep.sum(1)  # (B, D)
    return mean @ t["head.w"] + t["head.b"], t, layers


@pytest.mark.parametrize("pool", ["flatten", "mean"])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-9), (np.float32, 1e-4)])
def test_logits_and_every_gradient_match_torch(torch, pool, dtype, rtol):
    rng = np.random.default_rng(1)
    p = classifier.init(rng, **SMALL, pool=pool, pad=PAD, dtype=dtype)
    ids = make_ids(rng, 4, SMALL["max_len"], SMALL["vocab_size"])
    cotangent = rng.standard_normal((4, SMALL["n_labels"])).astype(dtype)
    (grads,) = ag.gradient(lambda p: ag.sum(classifier.apply(p, ids) * cotangent), p)
    ref_logits, t, layers = torch_classifier(torch, p, ids)
    (ref_logits * torch.from_numpy(cotangent)).sum().backward()
    ours = classifier.apply(p, ids)
    assert ours.dtype == dtype and ours.shape == (4, SMALL["n_labels"])
    assert relative_error(ours, ref_logits.detach().numpy()) < rtol
    assert_model_gradients_match(grads, t, layers, rtol)


def test_embeddings_are_standard_normal():
    """TransformersLite's Embed is randn (the torch model above adds it to PE unscaled)."""
    p = classifier.init(np.random.default_rng(0), 7455, 5)
    table = p.embed.table
    assert abs(table.mean()) < 0.01 and abs(table.std() - 1) < 0.01


def test_mean_pool_ignores_padding():
    rng = np.random.default_rng(2)
    p = classifier.init(rng, **SMALL, pool="mean", pad=PAD, dtype=np.float64)
    ids = make_ids(rng, 3, 5, SMALL["vocab_size"])
    ids[:, -1] = PAD
    logits = classifier.apply(p, ids)
    moved_pad = p._replace(embed=p.embed._replace(table=p.embed.table.copy()))
    moved_pad.embed.table[PAD] += 5.0  # the pad token's embedding
    longer = np.concatenate([ids, np.full((3, 2), PAD)], axis=1)  # (3, 7): more padding
    np.testing.assert_allclose(classifier.apply(moved_pad, ids), logits, rtol=0, atol=1e-12)
    np.testing.assert_allclose(classifier.apply(p, longer), logits, rtol=0, atol=1e-12)
    changed = ids.copy()
    changed[:, 0] = changed[:, 0] % (SMALL["vocab_size"] - 1) + 1  # a real token changes
    assert np.abs(classifier.apply(p, changed) - logits).min() > 1e-6


def test_dropout_only_in_training_and_reproducible():
    rng = np.random.default_rng(3)
    p = classifier.init(rng, **SMALL, dropout=0.3, dtype=np.float64)
    ids = make_ids(rng, 3, SMALL["max_len"], SMALL["vocab_size"])
    inference = assert_dropout_in_training_only_and_seeded(
        lambda training, rng: classifier.apply(p, ids, training, rng))
    no_drop = p._replace(dropout=ag.Hyper(0.0))
    np.testing.assert_array_equal(
        classifier.apply(no_drop, ids, training=True, rng=np.random.default_rng(7)), inference)


@pytest.mark.parametrize("pool", ["flatten", "mean"])
def test_gradients_through_dropout_in_training(pool):
    """The same seed in every call gives the same masks, so differences see one function;
    the rate is static (no gradient), not a trainable float leaf. (Without dropout, every
    gradient is checked against torch above.)"""
    rng = np.random.default_rng(5)
    p = classifier.init(rng, vocab_size=6, n_labels=2, d_model=4, n_heads=2, d_ff=6, n_layers=1,
                        max_len=4, pool=pool, pad=PAD, dropout=0.3, dtype=np.float64)
    ids, labels = np.array([[1, 2, 5, PAD], [3, 3, 4, 1]]), np.array([0, 1])

    def loss(p):
        return ag.cross_entropy(classifier.apply(p, ids, True, np.random.default_rng(0)), labels)
    ag.check_gradients(loss, p)
    assert ag.gradient(loss, p)[0].dropout is None


def test_errors_name_the_function_and_shapes():
    p = classifier.init(np.random.default_rng(0), **SMALL)
    with pytest.raises(ValueError, match=r"classifier.apply.*max_len=7.*length 5"):
        classifier.apply(p, np.ones((2, 5), dtype=int))
    with pytest.raises(ValueError, match=r"classifier.apply: ids must be integer.*float64"):
        classifier.apply(p, np.ones((2, 7)))
    with pytest.raises(ValueError, match="training=True needs an rng"):
        classifier.apply(p, np.ones((2, 7), dtype=int), training=True)
    with pytest.raises(ValueError, match="pool='mean' needs the pad id"):
        classifier.init(np.random.default_rng(0), **SMALL, pool="mean")
    with pytest.raises(ValueError, match="pool must be one of"):
        classifier.init(np.random.default_rng(0), **SMALL, pool="max")
    mean = classifier.init(np.random.default_rng(0), **SMALL, pool="mean", pad=PAD)
    with pytest.raises(ValueError, match=r"classifier.apply: ids \(2, 9\).*max_len=7"):
        classifier.apply(mean, np.ones((2, 9), dtype=int))
    with pytest.raises(ValueError, match=r"classifier.apply: ids \(1, 7\) holds id 40, outside "
                                         r"the vocabulary 0\.\.39"):
        classifier.apply(p, np.array([[1, 2, 40, 3, 4, 5, 6]]))


@pytest.mark.parametrize("rate", [-0.1, 1.0, 2.0, float("nan")])
def test_init_refuses_a_dropout_rate_outside_0_to_1(rate):
    with pytest.raises(ValueError,
                       match=rf"classifier.init: dropout must lie in \[0, 1\), got {rate}$"):
        classifier.init(np.random.default_rng(0), **SMALL, dropout=rate)
    with pytest.raises(ValueError,
                       match=rf"classifier.init: dropout must lie in \[0, 1\), got {rate}$"):
        classifier.init(np.random.default_rng(0), **SMALL, pool="mean", pad=PAD, dropout=rate)


@pytest.mark.parametrize("pool", ["flatten", "mean"])
def test_dropout_sites_follow_transformers_lite_plus_the_paper_and_torch(dropout_sites, pool):
    """The sites of a training pass, from the architecture (module docstring): TransformersLite
    drops embeddings + positions and each encoder sublayer's output before the residual add
    (as the paper's §5.4); on top, as in torch's nn.MultiheadAttention and
    nn.TransformerEncoderLayer, the attention weights and the feed-forward's hidden
    activation. Nothing after the encoder (pooling, head) is dropped."""
    B, T, H, D, F, N, RATE = 3, 7, 2, 8, 12, 2, 0.25
    sizes = dict(SMALL, d_model=D, n_heads=H, d_ff=F, n_layers=N, max_len=T)
    rng = np.random.default_rng(6)
    p = classifier.init(rng, **sizes, pool=pool, pad=PAD, dropout=RATE, dtype=np.float64)
    ids = make_ids(rng, B, T, SMALL["vocab_size"])
    classifier.apply(p, ids, training=True, rng=np.random.default_rng(0))
    layer = [(B, H, T, T),  # self-attention weights
             (B, T, D),  # self-attention sublayer output, before the residual add
             (B, T, F),  # feed-forward hidden activation (after relu)
             (B, T, D)]  # feed-forward sublayer output, before the residual add
    want = [(B, T, D)] + N * layer  # embeddings + positions, then each encoder block
    assert len(want) == 1 + 4 * N == 9
    assert sorted(dropout_sites) == sorted((shape, RATE) for shape in want)


def test_init_refuses_fewer_than_two_labels():
    """A classifier of one label answers it every time (its softmax is 1): refused."""
    with pytest.raises(ValueError, match=r"^classifier.init: n_labels must be an int >= 2, "
                                         r"got 1$"):
        classifier.init(np.random.default_rng(0), **dict(SMALL, n_labels=1))
