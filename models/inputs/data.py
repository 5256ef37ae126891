"""From files to batches: readers for labelled texts (CSV, JSON lines, TSV) and for a
language model's corpus, a deterministic train / validation split, and the batches of one
epoch for the classifier and the language model.

    texts, labels = data.read_tsv("yelp_labelled.txt")          # a Dataset; unpacks in two
    documents = [text.words(t) for t in texts]
    train, val = data.split(len(texts), validation_fraction=0.1, seed=0)
    tok = text.IndexTokenizer(text.select_vocabulary([documents[i] for i in train]))
    ids = tok.encode_batch(documents, max_len=50)                 # (N, 50)
    epoch_batches = lambda epoch: data.batches(ids[train], labels[train], 32,
                                               rng=np.random.default_rng([seed, epoch]))

Readers decode UTF-8 (a leading byte-order mark is skipped) and end a line at "\\n",
"\\r\\n" or "\\r", as Python's csv module does, and nowhere else: U+0085 or U+2028 inside a
review is not a line break (str.splitlines would break there). Texts and labels are
stripped of surrounding whitespace. Every error names the file and the 1-based line number.
Rows a reader leaves out (a blank line, an empty text, a 3-star review in binary mode, a
TSV's header) are counted per reason in `Dataset.dropped` and reported once by a
`DroppedRowsWarning` naming the file.

Labels become int64 class ids. Integer labels ("0", "1", or JSON numbers) are kept as they
are and label_names is None (one that does not fit in int64 is an error); other labels
(such as "negative", "positive") are numbered in sorted order, and label_names[i] is the
label of id i; two that differ only in case ("Positive", "positive") or are one number
("1", "1.0") are an error naming both, as they are most likely one class spelt two ways.
Pass label_names=[...] to fix the numbering (the same for a training and a test file); a
label not in it is an error.
"""
import csv
import io
import json
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .text import check_count, pad_sequences

INTEGER = re.compile(r"[+-]?\d+")
INT64 = np.iinfo(np.int64)
LINE_END = re.compile(r"\r\n|\r|\n")  # where csv ends a line; not U+0085, U+2028, ...
# a TSV's first line is its header when its label is one of these words (and no other line's)
HEADER_LABELS = ("label", "labels", "class", "category", "sentiment", "polarity", "target",
                 "rating", "stars", "y")


class DroppedRowsWarning(UserWarning):
    """A reader left rows out; the message names the file and the count per reason."""


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """texts (list of N str), labels (N,) int64, label_names (the label of each id, or None for
    integer labels), dropped ({reason: rows left out}). Unpacks as `texts, labels = ...`."""
    texts: list
    labels: np.ndarray
    label_names: tuple = None
    dropped: dict = field(default_factory=dict)

    def __iter__(self):
        return iter((self.texts, self.labels))

    def __repr__(self):
        return (f"Dataset({len(self.texts)} texts, label_names={self.label_names}, "
                f"dropped={self.dropped})")


# --- reading files ----------------------------------------------------------------------------

