"""The models' fast rules (models/fast), which the blocks run with or without dropout: for
multihead_attention (and so cross_attention), decoding's projected_heads (keys_and_values)
and attention_over, feed_forward with relu, and the post-LN blocks' add_and_norm (with or
without dropout). Values and every gradient against torch (nn.MultiheadAttention for self-
and cross-attention with each mask kind; F.linear and relu; F.layer_norm of the sum); second
order and jvp (the plain functions under enclosing traces, the rules' pullbacks given a
traced cotangent) against finite differences; each rule against its function with the rules
off; the three models whole, rules on against off in float64 to 1e-10; which calls take
them; and that pictures and captures still show the composition."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import autograd_lite as ag
from helpers.fused import assert_fused_matches_composed, fused_calls, rules_off
from helpers.references import DTYPES, assert_close, random_weight
from helpers.threads import THREAD_COUNTS, pool_runs, split_at
from helpers.torch_models import assert_gradients_match, torch_attention
from models import attention, layers
from models.attention import MultiHeadAttention, causal_mask, multihead_attention, padding_mask
from models.layers import Dense, FeedForward, feed_forward

pytestmark = pytest.mark.usefixtures("fast_rules_on")
RTOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-4}


def random_attention(rng, d_model=8, n_heads=2, dtype=np.float64):
    def dense():
        return Dense((rng.standard_normal((d_model, d_model)) / 3).astype(dtype),
                     rng.standard_normal(d_model).astype(dtype))
    return MultiHeadAttention(dense(), dense(), dense(), dense(), n_heads)


def masks(kind, batch, t_q, t_k):
    """(our mask: True = attend, torch's key_padding_mask, torch's attn_mask: True = masked)."""
    if kind == "none":
        return None, None, None
    if kind == "causal":
        keep = causal_mask(t_q)[0, 0]  # (T, T)
        return causal_mask(t_q), None, ~keep
    ids = np.ones((batch, t_k), dtype=int)
    ids[0, 3:] = ids[2, 2:] = 0  # padding at the end of two rows
    return padding_mask(ids, 0), ids == 0, None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
@pytest.mark.parametrize("kind", ["self", "cross"])
def test_fused_attention_matches_torch(kind, mask_kind, dtype, torch, rng):
    p = random_attention(rng, dtype=dtype)
    t_k = 5 if kind == "cross" and mask_kind != "causal" else 4
    x_q = rng.standard_normal((3, 4, 8)).astype(dtype)
    x_kv = x_q if kind == "self" else rng.standard_normal((3, t_k, 8)).astype(dtype)
    mask, key_padding, attn_mask = masks(mask_kind, 3, 4, x_kv.shape[1])
    weight = rng.standard_normal((3, 4, 8)).astype(dtype)
    assert "multihead_attention" in fused_calls(multihead_attention, p, x_q, x_kv, mask)

    if kind == "self":
        out = multihead_attention(p, x_q, x_q, mask)
        dp, dx = ag.gradient(lambda p, x: ag.sum(multihead_attention(p, x, x, mask) * weight),
                             p, x_q)
    else:
        out = multihead_attention(p, x_q, x_kv, mask)
        dp, dx, dkv = ag.gradient(
            lambda p, a, b: ag.sum(multihead_attention(p, a, b, mask) * weight), p, x_q, x_kv)
    assert all(g.dtype == dtype for g in (out, dx, *ag.tree_leaves(dp)) if g is not None)

    m = torch_attention(torch, p)
    tq = torch.from_numpy(x_q).requires_grad_(True)
    tkv = tq if kind == "self" else torch.from_numpy(x_kv).requires_grad_(True)
    want, _ = m(tq, tkv, tkv,
                key_padding_mask=None if key_padding is None else torch.from_numpy(key_padding),
                attn_mask=None if attn_mask is None else torch.from_numpy(attn_mask))
    (want * torch.from_numpy(weight)).sum().backward()
    rtol = RTOL[np.dtype(dtype)]
    assert_close(out, want.detach().numpy(), rtol, "output")
    assert_close(dx, tq.grad.numpy(), rtol, "d x_q")
    if kind == "cross":
        assert_close(dkv, tkv.grad.numpy(), rtol, "d x_kv")
    from models.torch_bridge import attention_to_torch  # dp in torch's layout
    assert_gradients_match({name: t.numpy() for name, t in attention_to_torch("", dp).items()},
                           {name: t.grad.numpy() for name, t in m.named_parameters()}, rtol)


def self_attention_loss(rng):
    """(loss(x), x, v): a float64 causal self-attention with a non-linear readout."""
    p = random_attention(rng)
    x, v = rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 4, 8))

    def loss(x):
        return ag.sum(ag.tanh(multihead_attention(p, x, x, causal_mask(4))))
    return loss, x, v


def test_second_order_runs_the_plain_function_and_matches_finite_differences(rng):
    loss, x, v = self_attention_loss(rng)
    gradient_of = ag.grad(loss)
    hvp = ag.gradient(lambda x: ag.sum(gradient_of(x) * v), x)[0]  # H v
    h = 1e-5
    central = (gradient_of(x + h * v) - gradient_of(x - h * v)) / (2 * h)
    np.testing.assert_allclose(hvp, central, rtol=1e-6, atol=1e-8)


def test_jvp_through_the_fast_rule_matches_finite_differences(rng):
    loss, x, v = self_attention_loss(rng)
    value, tangent = ag.jvp(loss, (x,), (v,))
    h = 1e-6
    np.testing.assert_allclose(value, loss(x), rtol=1e-15)
    np.testing.assert_allclose(tangent, (loss(x + h * v) - loss(x - h * v)) / (2 * h), rtol=1e-7)


def test_dropout_on_the_weights_runs_in_the_rule_with_the_functions_draws(rng):
    """With dropout the rule still applies: it draws the mask the function's ag.dropout
    draws, from the same generator, which it leaves where the function leaves it."""
    p = random_attention(rng, dtype=np.float32)
    x = rng.standard_normal((2, 4, 8)).astype(np.float32)
    names = fused_calls(lambda p, x: multihead_attention(p, x, x, None, 0.5,
                                                         np.random.default_rng(3)), p, x)
    assert "multihead_attention" in names and "softmax" not in names
    generators = np.random.default_rng(3), np.random.default_rng(3)
    got = multihead_attention(p, x, x, None, 0.5, generators[0])
    want = rules_off(multihead_attention)(p, x, x, None, 0.5, generators[1])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # float32
    assert generators[0].random() == generators[1].random()
    with pytest.raises(ValueError, match=r"dropout: rate must lie in \[0, 1\), got 1.5"):
        multihead_attention(p, x, x, None, 1.5, np.random.default_rng(3))


def test_float16_and_unusual_masks_take_the_composed_path(rng):
    p16 = random_attention(rng, dtype=np.float16)
    x16 = rng.standard_normal((2, 4, 8)).astype(np.float16)
    assert "multihead_attention" not in fused_calls(multihead_attention, p16, x16, x16)
    p = random_attention(rng, dtype=np.float32)
    x = rng.standard_normal((2, 4, 8)).astype(np.float32)
    two_d_mask = np.tril(np.ones((4, 4), bool))  # broadcasts, but not of the scores' rank
    assert "multihead_attention" not in fused_calls(multihead_attention, p, x, x, two_d_mask)
    np.testing.assert_allclose(multihead_attention(p, x, x, two_d_mask),
                               multihead_attention(p, x, x, causal_mask(4)), rtol=1e-6)
    with pytest.raises(TypeError, match="softmax: mask must be a bool array"):
        multihead_attention(p, x, x, np.ones((1, 1, 4, 4)))


def test_a_sequence_of_length_0_is_declined_and_runs_as_the_plain_function(rng):
    """The kernels take rows of one number or more: for a sequence of length 0 (or no
    sequence) the rules' `applies` say no, and the plain functions, which take it, run."""
    from models.fast import attention as fast_attention
    from models import lm, transformer
    p = random_attention(rng)
    empty, x = np.zeros((2, 0, 8)), rng.standard_normal((2, 3, 8))
    for x_q, x_kv in ((empty, empty), (x, empty), (empty, x), (np.zeros((0, 3, 8)),) * 2):
        assert not fast_attention.multihead_attention_applies(p, x_q, x_kv, None, 0.0, None)
        assert "multihead_attention" not in fused_calls(multihead_attention, p, x_q, x_kv)
        np.testing.assert_array_equal(multihead_attention(p, x_q, x_kv),
                                      rules_off(multihead_attention)(p, x_q, x_kv))
    assert not fast_attention.projected_heads_applies(p.wk, empty, 2)
    keys = np.zeros((2, 2, 0, 4))
    assert not fast_attention.attention_over_applies(p, x, (keys, keys), None)
    model = lm.init(rng, 10, 16, 2, 32, 1, 8)
    ids = np.zeros((2, 0), np.int64)
    assert lm.apply(model, ids).shape == (2, 0, 10)
    grads = ag.gradient(lambda q: ag.sum(lm.apply(q, ids)), model)[0]
    with ag.fast_rules(False):
        plain = ag.gradient(lambda q: ag.sum(lm.apply(q, ids)), model)[0]
    for g, want in zip(ag.tree_leaves(grads), ag.tree_leaves(plain)):
        np.testing.assert_array_equal(g, want)
    tp = transformer.init(rng, 10, 10, 16, 2, 32, 1, 1, 8)
    for src, tgt in ((np.ones((2, 0), int), np.ones((2, 3), int)),
                     (np.ones((2, 3), int), np.ones((2, 0), int))):
        np.testing.assert_allclose(transformer.apply(tp, src, tgt),
                                   rules_off(transformer.apply)(tp, src, tgt), rtol=1e-5)


