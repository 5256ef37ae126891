"""models.lm: logits and every gradient against PyTorch, causality, dropout, gradient
check; generation: the cache against recomputation, sampling against sampling from
recomputed prefixes, greedy, beam search against exhaustive search. (sample_next is tested
in test_decoding.py, where it lives.)"""
import math

import numpy as np
import pytest

import autograd_lite as ag
from models import decoding, lm
from helpers.search import exhaustive_search
from helpers.tiny_models import assert_dropout_in_training_only_and_seeded, perturbed
from helpers.references import float_leaves, paper_position_encoding, relative_error, to_tensor
from helpers.torch_models import assert_model_gradients_match, torch_block

SMALL = dict(vocab_size=23, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=12)


def torch_lm(torch, p, ids):
    """Logits and leaf tensors of an independent pre-LN causal torch model with p's weights."""
    t = {path: to_tensor(torch, x, requires_grad=True) for path, x in float_leaves(p).items()
         if not path.startswith("blocks[")}
    d_model = t["embed.table"].shape[1]
    x = torch.nn.functional.embedding(torch.from_numpy(ids), t["embed.table"]) * math.sqrt(d_model)
    x = x + torch.from_numpy(paper_position_encoding(ids.shape[1], d_model)).to(x.dtype)
    future = torch.triu(torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool), 1)  # True = hide
    layers = [torch_block(torch, block, "pre") for block in p.blocks]
    for layer in layers:
        x = layer(x, src_mask=future)  # (B, T, D)
    x = torch.nn.functional.layer_norm(x, (d_model,), t["norm.scale"], t["norm.bias"], 1e-5)
    return x @ t["head.w"] + t["head.b"], t, layers  # (B, T, V)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-9), (np.float32, 1e-4)])
def test_logits_and_every_gradient_match_torch(torch, dtype, rtol):
    rng = np.random.default_rng(1)
    p = lm.init(rng, **SMALL, dtype=dtype)
    ids = rng.integers(0, SMALL["vocab_size"], size=(3, 9))
    cotangent = rng.standard_normal((3, 9, SMALL["vocab_size"])).astype(dtype)
    (grads,) = ag.gradient(lambda p: ag.sum(lm.apply(p, ids) * cotangent), p)
    ref_logits, t, layers = torch_lm(torch, p, ids)
    (ref_logits * torch.from_numpy(cotangent)).sum().backward()
    ours = lm.apply(p, ids)
    assert ours.dtype == dtype and ours.shape == (3, 9, SMALL["vocab_size"])
    assert relative_error(ours, ref_logits.detach().numpy()) < rtol
    assert_model_gradients_match(grads, t, layers, rtol, blocks="blocks")


def test_the_blocks_are_decoder_only_blocks():
    """Its own block type (the encoder block's fields and code, not an EncoderBlock)."""
    p = lm.init(np.random.default_rng(0), **SMALL)
    assert {type(b).__name__ for b in p.blocks} == {"DecoderOnlyBlock"}


def test_future_tokens_change_no_earlier_logits():
    rng = np.random.default_rng(2)
    p = lm.init(rng, **SMALL, dtype=np.float64)
    ids = rng.integers(0, SMALL["vocab_size"], size=(2, 8))
    changed = ids.copy()
    changed[:, 5] = (changed[:, 5] + 1) % SMALL["vocab_size"]
    before, after = lm.apply(p, ids), lm.apply(p, changed)
    np.testing.assert_allclose(after[:, :5], before[:, :5], rtol=0, atol=1e-12)
    assert np.abs(after[:, 5:] - before[:, 5:]).min() > 1e-8


def test_dropout_only_in_training_and_reproducible():
    rng = np.random.default_rng(3)
    p = lm.init(rng, **SMALL, dropout=0.2, dtype=np.float64)
    ids = rng.integers(0, SMALL["vocab_size"], size=(2, 6))
    assert_dropout_in_training_only_and_seeded(
        lambda training, rng: lm.apply(p, ids, training, rng))
    with pytest.raises(ValueError, match="lm.apply: training=True needs an rng"):
        lm.apply(p, ids, training=True)