def read_file(caller, path):
    """The file's text, decoded as UTF-8; an empty file or bytes that are not UTF-8 are errors."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{caller}: {path}, line {line}: not UTF-8 (byte 0x{raw[e.start]:02x}"
                         f" at offset {e.start})") from None
    if not text:
        raise ValueError(f"{caller}: {path} is empty")
    return text


def numbered_lines(text):
    """(line number from 1, line) for the lines of text, ended by "\\n", "\\r\\n" or "\\r" (the
    line end of the last line, if any, starts no other)."""
    lines = LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return enumerate(lines, 1)


class Rows:
    """What one reader keeps of `path` (texts, raw labels and their lines) and what it drops."""

    def __init__(self, caller, path):
        self.caller, self.path = caller, path
        self.texts, self.labels, self.lines = [], [], []
        self.dropped = Counter()

    def error(self, line, message):
        return ValueError(f"{self.caller}: {self.path}, line {line}: {message}")

    def add(self, line, text, label):
        """Keep a row; an empty text is dropped, an empty label is an error."""
        text, label = text.strip(), label.strip()
        if not label:
            raise self.error(line, f"empty label (text {text[:40]!r})")
        if not text:
            self.dropped["empty text"] += 1
            return
        self.texts.append(text)
        self.labels.append(label)
        self.lines.append(line)

    def dataset(self, label_names=None):
        """The Dataset of the rows kept, after one warning that names what was dropped (an
        error if nothing is kept)."""
        dropped = dict(sorted(self.dropped.items()))
        if not self.texts:
            raise ValueError(f"{self.caller}: {self.path} has no rows to return "
                             f"(left out: {dropped})")
        if dropped:
            counts = ", ".join(f"{n} ({reason})" for reason, n in dropped.items())
            warnings.warn(f"{self.caller}: {self.path}: left out {sum(dropped.values())} rows: "
                          f"{counts}; {len(self.texts)} kept", DroppedRowsWarning, stacklevel=3)
        labels, label_names = self.label_ids(label_names)
        return Dataset(self.texts, labels, label_names, dropped)

    def label_ids(self, label_names):
        """(ids (N,) int64, label_names): see the module's docstring."""
        if label_names is None and all(INTEGER.fullmatch(label) for label in self.labels):
            return self.integer_labels(), None
        if label_names is None:
            self.check_one_spelling()
        names = sorted(set(self.labels)) if label_names is None else list(label_names)
        index = {str(name): i for i, name in enumerate(names)}
        if len(index) != len(names):
            raise ValueError(f"{self.caller}: label_names {names} holds a label twice")
        for label, line in zip(self.labels, self.lines):
            if label not in index:
                raise self.error(line, f"label {label!r} is not one of label_names {names}")
        return np.array([index[label] for label in self.labels], dtype=np.int64), tuple(names)

    def integer_labels(self):
        """The labels as int64 numbers; one that does not fit is an error naming its line."""
        values = [int(label) for label in self.labels]
        for value, line in zip(values, self.lines):
            if not INT64.min <= value <= INT64.max:
                raise self.error(line, f"the label {value} does not fit in int64, as a class "
                                       f"must: is this the label column?")
        return np.array(values, dtype=np.int64)

    def check_one_spelling(self):
        """Two labels that are one label written two ways (in another case, or the same
        number: "1" and "1.0") are refused, naming both and their first lines."""
        first = {}  # spelling_key(label) -> (label, its first line)
        for label, line in zip(self.labels, self.lines):
            seen, seen_line = first.setdefault(spelling_key(label), (label, line))
            if seen != label:
                how = "only in case" if seen.casefold() == label.casefold() else "as a number"
                raise self.error(line, f"the label {label!r} is {seen!r} (line {seen_line}) "
                                       f"written another way ({how}): write them one way, or "
                                       f"they are two classes")


def spelling_key(label):
    """What two spellings of one label share: a number's value ("1", "+1", "1.0" -> 1.0),
    else the label's casefolded text."""
    try:
        return float(label)
    except ValueError:
        return label.casefold()


def csv_records(rows, delimiter):
    """(line where the record starts, its fields) for each record of the CSV file rows.path;
    quoting is strict (a stray quote is an error, not a merged field); a TAB-separated file
    has no quoting (a quote is text)."""
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    reader = csv.reader(io.StringIO(read_file(rows.caller, rows.path), newline=""),
                        delimiter=delimiter, strict=True, quoting=quoting)
    line = 1
    try:
        for fields in reader:
            yield line, fields
            line = reader.line_num + 1
    except csv.Error as e:
        raise rows.error(line, f"not valid CSV ({e})") from None


def read_csv(path, text_column, label_column, label_names=None, delimiter=",",
             caller="read_csv"):
    """A CSV file with a header row naming its columns; fields may be quoted and hold commas
    and newlines. -> Dataset(texts, labels, label_names, dropped)"""
    rows = Rows(caller, path)
    records = csv_records(rows, delimiter)
    _, header = next(records)
    for column in (text_column, label_column):
        if column not in header:
            raise rows.error(1, f"no column {column!r}; the columns are {header}")
    text_at, label_at = header.index(text_column), header.index(label_column)
    for line, fields in records:
        if not fields:
            rows.dropped["blank line"] += 1
        elif len(fields) != len(header):
            raise rows.error(line, f"{len(fields)} fields where the header has {len(header)}")
        else:
            rows.add(line, fields[text_at], fields[label_at])
    return rows.dataset(label_names)