def test_pictures_and_captures_show_the_composition(rng):
    p = random_attention(rng, dtype=np.float32)
    x = rng.standard_normal((2, 4, 8)).astype(np.float32)
    graph = ag.viz.trace(lambda p, x: multihead_attention(p, x, x, causal_mask(4)), p, x)
    labels = sorted({op.label for op in graph.ops})
    assert labels == ["linear", "matmul", "mul", "reshape", "softmax", "swapaxes", "transpose"]
    def names(scope):
        return [] if scope is None else names(scope.parent) + [scope.name]
    assert {"/".join(names(op.scope)) for op in graph.ops if op.label == "softmax"} == {
        "lambda/multihead_attention/scaled_dot_product_attention"}
    (weights,) = ag.viz.capture(multihead_attention, p, x, x, causal_mask(4), op="softmax")
    q = (x @ p.wq.w + p.wq.b).reshape(2, 4, 2, 4).transpose(0, 2, 1, 3)
    k = (x @ p.wk.w + p.wk.b).reshape(2, 4, 2, 4).transpose(0, 2, 1, 3)
    scores = np.where(causal_mask(4), q @ k.transpose(0, 1, 3, 2) / 2.0, -np.inf)
    want = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(weights, want / want.sum(-1, keepdims=True), rtol=2e-5,
                               atol=1e-7)