def test_gradients_through_dropout_in_training():
    """The same masks in every call (one seed), so central differences see one function.
    (Without dropout, every gradient is checked against torch above.)"""
    rng = np.random.default_rng(4)
    p = lm.init(rng, vocab_size=7, d_model=4, n_heads=2, d_ff=6, n_layers=1, max_len=5,
                dropout=0.3, dtype=np.float64)
    ids = rng.integers(0, 7, size=(2, 5))

    def loss(p):
        logits = lm.apply(p, ids[:, :-1], training=True, rng=np.random.default_rng(0))
        return ag.cross_entropy(logits, ids[:, 1:])
    ag.check_gradients(loss, p)


def test_cached_steps_equal_recomputing_the_prefix():
    """Prompt in one pass, then one token at a time: the last-position logits match
    apply on the whole prefix at every step."""
    rng = np.random.default_rng(5)
    p = lm.init(rng, **SMALL, dtype=np.float64)
    ids = rng.integers(0, SMALL["vocab_size"], size=(3, SMALL["max_len"]))
    logits, cache = lm.forward_cached(p, ids[:, :4], lm.empty_cache(p, 3))
    np.testing.assert_allclose(logits, lm.apply(p, ids[:, :4]), rtol=0, atol=1e-10)
    for t in range(4, SMALL["max_len"]):
        logits, cache = lm.forward_cached(p, ids[:, t:t + 1], cache)  # (B, 1, V)
        assert logits.shape == (3, 1, SMALL["vocab_size"])
        assert cache.layers[0][0].shape == (3, SMALL["n_heads"], t + 1, 4)
        assert cache.length == t + 1
        np.testing.assert_allclose(logits[:, 0], lm.apply(p, ids[:, :t + 1])[:, -1],
                                   rtol=0, atol=1e-10)


def test_generate_without_layers_equals_recomputing_apply():
    """n_layers=0 (logits = LN(E[ids]·√D + PE) W + b): the cache holds no layer to read its
    length from, so it is carried explicitly (this raised IndexError)."""
    rng = np.random.default_rng(12)
    p = lm.init(rng, **{**SMALL, "n_layers": 0}, dtype=np.float64)
    prompt = rng.integers(0, SMALL["vocab_size"], size=(2, 3))
    ours = lm.generate(p, prompt, 5, 0.9, 4, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(ours, uncached_generate(p, prompt, 5, 0.9, 4,
                                                          np.random.default_rng(3)))


def test_generate_returns_int64_whatever_the_prompt_dtype():
    """A uint8 prompt with a 300-token vocabulary: token 299 came back as 299 mod 256 = 43."""
    rng = np.random.default_rng(13)
    p = lm.init(rng, 300, 8, 2, 16, 1, 10, dtype=np.float64)
    head = p.head._replace(b=np.where(np.arange(300) == 299, 100.0, 0.0))  # 299 always wins
    p = p._replace(head=head)
    ids = lm.generate(p, np.array([[1, 2]], dtype=np.uint8), 3, temperature=0.0)
    assert ids.dtype == np.int64
    assert ids.tolist() == [[1, 2, 299, 299, 299]]


def uncached_generate(p, prompt, n_new, temperature, top_k, rng, eos=None):
    """The reference: recompute apply on the whole prefix for every new token; with eos, a row
    that has emitted it gets eos, and the loop stops when every row has."""
    ids = prompt
    for _ in range(n_new):
        ended = (ids[:, prompt.shape[1]:] == eos).any(axis=1)  # (B,)
        if eos is not None and ended.all():
            break
        token = decoding.sample_next(lm.apply(p, ids)[:, -1], temperature, top_k, rng)
        token = np.where(ended, eos, token) if eos is not None else token
        ids = np.concatenate([ids, token[:, None]], axis=1)
    return ids


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.7, 5), (0.0, None)])
def test_generate_equals_uncached_sampling(temperature, top_k):
    rng = np.random.default_rng(6)
    p = lm.init(rng, **SMALL, dtype=np.float64)
    prompt = rng.integers(0, SMALL["vocab_size"], size=(4, 3))
    ours = lm.generate(p, prompt, 9, temperature, top_k, rng=np.random.default_rng(11))
    reference = uncached_generate(p, prompt, 9, temperature, top_k, np.random.default_rng(11))
    assert ours.shape == (4, 12)
    np.testing.assert_array_equal(ours[:, :3], prompt)
    np.testing.assert_array_equal(ours, reference)


