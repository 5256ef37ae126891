"""demos/support/ensemble.py: the mean of two models' class probabilities, against fixtures
worked by hand; the classify demo's ensemble figure against the two models recomputed on
their own is in test_demo_classify.py."""
import numpy as np
import pytest

from demos.support import ensemble


def test_the_mean_of_two_models_probabilities_by_hand():
    transformer = np.array([[0.9, 0.1], [0.3, 0.7], [0.55, 0.45]], np.float32)
    bag = np.array([[0.6, 0.4], [0.9, 0.1], [0.25, 0.75]], np.float32)
    p = ensemble.mean_probabilities(transformer, bag)
    assert p.dtype == np.float32 and p.shape == (3, 2)
    # (0.9 + 0.6) / 2, (0.3 + 0.9) / 2, (0.55 + 0.25) / 2 in the first column
    np.testing.assert_allclose(p, [[0.75, 0.25], [0.6, 0.4], [0.4, 0.6]], rtol=1e-6)
    # row 2: the bag of words, surer (0.9) than the transformer (0.7), outvotes it
    assert p.argmax(axis=1).tolist() == [0, 0, 1]


def test_float64_stays_float64_and_rows_still_sum_to_one():
    rng = np.random.default_rng(0)
    a, b = (rng.dirichlet(np.ones(5), size=7) for _ in range(2))  # (7, 5) float64 each
    p = ensemble.mean_probabilities(a, b)
    assert p.dtype == np.float64
    np.testing.assert_allclose(p, 0.5 * a + 0.5 * b, rtol=1e-15)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-14)


def test_accuracy_counts_the_most_probable_class():
    p = np.array([[0.2, 0.8], [0.7, 0.3], [0.5, 0.5], [0.1, 0.9]])
    assert ensemble.accuracy(p, [1, 1, 0, 1]) == 0.75  # a tie goes to class 0


@pytest.mark.parametrize("other", [np.zeros((3, 3), np.float32), np.zeros((2, 2), np.float32),
                                   np.zeros((3, 2), np.float64)])
def test_arrays_of_different_shapes_or_dtypes_are_refused(other):
    with pytest.raises(ValueError, match=r"ensemble.mean_probabilities: expected arrays of one "
                                         r"shape and dtype, got \[\(\(3, 2\), 'float32'\)"):
        ensemble.mean_probabilities(np.zeros((3, 2), np.float32), other)
