"""The transformer's decoding: start / step against recomputing the prefix with
transformer.apply, greedy_decode against beam size 1, beam_search against exhaustive search
of its own objective and against a plain search over recomputed prefixes, sample against
the distribution apply gives. (These tests lived in test_decoding.py while decoding.py held
the transformer's incremental decoder; the model-free searches are tested there now.)"""
import itertools

import numpy as np
import pytest

import autograd_lite as ag
from models import decoding, transformer
from helpers.search import (assert_only_eos_after_eos, exhaustive_search,
                            reference_beam_search)
from helpers.tiny_models import perturbed, tiny_transformer

BOS, EOS, PAD = 1, 2, 0


def tiny(seed=0, norm="post", vocab=6, dtype=np.float64, d_model=8):
    """Larger weights than Glorot (scale 0.5), so that the model's choices depend on the
    prefix."""
    return tiny_transformer(seed, tgt_vocab=vocab, scale=0.5, d_model=d_model, n_encoder=1,
                            max_len=12, norm=norm, dropout=0.1, dtype=dtype)


def sources(seed=1, b=3, s=5):
    rng = np.random.default_rng(seed)
    src = rng.integers(1, 7, (b, s))  # (B, S)
    src[0, 3:] = PAD
    return src


def sequence_log_prob(p, src, ids, eos=EOS):
    """log P(ids[1:] | src) by transformer.apply over the whole sequence, up to the first eos;
    with the number of tokens counted after bos.  ids: (B, L) -> ((B,), (B,))"""
    log_probs = ag.log_softmax(transformer.apply(p, src, ids[:, :-1], PAD))  # (B, L-1, V)
    picked = np.take_along_axis(log_probs, ids[:, 1:, None], axis=2)[:, :, 0]  # (B, L-1)
    ended = np.cumsum(ids[:, 1:] == eos, axis=1)  # (B, L-1): eos seen at or before
    counted = (ended == 0) | ((ended == 1) & (ids[:, 1:] == eos))
    return (picked * counted).sum(axis=1), counted.sum(axis=1)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_cached_steps_give_the_logits_of_the_whole_prefix(norm):
    p = tiny(norm=norm)
    src = sources()
    tgt = np.random.default_rng(2).integers(0, 6, (3, 7))  # (B, T) an arbitrary prefix
    want = transformer.apply(p, src, tgt, PAD)  # (B, T, V)
    state = transformer.start(p, src, PAD)
    for t in range(tgt.shape[1]):
        logits, state = transformer.step(p, state, tgt[:, t:t + 1])  # (B, V)
        np.testing.assert_allclose(logits, want[:, t], rtol=0, atol=1e-10)
    assert state.layers[0].self_kv[0].shape == (3, 2, 7, 4) and state.length == 7


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_a_step_of_several_tokens_gives_the_logits_after_the_last(norm):
    """Feeding a prefix in chunks (3 tokens, then 1, then 3) is feeding it token by token."""
    p = tiny(norm=norm)
    src = sources()
    tgt = np.random.default_rng(3).integers(0, 6, (3, 7))  # (B, T)
    want = transformer.apply(p, src, tgt, PAD)  # (B, T, V)
    state = transformer.start(p, src, PAD)
    for begin, end in [(0, 3), (3, 4), (4, 7)]:
        logits, state = transformer.step(p, state, tgt[:, begin:end])  # (B, V)
        np.testing.assert_allclose(logits, want[:, end - 1], rtol=0, atol=1e-10)