def test_generate_with_eos_ends_rows_there_as_sampling_from_recomputed_prefixes():
    rng = np.random.default_rng(14)
    p = lm.init(rng, **{**SMALL, "vocab_size": 5}, dtype=np.float64)
    prompt = rng.integers(0, 5, size=(6, 2))
    for eos in range(5):
        ours = lm.generate(p, prompt, 9, 1.0, None, np.random.default_rng(2), eos=eos)
        np.testing.assert_array_equal(
            ours, uncached_generate(p, prompt, 9, 1.0, None, np.random.default_rng(2), eos))
        ended = (ours[:, 2:] == eos).any(axis=1)
        assert ended.any() and (ours.shape[1] < 11 or not ended.all()), eos


def test_errors_name_the_function_and_lengths():
    p = lm.init(np.random.default_rng(0), **SMALL)
    prompt = np.zeros((2, 5), dtype=int)
    with pytest.raises(ValueError, match=r"lm.generate: a prompt of 5 tokens plus n_new=8 "
                                         r"exceeds max_len=12"):
        lm.generate(p, prompt, 8, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"lm.apply: ids \(2, 13\) at positions 0\.\.12 run past "
                                         r"the position table's max_len=12"):
        lm.apply(p, np.zeros((2, 13), dtype=int))
    with pytest.raises(ValueError, match=r"lm.forward_cached: ids \(2, 3\) at positions 10\.\.12 "
                                         r"run past the position table's max_len=12"):
        lm.forward_cached(p, prompt[:, :3], lm.Cache(lm.empty_cache(p, 2).layers, 10))
    with pytest.raises(ValueError, match=r"lm.generate: ids \(1, 2\) holds id 23, outside the "
                                         r"vocabulary 0\.\.22"):
        lm.generate(p, np.array([[0, 23]]), 2, temperature=0.0)


def lm_log_probs(p):
    """log P(next token | tokens) by lm.apply over the whole sequence (the reference's view)."""
    return lambda tokens: ag.log_softmax(lm.apply(p, np.array([tokens]))[0, -1])


@pytest.mark.parametrize("eos", [2, None])
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_with_a_wide_beam_is_the_exact_optimum(alpha, eos):
    """4 tokens, 3 new ones: a beam of 4³ prunes nothing, so the result is the best of every
    continuation by log P / lp, enumerated with lm.apply over whole sequences."""
    rng = np.random.default_rng(15)
    p = lm.init(rng, **{**SMALL, "vocab_size": 4}, dtype=np.float64)
    p = perturbed(p, rng, 1.0)  # larger weights: choices that depend on the prefix
    prompt = rng.integers(0, 4, size=(3, 2))
    ids, scores = lm.beam_search_with_scores(p, prompt, 3, beam_size=64, length_penalty=alpha,
                                             eos=eos)
    lengths = set()
    for row, got, tokens in zip(ids, scores, prompt):
        want, want_score = exhaustive_search(lm_log_probs(p), tokens, eos, 5, alpha)
        n = len(want)
        assert row[:n].tolist() == list(want) and (row[n:] == eos).all()
        assert abs(got - want_score) < 1e-10
        lengths.add(n)
    assert ids.shape[1] <= 5 and (eos is None) == (lengths == {5})


def test_beam_size_1_is_greedy_and_an_exact_beam_scores_no_lower():
    """Without eos, three new tokens and a beam of V²: nothing is pruned before the last step,
    whose best extension is the result, so it is the optimum and cannot score below greedy."""
    rng = np.random.default_rng(16)
    p = lm.init(rng, **SMALL, dtype=np.float64)
    prompt = rng.integers(0, SMALL["vocab_size"], size=(3, 2))
    greedy, greedy_score = lm.beam_search_with_scores(p, prompt, 3, beam_size=1)
    np.testing.assert_array_equal(greedy, lm.generate(p, prompt, 3, temperature=0.0))
    best, best_score = lm.beam_search_with_scores(p, prompt, 3,
                                                  beam_size=SMALL["vocab_size"] ** 2)
    assert (best_score >= greedy_score - 1e-12).all()
    assert (best_score > greedy_score + 1e-9).any()  # and finds better than greedy here