def json_label(rows, line, value, binary):
    """A label read from JSON as a string. binary: a 1..5 star rating, 1-2 -> "0", 4-5 -> "1",
    3 -> None (the row is dropped)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise rows.error(line, f"label {value!r} is neither an integer nor a string")
    if not binary:
        return str(value)
    if not (isinstance(value, int) and 1 <= value <= 5):
        raise rows.error(line, f"binary=True needs a star rating 1..5, got {value!r}")
    return None if value == 3 else str(int(value >= 4))


def read_jsonl(path, text_key="review_body", label_key="stars", binary=False, label_names=None):
    """One JSON object a line, as in Amazon-reviews-multi. binary=True reads the label as a star
    rating: 1-2 stars -> 0, 4-5 -> 1, 3-star reviews dropped (as the seed does).
    -> Dataset(texts, labels, label_names, dropped)"""
    rows = Rows("read_jsonl", path)
    for line, content in numbered_lines(read_file(rows.caller, path)):
        if not content.strip():
            rows.dropped["blank line"] += 1
            continue
        try:
            record = json.loads(content)
        except json.JSONDecodeError as e:
            raise rows.error(line, f"not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(record, dict):
            raise rows.error(line, f"expected a JSON object, got {type(record).__name__}")
        for key in (text_key, label_key):
            if key not in record:
                raise rows.error(line, f"no key {key!r}; the keys are {list(record)}")
        if not isinstance(record[text_key], str):
            raise rows.error(line, f"{text_key} is {type(record[text_key]).__name__}, "
                                   f"not a string")
        label = json_label(rows, line, record[label_key], binary)
        if label is None:
            rows.dropped["3 stars, binary=True"] += 1
            continue
        rows.add(line, record[text_key], label)
    return rows.dataset(label_names)


def read_tsv(path, label_names=None, text_column=None, label_column=None):
    """`sentence<TAB>label` lines, as the UCI sentiment sentences. The label follows the last
    TAB, so a sentence may hold a TAB. A first line that is a header is left out (counted
    as dropped): one whose label is a word such as "label" (HEADER_LABELS) that no other
    line has, or a word above labels that are all integers (the sign csv.Sniffer reads).
    With text_column and label_column, the file is a table whose first line names its
    columns, the fields split at every TAB, as csv reads it with delimiter "\\t" and no
    quoting. -> Dataset(texts, labels, label_names, dropped)"""
    if text_column is not None or label_column is not None:
        if text_column is None or label_column is None:
            raise ValueError(f"read_tsv: {path}: pass both text_column and label_column (the "
                             f"header's names of the two), or neither")
        return read_csv(path, text_column, label_column, label_names, delimiter="\t",
                        caller="read_tsv")
    rows = Rows("read_tsv", path)
    for line, content in numbered_lines(read_file(rows.caller, path)):
        if not content.strip():
            rows.dropped["blank line"] += 1
            continue
        sentence, tab, label = content.rpartition("\t")
        if not tab:
            raise rows.error(line, f"no TAB: expected sentence<TAB>label, got {content[:60]!r}")
        rows.add(line, sentence, label)
    drop_header(rows)
    return rows.dataset(label_names)


def drop_header(rows):
    """Leave out the first row of a TSV when it is a header (read_tsv)."""
    if len(rows.labels) < 2:
        return
    first, rest = rows.labels[0], rows.labels[1:]
    named = first.casefold() in HEADER_LABELS and first not in rest
    above_numbers = not INTEGER.fullmatch(first) and all(INTEGER.fullmatch(r) for r in rest)
    if named or above_numbers:
        del rows.texts[0], rows.labels[0], rows.lines[0]
        rows.dropped["the header line"] += 1


def read_text(path):
    """The whole file as one string, line endings as they are: a language model's corpus."""
    return read_file("read_text", path)


# --- splits and batches -------------------------------------------------------------------------