def random_feed_forward(rng, d_model=6, d_ff=10, dtype=np.float64):
    return FeedForward(Dense((rng.standard_normal((d_model, d_ff)) / 2).astype(dtype),
                             rng.standard_normal(d_ff).astype(dtype)),
                       Dense((rng.standard_normal((d_ff, d_model)) / 2).astype(dtype),
                             rng.standard_normal(d_model).astype(dtype)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_feed_forward_matches_torch(dtype, torch, rng):
    p = random_feed_forward(rng, dtype=dtype)
    x = rng.standard_normal((3, 5, 6)).astype(dtype)
    weight = rng.standard_normal((3, 5, 6)).astype(dtype)
    assert "feed_forward" in fused_calls(feed_forward, p, x)
    out = feed_forward(p, x)
    dp, dx = ag.gradient(lambda p, x: ag.sum(feed_forward(p, x) * weight), p, x)

    F = torch.nn.functional
    tx = torch.from_numpy(x).requires_grad_(True)
    tw = [torch.from_numpy(a).requires_grad_(True) for a in (*p.linear1, *p.linear2)]
    want = F.linear(torch.relu(F.linear(tx, tw[0].T, tw[1])), tw[2].T, tw[3])
    (want * torch.from_numpy(weight)).sum().backward()
    rtol = RTOL[np.dtype(dtype)]
    assert out.dtype == dx.dtype == dtype
    assert_close(out, want.detach().numpy(), rtol, "output")
    assert_close(dx, tx.grad.numpy(), rtol, "d x")
    for got, t, name in zip(ag.tree_leaves(dp), tw, ("w1", "b1", "w2", "b2")):
        assert got.dtype == dtype
        assert_close(got, t.grad.numpy(), rtol, name)


def feed_forward_loss(rng):
    p = random_feed_forward(rng)
    x, v = rng.standard_normal((2, 3, 6)), rng.standard_normal((2, 3, 6))
    return (lambda x: ag.sum(ag.tanh(feed_forward(p, x)))), x, v


def assert_hvp_and_jvp_match_central_differences(loss, x, v):
    """H v (grad of grad: the plain function under the outer trace) against central
    differences of the gradient, and jvp (a traced cotangent) against those of the loss."""
    gradient_of = ag.grad(loss)
    hvp = ag.gradient(lambda x: ag.sum(gradient_of(x) * v), x)[0]
    h = 1e-5
    np.testing.assert_allclose(hvp, (gradient_of(x + h * v) - gradient_of(x - h * v)) / (2 * h),
                               rtol=1e-6, atol=1e-8)
    _, tangent = ag.jvp(loss, (x,), (v,))
    np.testing.assert_allclose(tangent, (loss(x + 1e-6 * v) - loss(x - 1e-6 * v)) / 2e-6,
                               rtol=1e-7)


def test_fused_feed_forward_second_order_and_jvp_match_finite_differences(rng):
    assert_hvp_and_jvp_match_central_differences(*feed_forward_loss(rng))


def test_gelu_and_dropout_take_the_rule_and_float16_and_tanh_go_op_by_op(rng):
    p = random_feed_forward(rng, dtype=np.float32)
    x = rng.standard_normal((2, 3, 6)).astype(np.float32)
    assert "feed_forward" in fused_calls(lambda p, x: feed_forward(p, x, activation=ag.gelu),
                                         p, x)
    assert "feed_forward" not in fused_calls(lambda p, x: feed_forward(p, x, activation=ag.tanh),
                                             p, x)
    assert "feed_forward" in fused_calls(
        lambda p, x: feed_forward(p, x, 0.5, np.random.default_rng(1)), p, x)
    np.testing.assert_allclose(  # the mask the composition draws, from the same generator
        feed_forward(p, x, 0.5, np.random.default_rng(1)),
        ag.linear(ag.dropout(ag.relu(ag.linear(x, *p.linear1)), 0.5, np.random.default_rng(1)),
                  *p.linear2), rtol=1e-6, atol=1e-6)
    p16 = random_feed_forward(rng, dtype=np.float16)
    assert "feed_forward" not in fused_calls(feed_forward, p16, x.astype(np.float16))


def test_feed_forward_pictures_show_the_composition(rng):
    p = random_feed_forward(rng, dtype=np.float32)
    x = rng.standard_normal((2, 3, 6)).astype(np.float32)
    graph = ag.viz.trace(lambda p, x: feed_forward(p, x), p, x)
    assert [op.label for op in graph.ops] == ["linear", "relu", "linear"]


def random_layer_norm(rng, d=8, dtype=np.float64):
    return layers.LayerNorm(rng.standard_normal(d).astype(dtype),
                            rng.standard_normal(d).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_add_and_norm_matches_torch(dtype, torch, rng):
    p = random_layer_norm(rng, dtype=dtype)
    x, y = (rng.standard_normal((3, 5, 8)).astype(dtype) for _ in range(2))
    weight = rng.standard_normal((3, 5, 8)).astype(dtype)
    assert "add_and_norm" in fused_calls(layers.add_and_norm, p, x, y)
    out = layers.add_and_norm(p, x, y)
    dp, dx, dy = ag.gradient(lambda p, x, y: ag.sum(layers.add_and_norm(p, x, y) * weight),
                             p, x, y)

    tx, ty, ts, tb = (torch.from_numpy(a).requires_grad_(True) for a in (x, y, *p))
    want = torch.nn.functional.layer_norm(tx + ty, (8,), ts, tb, eps=1e-5)
    (want * torch.from_numpy(weight)).sum().backward()
    rtol = RTOL[np.dtype(dtype)]
    assert out.dtype == dx.dtype == dy.dtype == dp.scale.dtype == dtype
    assert_close(out, want.detach().numpy(), rtol, "output")
    for got, t, name in ((dx, tx, "d x"), (dy, ty, "d y"), (dp.scale, ts, "d scale"),
                         (dp.bias, tb, "d bias")):
        assert_close(got, t.grad.numpy(), rtol, name)


def test_fast_add_and_norm_second_order_and_jvp_match_finite_differences(rng):
    p = random_layer_norm(rng)
    y, v = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 3, 8))
    loss = lambda x: ag.sum(ag.tanh(layers.add_and_norm(p, x, y)) * y)
    assert_hvp_and_jvp_match_central_differences(loss, rng.standard_normal((2, 3, 8)), v)


def test_the_fast_add_and_norm_differentiates_eps(rng):
    """eps traced by the gradient itself (the rule runs) and under jvp, against central
    differences of the function in eps."""
    p = random_layer_norm(rng)
    x, y, w = (rng.standard_normal((2, 3, 8)) for _ in range(3))
    loss = lambda eps: ag.sum(layers.add_and_norm(p, x, y, eps) * w)
    h, eps = 1e-7, 0.3
    central = (loss(eps + h) - loss(eps - h)) / (2 * h)
    assert "add_and_norm" in fused_calls(lambda p, x: layers.add_and_norm(p, x, y),
                                                p, x)
    np.testing.assert_allclose(ag.grad(loss)(eps), central, rtol=1e-6)
    np.testing.assert_allclose(ag.jvp(loss, (eps,), (1.0,))[1], central, rtol=1e-6)


def test_add_and_norm_goes_op_by_op_where_no_rule_applies(rng):
    """A y that broadcasts, or float16: the sum, then the norm (whose ops check the shapes)."""
    p = random_layer_norm(rng, dtype=np.float32)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    row = rng.standard_normal((1, 1, 8)).astype(np.float32)
    assert "add_and_norm" not in fused_calls(layers.add_and_norm, p, x, row)
    np.testing.assert_array_equal(layers.add_and_norm(p, x, row),
                                  ag.layer_norm(x + row, *p))
    p16 = random_layer_norm(rng, dtype=np.float16)
    names = fused_calls(layers.add_and_norm, p16, x.astype(np.float16),
                        x.astype(np.float16))
    assert "add_and_norm" not in names and "layer_norm" in names
    with pytest.raises(ValueError, match="layer_norm: scale"):
        layers.add_and_norm(random_layer_norm(rng, d=5, dtype=np.float32), x, x)
    x64 = x.astype(np.float64)  # float32 parameters: no rule, and the norm refuses the mix
    with pytest.raises(TypeError, match=r"layer_norm: operands float64 \(2, 3, 8\) and float32"):
        layers.add_and_norm(p, x64, x64)


def test_post_ln_blocks_run_the_add_and_norm_rule_and_pictures_show_the_sum(rng):
    from models import blocks
    p = blocks.encoder_block_init(rng, 8, 2, 12)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    names = fused_calls(lambda p, x: blocks.encoder_block(p, x, norm="post"), p, x)
    assert names.count("add_and_norm") == 2 and "layer_norm" not in names
    dropped = fused_calls(lambda p, x: blocks.encoder_block(
        p, x, norm="post", rate=0.1, rng=np.random.default_rng(0)), p, x)
    assert dropped.count("add_and_norm") == 2
    graph = ag.viz.trace(lambda p, x: blocks.encoder_block(p, x, norm="post"), p, x)
    labels = [op.label for op in graph.ops]
    assert labels.count("layer_norm") == 2 and "add_and_norm" not in labels
    assert {op.scope.parent.name for op in graph.ops if op.label == "layer_norm"} == {
        "add_and_norm"}
    assert labels[labels.index("layer_norm") - 1] == "add"


@pytest.mark.parametrize("sublayer", ["self-attention", "cross-attention", "feed-forward",
                                      "add and norm", "self-attention with dropout",
                                      "cross-attention with dropout", "feed-forward with dropout",
                                      "feed-forward with gelu and dropout"])
def test_each_rule_agrees_with_its_function(sublayer, rng):
    """The rule's value and pullback against the plain function's (what pictures and higher
    order run), in float64 at the same point, to first and second order; float32 stays
    float32. With dropout, each call draws its masks from a generator seeded alike."""
    x = rng.standard_normal((2, 4, 8))
    drop = lambda: np.random.default_rng(11)  # noqa: E731
    if sublayer == "self-attention with dropout":
        function = lambda p, x: multihead_attention(p, x, x, causal_mask(4), 0.3, drop())  # noqa
        args = (random_attention(rng), x)
    elif sublayer == "cross-attention with dropout":
        function = lambda p, x, m: attention.cross_attention(p, x, m, None, 0.3, drop())  # noqa
        args = (random_attention(rng), x, rng.standard_normal((2, 5, 8)))
    elif sublayer == "feed-forward with dropout":
        function = lambda p, x: layers.feed_forward(p, x, 0.3, drop())  # noqa: E731
        args = (random_feed_forward(rng, d_model=8), x)
    elif sublayer == "feed-forward with gelu and dropout":
        function = lambda p, x: layers.feed_forward(p, x, 0.3, drop(), ag.gelu)  # noqa: E731
        args = (random_feed_forward(rng, d_model=8), x)
    elif sublayer == "add and norm":
        function, args = layers.add_and_norm, (random_layer_norm(rng), x,
                                               rng.standard_normal((2, 4, 8)))
    elif sublayer == "feed-forward":
        function, args = layers.feed_forward, (random_feed_forward(rng, d_model=8), x)
    elif sublayer == "self-attention":
        function = lambda p, x: multihead_attention(p, x, x, causal_mask(4))  # noqa: E731
        args = (random_attention(rng), x)
    else:
        mask = padding_mask(np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), 0)
        function = lambda p, x, m: attention.cross_attention(p, x, m, mask)  # noqa: E731
        args = (random_attention(rng), x, rng.standard_normal((2, 5, 8)))
    assert_fused_matches_composed(function, rules_off(function), *args)


