"""models.attention: scaled dot-product attention by hand and against torch, multi-head attention
against nn.MultiheadAttention (values and every gradient), heads as slices, masks."""
import math

import numpy as np
import pytest

import autograd_lite as ag
from models import attention
from models.attention import (MultiHeadAttention, causal_mask, multihead_attention, padding_mask,
                              scaled_dot_product_attention)
from models.layers import Dense
from helpers.references import DTYPES, assert_close, compare_with_torch
from helpers.torch_models import assert_gradients_match, torch_attention


def test_scaled_dot_product_attention_by_hand():
    q = np.array([[[[1.0, 0.0], [0.0, 2.0]]]])  # (1, 1, 2, 2)
    k = np.array([[[[1.0, 1.0], [2.0, -1.0]]]])
    v = np.array([[[[1.0, 10.0], [3.0, -2.0]]]])
    out, weights = scaled_dot_product_attention(q, k, v)
    want_w = []
    for row in q[0, 0]:
        scores = [float(row @ key) / math.sqrt(2) for key in k[0, 0]]
        e = [math.exp(s) for s in scores]
        want_w.append([x / sum(e) for x in e])
    want_out = [[w[0] * v[0, 0, 0, j] + w[1] * v[0, 0, 1, j] for j in range(2)] for w in want_w]
    np.testing.assert_allclose(weights[0, 0], want_w, rtol=1e-15)
    np.testing.assert_allclose(out[0, 0], want_out, rtol=1e-14)
    keep = np.array([[True, False], [True, True]])  # query 0 may not see key 1
    masked, w = scaled_dot_product_attention(q, k, v, mask=keep)
    np.testing.assert_allclose(masked[0, 0, 0], v[0, 0, 0], rtol=1e-15)  # only key 0 left
    np.testing.assert_array_equal(w[0, 0, 0], [1.0, 0.0])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scaled_dot_product_attention_matches_torch(torch, rng, dtype):
    q, k, v = (rng.standard_normal((2, 3, n, 4)).astype(dtype) for n in (5, 6, 6))
    mask = rng.random((2, 1, 5, 6)) > 0.3
    mask[..., 0] = True  # every query keeps a key: torch gives NaN for an empty row
    compare_with_torch(
        torch, lambda q, k, v, m: scaled_dot_product_attention(q, k, v, m)[0],
        lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m),
        q, k, v, mask, rtol=1e-12 if dtype == np.float64 else 1e-5)


def random_attention(rng, d_model=8, n_heads=2, dtype=np.float64):
    def dense():
        return Dense(rng.standard_normal((d_model, d_model)).astype(dtype) / 3,
                     rng.standard_normal(d_model).astype(dtype))
    return MultiHeadAttention(dense(), dense(), dense(), dense(), n_heads)


# Relative tolerances: float32 to 1e-4, float64 to 1e-12.
MHA_RTOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-4}


@pytest.mark.parametrize("dtype", DTYPES)
def test_multihead_attention_matches_torch_with_both_masks(torch, rng, dtype):
    p = random_attention(rng, dtype=dtype)
    x_q, x_kv = (rng.standard_normal(shape).astype(dtype) for shape in ((3, 4, 8), (3, 5, 8)))
    keep_keys = np.ones((3, 5), dtype=bool)
    keep_keys[0, 3:] = keep_keys[2, 1:] = False
    attn_keep = rng.random((4, 5)) > 0.4
    attn_keep[:, 0] = True
    mask = padding_mask(np.where(keep_keys, 1, 0), 0) & attn_keep  # (B, 1, T_q, T_k)
    weight = rng.standard_normal((3, 4, 8)).astype(dtype)
    out = multihead_attention(p, x_q, x_kv, mask)  # (B, T_q, D)
    grads = ag.gradient(lambda p, a, b: ag.sum(multihead_attention(p, a, b, mask) * weight),
                        p, x_q, x_kv)
    dp, dq, dkv = grads
    assert all(g.dtype == dtype for g in (out, dq, dkv, *ag.tree_leaves(dp)) if g is not None)

    m = torch_attention(torch, p)
    tq, tkv = (torch.from_numpy(a).requires_grad_(True) for a in (x_q, x_kv))
    want, _ = m(tq, tkv, tkv, key_padding_mask=torch.from_numpy(~keep_keys),
                attn_mask=torch.from_numpy(~attn_keep))  # torch: True = masked out
    (want * torch.from_numpy(weight)).sum().backward()
    rtol = MHA_RTOL[np.dtype(dtype)]
    assert_close(out, want.detach().numpy(), rtol, "output")
    assert_close(dq, tq.grad.numpy(), rtol, "d x_q")
    assert_close(dkv, tkv.grad.numpy(), rtol, "d x_kv")
    from models.torch_bridge import attention_to_torch  # dp in torch's layout
    assert_gradients_match({name: t.numpy() for name, t in attention_to_torch("", dp).items()},
                           {name: t.grad.numpy() for name, t in m.named_parameters()}, rtol)