def test_reorder_takes_the_rows_of_every_cache_and_the_memory_mask():
    """Beam search multiplies a source's row into its beams: a reordered state must step like
    a state started from the reordered sources."""
    p = tiny()
    src, tgt = sources(), np.array([[1, 4], [1, 3], [1, 5]])
    rows = np.array([2, 0, 0, 1, 2])
    state = transformer.step(p, transformer.start(p, src, PAD), tgt)[1]
    logits, _ = transformer.step(p, transformer.reorder(state, rows), tgt[rows, 1:])
    np.testing.assert_allclose(logits, transformer.apply(p, src[rows], np.concatenate(
        [tgt[rows], tgt[rows, 1:]], axis=1), PAD)[:, -1], rtol=0, atol=1e-10)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_greedy_is_the_argmax_of_the_recomputed_prefix(norm):
    p = tiny(norm=norm)
    src = sources()
    ids = transformer.greedy_decode(p, src, BOS, EOS, 10, src_pad=PAD)
    want = np.full((3, 1), BOS)
    for _ in range(ids.shape[1] - 1):
        token = transformer.apply(p, src, want, PAD)[:, -1].argmax(-1)  # (B,)
        want = np.concatenate([want, token[:, None]], axis=1)
    ended = np.cumsum(want == EOS, axis=1) > 0
    after_eos = ended & np.roll(ended, 1, axis=1)
    np.testing.assert_array_equal(ids, np.where(after_eos, EOS, want))
    assert ids.dtype == np.int64 and ids.shape[1] <= 10 and (ids[:, 0] == BOS).all()


def test_greedy_stops_at_eos_or_max_len_and_pads_with_eos():
    p = tiny(seed=4)
    src = sources(b=6)
    first = transformer.greedy_decode(p, src, BOS, EOS, 2)[:, 1]  # (B,) each row's first choice
    eos = int(first[0])  # make row 0 end at once
    ids = transformer.greedy_decode(p, src, BOS, eos, 6)
    assert ids.shape[1] == 6 or (ids == eos).any(axis=1).all()  # stopped early: all ended
    assert ids[0, 1] == eos and (ids[0, 1:] == eos).all()
    assert_only_eos_after_eos(ids, eos)
    assert transformer.greedy_decode(p, src, BOS, EOS, 1).tolist() == [[BOS]] * 6


@pytest.mark.parametrize("seed", range(4))
def test_greedy_equals_beam_size_one(seed):
    p = tiny(seed=seed, dtype=np.float32 if seed % 2 else np.float64)
    src = sources(seed=seed)
    ids, scores = transformer.beam_search_with_scores(p, src, BOS, EOS, 10, beam_size=1,
                                                      src_pad=PAD)
    np.testing.assert_array_equal(ids, transformer.greedy_decode(p, src, BOS, EOS, 10,
                                                                 src_pad=PAD))
    log_p, length = sequence_log_prob(p, src, ids)
    np.testing.assert_allclose(scores, log_p / ((5 + length) / 6) ** 0.6, rtol=0,
                               atol=1e-5 if seed % 2 else 1e-10)


@pytest.mark.parametrize("alpha,seed", [(0.6, 3), (0.0, 3), (2.0, 3), (0.0, 10), (1.0, 10)])
def test_beam_search_with_a_wide_beam_is_the_exact_optimum(alpha, seed):
    """With more slots than prefixes, nothing is pruned and the early stop must not cut off
    anything better: beam search must return the maximum of log P / lp over every sequence
    (eos-terminated, or max_len long), found here by enumerating them all."""
    vocab, max_len = 4, 4
    p = tiny(seed=seed, vocab=vocab)
    src = sources(b=2)
    found = transformer.beam_search(p, src, BOS, EOS, max_len, beam_size=vocab ** 3,
                                    length_penalty=alpha, src_pad=PAD)
    for row, source in zip(found, src):
        want, _ = exhaustive_search(next_log_probs(p, source[None]), [BOS], EOS, max_len, alpha)
        assert row[:len(want)].tolist() == list(want) and (row[len(want):] == EOS).all()


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_scores_are_log_prob_over_length_penalty_under_apply(alpha):
    """Every eos id in turn, so that hypotheses end at different steps (this pre-LN model's
    choices depend on the prefix more than the small post-LN ones', which repeat a token)."""
    p = tiny(seed=6, norm="pre")
    src = sources(b=4)
    ends = set()
    for eos, k in itertools.product(range(6), (2, 3)):
        ids, scores = transformer.beam_search_with_scores(p, src, BOS, eos, 8, beam_size=k,
                                                          length_penalty=alpha, src_pad=PAD)
        assert ids.shape[0] == 4 and ids.shape[1] <= 8 and (ids[:, 0] == BOS).all()
        assert_only_eos_after_eos(ids, eos)
        log_p, length = sequence_log_prob(p, src, ids, eos)
        np.testing.assert_allclose(scores, log_p / ((5 + length) / 6) ** alpha, rtol=0,
                                   atol=1e-10)
        ends.update(length.tolist())
    assert len(ends) >= 3  # the fixture does exercise hypotheses of different lengths