# ---- the decoding ops: keys and values split into heads, attention over them -----------------

def cached_attention_case(rng, dtype=np.float64):
    """(p, x_q (2, 3, 8), keys and values (2, 2, 5, 4) from a memory, a padding mask)."""
    p = random_attention(rng, dtype=dtype)
    memory = rng.standard_normal((2, 5, 8)).astype(dtype)
    keys, values = attention.keys_and_values(p, memory)
    mask = padding_mask(np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), 0)
    return p, rng.standard_normal((2, 3, 8)).astype(dtype), (keys, values), mask


@pytest.mark.parametrize("op, mask_kind", [
    ("attention_over", "padding"), ("attention_over", "causal"), ("attention_over", "none"),
    ("projected_heads", "")])
def test_the_decoding_rules_agree_with_their_functions(op, mask_kind, rng):
    """The rule's value and every gradient against its function's with the rules off, in
    float64, to first and second order."""
    p, x, kv, mask = cached_attention_case(rng)
    if op == "projected_heads":
        function, args = (lambda w, x: attention.projected_heads(w, x, p.n_heads)), (p.wk, x)
    else:
        mask = {"padding": mask, "causal": causal_mask(3, 2), "none": None}[mask_kind]
        function = lambda p, x, kv: attention.attention_over(p, x, kv, mask)  # noqa: E731
        args = (p, x, kv)
    assert op in fused_calls(function, *args)
    assert_fused_matches_composed(function, rules_off(function), *args)


