"""models.blocks: the residual wiring against its two formulas; encoder and decoder blocks
against nn.TransformerEncoderLayer and nn.TransformerDecoderLayer (dropout 0), both
norm orders, values and every gradient; the cached steps against the whole blocks, with the
cache they return. (The decoder-only block is tested with the language model against torch,
and the cached steps also through the models' decoding.)"""
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


def test_residual_hands_back_what_the_sublayer_returns_beside_its_output(rng):
    """The sublayer returns (its output, its input): residual returns its wiring's output
    and the input that norm order gives the sublayer, handed back unchanged."""
    norm = perturbed(layer_norm_init(D, np.float64), rng, 0.2)
    x = rng.standard_normal((2, 3, D))
    w = rng.standard_normal((D, D))
    sublayer = lambda h: (np.tanh(h @ w), h)  # noqa: E731
    for order, given in (("post", x), ("pre", numpy_layer_norm(x, norm))):
        out, aux = blocks.residual(norm, x, sublayer, order)
        np.testing.assert_allclose(out, blocks.residual(norm, x, lambda h: sublayer(h)[0], order),
                                   rtol=1e-15)
        np.testing.assert_allclose(aux, given, rtol=1e-12)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_cached_steps_return_the_blocks_rows_and_the_grown_keys_and_values(rng, norm):
    """Rows 0..2, then 3..4, through the cached steps: the same rows as the whole block, and
    each step returns as a value the cache it grew, the self-attention's keys and values of
    every row fed so far (its input: x post-LN, LayerNorm(x) pre-LN)."""
    from models.attention import keys_and_values
    decoder = perturbed(blocks.decoder_block_init(rng, D, H, D_FF, np.float64), rng, 0.1)
    only = perturbed(blocks.decoder_only_block_init(rng, D, H, D_FF, np.float64), rng, 0.1)
    x, memory = rng.standard_normal((2, 5, D)), rng.standard_normal((2, 4, D))
    memory_mask = padding_mask(np.array([[1, 1, 1, 1], [1, 1, 0, 0]]), 0)
    memory_kv = keys_and_values(decoder.cross_attn, memory)
    whole = {"decoder": blocks.decoder_block(decoder, x, memory, causal_mask(5), memory_mask,
                                             norm),
             "decoder_only": blocks.decoder_only_block(only, x, causal_mask(5))}
    steps = {"decoder": lambda x, kv: blocks.decoder_block_step(decoder, x, kv, memory_kv,
                                                                memory_mask, norm),
             "decoder_only": lambda x, kv: blocks.decoder_only_block_step(only, x, kv)}
    for name, block in (("decoder", decoder), ("decoder_only", only)):
        order = norm if name == "decoder" else "pre"
        attention_input = x if order == "post" else numpy_layer_norm(x, block.norm1)
        want_kv = keys_and_values(block.self_attn, attention_input)  # (2, H, 5, d_head) each
        kv = tuple(a[:, :, :0] for a in want_kv)
        for lo, hi in ((0, 3), (3, 5)):
            out, kv = steps[name](x[:, lo:hi], kv)
            np.testing.assert_allclose(out, whole[name][:, lo:hi], rtol=1e-10, atol=1e-12)
            for got, want in zip(kv, want_kv):
                np.testing.assert_allclose(got, want[:, :, :hi], rtol=1e-12, atol=1e-14)


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