def next_log_probs(p, source):
    """log P(next token | tokens, source) by transformer.apply over the whole prefix: the
    reference searches' view of the model.  source: (1, S)"""
    return lambda tokens: ag.log_softmax(transformer.apply(p, source, np.array([tokens]),
                                                           PAD)[0, -1])


@pytest.mark.parametrize("norm,seed", [("pre", 6), ("post", 3)])
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_equals_a_plain_search_over_recomputed_prefixes(norm, seed, alpha):
    p = tiny(seed=seed, norm=norm)
    src = sources(b=3)
    for eos, k in itertools.product(range(0, 6, 2), (2, 3)):
        ids, scores = transformer.beam_search_with_scores(p, src, BOS, eos, 7, beam_size=k,
                                                          length_penalty=alpha, src_pad=PAD)
        for row, score, source in zip(ids, scores, src):
            want, want_score = reference_beam_search(next_log_probs(p, source[None]), [BOS],
                                                     eos, 7, k, alpha)
            assert row[:len(want)].tolist() == want and (row[len(want):] == eos).all()
            assert abs(score - want_score) < 1e-10


def review_model(seed):
    """The reviewer's fixture: a random vocabulary size, weights perturbed by N(0, 1)."""
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(4, 9))
    p = transformer.init(rng, 7, vocab, d_model=8, n_heads=2, d_ff=16, n_encoder=1, n_decoder=1,
                         max_len=12, dtype=np.float64)
    return perturbed(p, rng, 1.0), rng.integers(1, 7, (1, 5))


def test_a_finished_hypothesis_is_not_pushed_out_of_the_beam(monkeypatch):
    """The review's case: eos is outranked by at least two tokens at step 1, so [bos, eos] is
    finished at step 1 while unfinished hypotheses fill a beam of two; and it is more probable
    than greedy's whole sequence. The old search kept it in the beam, where it was pushed out,
    and returned greedy's answer. Expected answer: the plain reference search."""
    p, src = review_model(10)
    first = ag.log_softmax(transformer.apply(p, src, np.array([[BOS]]), PAD)[0, -1])  # (V,)
    assert (first > first[EOS]).sum() >= 2  # the fixture is the case described
    greedy = transformer.greedy_decode(p, src, BOS, EOS, 9, src_pad=PAD)
    assert sequence_log_prob(p, src, greedy)[0][0] < first[EOS]
    steps = []
    counted = transformer.step
    monkeypatch.setattr(transformer, "step", lambda *args: steps.append(1) or counted(*args))
    for k in (2, 3, 4):
        del steps[:]
        ids, score = transformer.beam_search_with_scores(p, src, BOS, EOS, 9, beam_size=k,
                                                         length_penalty=0.0, src_pad=PAD)
        want, want_score = reference_beam_search(next_log_probs(p, src), [BOS], EOS, 9, k,
                                                 0.0)
        assert ids.tolist() == [want] == [[BOS, EOS]]
        np.testing.assert_allclose(score, [want_score], rtol=0, atol=1e-12)
        np.testing.assert_allclose(score, [first[EOS]], rtol=0, atol=1e-12)
        assert len(steps) < 9 - 1  # stopped before max_len: nothing live could beat [bos, eos]


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_search_never_scores_below_the_finished_bos_eos(alpha):
    """[bos, eos] is finished at step 1 of every search: no result may score below it. The
    old search lost it (as in the review's case) whenever unfinished hypotheses outranked it."""
    for seed in range(12):
        p, src = review_model(seed)
        first = ag.log_softmax(transformer.apply(p, src, np.array([[BOS]]), PAD)[0, -1])
        for k in (2, 3):
            ids, score = transformer.beam_search_with_scores(p, src, BOS, EOS, 9, beam_size=k,
                                                             length_penalty=alpha, src_pad=PAD)
            log_p, length = sequence_log_prob(p, src, ids)
            np.testing.assert_allclose(score, log_p / ((5 + length) / 6) ** alpha, atol=1e-10)
            assert score[0] >= first[EOS] / (6 / 6) ** alpha - 1e-12, (seed, k)