def test_attention_over_cached_keys_equals_attention_over_the_memory(rng):
    """attention_over(keys_and_values(memory)) is cross_attention(memory), in float32 (the
    fused decoding ops) and float64."""
    for dtype, rtol in ((np.float32, 2e-5), (np.float64, 1e-12)):
        p, x, kv, mask = cached_attention_case(rng, dtype)
        memory = rng.standard_normal((2, 5, 8)).astype(dtype)
        kv = attention.keys_and_values(p, memory)
        got = attention.attention_over(p, x, kv, mask)
        assert got.dtype == dtype
        assert_close(got, attention.cross_attention(p, x, memory, mask), rtol)


def test_the_decoding_ops_second_order_and_jvp_match_finite_differences(rng):
    p, x, (keys, values), mask = cached_attention_case(rng)

    def loss(x):  # x's own keys and values: both decoding ops see the traced x
        return ag.sum(ag.tanh(attention.attention_over(p, x, attention.keys_and_values(p, x))))
    assert_hvp_and_jvp_match_central_differences(loss, x, rng.standard_normal(x.shape))


def test_decoding_runs_the_rules_and_pictures_show_the_composition(rng):
    p, x, (keys, values), mask = cached_attention_case(rng, np.float32)
    names = fused_calls(lambda x, k, v: attention.attention_over(p, x, (k, v), mask), x, keys,
                        values)
    assert names == ["attention_over"]
    assert fused_calls(lambda x: attention.keys_and_values(p, x), x) == ["projected_heads"] * 2
    graph = ag.viz.trace(lambda x: attention.attention_over(p, x, (keys, values), mask), x)
    assert "attention_over" not in {op.label for op in graph.ops}
    assert {"matmul", "softmax", "linear"} <= {op.label for op in graph.ops}


