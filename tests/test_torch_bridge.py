"""models.torch_bridge: state_dict keys, exact round trips of the three models, tied weights,
torch -> ours."""
import numpy as np
import pytest

import autograd_lite as ag
from models import transformer
from helpers.tiny_models import perturbed, tiny_classifier, tiny_lm, tiny_transformer

SIZES = dict(d_model=8, n_heads=2, d_ff=12, n_encoder=2, n_decoder=1, max_len=10, dropout=0.0)


def vocabularies(share=False):
    """(src_vocab, tgt_vocab) of tiny(): one vocabulary when all three matrices are shared."""
    return (6, 6) if share == "all" else (6, 5)


def tiny(dtype=np.float64, **overrides):
    vocabs = vocabularies(overrides.get("share_embeddings"))
    return tiny_transformer(0, *vocabs, scale=0.0, dtype=dtype, **{**SIZES, **overrides})


@pytest.fixture
def bridge(torch):
    from models import torch_bridge
    return torch_bridge


@pytest.mark.parametrize("share", [False, True, "all"])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_keys_are_those_of_the_torch_module(bridge, share, norm):
    p = tiny(share_embeddings=share, norm=norm)
    module = bridge.TorchTransformer(*vocabularies(share), norm=norm, share_embeddings=share,
                                     **SIZES)
    assert list(bridge.to_torch(p)) == list(module.state_dict())
    assert "transformer.decoder.layers.0.multihead_attn.in_proj_weight" in module.state_dict()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("share", [False, True, "all"])
def test_round_trip_is_exact(bridge, dtype, share):
    p = tiny(dtype, share_embeddings=share)
    q = bridge.from_torch(bridge.to_torch(p), like=p)
    assert type(q) is type(p)
    assert ag.tree_paths(q) == ag.tree_paths(p)
    for path, a, b in zip(ag.tree_paths(p), ag.tree_leaves(p), ag.tree_leaves(q)):
        if isinstance(a, np.ndarray):
            assert b.dtype == a.dtype and b.shape == a.shape, path
            np.testing.assert_array_equal(b, a, err_msg=path)
        else:
            assert a == b, path


def assert_same_tree_to_the_bit(q, p):
    assert type(q) is type(p)
    assert ag.tree_paths(q) == ag.tree_paths(p)
    for path, a, b in zip(ag.tree_paths(p), ag.tree_leaves(p), ag.tree_leaves(q)):
        if isinstance(a, np.ndarray):
            assert b.dtype == a.dtype and b.shape == a.shape, path
            np.testing.assert_array_equal(b.view(np.uint32), a.view(np.uint32), err_msg=path)
        else:
            assert a == b, path


def other_models():
    """A classifier of each pool and a language model, float32, every array perturbed (no
    zero biases, no unit scales: a swapped pair would show)."""
    rng = np.random.default_rng(5)
    return {"classifier, flatten": perturbed(tiny_classifier(1, dtype=np.float32), rng, 0.1),
            "classifier, mean": perturbed(tiny_classifier(2, pool="mean", dtype=np.float32),
                                          rng, 0.1),
            "lm": perturbed(tiny_lm(3, dtype=np.float32), rng, 0.1)}


@pytest.mark.parametrize("name", ["classifier, flatten", "classifier, mean", "lm"])
def test_classifier_and_lm_round_trip_to_the_bit_in_float32(bridge, name):
    p = other_models()[name]
    sd = bridge.to_torch(p)
    own = bridge.lm_to_torch if name == "lm" else bridge.classifier_to_torch
    assert list(sd) == list(own(p))
    assert all(t.dtype == bridge.torch.float32 for t in sd.values())
    assert_same_tree_to_the_bit(bridge.from_torch(sd, like=p), p)


def test_a_classifier_or_lm_key_missing_or_misshapen_is_named(bridge):
    models = other_models()
    sd = bridge.to_torch(models["lm"])
    del sd["blocks.1.norm2.weight"]
    with pytest.raises(KeyError, match=r"lacks 1 keys.*blocks\.1\.norm2\.weight"):
        bridge.from_torch(sd, like=models["lm"])
    sd = bridge.to_torch(models["classifier, flatten"])
    with pytest.raises(ValueError, match=r"head\.weight has shape \(3, 6\) but .* needs "
                                         r"\(3, 8\)"):
        bridge.from_torch(sd, like=models["classifier, mean"])


def test_a_tree_of_no_model_is_refused_by_name(bridge):
    with pytest.raises(TypeError, match=r"to_torch: expected a models\.transformer, classifier "
                                        r"or lm tree, got Dense"):
        bridge.to_torch(tiny().out)
    with pytest.raises(TypeError, match=r"from_torch: .* got dict"):
        bridge.from_torch({}, like={"w": np.zeros(2)})


