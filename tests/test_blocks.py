"""models.blocks: the residual wiring against its two formulas; encoder and decoder blocks
against nn.TransformerEncoderLayer and nn.TransformerDecoderLayer (dropout 0), both
norm orders, values and every gradient. (The decoder-only block is tested with the language
model against torch, and the cached steps against the models' full forward passes.)"""
import numpy as np
import pytest

import autograd_lite as ag
from models import blocks
from models.attention import causal_mask, padding_mask
from models.layers import layer_norm_init
from helpers.references import relative_error
from helpers.tiny_models import assert_dropout_in_training_only_and_seeded, perturbed
from helpers.torch_models import (assert_gradients_match, our_gradients, torch_block,
                                  torch_gradients)

D, H, D_FF = 8, 2, 12
RTOL = {np.float64: 1e-11, np.float32: 1e-4}


def compare(torch, block, norm, ours, inputs, torch_kwargs, weight, rtol):
    """Values, input gradients and the gradient of every parameter (by torch's names)."""
    layer = torch_block(torch, block, norm)
    out = ours(block, *inputs)
    grads = ag.gradient(lambda b, *xs: ag.sum(ours(b, *xs) * weight), block, *inputs)
    tensors = [torch.from_numpy(a).requires_grad_(True) for a in inputs]
    want = layer(*tensors, **torch_kwargs)
    (want * torch.from_numpy(weight)).sum().backward()
    assert out.dtype == inputs[0].dtype
    assert relative_error(out, want.detach().numpy()) < rtol
    for g, t in zip(grads[1:], tensors):
        assert relative_error(g, t.grad.numpy()) < rtol
    assert_gradients_match(our_gradients([grads[0]], "block"), torch_gradients([layer], "block"),
                           rtol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_block_matches_torch(torch, rng, norm, dtype):
    block = perturbed(blocks.encoder_block_init(rng, D, H, D_FF, dtype), rng, 0.2)
    x = rng.standard_normal((3, 5, D)).astype(dtype)
    ids = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    mask = padding_mask(ids, 0)  # (B, 1, 1, T)
    weight = rng.standard_normal((3, 5, D)).astype(dtype)
    compare(torch, block, norm, lambda b, x: blocks.encoder_block(b, x, mask, norm), [x],
            dict(src_key_padding_mask=torch.from_numpy(ids == 0)), weight, RTOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_block_matches_torch(torch, rng, norm, dtype):
    block = perturbed(blocks.decoder_block_init(rng, D, H, D_FF, dtype), rng, 0.2)
    x = rng.standard_normal((2, 4, D)).astype(dtype)
    memory = rng.standard_normal((2, 6, D)).astype(dtype)
    src = np.array([[3, 4, 5, 0, 0, 0], [3, 3, 3, 3, 3, 2]])
    weight = rng.standard_normal((2, 4, D)).astype(dtype)
    compare(torch, block, norm,
            lambda b, x, m: blocks.decoder_block(b, x, m, causal_mask(4), padding_mask(src, 0),
                                                 norm),
            [x, memory],
            dict(tgt_mask=torch.triu(torch.ones(4, 4, dtype=torch.bool), 1),
                 memory_key_padding_mask=torch.from_numpy(src == 0)),
            weight, RTOL[dtype])


def numpy_layer_norm(x, p, eps=1e-5):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * p.scale + p.bias


def test_residual_is_the_post_ln_and_pre_ln_wiring(rng):
    """LayerNorm(x + Sublayer(x)) and x + Sublayer(LayerNorm(x)), with the layer norm written
    out in numpy; dropout acts on the sublayer's output only (a zero sublayer leaves the
    residual path as it is, whatever is dropped)."""
    norm = perturbed(layer_norm_init(D, np.float64), rng, 0.2)
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


def test_dropout_in_a_block_is_seeded(rng):
    block = blocks.encoder_block_init(rng, D, H, D_FF, np.float64)
    x = rng.standard_normal((2, 3, D))
    def run(training, rng):  # a block's inference is rng=None
        return blocks.encoder_block(block, x, rate=0.5, rng=rng if training else None)
    inference = assert_dropout_in_training_only_and_seeded(run)
    np.testing.assert_array_equal(inference, blocks.encoder_block(block, x))


def test_blocks_reject_an_unknown_norm_order(rng):
    """"Post" is not "post": before the check (in residual, which every block calls), any
    other string ran silently as pre-LN."""
    x = rng.standard_normal((1, 3, D))
    encoder = blocks.encoder_block_init(rng, D, H, D_FF, np.float64)
    decoder = blocks.decoder_block_init(rng, D, H, D_FF, np.float64)
    with pytest.raises(ValueError, match=r"norm must be one of \('post', 'pre'\), got 'Post'"):
        blocks.encoder_block(encoder, x, norm="Post")
    with pytest.raises(ValueError, match=r"norm must be one of \('post', 'pre'\), got 'Post'"):
        blocks.decoder_block(decoder, x, x, norm="Post")