def chain_model():
    """A decoder whose next token depends on the last token only (no blocks; embeddings so
    large that the positions do not matter), over the vocabulary {0, 1 = bos, 2 = eos, 3}:
    after bos, P(eos) = 0.6 and P(3) = 0.4; after 3, P(3) ≈ 1."""
    rng = np.random.default_rng(0)
    vocab, d = 4, 8
    p = transformer.init(rng, 5, vocab, d_model=d, n_heads=2, d_ff=8, n_encoder=0, n_decoder=0,
                         max_len=12, dtype=np.float64)
    table = 1e4 * rng.standard_normal((vocab, d))  # (V, D)
    scaled = table * np.sqrt(d)
    h = (scaled - scaled.mean(-1, keepdims=True)) / np.sqrt(scaled.var(-1, keepdims=True) + 1e-5)
    logits = np.full((vocab, vocab), -20.0)  # row: the last token; column: the next
    logits[BOS, [EOS, 3]] = np.log(0.6), np.log(0.4)
    logits[3, 3] = 20.0
    w = np.linalg.lstsq(h[[BOS, 3]], logits[[BOS, 3]], rcond=None)[0]  # (D, V)
    return p._replace(tgt_embed=p.tgt_embed._replace(table=table),
                      out=p.out._replace(w=w, b=np.zeros(vocab)))


def test_a_hypothesis_that_wins_by_its_length_penalty_is_not_cut_off():
    """log P / lp with α = 2: [bos, eos] scores log 0.6 / 1 = -0.51 at step 1, while the live
    [bos, 3] has log 0.4 = -0.92. Divided by the next length's lp it could not win (-0.67),
    but lp grows with the length: at 8 tokens [bos, 3, ..., 3] scores -0.92 / (13/6)² = -0.20
    and wins. The search may stop only at the largest lp still possible."""
    p, src = chain_model(), np.array([[1, 2, 3]])
    ids, score = transformer.beam_search_with_scores(p, src, BOS, EOS, 9, beam_size=2,
                                                     length_penalty=2.0)
    assert ids.tolist() == [[BOS] + [3] * 8]
    # the designed probabilities hold to ~1e-4 (the position encoding moves them slightly)
    np.testing.assert_allclose(score, [np.log(0.4) / (13 / 6) ** 2], rtol=1e-3)
    want, want_score = reference_beam_search(next_log_probs(p, src), [BOS], EOS, 9, 2, 2.0)
    assert ids[0].tolist() == want and abs(score[0] - want_score) < 1e-12
    short, short_score = transformer.beam_search_with_scores(p, src, BOS, EOS, 9, beam_size=2,
                                                             length_penalty=0.0)
    assert short.tolist() == [[BOS, EOS]]  # without the penalty the early eos wins
    np.testing.assert_allclose(short_score, [np.log(0.6)], rtol=1e-3)


def test_beam_search_can_score_below_greedy():
    """Not guaranteed: pruning can drop greedy's prefix, and the survivors can end worse.
    A concrete case (found by searching seeds): beam size 2 on source 4. The beam's answer is
    the plain reference search's, and both sequences are scored by transformer.apply."""
    p = tiny_transformer(14, tgt_vocab=10, scale=0.5, n_encoder=1, n_decoder=1, max_len=12)
    src = sources(seed=14, b=8)
    greedy = transformer.greedy_decode(p, src, BOS, EOS, 10, src_pad=PAD)
    beam, scores = transformer.beam_search_with_scores(p, src, BOS, EOS, 10, beam_size=2,
                                                       length_penalty=1.0, src_pad=PAD)
    want, want_score = reference_beam_search(next_log_probs(p, src[4:5]), [BOS], EOS, 10, 2, 1.0)
    assert beam[4, :len(want)].tolist() == want and (beam[4, len(want):] == EOS).all()
    assert abs(scores[4] - want_score) < 1e-10
    greedy_log_p, greedy_length = sequence_log_prob(p, src, greedy)
    log_p, length = sequence_log_prob(p, src, beam)
    np.testing.assert_allclose(scores, log_p / ((5 + length) / 6), atol=1e-10)
    assert scores[4] < greedy_log_p[4] / ((5 + greedy_length[4]) / 6) - 1e-6


