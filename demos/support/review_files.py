"""The classify demo's data: a user's file of labelled texts (CSV, JSON lines as in
Amazon-reviews-multi, or sentence<TAB>label lines), split into training and test reviews or
tested on a second file, or, without a file, the generated reviews of demos/support/reviews.py.

Labels become class ids 0..C-1: text labels in sorted order ("negative", "positive"), number
labels in increasing order (stars 1..5 are classes 0..4, named "1".."5"). A test file is read
with the training file's classes; a label the training file does not have is an error.
"""
import pathlib
import re
from typing import NamedTuple

import numpy as np

from models import data

from . import reviews

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".tsv": "tsv", ".txt": "tsv"}
TEST_FRACTION = 0.2
# models.data's wording for a CSV column (read_csv) or JSON key (read_jsonl) the file lacks
MISSING_FIELD = re.compile(r", line \d+: no (column|key) ")


class Reviews(NamedTuple):
    texts: list  # N strings
    labels: np.ndarray  # (N,) int64 class ids


class Split(NamedTuple):
    train: Reviews
    test: Reviews
    class_names: tuple  # the name of each class id
    source: str  # where the reviews came from, for the printout


def file_format(path, given=None):
    """csv, jsonl or tsv: `given`, else from the file's suffix."""
    if given is not None:
        return given
    suffix = pathlib.Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"classify: cannot tell the format of {path} from its suffix "
                         f"{suffix!r} (known: {', '.join(FORMATS)}); pass --format csv, "
                         f"jsonl or tsv")
    return FORMATS[suffix]


def read(path, options, label_names=None):
    """A models.data.Dataset of the file, read as its format says. options: the parsed
    arguments (format, text_column, label_column, labels). A column or key the file lacks is
    an error that says which options name them."""
    try:
        return read_as(file_format(path, options.format), path, options, label_names)
    except ValueError as error:
        if not MISSING_FIELD.search(str(error)):
            raise
        raise ValueError(f"{error}; pass --text-column NAME and --label-column NAME to say "
                         f"which hold the text and the label") from None


def read_as(kind, path, options, label_names):
    """read's Dataset of a file of `kind` (csv, jsonl or tsv)."""
    if kind == "csv":
        return data.read_csv(path, options.text_column or "text", options.label_column or "label",
                             label_names)
    if kind == "jsonl":
        keys = {name: value for name, value in (("text_key", options.text_column),
                                                ("label_key", options.label_column)) if value}
        return data.read_jsonl(path, binary=options.labels == "binary", label_names=label_names,
                               **keys)
    return data.read_tsv(path, label_names, options.text_column, options.label_column)


def classes_of(dataset, binary_stars=False):
    """(class names, the label value of each class or None) of a training file: its text
    labels (read as ids already), or its number labels in increasing order."""
    if dataset.label_names is not None:
        return dataset.label_names, None
    if binary_stars:  # read_jsonl(binary=True): 1-2 stars -> 0, 4-5 -> 1
        return ("negative", "positive"), (0, 1)
    values = tuple(int(v) for v in np.unique(dataset.labels))
    return tuple(str(v) for v in values), values


def check_two_classes(dataset, class_names, values, path):
    """A classifier needs at least two classes among the training file's labels (class_names
    and values as classes_of gives them)."""
    present = np.unique(dataset.labels).tolist()
    if len(present) < 2:
        only = class_names[present[0] if values is None else values.index(present[0])]
        raise ValueError(f"classify: every review in {path} has the label {only!r}: a "
                         f"classifier needs at least two classes")


def class_ids(dataset, values, path):
    """The dataset's labels as class ids: as read for text labels (values None), else the
    place of each number label in `values`."""
    if values is None:
        return dataset.labels
    index = {v: i for i, v in enumerate(values)}
    unknown = sorted(set(dataset.labels.tolist()) - set(index))
    if unknown:
        raise ValueError(f"classify: {path} has the labels {unknown}, which the training file "
                         f"does not have (its labels: {list(values)})")
    return np.array([index[v] for v in dataset.labels.tolist()], dtype=np.int64)


def load(options, generated, seed):
    """The Split to train and test on: options.data (and options.test), or `generated`
    generated reviews. Without a test file, TEST_FRACTION of the reviews, drawn by seed, are
    the test set."""
    if options.data is None:
        texts, labels = reviews.generate(generated, seed)
        return split_off_test(Reviews(texts, labels), reviews.CLASS_NAMES, seed,
                              f"{generated:,} generated reviews (demos/support/reviews.py)",
                              drop_repeats=True)
    dataset = read(options.data, options)
    names, values = classes_of(dataset, binary_stars=options.labels == "binary")
    check_two_classes(dataset, names, values, options.data)
    whole = Reviews(dataset.texts, class_ids(dataset, values, options.data))
    if options.test is None:
        return split_off_test(whole, names, seed, str(options.data))
    test = read(options.test, options, label_names=names if values is None else None)
    if values is not None and test.label_names is not None:
        raise ValueError(f"classify: {options.test} has the text labels {test.label_names} "
                         f"where {options.data} has the numbers {list(values)}")
    return Split(whole, Reviews(test.texts, class_ids(test, values, options.test)), names,
                 f"{options.data}, tested on {options.test}")


def split_off_test(whole, class_names, seed, source, drop_repeats=False):
    """A Split with TEST_FRACTION of `whole` for testing (data.split); drop_repeats leaves
    out test texts that are also training texts (short generated reviews can repeat)."""
    train, test = data.split(len(whole.texts), TEST_FRACTION, seed)
    if drop_repeats:
        seen = {whole.texts[i] for i in train}
        test = np.array([i for i in test if whole.texts[i] not in seen], dtype=np.int64)
    if len(test) == 0 or len(train) == 0:
        raise ValueError(f"{source}: {len(whole.texts)} reviews leave {len(train)} to train on "
                         f"and {len(test)} to test on ({TEST_FRACTION:.0%} held out): give more "
                         f"reviews, or a held-out file with --test FILE")
    pick = lambda rows: Reviews([whole.texts[i] for i in rows], whole.labels[rows])  # noqa: E731
    return Split(pick(train), pick(test), tuple(class_names), source)