def test_each_head_is_single_head_attention_on_its_slice(rng):
    p = random_attention(rng, d_model=12, n_heads=3)
    x = rng.standard_normal((2, 5, 12))
    heads = []
    for h in range(3):
        cols = slice(4 * h, 4 * h + 4)
        q, k, v = ((x @ d.w[:, cols] + d.b[cols])[:, None] for d in (p.wq, p.wk, p.wv))
        heads.append(scaled_dot_product_attention(q, k, v, causal_mask(5))[0][:, 0])  # (B, T, 4)
    want = np.concatenate(heads, axis=-1) @ p.wo.w + p.wo.b  # (B, T, D)
    np.testing.assert_allclose(multihead_attention(p, x, x, causal_mask(5)), want, rtol=1e-13,
                               atol=1e-13)


def test_a_fully_padded_row_gives_no_nan(rng):
    p = random_attention(rng)
    x = rng.standard_normal((2, 3, 8))
    mask = padding_mask(np.array([[0, 0, 0], [1, 2, 0]]), 0)  # row 0: every key is padding
    out = multihead_attention(p, x, x, mask)
    np.testing.assert_allclose(out[0], np.broadcast_to(p.wo.b, (3, 8)), rtol=1e-15)  # no heads
    grads = ag.gradient(lambda p, x: ag.sum(multihead_attention(p, x, x, mask) ** 2), p, x)
    assert all(np.isfinite(g).all() for g in ag.tree_leaves(grads) if g is not None)
    np.testing.assert_array_equal(grads[1][0], 0.0)  # nothing flows to an ignored row


def test_masks():
    np.testing.assert_array_equal(causal_mask(3)[0, 0], [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    np.testing.assert_array_equal(padding_mask(np.array([[5, 0, 2]]), 0),
                                  [[[[True, False, True]]]])
    assert padding_mask(np.array([[5, 0]]), None) is None


def test_activations_of_the_wrong_shape_are_named(rng):
    p = attention.multihead_attention_init(rng, 8, 2)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    for x_q, x_kv, message in ((x[0], x, r"x_q \(5, 8\) must be \(B, T, 8\)"),
                               (x, x[..., :6], r"x_kv \(2, 5, 6\) must be \(B, T, 8\)"),
                               (x, x[:1], r"x_q \(2, 5, 8\) and x_kv \(1, 5, 8\) have "
                                          r"different batch sizes")):
        with pytest.raises(ValueError, match="multihead_attention: " + message):
            multihead_attention(p, x_q, x_kv)


def test_heads_must_divide_d_model(rng):
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by n_heads=4"):
        attention.multihead_attention_init(rng, 10, 4)


def test_cached_self_attention_equals_causal_attention_over_the_whole_sequence(rng):
    """Rows fed in chunks of 3, 1 and 2 after a cache: each chunk's output is that of
    multihead_attention over all rows so far under the causal mask (checked against torch
    above), and the cache grows to every row's keys and values."""
    p = random_attention(rng, d_model=8, n_heads=2)
    x = rng.standard_normal((2, 6, 8))
    want = multihead_attention(p, x, x, causal_mask(6))  # (B, T, D)
    cache = (np.zeros((2, 2, 0, 4)), np.zeros((2, 2, 0, 4)))
    for lo, hi in ((0, 3), (3, 4), (4, 6)):
        out, cache = attention.cached_self_attention(p, x[:, lo:hi], cache)
        np.testing.assert_allclose(out, want[:, lo:hi], rtol=0, atol=1e-13)
    keys = (x @ p.wk.w + p.wk.b).reshape(2, 6, 2, 4).transpose(0, 2, 1, 3)  # (B, H, T, d_head)
    np.testing.assert_allclose(cache[0], keys, rtol=0, atol=1e-13)
    assert cache[1].shape == (2, 2, 6, 4)


def test_an_offset_causal_mask_lets_new_rows_see_every_cached_row():
    np.testing.assert_array_equal(causal_mask(2, offset=3)[0, 0],
                                  [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
