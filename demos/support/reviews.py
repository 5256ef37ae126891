"""Generated reviews whose label depends on word order: the classify demo's default data.

A review is one clause, or two joined by "and" (both of the review's polarity) or by "but"
(opposite polarities: the clause after "but" decides). A clause says how one aspect was;
"not" before the adverb flips the adjective:

    the battery was really good overall                                        positive
    the battery was not really good overall                                    negative
    the food is very good honestly but the staff was quite poor this time      negative
    the staff was quite poor this time but the food is very good honestly      positive

Every adjective has an adverb before it and every clause ends with a closing phrase, drawn
at random, so that only the order of the words says which clause a word belongs to and
whether "not" applies: "really good" is in the positive clause and in the negated one
above, and swapping the clauses around "but" keeps every word and every pair of
neighbouring words while it turns the label over. The adjectives still lean towards the
label (a clause is negated a third of the time), which gives a learner its first signal: a
bag of words and word pairs gets about 60% of the reviews right, a model that reads the
order nearly all.
"""
import numpy as np

CLASS_NAMES = ("negative", "positive")
ASPECTS = ("food", "service", "battery", "screen", "price", "staff", "sound", "delivery",
           "packaging", "design")
ADJECTIVES = {0: ("bad", "poor", "awful", "disappointing", "terrible", "mediocre"),
              1: ("good", "great", "excellent", "decent", "impressive", "pleasant")}
ADVERBS = ("very", "really", "quite", "truly", "particularly", "especially")
CLOSINGS = ("overall", "honestly", "to be fair", "in my opinion", "this time")
VERBS = ("was", "is")
SHAPES = ("one clause", "and", "but")
NEGATED_SHARE = 1 / 3  # of the clauses; at 1/2 no adjective would say anything alone


def pick(rng, options):
    return options[rng.integers(len(options))]


def clause(rng, polarity, aspect):
    """One clause about `aspect` whose meaning is `polarity` (0 negative, 1 positive); negated
    half of the time, with an adjective of the other polarity."""
    negated = rng.random() < NEGATED_SHARE
    adjective = pick(rng, ADJECTIVES[polarity ^ negated])
    return (f"the {aspect} {pick(rng, VERBS)} {'not ' if negated else ''}{pick(rng, ADVERBS)} "
            f"{adjective} {pick(rng, CLOSINGS)}")


def review(rng, label):
    """A review of polarity `label`: one clause, two that agree ("and"), or two that disagree
    ("but"), the last one deciding."""
    shape = pick(rng, SHAPES)
    first, second = rng.choice(len(ASPECTS), size=2, replace=False)
    if shape == "one clause":
        return clause(rng, label, ASPECTS[first])
    if shape == "and":
        return f"{clause(rng, label, ASPECTS[first])} and {clause(rng, label, ASPECTS[second])}"
    return f"{clause(rng, 1 - label, ASPECTS[first])} but {clause(rng, label, ASPECTS[second])}"


def generate(n, seed):
    """n reviews and their labels (n,) int64 (0 negative, 1 positive, in equal shares up to
    one), shuffled; the same for the same seed."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % 2)  # (n,)
    return [review(rng, int(label)) for label in labels], labels.astype(np.int64)