def test_beam_search_names_its_bad_arguments():
    p = lm.init(np.random.default_rng(0), **SMALL)
    with pytest.raises(ValueError, match="lm.beam_search: beam_size must be >= 1, got 0"):
        lm.beam_search(p, np.array([[1, 2]]), 3, beam_size=0)
    with pytest.raises(ValueError, match=r"lm.beam_search: a prompt of 2 tokens plus n_new=11 "
                                         r"exceeds max_len=12"):
        lm.beam_search(p, np.array([[1, 2]]), 11)


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5, float("nan")])
def test_init_refuses_a_dropout_rate_outside_0_to_1(rate):
    with pytest.raises(ValueError, match=rf"lm.init: dropout must lie in \[0, 1\), got {rate}$"):
        lm.init(np.random.default_rng(0), **SMALL, dropout=rate)


@pytest.mark.parametrize("ids", [np.array([[1.0, 2.0, 3.0]]),
                                 np.array([[1, 2, 3]], dtype=np.float32),
                                 np.array([[True, False, True]])])
def test_token_ids_of_a_non_integer_dtype_are_refused_naming_dtype_and_shape(ids):
    p = lm.init(np.random.default_rng(0), **SMALL)
    message = rf"ids must be integer tokens \(B, T\), got {ids.dtype} \(1, 3\)"
    with pytest.raises(ValueError, match="lm.apply: " + message):
        lm.apply(p, ids)
    with pytest.raises(ValueError, match="lm.generate: " + message):
        lm.generate(p, ids, 2, temperature=0.0)
    with pytest.raises(ValueError, match="lm.forward_cached: " + message):
        lm.forward_cached(p, ids, lm.empty_cache(p, 1))
    with pytest.raises(ValueError, match=r"got int64 \(3,\)"):  # integer, but not (B, T)
        lm.apply(p, np.array([1, 2, 3], dtype=np.int64))


def test_generate_checks_its_sampling_settings_and_n_new_before_running():
    """decoding.check_sampling (test_decoding.py) under lm.generate's name and vocabulary,
    even when no token is to be generated."""
    p = lm.init(np.random.default_rng(0), **SMALL)
    prompt = np.array([[1, 2]])
    with pytest.raises(ValueError, match=r"lm.generate: top_k must lie in 1..23 \(the "
                                         r"vocabulary\), got 24"):
        lm.generate(p, prompt, 0, top_k=24, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="lm.generate: n_new must be >= 0, got -1"):
        lm.generate(p, prompt, -1, temperature=0.0)


def test_generate_refuses_an_empty_prompt():
    p = lm.init(np.random.default_rng(0), **SMALL)
    for batch in (1, 3):
        with pytest.raises(ValueError,
                           match="lm.generate: the prompt must hold at least one token"):
            lm.generate(p, np.zeros((batch, 0), dtype=np.int64), 4, temperature=0.0)


def test_dropout_sites_are_those_of_a_pre_ln_decoder_only_stack(dropout_sites):
    """The sites of a training pass, from the architecture (a GPT-style stack of pre-LN
    causal self-attention blocks): the paper's §5.4 drops embeddings + positions and each
    sublayer's output before the residual add; torch's nn.MultiheadAttention drops the
    attention weights and nn.TransformerEncoderLayer the feed-forward's hidden activation.
    The final layer norm and the head are not dropped."""
    B, T, H, D, F, N, RATE = 3, 6, 2, 8, 12, 2, 0.25
    rng = np.random.default_rng(6)
    p = lm.init(rng, **dict(SMALL, d_model=D, n_heads=H, d_ff=F, n_layers=N), dropout=RATE,
                dtype=np.float64)
    ids = rng.integers(0, SMALL["vocab_size"], size=(B, T))
    lm.apply(p, ids, training=True, rng=np.random.default_rng(0))
    block = [(B, H, T, T),  # causal self-attention weights
             (B, T, D),  # self-attention sublayer output, before the residual add
             (B, T, F),  # feed-forward hidden activation (after relu)
             (B, T, D)]  # feed-forward sublayer output, before the residual add
    want = [(B, T, D)] + N * block  # embeddings · √D + positions, then each block
    assert len(want) == 1 + 4 * N == 9
    assert sorted(dropout_sites) == sorted((shape, RATE) for shape in want)