def split(n, validation_fraction, seed):
    """(train, validation): sorted index arrays that partition range(n), with
    round(validation_fraction · n) rows for validation drawn by np.random.default_rng(seed)."""
    check_count("split", "n", n, 0)
    if not 0 <= validation_fraction < 1:
        raise ValueError(f"split: validation_fraction must lie in [0, 1), "
                         f"got {validation_fraction}")
    order = np.random.default_rng(seed).permutation(n)
    n_validation = round(validation_fraction * n)
    return np.sort(order[n_validation:]), np.sort(order[:n_validation])


class Batches:
    """One epoch's batches: the order is fixed when made and each batch is built when
    iterated, so iterating twice gives the same batches; len() is the number of batches."""

    def __init__(self, groups, build):
        self.groups, self.build = groups, build

    def __len__(self):
        return len(self.groups)

    def __iter__(self):
        return (self.build(group) for group in self.groups)


def epoch_groups(caller, n, batch_size, rng, drop_last):
    """Row indices of each batch: range(n) shuffled by rng (in order when rng is None) and cut
    into batch_size rows, the last batch shorter unless drop_last."""
    check_count(caller, "batch_size", batch_size, 1)
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise TypeError(f"{caller}: rng must be an np.random.Generator (np.random.default_rng"
                        f"(...)) or None for the rows in order, got {type(rng).__name__}")
    order = np.arange(n) if rng is None else rng.permutation(n)
    stop = n - n % batch_size if drop_last else n
    return [order[i:i + batch_size] for i in range(0, stop, batch_size)]


def batches(ids, labels, batch_size, rng=None, pad=None, drop_last=False):
    """(ids (B, T), labels (B,)) for every batch of an epoch, rows shuffled by rng (in order
    when rng is None, for validation).

    ids: (N, T) token rows (e.g. IndexTokenizer.encode_batch(..., max_len=50)), or a list of N
    id sequences, each batch then padded with `pad` to its longest. For a training loop that
    asks for batches(epoch):
        lambda epoch: data.batches(ids, labels, 32, rng=np.random.default_rng([seed, epoch]))
    """
    labels = np.asarray(labels)
    if isinstance(ids, np.ndarray) and (ids.ndim != 2 or ids.dtype.kind not in "iu"):
        raise ValueError(f"batches: ids must be integer (N, T) or a list of sequences, got "
                         f"{ids.dtype} {ids.shape}")
    if len(ids) != len(labels) or labels.ndim != 1:
        raise ValueError(f"batches: {len(ids)} rows of ids but labels {labels.shape}")
    groups = epoch_groups("batches", len(ids), batch_size, rng, drop_last)
    if isinstance(ids, np.ndarray):
        return Batches(groups, lambda rows: (ids[rows], labels[rows]))
    if pad is None:
        raise ValueError("batches: ids given as a list of sequences need pad=<the pad id>")
    return Batches(groups, lambda rows: (pad_sequences([ids[i] for i in rows], pad),
                                         labels[rows]))


def lm_batches(ids, seq_len, batch_size, n_batches, rng):
    """n_batches of (inputs (B, T), targets (B, T)) with T = seq_len: windows of seq_len + 1
    ids starting anywhere in the 1-D corpus `ids`, targets the inputs shifted by one."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ValueError(f"lm_batches: ids must be one integer sequence (N,), got {ids.dtype} "
                         f"with shape {ids.shape}")
    for name, value in (("seq_len", seq_len), ("batch_size", batch_size),
                        ("n_batches", n_batches)):
        check_count("lm_batches", name, value, 1)
    if seq_len >= len(ids):
        raise ValueError(f"lm_batches: a window of seq_len + 1 = {seq_len + 1} ids does not fit "
                         f"in the {len(ids)} ids")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"lm_batches: rng must be an np.random.Generator, got "
                        f"{type(rng).__name__}")
    starts = rng.integers(0, len(ids) - seq_len, size=(n_batches, batch_size))  # window fits
    offsets = np.arange(seq_len + 1)

    def build(batch_starts):
        windows = ids[batch_starts[:, None] + offsets]  # (B, T + 1)
        return np.ascontiguousarray(windows[:, :-1]), np.ascontiguousarray(windows[:, 1:])
    return Batches(list(starts), build)
