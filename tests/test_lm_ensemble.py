"""lm's ensembles: the mean of several models' next-token probabilities, against plain numpy
(softmaxes averaged) and against full forward passes of each model, token by token."""
import numpy as np
import pytest

from models import lm

VOCAB = 7


def model(seed, max_len=10):
    return lm.init(np.random.default_rng(seed), VOCAB, d_model=8, n_heads=2, d_ff=16,
                   n_layers=2, max_len=max_len)


def softmax(logits):
    logits = np.asarray(logits, np.float64)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def mean_probabilities(members, ids):
    """(B, T, V) float64: the members' softmax(apply) averaged, in plain numpy."""
    return np.mean([softmax(lm.apply(p, ids)) for p in members], axis=0)


def test_mixture_logits_softmax_to_the_mean_of_the_softmaxes_in_their_dtype():
    rng = np.random.default_rng(0)
    logits = [rng.normal(0, 3, (2, 3, VOCAB)).astype(np.float32) for _ in range(3)]
    mixed = lm.mixture_logits(logits)
    assert mixed.dtype == np.float32 and mixed.shape == (2, 3, VOCAB)
    np.testing.assert_allclose(np.exp(mixed), np.mean([softmax(l) for l in logits], axis=0),
                               rtol=1e-5, atol=1e-7)
    assert lm.mixture_logits(logits[:1]) is logits[0]  # one model: its own logits


def test_greedy_ensemble_generation_picks_the_most_probable_token_of_the_mean():
    members = (model(0), model(1), model(3))
    prompt = np.array([[1, 2], [4, 4]])
    ids = lm.ensemble_generate(members, prompt, 6, temperature=0.0)
    expected = prompt
    for _ in range(6):  # each token from full forward passes of every model, no cache
        after = mean_probabilities(members, expected)[:, -1].argmax(-1)
        expected = np.concatenate([expected, after[:, None]], axis=1)
    np.testing.assert_array_equal(ids, expected)


def test_an_ensemble_of_one_samples_and_searches_as_the_model_itself():
    p, prompt = model(0), np.array([[3, 1, 2]])
    sampled = lm.ensemble_generate((p,), prompt, 5, temperature=0.9, top_k=4,
                                   rng=np.random.default_rng(7))
    np.testing.assert_array_equal(sampled, lm.generate(p, prompt, 5, temperature=0.9, top_k=4,
                                                       rng=np.random.default_rng(7)))
    np.testing.assert_array_equal(lm.ensemble_beam_search((p,), prompt, 5, beam_size=3),
                                  lm.beam_search(p, prompt, 5, beam_size=3))


def test_ensemble_beam_search_finds_the_most_probable_continuation_of_the_mean():
    members, prompt = (model(0), model(1)), np.array([[2, 5]])
    best = lm.ensemble_beam_search(members, prompt, 3, beam_size=VOCAB ** 2)
    # every continuation of 3 tokens, scored by the mean probabilities of full forward passes
    scores = {}
    for a in range(VOCAB):
        for b in range(VOCAB):
            for c in range(VOCAB):
                ids = np.array([[2, 5, a, b, c]])
                p = mean_probabilities(members, ids[:, :-1])[0]  # (4, V)
                scores[(a, b, c)] = np.log(p[1, a]) + np.log(p[2, b]) + np.log(p[3, c])
    assert tuple(best[0, 2:]) == max(scores, key=scores.get)


def test_the_members_must_be_language_models_of_one_vocabulary_and_length():
    prompt = np.array([[1]])
    with pytest.raises(ValueError, match=r"lm.ensemble_generate: members must be one or more "
                                         r"lm.LM parameters, got \[\]"):
        lm.ensemble_generate((), prompt, 2, temperature=0.0)
    other = lm.init(np.random.default_rng(0), VOCAB + 1, 8, 2, 16, 1, max_len=10)
    with pytest.raises(ValueError, match=r"lm.ensemble_beam_search: the members must share "
                                         r"the vocabulary and max_len, got \(vocab, max_len\) "
                                         r"= \[\(7, 10\), \(8, 10\)\]"):
        lm.ensemble_beam_search((model(0), other), prompt, 2)
    with pytest.raises(ValueError, match=r"\(7, 10\), \(7, 12\)"):
        lm.ensemble_generate((model(0), model(1, max_len=12)), prompt, 2, temperature=0.0)
