"""Nucleus (top-p) sampling in models/decoding.py against a direct computation: the nucleus
found by walking the sorted probabilities in a Python loop, and the frequencies of 20,000
draws against the renormalized probabilities inside it; with temperature and top_k first."""
import numpy as np
import pytest

from models import decoding, lm

LOGITS = np.array([1.0, -0.5, 2.0, 0.3, 1.7, -2.0, 0.9])


def nucleus_by_loop(logits, top_p):
    """The most probable tokens, one by one, until their probabilities sum to >= top_p."""
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    kept, mass = [], 0.0
    for token in sorted(range(len(probs)), key=lambda t: -probs[t]):
        kept.append(token)
        mass += probs[token]
        if mass >= top_p:
            break
    return kept


def restricted(logits, kept):
    probs = np.zeros(len(logits))
    probs[kept] = np.exp(logits[kept] - logits[kept].max())
    return probs / probs.sum()


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, None, 0.6), (0.5, None, 0.9),
                                                       (2.0, 5, 0.7), (1.0, None, 1.0),
                                                       (1.0, None, 1e-9)])
def test_top_p_draws_follow_the_nucleus(temperature, top_k, top_p):
    rows = np.tile(LOGITS, (20000, 1))
    z = LOGITS / temperature
    if top_k is not None:
        z = np.where(np.isin(np.arange(7), np.argsort(LOGITS)[-top_k:]), z, -np.inf)
    kept = nucleus_by_loop(z, top_p)
    drawn = decoding.sample_next(rows, temperature, top_k, np.random.default_rng(5), top_p)
    assert set(np.unique(drawn)) == set(kept)
    np.testing.assert_allclose(np.bincount(drawn, minlength=7) / 20000, restricted(z, kept),
                               atol=0.012)


def test_the_nucleus_of_each_row_equals_the_loops():
    rows = np.random.default_rng(0).standard_normal((50, 11)) * 2
    for top_p in (0.1, 0.5, 0.95):
        got = decoding.nucleus(rows, top_p)
        for row, z in zip(rows, got):
            assert set(np.flatnonzero(np.isfinite(z))) == set(nucleus_by_loop(row, top_p))
            np.testing.assert_array_equal(z[np.isfinite(z)], row[np.isfinite(z)])


@pytest.mark.parametrize("top_p", [0.0, -0.1, 1.5, np.nan])
def test_a_top_p_outside_0_1_is_refused(top_p):
    with pytest.raises(ValueError, match=r"^f: top_p must lie in \(0, 1\], got "):
        decoding.check_sampling("f", 1.0, None, 5, np.random.default_rng(0), top_p)


def test_lm_generate_takes_top_p_as_a_loop_of_sample_next_over_apply():
    p = lm.init(np.random.default_rng(0), 13, 16, 2, 32, 1, 20, dtype=np.float64)
    prompt = np.array([[1, 2, 3]])
    got = lm.generate(p, prompt, 6, 0.9, None, np.random.default_rng(3), top_p=0.8)
    rng, ids = np.random.default_rng(3), prompt
    for _ in range(6):
        token = decoding.sample_next(lm.apply(p, ids)[:, -1], 0.9, None, rng, 0.8)
        ids = np.concatenate([ids, token[:, None]], axis=1)
    np.testing.assert_array_equal(got, ids)