# ---- whole models: the rules on and off ------------------------------------------------------

def model_loss(model, rng):
    """(a float64 model's mean cross-entropy as a function of its parameters, the parameters):
    tiny sizes, each model's masks, and "with dropout" a training pass whose masks come from
    a generator seeded alike at every call."""
    from models import classifier, lm, transformer
    name, _, dropout = model.partition(" with ")
    rate = 0.2 if dropout else 0.0

    def mode():  # apply's keywords: a training pass with a fresh generator, or inference
        return dict(training=True, rng=np.random.default_rng(5)) if dropout else {}
    if name.startswith("transformer"):
        p = transformer.init(rng, 11, 13, d_model=8, n_heads=2, d_ff=12, n_encoder=2,
                             n_decoder=2, max_len=10, norm=name.split()[1], dropout=rate,
                             dtype=np.float64)
        src, tgt = rng.integers(1, 11, (3, 7)), rng.integers(1, 13, (3, 6))
        src[0, 5:] = 0  # padding
        return (lambda p: ag.cross_entropy(
            transformer.apply(p, src, tgt[:, :-1], src_pad=0, **mode()), tgt[:, 1:])), p
    if name == "classifier":
        p = classifier.init(rng, 17, 3, d_model=8, n_heads=2, d_ff=12, n_layers=2, max_len=6,
                            pool="mean", pad=0, dropout=rate, dtype=np.float64)
        ids, labels = rng.integers(0, 17, (4, 6)), rng.integers(0, 3, 4)
        return (lambda p: ag.cross_entropy(classifier.apply(p, ids, **mode()), labels)), p
    p = lm.init(rng, 9, d_model=8, n_heads=2, d_ff=12, n_layers=2, max_len=8, dropout=rate,
                dtype=np.float64)
    ids = rng.integers(0, 9, (3, 8))
    return (lambda p: ag.cross_entropy(lm.apply(p, ids[:, :-1], **mode()), ids[:, 1:])), p