def test_bad_arguments_are_named():
    p = tiny()
    with pytest.raises(ValueError, match=r"greedy_decode: max_len=13 must lie in \[1, 12\]"):
        transformer.greedy_decode(p, sources(), BOS, EOS, 13)
    with pytest.raises(ValueError, match=r"beam_search: beam_size must be >= 1, got 0"):
        transformer.beam_search(p, sources(), BOS, EOS, 5, beam_size=0)


def uncached_sample(p, src, eos, max_len, temperature, top_k, rng):
    """The reference: each token drawn by decoding.sample_next from transformer.apply over the
    whole prefix; a row that has emitted eos gets eos, and the loop stops when all have."""
    ids = np.full((len(src), 1), BOS)
    while ids.shape[1] < max_len and not (ids[:, 1:] == eos).any(axis=1).all():
        logits = transformer.apply(p, src, ids, PAD)[:, -1]  # (B, V)
        token = decoding.sample_next(logits, temperature, top_k, rng)  # (B,)
        token = np.where((ids[:, 1:] == eos).any(axis=1), eos, token)
        ids = np.concatenate([ids, token[:, None]], axis=1)
    return ids


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.8, 3), (0.0, None)])
def test_sample_equals_sampling_from_recomputed_prefixes(temperature, top_k):
    p = tiny(seed=3, norm="pre")
    src = sources(b=6)
    for eos in (0, 3):  # rows of this fixture end at different steps, or run to max_len
        ids = transformer.sample(p, src, BOS, eos, 10, temperature, top_k,
                                 np.random.default_rng(7), src_pad=PAD)
        want = uncached_sample(p, src, eos, 10, temperature, top_k, np.random.default_rng(7))
        np.testing.assert_array_equal(ids, want)
        assert ids.dtype == np.int64
        assert_only_eos_after_eos(ids, eos)


def test_sample_at_temperature_0_is_greedy_decode():
    p = tiny(norm="pre")
    src = sources()
    np.testing.assert_array_equal(
        transformer.sample(p, src, BOS, EOS, 10, temperature=0.0, src_pad=PAD),
        transformer.greedy_decode(p, src, BOS, EOS, 10, src_pad=PAD))


def test_sampled_first_tokens_follow_the_softmax_of_apply():
    """20,000 copies of one source, one token each: the frequencies are softmax(logits / T)
    over the 3 largest of apply's logits (a 5-sigma band around each probability)."""
    p, n = tiny(seed=2), 20000
    src = np.repeat(sources()[:1], n, axis=0)  # (N, S)
    logits = transformer.apply(p, src[:1], np.array([[BOS]]), PAD)[0, -1]  # (V,)
    ids = transformer.sample(p, src, BOS, EOS, 2, temperature=0.7, top_k=3,
                             rng=np.random.default_rng(0), src_pad=PAD)
    top3 = np.argsort(logits)[-3:]
    want = np.zeros(len(logits))
    want[top3] = np.exp(logits[top3] / 0.7) / np.exp(logits[top3] / 0.7).sum()
    band = 5 * np.sqrt(want * (1 - want) / n) + 1e-12
    assert (np.abs(np.bincount(ids[:, 1], minlength=len(logits)) / n - want) <= band).all()


def test_sample_names_its_bad_arguments():
    p = tiny()
    with pytest.raises(ValueError, match=r"transformer.sample: top_k must lie in 1..6"):
        transformer.sample(p, sources(), BOS, EOS, 5, top_k=7, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"transformer.sample: max_len=13 must lie in \[1, 12\]"):
        transformer.sample(p, sources(), BOS, EOS, 13, rng=np.random.default_rng(0))
