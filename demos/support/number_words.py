"""The translation task of demos.translate: whole numbers written in digits, to English words.

    4721       -> four thousand seven hundred twenty one
    100000     -> one hundred thousand
    12000005   -> twelve million five
    0          -> zero

American usage without "and" or hyphens, so every word is one token; numbers from 0 to
999,999,999. The digits fall into groups of three (millions, thousands, units), each
group below a thousand is written the same way and followed by its scale word. The
source is the digit string, one token per character; the target is the word sequence
between BOS and EOS. The vocabularies are fixed by the task, not read from data: 10
digits, and 31 words (zero..nineteen, the eight tens, hundred, thousand, million). A model
that shares one matrix between both embeddings and its output (the paper's §3.4) reads and
writes one vocabulary, JOINT_VOCAB: the target's tokens, then the ten digits.

`held_out_values` draws a fixed set of values uniformly from the whole range with a
seeded generator; `sample_values` draws training values from the other values only, so
the held-out exact match measures translation of numbers the model has never seen.
Training draws favour short numbers and 000 groups, which uniform draws rarely give.

Token arrays are batch first: sources (B, S) and targets (B, T), padded with PAD = 0.
"""
import numpy as np

LARGEST = 999_999_999
N_VALUES = LARGEST + 1
SCALES = ("million", "thousand", "")  # the groups of three digits, from the left

UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()  # 20, 30, .., 90

PAD, BOS, EOS = 0, 1, 2  # shared by both vocabularies (digits have no BOS/EOS, but keep the ids)
SOURCE_VOCAB = ("<pad>", "<bos>", "<eos>") + tuple("0123456789")
TARGET_VOCAB = (("<pad>", "<bos>", "<eos>") + tuple(UNITS) + tuple(TENS)
                + ("hundred", "thousand", "million"))
JOINT_VOCAB = TARGET_VOCAB + tuple("0123456789")  # TARGET_VOCAB's ids keep their meaning
SOURCE_IDS = {token: i for i, token in enumerate(SOURCE_VOCAB)}
TARGET_IDS = {token: i for i, token in enumerate(TARGET_VOCAB)}
JOINT_IDS = {token: i for i, token in enumerate(JOINT_VOCAB)}
MAX_DIGITS = len(str(LARGEST))  # 9
MAX_WORDS = 14  # 777,777,777: (seven hundred seventy seven) × 3 and two scale words
ZERO_GROUP_RATE = 0.15  # how often training zeroes a group of three digits: sample_values


def check_value(n):
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or not 0 <= n <= LARGEST:
        raise ValueError(f"number_words: expected an integer in [0, {LARGEST}], got {n!r}")


def below_thousand(n):
    """Words for 1 <= n <= 999: [units hundred] [tens] [units], teens as one word."""
    hundreds, rest = divmod(n, 100)
    words = [UNITS[hundreds], "hundred"] if hundreds else []
    if rest >= 20:
        tens, units = divmod(rest, 10)
        words.append(TENS[tens - 2])
        if units:
            words.append(UNITS[units])
    elif rest:
        words.append(UNITS[rest])
    return words


def to_words(n):
    """English words of 0 <= n <= 999,999,999 as a list:
    4721 -> [four, thousand, seven, hundred, twenty, one]."""
    check_value(n)
    if n == 0:
        return ["zero"]
    words = []
    n = int(n)
    groups = (n // 1000 ** 2, n // 1000 % 1000, n % 1000)  # millions, thousands, units
    for group, scale in zip(groups, SCALES):
        if group:
            words += below_thousand(group) + ([scale] if scale else [])
    return words


def pad_rows(rows, length):
    """Lists of token ids -> (len(rows), length) int64, right-padded with PAD."""
    out = np.full((len(rows), length), PAD, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def encode_sources(values, ids=SOURCE_IDS):
    """Digit strings as token ids of `ids` (SOURCE_IDS, or JOINT_IDS for one vocabulary).
    values: (B,) -> (B, MAX_DIGITS), PAD after the digits."""
    return pad_rows([[ids[c] for c in str(int(v))] for v in values], MAX_DIGITS)


def encode_targets(values):
    """[BOS, words.., EOS] as token ids.  values: (B,) -> (B, MAX_WORDS + 2), PAD after EOS."""
    return pad_rows([[BOS] + [TARGET_IDS[w] for w in to_words(int(v))] + [EOS] for v in values],
                    MAX_WORDS + 2)


def decode_words(ids):
    """Target ids (one row) -> the words up to the first EOS (BOS and PAD dropped). The ids
    may be JOINT_VOCAB's: a model of one vocabulary may write a digit, which is shown."""
    words = []
    for i in np.asarray(ids).tolist():
        if i == EOS:
            break
        if i not in (PAD, BOS):
            words.append(JOINT_VOCAB[i])
    return words


def held_out_values(n, seed=0):
    """n distinct values drawn uniformly from 0..999,999,999 by a seeded generator, ascending:
    the values that training never sees.  -> (n,) int64"""
    if not 0 < n <= 100_000:
        raise ValueError(f"number_words.held_out_values: n must lie in [1, 100000], got {n}")
    return np.sort(np.random.default_rng(seed).choice(N_VALUES, size=n, replace=False))


def is_member(values, sorted_set):
    """values (n,) -> (n,) bool: which of them are in the ascending array sorted_set."""
    at = np.searchsorted(sorted_set, values).clip(max=len(sorted_set) - 1)
    return sorted_set[at] == values


def zero_some_groups(rng, values, digits, rate):
    """Set each group of three digits right of the leading one to 000 with probability `rate`:
    608,613,503 -> 608,000,503. The digit count stays.  values, digits: (n,) -> (n,)"""
    scale = 1000 ** np.arange(len(SCALES))  # (3,): units, thousands, millions
    groups = values[:, None] // scale % 1000  # (n, 3)
    leading = (digits - 1) // 3  # (n,) the index of the leading group
    zeroed = (np.arange(len(SCALES)) < leading[:, None]) & (rng.random(groups.shape) < rate)
    return np.where(zeroed, 0, groups) @ scale  # (n,)


def sample_values(rng, n, held_out, zero_group_rate=ZERO_GROUP_RATE):
    """n training values, never one of `held_out` (ascending, as held_out_values returns it):
    a digit count uniform in 1..9 (so short numbers are as common as long ones), a value
    uniform among those with that many digits, then each group right of the leading one
    zeroed with probability zero_group_rate (zero_some_groups).  -> (n,) int64

    Uniform values have a 000 group once in 500 nine-digit numbers; trained on those, the
    model misread them (608,000,503 -> "six hundred eight million five hundred five"),
    1 to 6 of 2,000 held-out numbers. With groups zeroed 15% of the time it did not.
    """
    out = np.empty(0, dtype=np.int64)
    while out.size < n:
        digits = rng.integers(1, MAX_DIGITS + 1, size=n)  # (n,)
        low = np.where(digits == 1, 0, 10 ** (digits - 1))  # 0..9, 10..99, 100..999, ..
        values = zero_some_groups(rng, rng.integers(low, 10 ** digits), digits,
                                  zero_group_rate)  # (n,)
        out = np.concatenate([out, values[~is_member(values, held_out)]])
    return out[:n]