@pytest.mark.parametrize("model", ["transformer post", "transformer pre",
                                   "transformer post with dropout", "classifier",
                                   "classifier with dropout", "lm", "lm with dropout"])
def test_whole_models_agree_with_the_rules_on_and_off(model, rng):
    """Each model's loss in float64, with the fast rules and with its plain functions alone,
    to 1e-10 relative: the value, every parameter's gradient and the second order (the
    gradient of the gradient's squared norm); in float32 the gradients stay float32."""
    loss, p = model_loss(model, rng)
    names = fused_calls(loss, p)
    assert "multihead_attention" in names and "feed_forward" in names, names
    assert_fused_matches_composed(loss, rules_off(loss), p, rtol=1e-10)


def tiny_logits(name, dtype):
    """(logits of the parameters, a tiny model of `name` in `dtype`): one sequence, post-LN
    blocks (the add & norm rule)."""
    from helpers.tiny_models import tiny_classifier, tiny_transformer
    from models import classifier, transformer
    if name == "transformer":
        src, tgt = np.array([[1, 4, 2, 5, 3]]), np.array([[0, 3, 8, 2]])
        return (lambda p: transformer.apply(p, src, tgt)), tiny_transformer(0, dtype=dtype)
    ids = np.array([[3, 7, 1, 12, 5, 9]])
    return (lambda p: classifier.apply(p, ids)), tiny_classifier(0, dtype=dtype)


@pytest.mark.parametrize("name", ["transformer", "classifier"])
def test_the_jacobian_of_a_models_logits_in_float32_takes_the_rules(name, rng):
    """ag.jacobian sends a one-hot cotangent per output entry, all at once, through each
    rule's pullback, which differentiates its plain function again at eps (a Python float):
    float32 stays float32 there. Against the rules off in float32, and in float64 the
    Jacobian along a direction against central differences of the logits."""
    logits, p = tiny_logits(name, np.float32)
    jacobian = ag.jacobian(logits)
    got = jacobian(p)
    with ag.fast_rules(False):
        want = jacobian(p)
    pairs = [(g, w) for g, w in zip(ag.tree_leaves(got), ag.tree_leaves(want)) if w is not None]
    largest = max(float(np.abs(w).max()) for _, w in pairs)  # a leaf that is 0 analytically
    for g, w in pairs:                                       # holds rounding noise alone
        assert g.dtype == np.float32
        assert_close(g, w, 1e-4, scale=largest)
    logits, p = tiny_logits(name, np.float64)
    v = ag.tree_map(lambda a: rng.standard_normal(a.shape) if ag.is_differentiable(a) else a, p)
    along = sum(np.tensordot(j, d, axes=d.ndim) for j, d in
                zip(ag.tree_leaves(jacobian(p)), ag.tree_leaves(v)) if j is not None)
    h = 1e-6
    moved = [logits(ag.tree_map(lambda a, d: a + s * h * d if ag.is_differentiable(a) else a,
                                p, v)) for s in (1, -1)]
    assert_close(along, (moved[0] - moved[1]) / (2 * h), 1e-6)


# ---- the attention core in shares of heads, and a whole step, at every thread count ----------

def split_attention_case(kind, mask_kind, dropout, dtype):
    """(function, args): a tiny attention of 3 batches of 4 heads (12 heads: shares cut
    batches), its mask of mask_kind, dropout 0.3 from a generator seeded alike at each call."""
    rng = np.random.default_rng(8)
    p = random_attention(rng, n_heads=4, dtype=dtype)
    x = rng.standard_normal((3, 4, 8)).astype(dtype)
    t_k = 4 if kind == "self" or mask_kind == "causal" else 5
    memory = rng.standard_normal((3, t_k, 8)).astype(dtype)
    mask, _, _ = masks(mask_kind, 3, 4, t_k)
    drop = (lambda: (0.3, np.random.default_rng(11))) if dropout else (lambda: (0.0, None))
    if kind == "self":
        return (lambda p, x: multihead_attention(p, x, x, mask, *drop())), (p, x)
    if kind == "cross":
        return (lambda p, x, m: attention.cross_attention(p, x, m, mask, *drop())), (p, x, memory)
    kv = attention.keys_and_values(p, memory)
    return (lambda p, x, kv: attention.attention_over(p, x, kv, mask)), (p, x, kv)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.integers(1, 6), st.integers(1, 5), st.data())
