"""models.layers: Glorot-uniform initialization (bounds, variance, dtype, determinism), dense,
layer norm, embedding and the feed-forward block against PyTorch (values and gradients),
the sinusoidal position encoding against the paper's formula (§3.5), the embedding's
scaling and its gradient by hand, the token and dropout-rate checks every model calls, and
the dropout settings of every model."""
import math
import re

import numpy as np
import pytest

import autograd_lite as ag
from models.layers import (Dense, Embedding, FeedForward, LayerNorm, add_position_encoding,
                           check_dropout_rate, check_tokens, dense, dense_init, dropout_setting,
                           embed, embed_with_positions,
                           embedding_init, feed_forward, feed_forward_init, glorot_uniform,
                           layer_norm, layer_norm_init, position_encoding, position_rows)
from helpers.references import DTYPES, compare_with_torch, paper_position_encoding
from helpers.tiny_models import perturbed, tiny_classifier, tiny_lm, tiny_transformer


def glorot_limit(fan_in, fan_out):
    return math.sqrt(6.0 / (fan_in + fan_out))


# Glorot-uniform initialization

@pytest.mark.parametrize("d_in, d_out", [(1, 1), (3, 7), (16, 4), (100, 20)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_init_is_glorot_uniform_within_its_limit(d_in, d_out, dtype):
    p = dense_init(np.random.default_rng(1), d_in, d_out, dtype)
    limit = glorot_limit(d_in, d_out)
    assert isinstance(p, Dense)
    assert p.w.shape == (d_in, d_out) and p.b.shape == (d_out,)
    assert p.w.dtype == dtype and p.b.dtype == dtype
    assert np.all(np.abs(p.w) <= np.asarray(limit, dtype=dtype))
    np.testing.assert_array_equal(p.b, np.zeros(d_out))


def test_glorot_uniform_moments_and_histogram():
    """U(-a, a) has mean 0 and variance a²/3 = 2 / (fan_in + fan_out) (Glorot & Bengio 2010).
    With n samples the sample variance has standard deviation √(4/45)·a²/√n; allow 5σ."""
    d_in, d_out = 400, 600
    w = dense_init(np.random.default_rng(2), d_in, d_out, np.float64).w
    n, a = w.size, glorot_limit(d_in, d_out)
    assert abs(w.mean()) < 5 * a / math.sqrt(3 * n)
    assert abs(w.var() - a * a / 3) < 5 * math.sqrt(4 / 45) * a * a / math.sqrt(n)
    assert math.isclose(a * a / 3, 2 / (d_in + d_out), rel_tol=1e-12)
    # Uniform, not merely the right variance: 10 equal bins each hold n/10 ± 5σ.
    counts, _ = np.histogram(w, bins=10, range=(-a, a))
    assert counts.sum() == n
    assert np.all(np.abs(counts - n / 10) < 5 * math.sqrt(n * 0.1 * 0.9))
    # The extremes reach the limit: the largest of n uniforms is within a few 2a/n of a.
    assert a - np.max(w) < 20 * 2 * a / n and np.min(w) + a < 20 * 2 * a / n


def test_same_seed_same_bits_other_seed_other_values():
    for dtype in DTYPES:
        first = dense_init(np.random.default_rng(42), 5, 3, dtype)
        again = dense_init(np.random.default_rng(42), 5, 3, dtype)
        other = dense_init(np.random.default_rng(43), 5, 3, dtype)
        assert first.w.tobytes() == again.w.tobytes() and first.b.tobytes() == again.b.tobytes()
        assert not np.any(first.w == other.w)
    # float32 weights are the float64 draw rounded: the dtype does not change the stream.
    w32 = glorot_uniform(np.random.default_rng(7), 4, 6, np.float32)
    w64 = glorot_uniform(np.random.default_rng(7), 4, 6, np.float64)
    np.testing.assert_array_equal(w32, w64.astype(np.float32))


def test_glorot_uniform_defaults_to_float32():
    assert glorot_uniform(np.random.default_rng(0), 2, 3).dtype == np.float32
    assert dense_init(np.random.default_rng(0), 2, 3).w.dtype == np.float32
    assert layer_norm_init(4).scale.dtype == np.float32
    assert embedding_init(np.random.default_rng(0), 5, 4).table.dtype == np.float32


@pytest.mark.parametrize("dtype", DTYPES)
def test_feed_forward_init_shapes_limits_and_zero_biases(dtype):
    d_model, d_ff = 6, 10
    p = feed_forward_init(np.random.default_rng(3), d_model, d_ff, dtype)
    assert isinstance(p, FeedForward)
    assert p.linear1.w.shape == (d_model, d_ff) and p.linear2.w.shape == (d_ff, d_model)
    limit = np.asarray(glorot_limit(d_model, d_ff), dtype=dtype)
    for layer in p:
        assert layer.w.dtype == dtype and layer.b.dtype == dtype
        assert np.all(np.abs(layer.w) <= limit)
        np.testing.assert_array_equal(layer.b, 0.0)
    assert not np.array_equal(p.linear1.w, p.linear2.w.T)  # two independent draws


# Dense

@pytest.mark.parametrize("x_shape", [(4, 3), (2, 5, 3), (2, 2, 1, 3)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_matches_torch_linear(x_shape, dtype, rng, torch):
    w = rng.standard_normal((3, 4)).astype(dtype)
    b = rng.standard_normal(4).astype(dtype)
    x = rng.standard_normal(x_shape).astype(dtype)
    out = compare_with_torch(torch, lambda x, w, b: dense(Dense(w, b), x),
                             lambda x, w, b: torch.nn.functional.linear(x, w.T, b), x, w, b)
    assert out.shape == x_shape[:-1] + (4,)


def test_dense_refuses_at_inference_what_training_refuses(rng):
    """A wrong d_in or a float64 x with float32 weights: the same error with or without a
    trace, naming the op, both shapes (and dtypes); never a silently float64 result."""
    p = dense_init(rng, 3, 4)  # float32
    for x, error, message in (
            (np.ones((2, 5, 6), np.float32), ValueError,
             r"linear: x \(2, 5, 6\) @ w \(3, 4\): inner dimensions 6 != 3"),
            (np.ones((2, 3)), TypeError,
             r"linear: operands float64 \(2, 3\) and float32 \(3, 4\) have different dtypes")):
        with pytest.raises(error, match=message):
            dense(p, x)
        with pytest.raises(error, match=message):
            ag.gradient(lambda p, x: ag.sum(dense(p, x)), p, x)


# Layer norm

@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_init_is_identity_scale_and_zero_bias(dtype):
    p = layer_norm_init(5, dtype)
    assert isinstance(p, LayerNorm)
    assert p.scale.dtype == dtype and p.bias.dtype == dtype
    np.testing.assert_array_equal(p.scale, np.ones(5))
    np.testing.assert_array_equal(p.bias, np.zeros(5))


@pytest.mark.parametrize("eps", [None, 1e-2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_matches_torch(eps, dtype, rng, torch):
    """A small spread (variance ~1e-4) so that eps visibly matters; torch's default is 1e-5."""
    x = (0.01 * rng.standard_normal((2, 3, 6))).astype(dtype)
    scale = (1 + 0.3 * rng.standard_normal(6)).astype(dtype)
    bias = rng.standard_normal(6).astype(dtype)
    kwargs = {} if eps is None else {"eps": eps}
    compare_with_torch(
        torch, lambda x, s, b: layer_norm(LayerNorm(s, b), x, **kwargs),
        lambda x, s, b: torch.nn.functional.layer_norm(x, (6,), s, b, **kwargs), x, scale, bias,
        rtol=1e-10 if dtype == np.float64 else 1e-4)


# Embedding

@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_init_and_lookup(dtype):
    p = embedding_init(np.random.default_rng(4), 11, 6, dtype)
    assert isinstance(p, Embedding) and p.table.shape == (11, 6) and p.table.dtype == dtype
    assert np.all(np.abs(p.table) <= np.asarray(glorot_limit(11, 6), dtype=dtype))
    ids = np.array([[0, 3, 3, 10], [7, 1, 0, 2]])
    out = embed(p, ids)
    assert out.shape == (2, 4, 6) and out.dtype == dtype
    for b in range(2):
        for t in range(4):
            np.testing.assert_array_equal(out[b, t], p.table[ids[b, t]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_embed_matches_torch_embedding(dtype, rng, torch):
    table = rng.standard_normal((7, 3)).astype(dtype)
    ids = np.array([[1, 1, 6], [0, 1, 5]])
    compare_with_torch(torch, lambda t: embed(Embedding(t), ids),
                       lambda t: torch.nn.functional.embedding(torch.from_numpy(ids), t), table)


# Position encoding

@pytest.mark.parametrize("max_len, d_model", [(50, 16), (7, 5), (3, 1), (1, 4)])
def test_position_encoding_is_the_papers_formula(max_len, d_model):
    table = position_encoding(max_len, d_model, np.float64)
    assert table.shape == (max_len, d_model) and table.dtype == np.float64
    np.testing.assert_allclose(table, paper_position_encoding(max_len, d_model),
                               rtol=0, atol=1e-12)


def test_position_encoding_float32_and_readonly_cached():
    table = position_encoding(20, 8, np.float32)
    assert table.dtype == np.float32
    np.testing.assert_allclose(table, paper_position_encoding(20, 8), rtol=0, atol=1e-7)
    assert position_encoding(20, 8, np.float32) is table
    with pytest.raises(ValueError):
        table[0, 0] = 1.0
    # Known values: position 0 is [0, 1, 0, 1, ...]; d = 2 is (sin pos, cos pos).
    np.testing.assert_array_equal(position_encoding(4, 6, np.float64)[0], [0, 1, 0, 1, 0, 1])
    np.testing.assert_allclose(position_encoding(4, 2, np.float64)[3], [math.sin(3), math.cos(3)],
                               rtol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_position_rows_slice_of_the_table(dtype):
    rows = position_rows(12, 6, 4, 5, dtype)
    assert rows.shape == (5, 6) and rows.dtype == dtype
    np.testing.assert_allclose(rows, paper_position_encoding(12, 6)[4:9], rtol=0,
                               atol=1e-12 if dtype == np.float64 else 1e-7)
    assert position_rows(12, 6, 0, 12, dtype).shape == (12, 6)  # exactly the whole table
    assert position_rows(12, 6, 5, 0, dtype).shape == (0, 6)


def test_position_rows_past_the_table_is_an_error():
    with pytest.raises(ValueError, match=r"positions 8\.\.10 need 11 positions but the table "
                                         r"holds max_len=10"):
        position_rows(10, 4, 8, 3)


@pytest.mark.parametrize("start, length", [(-2, 3), (0, -1)])
def test_position_rows_before_the_table_is_an_error(start, length):
    with pytest.raises(ValueError, match=rf"position encoding: start={start} and "
                                         rf"length={length} must be >= 0"):
        position_rows(10, 4, start, length)


@pytest.mark.parametrize("start", [0, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_add_position_encoding(start, dtype, rng):
    x = rng.standard_normal((2, 4, 6)).astype(dtype)
    out = add_position_encoding(x, 10, start)
    assert out.shape == x.shape and out.dtype == dtype
    want = x.astype(np.float64) + paper_position_encoding(10, 6)[start:start + 4]
    np.testing.assert_allclose(out, want, rtol=1e-12 if dtype == np.float64 else 1e-6,
                               atol=1e-12 if dtype == np.float64 else 1e-6)


def test_add_position_encoding_longer_than_table_names_both_lengths(rng):
    x = rng.standard_normal((2, 7, 4))
    with pytest.raises(ValueError) as info:
        add_position_encoding(x, 5)
    message = str(info.value)
    assert "7 positions" in message and "max_len=5" in message
    with pytest.raises(ValueError, match=r"need 9 positions .* max_len=8"):
        add_position_encoding(x[:, :4], 8, start=5)


def test_add_position_encoding_gradient_is_identity(rng):
    x = rng.standard_normal((2, 3, 4))
    weight = rng.standard_normal((2, 3, 4))
    (g,) = ag.gradient(lambda x: ag.sum(add_position_encoding(x, 6, 2) * weight), x)
    np.testing.assert_array_equal(g, weight)


@pytest.mark.parametrize("start", [0, 2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_embed_with_positions_scales_by_sqrt_d_model(start, dtype, rng):
    """E[ids]·√d_model + PE[start:start+T] (§3.4: embeddings multiplied by √d_model)."""
    d = 9
    table = rng.standard_normal((6, d)).astype(dtype)
    ids = np.array([[5, 0, 0], [1, 2, 3]])
    out = embed_with_positions(Embedding(table), ids, 8, start)
    assert out.shape == (2, 3, d) and out.dtype == dtype
    want = (table.astype(np.float64)[ids] * 3.0
            + paper_position_encoding(8, d)[start:start + 3])
    np.testing.assert_allclose(out, want, rtol=1e-12 if dtype == np.float64 else 1e-6,
                               atol=1e-12 if dtype == np.float64 else 1e-6)


def test_embed_with_positions_too_long_and_gradient(rng):
    table = rng.standard_normal((6, 4))
    ids = np.array([[5, 0, 0, 5], [1, 2, 3, 0]])
    with pytest.raises(ValueError, match=r"need 4 positions but the table holds max_len=3"):
        embed_with_positions(Embedding(table), ids, 3)
    weight = rng.standard_normal((2, 4, 4))
    (g,) = ag.gradient(lambda p: ag.sum(embed_with_positions(p, ids, 5, 1) * weight),
                       Embedding(table))
    want = np.zeros_like(table)  # the scatter-add of weight's rows, times √d_model = 2
    for b in range(2):
        for t in range(4):
            want[ids[b, t]] += 2.0 * weight[b, t]
    np.testing.assert_allclose(g.table, want, rtol=1e-14, atol=1e-14)


def perturbed_feed_forward(rng, d_model, d_ff, dtype):
    return perturbed(feed_forward_init(rng, d_model, d_ff, dtype), rng, 0.3)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_feed_forward_matches_torch(activation, dtype, rng, torch):
    p = perturbed_feed_forward(rng, 4, 6, dtype)
    x = rng.standard_normal((2, 3, 4)).astype(dtype)
    ag_act, torch_act = {
        "relu": (ag.relu, torch.relu),
        "gelu": (ag.gelu, lambda t: torch.nn.functional.gelu(t, approximate="tanh"))}[activation]

    def ours(x, w1, b1, w2, b2):
        return feed_forward(FeedForward(Dense(w1, b1), Dense(w2, b2)), x, activation=ag_act)

    def theirs(x, w1, b1, w2, b2):
        return torch_act(x @ w1 + b1) @ w2 + b2
    compare_with_torch(torch, ours, theirs, x, *p.linear1, *p.linear2,
                       rtol=1e-11 if dtype == np.float64 else 1e-4)


def test_feed_forward_dropout_zeroes_hidden_units_and_rescales(rng):
    """With W2 = I and b2 = 0 the output is the dropped-out hidden layer itself. exp as the
    activation keeps every hidden unit positive, so dropped units are exactly the zeros."""
    d, rate = 64, 0.25
    linear1 = Dense(0.1 * rng.standard_normal((d, d)), 0.1 * rng.standard_normal(d))
    p = FeedForward(linear1, Dense(np.eye(d), np.zeros(d)))
    x = rng.standard_normal((4, 8, d))
    hidden = np.exp(x @ linear1.w + linear1.b)
    out = feed_forward(p, x, rate, np.random.default_rng(9), activation=ag.exp)
    kept = out != 0
    np.testing.assert_allclose(out[kept], hidden[kept] / (1 - rate), rtol=1e-12)
    n = out.size
    assert abs(kept.mean() - (1 - rate)) < 5 * math.sqrt(rate * (1 - rate) / n)
    again = feed_forward(p, x, rate, np.random.default_rng(9), activation=ag.exp)
    np.testing.assert_array_equal(again, out)  # same seed, same mask
    # Inference: rate 0, or no rng, is the plain block.
    np.testing.assert_allclose(feed_forward(p, x, 0.0, np.random.default_rng(9), activation=ag.exp),
                               hidden, rtol=1e-12)
    np.testing.assert_allclose(feed_forward(p, x, rate, None, activation=ag.exp), hidden,
                               rtol=1e-12)


# Token ids and dropout rates

def test_check_tokens_returns_the_ids_as_an_array_and_accepts_every_edge():
    ids = np.array([[0, 4], [2, 3]], dtype=np.int32)
    assert check_tokens("m.apply", ids, 5, 2) is ids
    np.testing.assert_array_equal(check_tokens("m.apply", [[0, 4], [2, 3]], 5, 2), ids)
    assert check_tokens("m.step", ids[:, :1].astype(np.uint8), 5, 3, start=2).shape == (2, 1)
    assert check_tokens("m.apply", np.zeros((3, 0), dtype=int), 5, 0).shape == (3, 0)


@pytest.mark.parametrize("ids, got", [(np.array([[1.0, 2.0]]), r"float64 \(1, 2\)"),
                                      (np.array([[True, False]]), r"bool \(1, 2\)"),
                                      (np.array([1, 2]), r"int64 \(2,\)"),
                                      ([[1.5, 2.0]], r"float64 \(1, 2\)")])
def test_check_tokens_refuses_what_is_not_integer_tokens_b_t(ids, got):
    with pytest.raises(ValueError, match=rf"^m.apply: src must be integer tokens \(B, T\), "
                                         rf"got {got}$"):
        check_tokens("m.apply", ids, 5, 4, "src")


def test_check_tokens_refuses_positions_past_the_table_and_ids_outside_the_vocabulary():
    ids = np.array([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"^m.step: tokens \(1, 3\) at positions 2\.\.4 run past "
                                         r"the position table's max_len=4$"):
        check_tokens("m.step", ids, 5, 4, "tokens", start=2)
    for bad, shown in ((-1, -1), (5, 5), (7, 7)):
        with pytest.raises(ValueError, match=rf"^m.apply: ids \(1, 3\) holds id {shown}, outside "
                                             rf"the vocabulary 0\.\.4$"):
            check_tokens("m.apply", np.array([[1, bad, 2]]), 5, 4)


@pytest.mark.parametrize("rate", [0, 0.0, 0.5, 0.999, ag.Hyper(0.25)])
def test_check_dropout_rate_accepts_0_to_1(rate):
    check_dropout_rate("m.init", rate)


@pytest.mark.parametrize("rate", [-0.25, 1, 1.0, 2.5, float("nan"), ag.Hyper(1.5)])
def test_check_dropout_rate_refuses_what_lies_outside_0_to_1(rate):
    with pytest.raises(ValueError, match=re.escape(
            f"m.init: dropout must lie in [0, 1), got {float(rate)}")):
        check_dropout_rate("m.init", rate)


# Dropout settings

def test_dropout_setting_inference_ignores_rate_and_rng():
    rng = np.random.default_rng(0)
    assert dropout_setting("lm.apply", ag.Hyper(0.3), False, rng) == (0.0, None)
    assert dropout_setting("lm.apply", ag.Hyper(0.3), False, None) == (0.0, None)


def test_dropout_setting_training_passes_rate_and_the_same_rng():
    rng = np.random.default_rng(0)
    rate, got = dropout_setting("lm.apply", ag.Hyper(0.3), True, rng)
    assert rate == 0.3 and got is rng


@pytest.mark.parametrize("rate", [-0.25, 1.0, 1.5])
def test_dropout_setting_refuses_a_rate_outside_0_to_1_when_training(rate):
    """A rate put into the tree after init (by hand, or read from a file) bypasses init's
    check: a training pass refuses it, naming the caller; inference never reads it."""
    assert dropout_setting("lm.apply", ag.Hyper(rate), False, None) == (0.0, None)
    with pytest.raises(ValueError, match=re.escape(
            f"lm.apply: dropout must lie in [0, 1), got {rate}")):
        dropout_setting("lm.apply", ag.Hyper(rate), True, np.random.default_rng(0))


def test_dropout_setting_training_without_rng_names_the_caller():
    with pytest.raises(ValueError, match=re.escape("classifier.apply: training=True needs an rng")):
        dropout_setting("classifier.apply", ag.Hyper(0.1), True, None)


@pytest.mark.parametrize("rate, shown", [(0.25, "float 0.25"), (0, "int 0"),
                                         (np.float32(0.5), "float 0.5")])
def test_dropout_setting_refuses_a_rate_that_is_not_a_hyper_whether_training_or_not(rate, shown):
    for training in (False, True):
        with pytest.raises(TypeError, match=re.escape(
                f"lm.apply: p.dropout is a plain {shown}; store settings as ag.Hyper(")):
            dropout_setting("lm.apply", rate, training, np.random.default_rng(0))


def plain_float_calls():
    """(the function named in the error, a model whose p.dropout is the plain float 0.1, a
    call of it) for the three models: inference, training, and the transformer's decoding
    and decoder."""
    from models import classifier, lm, transformer
    tp, cp, lp = tiny_transformer(), tiny_classifier(), tiny_lm()
    src, ids = np.array([[3, 4, 5]]), np.array([[1, 2, 3, 4, 5, 6]])
    memory = transformer.encode(tp, src)  # (1, 3, D)
    train = dict(training=True, rng=np.random.default_rng(1))
    return [("transformer.apply", tp, lambda p: transformer.apply(p, src, ids)),
            ("transformer.apply", tp, lambda p: transformer.apply(p, src, ids, **train)),
            ("transformer.encode", tp, lambda p: transformer.greedy_decode(p, src, 1, 2, 4)),
            ("transformer.decode", tp, lambda p: transformer.decode(p, memory, ids)),
            ("classifier.apply", cp, lambda p: classifier.apply(p, ids)),
            ("classifier.apply", cp, lambda p: classifier.apply(p, ids, **train)),
            ("lm.apply", lp, lambda p: lm.apply(p, ids)),
            ("lm.apply", lp, lambda p: lm.apply(p, ids, **train))]


@pytest.mark.parametrize("case", range(8))
def test_the_models_refuse_a_plain_float_dropout_rate_by_name(case):
    """p._replace(dropout=0.1) puts a trainable leaf where init put ag.Hyper(0.1): refused
    by the function that reads it, training or not, and under ag.gradient (which traces the
    float) with the same message. Before, inference ran and training failed inside dropout."""
    caller, p, call = plain_float_calls()[case]
    bad = p._replace(dropout=0.1)
    message = re.escape(f"{caller}: p.dropout is a plain float 0.1; store settings as "
                        "ag.Hyper(0.1) (a plain float in a parameter tree is a trainable "
                        "parameter)")
    with pytest.raises(TypeError, match=message):
        call(bad)
    with pytest.raises(TypeError, match=message):
        ag.gradient(lambda q: ag.sum(call(q)), bad)
    call(p)  # the same call with the ag.Hyper runs
