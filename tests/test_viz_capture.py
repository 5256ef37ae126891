"""ag.viz.capture: the outputs of the ops matching a name and a function scope, in call order,
checked against attention weights computed here in plain numpy from the weights (softmax of
q kᵀ / √d_head), counted over a whole Transformer, inside ag.gradient, and its errors."""
import sys

import numpy as np
import pytest

import autograd_lite as ag
from models import blocks, transformer
from models.attention import causal_mask, multihead_attention, padding_mask
from helpers.tiny_models import tiny_transformer


# --- the reference: attention in plain numpy, from the weights ------------------------------

def np_dense(p, x):
    return x @ p.w + p.b


def np_heads(x, n_heads):
    """(B, T, D) -> (B, H, T, D / H)"""
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads).transpose(0, 2, 1, 3)


def np_attention_weights(p, x_q, x_kv, mask=None):
    """softmax(q kᵀ / √d_head) over the keys, 0 where the mask is False: (B, H, T_q, T_k)"""
    q, k = np_heads(np_dense(p.wq, x_q), p.n_heads), np_heads(np_dense(p.wk, x_kv), p.n_heads)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_attention(p, x_q, x_kv, mask=None):
    """Concat(heads) W_O: (B, T_q, D)"""
    v = np_heads(np_dense(p.wv, x_kv), p.n_heads)
    heads = np_attention_weights(p, x_q, x_kv, mask) @ v  # (B, H, T_q, d_head)
    b, h, t, d = heads.shape
    return np_dense(p.wo, heads.transpose(0, 2, 1, 3).reshape(b, t, h * d))


def np_layer_norm(p, x, eps=1e-5):
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * p.scale + p.bias


# --- values ----------------------------------------------------------------------------------

def test_capture_of_multihead_attention_is_softmax_of_q_kT_over_sqrt_d(rng):
    p = tiny_transformer().decoder[0].self_attn  # d_model 8, 2 heads, float64
    x_q, x_kv = rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 5, 8))
    mask = padding_mask(np.array([[1, 2, 3, 4, 5], [1, 2, 0, 0, 0]]), 0)  # (2, 1, 1, 5)
    (weights,) = ag.viz.capture(multihead_attention, p, x_q, x_kv, mask, op="softmax")
    assert type(weights) is np.ndarray and weights.shape == (2, 2, 4, 5)
    np.testing.assert_allclose(weights, np_attention_weights(p, x_q, x_kv, mask), rtol=1e-12)
    np.testing.assert_array_equal(weights[1, :, :, 2:], 0.0)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_capture_in_a_decoder_block_tells_cross_attention_from_self_attention(rng, norm):
    """The cross-attention's queries are what the block's first residual sublayer gives:
    LayerNorm(x + SelfAttention(x)) post-LN; x + SelfAttention(LN(x)), normalized, pre-LN."""
    p = tiny_transformer().decoder[1]
    x, memory = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 5, 8))
    self_mask = causal_mask(3)
    memory_mask = padding_mask(np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]), 0)
    args = (blocks.decoder_block, p, x, memory, self_mask, memory_mask, norm)
    if norm == "post":
        self_queries = x
        h = np_layer_norm(p.norm1, x + np_attention(p.self_attn, x, x, self_mask))
        cross_queries = h
    else:
        self_queries = np_layer_norm(p.norm1, x)
        h = x + np_attention(p.self_attn, self_queries, self_queries, self_mask)
        cross_queries = np_layer_norm(p.norm2, h)
    self_keys = x if norm == "post" else self_queries
    want_self = np_attention_weights(p.self_attn, self_queries, self_keys, self_mask)
    want_cross = np_attention_weights(p.cross_attn, cross_queries, memory, memory_mask)

    (cross,) = ag.viz.capture(*args, op="softmax", scope="cross_attention")
    assert cross.shape == (2, 2, 3, 5)
    np.testing.assert_allclose(cross, want_cross, rtol=1e-12)
    (alone,) = ag.viz.capture(*args, op="softmax", scope="multihead_attention")
    np.testing.assert_allclose(alone, want_self, rtol=1e-12)
    both = ag.viz.capture(*args, op="softmax")  # in call order: self, then cross
    np.testing.assert_array_equal(both[0], alone)
    np.testing.assert_array_equal(both[1], cross)