def testhead_blocks_cover_a_shares_heads_once_each(batch, n_heads, data):
    """The blocks of a share [start, stop) of the (B, H) grid hold exactly its pairs, each
    once (counted in a grid, against the loop over the pairs), in at most three blocks."""
    from models.fast.sublayers import head_blocks
    start = data.draw(st.integers(0, batch * n_heads))
    stop = data.draw(st.integers(start, batch * n_heads))
    count = np.zeros((batch, n_heads), int)
    blocks = head_blocks(start, stop, n_heads)
    for block in blocks:
        count[block] += 1
    want = np.zeros((batch, n_heads), int)
    for pair in range(start, stop):
        want[divmod(pair, n_heads)] += 1
    np.testing.assert_array_equal(count, want)
    assert len(blocks) <= 3


def arrays(tree):
    """The tree's array leaves (not the None of an int leaf's gradient, nor a setting)."""
    return [leaf for leaf in ag.tree_leaves(tree) if isinstance(leaf, (np.ndarray, np.generic))]


SPLIT_ATTENTION = [(kind, mask_kind, dropout)
                   for kind in ("self", "cross", "decoding")
                   for mask_kind in ("padding", "causal", "none")
                   for dropout in ((False, True) if kind != "decoding" else (False,))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind, mask_kind, dropout", SPLIT_ATTENTION)
def test_the_attention_core_in_shares_gives_the_serial_bits(kind, mask_kind, dropout, dtype,
                                                            monkeypatch):
    """The fused attention's output and every gradient (weights, queries, memory or cached
    keys and values) at 1 to 8 threads with the split forced, against one thread: the same
    bits; each count's shares handed to the pool (12 heads: 5 and 8 shares cut batches)."""
    function, args = split_attention_case(kind, mask_kind, dropout, dtype)
    weight = random_weight((3, 4, 8), dtype)

    rule = "attention_over" if kind == "decoding" else "multihead_attention"
    assert rule in fused_calls(function, *args)

    def output_and_gradients():
        return function(*args), ag.gradient(lambda *a: ag.sum(function(*a) * weight), *args)
    with split_at(1):
        serial = arrays(output_and_gradients())
    runs = pool_runs(monkeypatch)
    for n in THREAD_COUNTS:
        with split_at(n):
            split = arrays(output_and_gradients())
        assert len(split) == len(serial) > 4
        for got, want in zip(split, serial):
            assert got.dtype == want.dtype == dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{n} threads")
    assert set(runs) == set(THREAD_COUNTS) - {1}


def test_a_whole_lm_training_step_gives_the_same_bits_at_every_thread_count(monkeypatch):
    """A tiny LM's training step with dropout (loss, every gradient, Adam's new parameters
    and moments over chunks of 64 entries) at 1 to 8 threads with every split forced: the
    bits of one thread. (The products are too small for OpenBLAS to thread: at larger ones
    its own bits may depend on its thread count.)"""
    from autograd_lite.optim import flat
    from models import lm
    monkeypatch.setattr(flat, "CHUNK_SIZE", 64)
    p = lm.init(np.random.default_rng(0), 11, d_model=8, n_heads=4, d_ff=12, n_layers=2,
                max_len=8, dropout=0.1)
    ids = np.random.default_rng(1).integers(0, 11, (3, 8))

    def step():
        def loss(p):
            logits = lm.apply(p, ids[:, :-1], training=True, rng=np.random.default_rng(2))
            return ag.cross_entropy(logits, ids[:, 1:])
        value, grads = ag.value_and_gradient(loss, p)
        adam = ag.optim.adam(1e-2)
        return value, grads, adam.update(p, grads[0], adam.init(p))
    with split_at(1):
        serial = arrays(step())
    runs = pool_runs(monkeypatch)
    for n in THREAD_COUNTS:
        with split_at(n):
            for got, want in zip(arrays(step()), serial, strict=True):
                np.testing.assert_array_equal(got, want, err_msg=f"{n} threads")
    assert set(runs) == set(THREAD_COUNTS) - {1}
