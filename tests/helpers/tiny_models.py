"""Small, seeded models of each family, in float64 unless asked, for the tests that need a
model rather than a particular one. Each factory takes the model's init keywords to change
a size or a setting.

    tiny_transformer(seed, src_vocab=7, tgt_vocab=9, scale=0.1, **init_keywords)
    tiny_classifier(seed, vocab_size=20, n_labels=3, **init_keywords)
    tiny_lm(seed, vocab_size=23, **init_keywords)
    perturbed(p, rng, scale)     every float array of p plus N(0, scale²) noise
    assert_dropout_in_training_only_and_seeded(run)
"""
import numpy as np

import autograd_lite as ag
from models import classifier, lm, transformer

TRANSFORMER = dict(d_model=8, n_heads=2, d_ff=16, n_encoder=2, n_decoder=2, max_len=16,
                   dropout=0.0, dtype=np.float64)
CLASSIFIER = dict(d_model=8, n_heads=2, d_ff=16, n_layers=2, max_len=6, pad=0, dtype=np.float64)
LM = dict(d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=12, dtype=np.float64)


def perturbed(p, rng, scale):
    """p with N(0, scale²) noise added to every float array, in its dtype: nonzero biases and
    layer-norm scales other than 1, so that every parameter matters; at a larger scale, a
    model whose choices depend on the prefix."""
    return ag.tree_map(lambda a: (a + scale * rng.standard_normal(a.shape)).astype(a.dtype)
                       if isinstance(a, np.ndarray) and ag.is_differentiable(a) else a, p)


def tiny_transformer(seed=0, src_vocab=7, tgt_vocab=9, scale=0.1, **init_keywords):
    """An encoder-decoder, perturbed by `scale` with the rng that drew it."""
    rng = np.random.default_rng(seed)
    p = transformer.init(rng, src_vocab, tgt_vocab, **{**TRANSFORMER, **init_keywords})
    return perturbed(p, rng, scale)


def tiny_classifier(seed=0, vocab_size=20, n_labels=3, **init_keywords):
    return classifier.init(np.random.default_rng(seed), vocab_size, n_labels,
                           **{**CLASSIFIER, **init_keywords})


def tiny_lm(seed=0, vocab_size=23, **init_keywords):
    return lm.init(np.random.default_rng(seed), vocab_size, **{**LM, **init_keywords})


def assert_dropout_in_training_only_and_seeded(run):
    """run(training, rng) -> the output of a model (or block) with a nonzero dropout rate:
    inference ignores the rng; training with one seed gives the same bits twice, other
    numbers with another seed, and other numbers than inference. -> inference's output"""
    inference = run(False, None)
    np.testing.assert_array_equal(run(False, np.random.default_rng(0)), inference)
    first, again, other = (run(True, np.random.default_rng(seed)) for seed in (7, 7, 8))
    np.testing.assert_array_equal(first, again)
    assert np.abs(first - inference).max() > 1e-3 and np.abs(first - other).max() > 1e-3
    return inference