def test_packed_attention_layout(bridge):
    p = tiny()
    sd = bridge.to_torch(p)
    attn = p.encoder[1].self_attn
    w = sd["transformer.encoder.layers.1.self_attn.in_proj_weight"].numpy()  # (3D, D)
    np.testing.assert_array_equal(w, np.vstack([attn.wq.w.T, attn.wk.w.T, attn.wv.w.T]))
    np.testing.assert_array_equal(sd["transformer.encoder.layers.1.linear2.weight"].numpy(),
                                  p.encoder[1].ff.linear2.w.T)  # torch's (d_out, d_in)


def test_a_torch_initialized_module_runs_the_same_in_our_model(bridge, torch):
    """The other direction: weights made by torch, converted, give torch's logits."""
    torch.manual_seed(0)
    module = bridge.TorchTransformer(6, 5, norm="pre", **SIZES).double().eval()
    p = bridge.from_torch(module.state_dict(), like=tiny(norm="pre"))
    src = np.array([[1, 2, 3, 0], [4, 5, 0, 0]])
    tgt = np.array([[1, 4, 2], [3, 3, 1]])
    with torch.no_grad():
        want = module(torch.from_numpy(src), torch.from_numpy(tgt), 0).numpy()
    np.testing.assert_allclose(transformer.apply(p, src, tgt, src_pad=0), want, rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("n_encoder, n_decoder", [(0, 1), (2, 0), (0, 0)])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_module_for_a_model_without_encoder_or_decoder_blocks(bridge, torch, n_encoder,
                                                              n_decoder, norm):
    """An empty stack is its final norm alone, in our model and in the module torch_module_for
    builds (torch's own stacks cannot run empty)."""
    p = tiny_transformer(0, *vocabularies(), scale=0.1, dtype=np.float64,
                         **{**SIZES, "n_encoder": n_encoder, "n_decoder": n_decoder,
                            "norm": norm})
    module = bridge.torch_module_for(p).eval()
    src = np.array([[1, 2, 3, 0], [4, 5, 0, 0]])
    tgt = np.array([[1, 4, 2], [3, 3, 1]])
    with torch.no_grad():
        want = module(torch.from_numpy(src), torch.from_numpy(tgt), 0).numpy()
    np.testing.assert_allclose(transformer.apply(p, src, tgt, src_pad=0), want, rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("share", [True, "target", "all"])
def test_tied_embeddings_are_one_torch_parameter(bridge, share):
    p = tiny(share_embeddings=share)
    module = bridge.torch_module_for(p)
    assert module.out.weight is module.tgt_embed.weight
    assert (module.src_embed.weight is module.tgt_embed.weight) == (share == "all")
    assert len(list(module.parameters())) == len(module.state_dict()) - (2 if share == "all"
                                                                         else 1)
    np.testing.assert_array_equal(module.out.weight.detach().numpy(), p.tgt_embed.table)
    np.testing.assert_array_equal(module.out.bias.detach().numpy(), p.out.b)
    sd = bridge.to_torch(p)
    assert sd["out.weight"] is sd["tgt_embed.weight"]
    assert (sd["src_embed.weight"] is sd["tgt_embed.weight"]) == (share == "all")


@pytest.mark.parametrize("share,tied", [("target", "out.weight"), ("all", "src_embed.weight"),
                                        ("all", "out.weight")])
def test_from_torch_refuses_untied_weights_for_a_tied_model(bridge, share, tied):
    like = tiny(share_embeddings=share)
    sd = {**bridge.to_torch(like)}
    sd[tied] = sd[tied] + 0.5  # a state_dict in which the tied keys hold two tables
    with pytest.raises(ValueError, match=rf"from_torch: `like` ties tgt_embed.weight, .* but "
                                         rf"the state_dict's {tied} differs from its "
                                         rf"tgt_embed.weight \(largest difference 0.5\)"):
        bridge.from_torch(sd, like=like)


@pytest.mark.parametrize("share", ["target", "all"])
def test_tied_weights_holding_a_nan_round_trip(bridge, share):
    """A NaN in the shared table is in every key that holds it (one tensor): the tables are
    still one, through the module's state_dict as through to_torch's."""
    p = tiny(share_embeddings=share)
    table = p.tgt_embed.table.copy()
    table[1, 2] = np.nan
    p = p._replace(tgt_embed=p.tgt_embed._replace(table=table))
    for sd in (bridge.to_torch(p), bridge.torch_module_for(p).state_dict()):
        back = bridge.from_torch(sd, like=p)
        for x, y in zip(ag.tree_leaves(back), ag.tree_leaves(p)):
            np.testing.assert_array_equal(x, y)  # NaN where p has NaN, the rest bit for bit
        assert np.isnan(back.tgt_embed.table[1, 2]) and np.isnan(back.tgt_embed.table).sum() == 1


def test_torch_module_refuses_sharing_all_with_two_vocabularies(bridge):
    with pytest.raises(ValueError, match=r'TorchTransformer: share_embeddings="all" .* '
                                         r'src_vocab=6, tgt_vocab=5'):
        bridge.TorchTransformer(6, 5, share_embeddings="all", **SIZES)


@pytest.mark.parametrize("dtype,torch_dtype", [(np.float64, "float64"), (np.float32, "float32")])
def test_module_for_has_our_sizes_and_dtype(bridge, torch, dtype, torch_dtype):
    p = tiny(dtype, norm="pre", dropout=0.2)
    module = bridge.torch_module_for(p)
    layer = module.transformer.encoder.layers[0]
    assert module.src_embed.weight.dtype == getattr(torch, torch_dtype)
    assert (layer.self_attn.num_heads, layer.linear1.out_features, layer.norm_first,
            layer.dropout.p) == (2, 12, True, 0.2)
    assert len(module.transformer.encoder.layers) == 2
    assert len(module.transformer.decoder.layers) == 1


def test_a_missing_key_is_named(bridge):
    p = tiny()
    sd = bridge.to_torch(p)
    del sd["transformer.decoder.norm.bias"]
    with pytest.raises(KeyError, match=r"lacks 1 keys.*transformer\.decoder\.norm\.bias"):
        bridge.from_torch(sd, like=p)


def test_a_shape_that_does_not_match_like_is_named(bridge):
    """A model with d_ff=20 loaded into one shaped with d_ff=12 used to come back with
    (8, 20) weights inside a tree that claims d_ff=12."""
    like = tiny()
    other = bridge.to_torch(tiny(d_ff=20))
    with pytest.raises(ValueError, match=r"transformer\.encoder\.layers\.0\.linear1\.weight has "
                                         r"shape \(20, 8\) but .* needs \(12, 8\)"):
        bridge.from_torch(other, like=like)
    sd = bridge.to_torch(like)
    sd["transformer.decoder.layers.0.multihead_attn.in_proj_weight"] = sd[
        "transformer.decoder.layers.0.multihead_attn.in_proj_weight"][:16]
    with pytest.raises(ValueError, match=r"multihead_attn\.in_proj_weight has shape \(16, 8\) "
                                         r"but .* needs \(24, 8\)"):
        bridge.from_torch(sd, like=like)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_module_has_exactly_the_documented_attributes(bridge, torch, norm):
    """src_embed, tgt_embed (nn.Embedding), transformer (nn.Transformer, batch_first,
    norm_first = (norm == "pre"), relu) and out (nn.Linear): the names a state_dict uses."""
    nn = torch.nn
    module = bridge.torch_module_for(tiny(norm=norm, dropout=0.1))
    children = dict(module.named_children())
    assert list(children) == ["src_embed", "tgt_embed", "transformer", "out"]
    assert [type(c) for c in children.values()] == [nn.Embedding, nn.Embedding, nn.Transformer,
                                                     nn.Linear]
    layers = [*module.transformer.encoder.layers, *module.transformer.decoder.layers]
    assert all(layer.norm_first == (norm == "pre") for layer in layers)
    assert all(layer.self_attn.batch_first for layer in layers)
    assert all(layer.activation is torch.nn.functional.relu for layer in layers)
    assert {k.split(".")[0] for k in module.state_dict()} == set(children)


@pytest.mark.parametrize("share", [False, True, "all"])
def test_torch_gradients_come_back_as_our_gradient_tree(bridge, torch, share):
    """The way back for training continued in PyTorch: module .grad tensors, converted with
    from_torch(like=params), equal ag.gradient of the same loss."""
    p = tiny(norm="pre", share_embeddings=share)
    src = np.array([[1, 2, 3, 0], [4, 5, 0, 0]])
    tgt = np.array([[1, 4, 2], [3, 3, 1]])
    labels = np.array([[4, 2, 0], [3, 1, 2]])
    module = bridge.torch_module_for(p)
    logits = module(torch.from_numpy(src), torch.from_numpy(tgt), 0)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.from_numpy(labels).reshape(-1)
                                      ).backward()
    torch_grads = {k: module.get_parameter(k).grad for k in module.state_dict()}
    got = bridge.from_torch(torch_grads, like=p)
    (want,) = ag.gradient(lambda p: ag.cross_entropy(transformer.apply(p, src, tgt, 0), labels), p)
    assert ag.tree_paths(got) == ag.tree_paths(want)
    for path, a, b in zip(ag.tree_paths(want), ag.tree_leaves(want), ag.tree_leaves(got)):
        if isinstance(a, np.ndarray):
            np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12, err_msg=path)
