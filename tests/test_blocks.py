"""models.blocks: the residual wiring against its two formulas; encoder and decoder blocks
against nn.TransformerEncoderLayer and nn.TransformerDecoderLayer (dropout 0, eval), both
norm orders, values and every gradient. (The decoder-only block is tested with the language
model against torch, and the cached steps against the models' full forward passes.)"""
import numpy as np
import pytest

import autograd_lite as ag
from models import blocks
from models.attention import causal_mask, padding_mask
from models.layers import layer_norm_init

D, H, D_FF = 8, 2, 12
RTOL = {np.float64: 1e-11, np.float32: 1e-4}


def perturbed(rng, p, dtype):
    """Nonzero biases and non-unit layer-norm scales, so that every parameter matters."""
    return ag.tree_map(lambda a: (a + 0.2 * rng.standard_normal(a.shape)).astype(dtype)
                       if isinstance(a, np.ndarray) else a, p)


def torch_layer(torch, kind, block, norm, dtype):
    from models.torch_bridge import block_to_torch
    cls = {"encoder": torch.nn.TransformerEncoderLayer,
           "decoder": torch.nn.TransformerDecoderLayer}[kind]
    layer = cls(D, H, D_FF, dropout=0.0, batch_first=True, norm_first=(norm == "pre"),
                dtype=torch.float64 if dtype == np.float64 else torch.float32).eval()
    layer.load_state_dict(block_to_torch("", block))
    return layer


def assert_close(got, want, rtol, what):
    scale = np.max(np.abs(want))
    assert np.max(np.abs(got - want)) <= rtol * scale, f"{what}: {np.max(np.abs(got - want))}"


def compare(torch, layer, ours, args, torch_args, weight, block, rtol):
    """Values, input gradients and the gradient of every parameter (state_dict names)."""
    from models.torch_bridge import block_to_torch
    floats = [a for a in args if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    out = ours(block, *floats)
    grads = ag.gradient(lambda b, *xs: ag.sum(ours(b, *xs) * weight), block, *floats)
    tensors = [torch.from_numpy(a).requires_grad_(True) for a in floats]
    want = layer(*tensors, **torch_args)
    (want * torch.from_numpy(weight)).sum().backward()
    assert out.dtype == floats[0].dtype
    assert_close(out, want.detach().numpy(), rtol, "value")
    for g, t in zip(grads[1:], tensors):
        assert_close(g, t.grad.numpy(), rtol, "input gradient")
    got = block_to_torch("", grads[0])
    for name, param in layer.named_parameters():
        assert_close(got[name].numpy(), param.grad.numpy(), rtol, name)
    assert set(got) == {name for name, _ in layer.named_parameters()}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_block_matches_torch(torch, rng, norm, dtype):
    block = perturbed(rng, blocks.encoder_block_init(rng, D, H, D_FF, dtype), dtype)
    x = rng.standard_normal((3, 5, D)).astype(dtype)
    ids = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    mask = padding_mask(ids, 0)  # (B, 1, 1, T)
    weight = rng.standard_normal((3, 5, D)).astype(dtype)
    layer = torch_layer(torch, "encoder", block, norm, dtype)
    compare(torch, layer, lambda b, x: blocks.encoder_block(b, x, mask, norm), [x],
            dict(src_key_padding_mask=torch.from_numpy(ids == 0)), weight, block, RTOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_block_matches_torch(torch, rng, norm, dtype):
    block = perturbed(rng, blocks.decoder_block_init(rng, D, H, D_FF, dtype), dtype)
    x = rng.standard_normal((2, 4, D)).astype(dtype)
    memory = rng.standard_normal((2, 6, D)).astype(dtype)
    src = np.array([[3, 4, 5, 0, 0, 0], [3, 3, 3, 3, 3, 2]])
    weight = rng.standard_normal((2, 4, D)).astype(dtype)
    layer = torch_layer(torch, "decoder", block, norm, dtype)
    compare(torch, layer,
            lambda b, x, m: blocks.decoder_block(b, x, m, causal_mask(4), padding_mask(src, 0),
                                                 norm),
            [x, memory],
            dict(tgt_mask=torch.triu(torch.ones(4, 4, dtype=torch.bool), 1),
                 memory_key_padding_mask=torch.from_numpy(src == 0)),
            weight, block, RTOL[dtype])


def numpy_layer_norm(x, p, eps=1e-5):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * p.scale + p.bias


def test_residual_is_the_post_ln_and_pre_ln_wiring(rng):
    """LayerNorm(x + Sublayer(x)) and x + Sublayer(LayerNorm(x)), with the layer norm written
    out in numpy; dropout acts on the sublayer's output only (a zero sublayer leaves the
    residual path as it is, whatever is dropped)."""
    norm = perturbed(rng, layer_norm_init(D, np.float64), np.float64)
    x = rng.standard_normal((2, 3, D))
    w = rng.standard_normal((D, D))
    sublayer = lambda h: np.tanh(h @ w)  # noqa: E731
    np.testing.assert_allclose(blocks.residual(norm, x, sublayer, "post"),
                               numpy_layer_norm(x + sublayer(x), norm), rtol=1e-12)
    np.testing.assert_allclose(blocks.residual(norm, x, sublayer, "pre"),
                               x + sublayer(numpy_layer_norm(x, norm)), rtol=1e-12)
    zero = np.zeros_like
    np.testing.assert_allclose(
        blocks.residual(norm, x, zero, "post", 0.5, np.random.default_rng(1)),
        numpy_layer_norm(x, norm), rtol=1e-12)
    np.testing.assert_array_equal(
        blocks.residual(norm, x, zero, "pre", 0.5, np.random.default_rng(1)), x)
    dropped = blocks.residual(norm, x, lambda h: np.ones_like(h), "pre", 0.5,
                              np.random.default_rng(1)) - x  # 0 where dropped, 1/(1 - 0.5) else
    kept = np.isclose(dropped, 2.0, rtol=0, atol=1e-12)
    assert (kept | (dropped == 0)).all() and 0 < kept.mean() < 1
    with pytest.raises(ValueError, match=r"norm must be one of \('post', 'pre'\), got 'Pre'"):
        blocks.residual(norm, x, sublayer, "Pre")


def test_dropout_in_a_block_is_seeded(rng):
    block = blocks.encoder_block_init(rng, D, H, D_FF, np.float64)
    x = rng.standard_normal((2, 3, D))
    runs = [blocks.encoder_block(block, x, rate=0.5, rng=np.random.default_rng(s))
            for s in (4, 4, 5)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert np.abs(runs[0] - runs[2]).max() > 1e-3
    np.testing.assert_array_equal(blocks.encoder_block(block, x, rate=0.5, rng=None),
                                  blocks.encoder_block(block, x))


def test_an_unknown_norm_order_is_named():
    with pytest.raises(ValueError, match=r"norm must be one of \('post', 'pre'\), got 'mid'"):
        blocks.check_norm_order("mid")


def test_blocks_reject_an_unknown_norm_order(rng):
    """"Post" is not "post": before the check, any other string ran silently as pre-LN."""
    x = rng.standard_normal((1, 3, D))
    encoder = blocks.encoder_block_init(rng, D, H, D_FF, np.float64)
    decoder = blocks.decoder_block_init(rng, D, H, D_FF, np.float64)
    with pytest.raises(ValueError, match=r"norm must be one of \('post', 'pre'\), got 'Post'"):
        blocks.encoder_block(encoder, x, norm="Post")
    with pytest.raises(ValueError, match=r"norm must be one of \('post', 'pre'\), got 'Post'"):
        blocks.decoder_block(decoder, x, x, norm="Post")
