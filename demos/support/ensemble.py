"""The classify demo's ensemble: the transformer and the bag-of-words baseline, trained on
the same reviews in one run, answer together by the mean of their class probabilities:

    p(c | x) = (p_transformer(c | x) + p_bag(c | x)) / 2

The two models err on different reviews (one reads the order of the first --max-len words
through attention, the other counts every word and word pair), which is the known way past
either alone (wide and deep models; NBSVM's mix of a bag of n-grams and a linear model).
The plain mean has no weight to choose, so nothing in it is fitted to any split of the data:
the test reviews stay a test. A confident model outvotes an unsure one (0.95 against 0.40
is 0.675 for the first one's class).

    p = ensemble.mean_probabilities(transformer_p, bag_p)   # (N, C) each -> (N, C)
    ensemble.accuracy(p, labels)                               # the fraction right
"""
import numpy as np

NAME = "ensemble (the mean of the two models' probabilities)"


def mean_probabilities(*probabilities):
    """The mean of several models' class probabilities of the same reviews, each (N, C):
    -> (N, C), in their common dtype (float32 stays float32)."""
    shapes = {p.shape for p in probabilities}
    dtypes = {p.dtype for p in probabilities}
    if len(shapes) != 1 or len(dtypes) != 1:
        raise ValueError(f"ensemble.mean_probabilities: expected arrays of one shape and "
                         f"dtype, got {[(p.shape, str(p.dtype)) for p in probabilities]}")
    return np.mean(np.stack(probabilities), axis=0)  # (N, C)


def accuracy(probabilities, labels):
    """The fraction of rows whose most probable class (the first on a tie) is the label."""
    return float(np.mean(np.argmax(probabilities, axis=1) == np.asarray(labels)))