def test_capture_over_a_whole_transformer_counts_every_block_in_call_order():
    p = tiny_transformer()  # 2 encoder and 2 decoder blocks
    src, tgt = np.array([[3, 4, 5, 0]]), np.array([[1, 3, 4]])
    call = (transformer.apply, p, src, tgt, 0)
    everything = ag.viz.capture(*call, op="softmax")
    assert [w.shape for w in everything] == [(1, 2, 4, 4)] * 2 + [(1, 2, 3, 3), (1, 2, 3, 4)] * 2
    encoder = ag.viz.capture(*call, op="softmax", scope="encoder_block")
    decoder = ag.viz.capture(*call, op="softmax", scope="decoder_block")
    cross = ag.viz.capture(*call, op="softmax", scope="cross_attention")
    for got, want in zip(encoder + decoder + cross, everything + everything[3::2]):
        np.testing.assert_array_equal(got, want)
    # the first encoder block's attention, from the source embedding the model computes
    memory_input = np.sqrt(8) * p.src_embed.table[src] + tiny_position_rows(4)
    np.testing.assert_allclose(encoder[0], np_attention_weights(
        p.encoder[0].self_attn, memory_input, memory_input, padding_mask(src, 0)), rtol=1e-12)
    assert len(ag.viz.capture(*call, op="layer_norm", scope="decode")) == 2 * 3 + 1


def tiny_position_rows(length, d_model=8):
    """PE[:length] of §3.5, written out: sin at even dimensions, cos at odd ones."""
    pos, i = np.arange(length)[:, None], np.arange(d_model)[None, :]
    angle = pos / 10000 ** ((i - i % 2) / d_model)
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle))


def test_capture_changes_no_argument_and_restores_the_profiler():
    p = tiny_transformer()
    src, tgt = np.array([[3, 4, 5]]), np.array([[1, 3]])
    before = ag.tree_map(lambda a: a.copy() if isinstance(a, np.ndarray) else a, p)
    ag.viz.capture(transformer.apply, p, src, tgt, op="softmax")
    assert sys.getprofile() is None
    for got, want in zip(ag.tree_leaves(p), ag.tree_leaves(before)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="transformer.apply: src must be"):
        ag.viz.capture(transformer.apply, p, src.astype(float), tgt, op="softmax")
    assert sys.getprofile() is None


def test_capture_inside_gradient_passes_the_derivative_through():
    """d/dx Σ exp(x), read as the captured exp of f: exp(x)."""
    x = np.array([0.5, -1.0, 2.0])

    def f(x):
        return ag.sum(ag.exp(x) * 3.0)
    (g,) = ag.gradient(lambda x: ag.sum(ag.viz.capture(f, x, op="exp")[0]), x)
    np.testing.assert_allclose(g, np.exp(x), rtol=1e-15)


# --- errors ----------------------------------------------------------------------------------

def test_errors_name_the_op_the_scope_and_what_ran():
    p = tiny_transformer()
    src, tgt = np.array([[3, 4]]), np.array([[1, 3]])
    with pytest.raises(ValueError, match=r"ag.viz.capture: no 'softmaxx' op ran during apply "
                                         r"\(ops seen: .*layer_norm.*softmax"):
        ag.viz.capture(transformer.apply, p, src, tgt, op="softmaxx")
    with pytest.raises(ValueError, match=r"no 'softmax' op ran in a function named 'cross_attn' "
                                         r"during apply \(.*scopes seen: .*cross_attention"):
        ag.viz.capture(transformer.apply, p, src, tgt, op="softmax", scope="cross_attn")
    with pytest.raises(ValueError, match=r"no op was recorded: pass the parameters as an "
                                         r"argument"):
        ag.viz.capture(lambda s, t: transformer.apply(p, s, t), src, tgt, op="softmax")
    with pytest.raises(TypeError, match=r"ag.viz.capture: op must be an op's name"):
        ag.viz.capture(transformer.apply, p, src, tgt, op=None)
    with pytest.raises(TypeError, match=r"ag.viz.capture: scope must be None or a function's"):
        ag.viz.capture(transformer.apply, p, src, tgt, scope=3)
