"""models.data: every reader on small files written here (good rows, dropped rows and their
warning, each error with its file and line), the split, the three kinds of batches worked by
hand, and the real public data sets when the data folder is present."""
import csv
import io
import json
import warnings

import numpy as np
import pytest
from helpers.data_folder import DATA, needs_data

from models import data, text


def write(tmp_path, name, content):
    """A fixture file holding exactly `content` (str as UTF-8, or bytes)."""
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def read_quietly(reader, *args, **kwargs):
    """Call a reader that must not leave rows out (a DroppedRowsWarning fails the test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", data.DroppedRowsWarning)
        return reader(*args, **kwargs)


# --- read_csv ------------------------------------------------------------------------------------

REVIEWS_CSV = ('id,review,sentiment\n'
               '1,"Great coffee, really",positive\n'
               '2,"Two lines:\nfirst, then ""second""",negative\n'
               '3,  Fine  ,positive\n')


def test_read_csv_quoted_commas_newlines_and_string_labels(tmp_path):
    path = write(tmp_path, "reviews.csv", REVIEWS_CSV)
    texts, labels = read_quietly(data.read_csv, path, "review", "sentiment")
    assert texts == ["Great coffee, really", 'Two lines:\nfirst, then "second"', "Fine"]
    assert labels.dtype == np.int64 and labels.tolist() == [1, 0, 1]
    result = data.read_csv(path, "review", "sentiment")
    assert result.label_names == ("negative", "positive") and result.dropped == {}
    assert repr(result) == ("Dataset(3 texts, label_names=('negative', 'positive'), "
                            "dropped={})")


def test_read_csv_label_names_fix_the_numbering_and_integers_stay(tmp_path):
    path = write(tmp_path, "reviews.csv", REVIEWS_CSV)
    result = data.read_csv(path, "review", "sentiment", label_names=["positive", "negative"])
    assert result.labels.tolist() == [0, 1, 0] and result.label_names == ("positive", "negative")
    stars = data.read_csv(write(tmp_path, "stars.csv", "text,stars\ngood,5\nbad,1\nmeh, 3\n"),
                          "text", "stars")
    assert stars.labels.tolist() == [5, 1, 3] and stars.label_names is None


def test_read_csv_skips_a_byte_order_mark(tmp_path):
    path = write(tmp_path, "excel.csv", "\ufeffreview,label\nnice,1\n")
    assert data.read_csv(path, "review", "label").texts == ["nice"]


def test_read_csv_missing_column_lists_the_columns(tmp_path):
    path = write(tmp_path, "reviews.csv", REVIEWS_CSV)
    with pytest.raises(ValueError, match=r"read_csv: .*reviews.csv, line 1: no column 'stars'; "
                                         r"the columns are \['id', 'review', 'sentiment'\]"):
        data.read_csv(path, "review", "stars")


@pytest.mark.parametrize("content, message", [
    ("", r"reviews.csv is empty"),
    ("review,label\n", r"reviews.csv has no rows to return \(left out: \{\}\)"),
    (b"review,label\nok,1\ncaf\xe9,1\n",
     r"reviews.csv, line 3: not UTF-8 \(byte 0xe9 at offset 21\)"),
    ('review,label\n"two\nlines",1\nthree,fields,1\n', r"reviews.csv, line 4: 3 fields where the "
                                                        r"header has 2"),
    ('review,label\nfine,1\nno label,\n', r"reviews.csv, line 3: empty label \(text 'no label'\)"),
    ('review,label\nfine,1\n"open quote,1\nnext,0\n', r"reviews.csv, line 3: not valid CSV "
                                                        r"\(unexpected end of data\)"),
    ('"review" x,label\nfine,1\n', r"reviews.csv, line 1: not valid CSV \(',' expected "
                                   r"after '\"'\)"),
    ('review,label\n"quoted" then more,1\n', r"reviews.csv, line 2: not valid CSV \(',' expected "
                                             r"after '\"'\)"),
])
def test_read_csv_errors_name_the_file_and_line(tmp_path, content, message):
    path = write(tmp_path, "reviews.csv", content)
    with pytest.raises(ValueError, match=rf"read_csv: .*{message}"):
        data.read_csv(path, "review", "label")


def test_read_csv_bad_label_names_its_line(tmp_path):
    path = write(tmp_path, "reviews.csv", REVIEWS_CSV + "4,Odd,neutral\n")  # row 4 is on line 6
    with pytest.raises(ValueError, match=r"read_csv: .*reviews.csv, line 6: label 'neutral' is "
                                         r"not one of label_names \['negative', 'positive'\]"):
        data.read_csv(path, "review", "sentiment", label_names=["negative", "positive"])


def test_read_csv_counts_and_reports_dropped_rows(tmp_path):
    path = write(tmp_path, "reviews.csv", "review,label\ngood,1\n  ,0\n\n\"\",1\nbad,0\n")
    with pytest.warns(data.DroppedRowsWarning, match=r"read_csv: .*reviews.csv: left out 3 rows: "
                                                     r"1 \(blank line\), 2 \(empty text\); 2 kept"):
        result = data.read_csv(path, "review", "label")
    assert result.texts == ["good", "bad"] and result.labels.tolist() == [1, 0]
    assert result.dropped == {"blank line": 1, "empty text": 2}


# --- read_jsonl ----------------------------------------------------------------------------------

def review(body, stars, **more):
    return json.dumps(dict(review_id="x", stars=stars, review_body=body, **more),
                      ensure_ascii=False) + "\n"


def test_read_jsonl_amazon_reviews_multi(tmp_path):
    body = "Arrived late\u0085but works\u2028fine."  # NEL and LINE SEPARATOR are not line breaks
    path = write(tmp_path, "reviews.jsonl", review(body, 2) + review("Great!", 5) +
                 review("ok", 3))
    texts, labels = read_quietly(data.read_jsonl, path)
    assert texts == [body, "Great!", "ok"] and labels.tolist() == [2, 5, 3]


def test_read_jsonl_binary_drops_three_stars_and_says_so(tmp_path):
    path = write(tmp_path, "reviews.jsonl", "".join(review(f"r{s}", s) for s in [1, 2, 3, 4, 5, 3]))
    with pytest.warns(data.DroppedRowsWarning, match=r"read_jsonl: .*reviews.jsonl: left out 2 "
                                                     r"rows: 2 \(3 stars, binary=True\); 4 kept"):
        result = data.read_jsonl(path, binary=True)
    assert result.texts == ["r1", "r2", "r4", "r5"] and result.labels.tolist() == [0, 0, 1, 1]
    assert result.dropped == {"3 stars, binary=True": 2}


def test_read_jsonl_other_keys_and_string_labels(tmp_path):
    path = write(tmp_path, "tweets.jsonl", '{"text": "yay", "label": "pos"}\n'
                                           '{"text": "meh", "label": "neg"}\n')
    result = data.read_jsonl(path, text_key="text", label_key="label")
    assert result.labels.tolist() == [1, 0] and result.label_names == ("neg", "pos")


@pytest.mark.parametrize("second_line, message", [
    ('{"review_body": "ok", "stars": 4\n', r"line 2: not valid JSON \(Expecting ',' delimiter "
                                          r"at column 33\)"),
    ('["ok", 4]\n', r"line 2: expected a JSON object, got list"),
    ('{"body": "ok", "stars": 4}\n', r"line 2: no key 'review_body'; the keys are "
                                     r"\['body', 'stars'\]"),
    ('{"review_body": "ok"}\n', r"line 2: no key 'stars'; the keys are \['review_body'\]"),
    ('{"review_body": 17, "stars": 4}\n', r"line 2: review_body is int, not a string"),
    ('{"review_body": "ok", "stars": 4.5}\n', r"line 2: label 4.5 is neither an integer nor a "
                                              r"string"),
    ('{"review_body": "ok", "stars": true}\n', r"line 2: label True is neither"),
])
def test_read_jsonl_errors_name_the_file_and_line(tmp_path, second_line, message):
    path = write(tmp_path, "reviews.jsonl", review("fine", 4) + second_line)
    with pytest.raises(ValueError, match=rf"read_jsonl: .*reviews.jsonl, {message}"):
        data.read_jsonl(path)


def test_read_jsonl_binary_needs_star_ratings(tmp_path):
    path = write(tmp_path, "reviews.jsonl", review("fine", 4) + "\n" + review("odd", 6))
    with pytest.raises(ValueError, match=r"read_jsonl: .*reviews.jsonl, line 3: binary=True needs "
                                         r"a star rating 1..5, got 6"):
        data.read_jsonl(path, binary=True)


# --- read_tsv, read_text, lines -----------------------------------------------------------------

UCI_LIKE = ('A very slow-moving, aimless movie.  \t0\n'
            'The script is\u0085was there a script?  \t0\n'
            '"Quotes" don\'t end a row.\t1\n'
            'tab\tinside the sentence\t1\n')


def test_read_tsv_uci_lines(tmp_path):
    texts, labels = read_quietly(data.read_tsv, write(tmp_path, "imdb.txt", UCI_LIKE))
    assert texts == ["A very slow-moving, aimless movie.", "The script is\u0085was there a script?",
                     '"Quotes" don\'t end a row.', "tab\tinside the sentence"]
    assert labels.tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("content, kwargs, message", [
    (UCI_LIKE + "no tab here, 1\n", {}, r", line 5: no TAB: expected sentence<TAB>label, got "
                                        r"'no tab here, 1'"),
    (UCI_LIKE + "neutral\t2\n", dict(label_names=["0", "1"]), r", line 5: label '2' is not one "
                                                              r"of label_names \['0', '1'\]"),
    ("fine\t1\nno label\t \n", {}, r", line 2: empty label"),
    ("\n\n", {}, r" has no rows to return \(left out: \{'blank line': 2\}\)"),
])
def test_read_tsv_errors_name_the_file_and_line(tmp_path, content, kwargs, message):
    path = write(tmp_path, "imdb.txt", content)
    with pytest.raises(ValueError, match=rf"read_tsv: .*imdb.txt{message}"):
        data.read_tsv(path, **kwargs)


@pytest.mark.parametrize("header", ["sentence\tlabel", "text\tSentiment", "review\ty"])
def test_read_tsv_leaves_a_header_line_out_and_says_so(tmp_path, header):
    """A header above integer labels (csv.Sniffer's sign), or whose label is a usual column
    name found on no other line, is not a review: left out, with the one warning."""
    for labels in (("1", "0"), ("pos", "neg")):
        rows = "".join(f"review {i}\t{labels[i % 2]}\n" for i in range(6))
        path = write(tmp_path, "h.tsv", f"{header}\n{rows}")
        with pytest.warns(data.DroppedRowsWarning, match=r"read_tsv: .*h.tsv: left out 1 rows: "
                                                         r"1 \(the header line\); 6 kept"):
            dataset = data.read_tsv(path)
        assert dataset.texts == [f"review {i}" for i in range(6)]
        assert dataset.label_names == (None if labels[0] == "1" else ("neg", "pos"))
    # a first line that is a review stays: its label is another line's, or a number among them
    for content in ("label one\tlabel\nlabel two\tlabel\nother\tx\n", "a\t1\nb\t0\nc\tx\n"):
        assert len(read_quietly(data.read_tsv, write(tmp_path, "r.tsv", content)).texts) == 3


def test_read_tsv_with_named_columns_reads_a_table_as_csv_does(tmp_path):
    path = write(tmp_path, "t.tsv", 'id\tlabel\ttext\n1\tpos\t"quoted" words\n2\tneg\tplain\n')
    dataset = read_quietly(data.read_tsv, path, text_column="text", label_column="label")
    assert dataset.texts == ['"quoted" words', "plain"] and dataset.label_names == ("neg", "pos")
    rows = list(csv.reader(io.StringIO(path.read_text()), delimiter="\t",
                           quoting=csv.QUOTE_NONE))  # the reference
    assert dataset.texts == [r[2] for r in rows[1:]]
    with pytest.raises(ValueError, match=r"read_tsv: .*t.tsv, line 1: no column 'body'"):
        data.read_tsv(path, text_column="body", label_column="label")
    with pytest.raises(ValueError, match=r"read_tsv: .*t.tsv: pass both text_column and "
                                         r"label_column"):
        data.read_tsv(path, text_column="text")


@pytest.mark.parametrize("name, content", [
    ("cr.tsv", "good film\t1\rbad film\t0\rfine\t1\r"),
    ("crlf.tsv", "good film\t1\r\nbad film\t0\r\nfine\t1"),
    ("cr.jsonl", '{"review_body": "good film", "stars": 1}\r{"review_body": "bad film", '
                 '"stars": 0}\r{"review_body": "fine", "stars": 1}'),
    ("cr.csv", "text,label\rgood film,1\rbad film,0\rfine,1\r"),
])
def test_rows_end_where_pythons_csv_ends_them(tmp_path, name, content):
    """CR alone ends a row as it does for csv (the file was once one row); U+0085 does not."""
    path = write(tmp_path, name, content)
    reader = {".tsv": data.read_tsv, ".jsonl": data.read_jsonl,
              ".csv": lambda p: data.read_csv(p, "text", "label")}[path.suffix]
    texts, labels = read_quietly(reader, path)
    assert texts == ["good film", "bad film", "fine"] and labels.tolist() == [1, 0, 1]
    if path.suffix == ".tsv":  # the reference: csv's own split of the lines
        rows = list(csv.reader(io.StringIO(content, newline=""), delimiter="\t"))
        assert texts == [r[0] for r in rows]


def test_a_label_beyond_int64_and_labels_differing_in_case_name_the_line(tmp_path):
    path = write(tmp_path, "big.tsv", "a\t1\nb\t99999999999999999999\n")
    with pytest.raises(ValueError, match=r"^read_tsv: .*big.tsv, line 2: the label "
                                         r"99999999999999999999 does not fit in int64"):
        data.read_tsv(path)
    path = write(tmp_path, "big.jsonl", '{"review_body": "a", "stars": -9223372036854775809}\n')
    with pytest.raises(ValueError, match=r"^read_jsonl: .*big.jsonl, line 1: the label "
                                         r"-9223372036854775809 does not fit"):
        data.read_jsonl(path)
    edge = read_quietly(data.read_tsv, write(tmp_path, "edge.tsv", "a\t9223372036854775807\n"))
    assert edge.labels.tolist() == [2 ** 63 - 1]
    path = write(tmp_path, "case.csv", "text,label\na,positive\nb,negative\nc, Positive \n")
    with pytest.raises(ValueError, match=r"^read_csv: .*case.csv, line 4: the label 'Positive' "
                                         r"is 'positive' \(line 2\) written another way \(only "
                                         r"in case\): write them one way, or they are two "
                                         r"classes$"):
        data.read_csv(path, "text", "label")
    path = write(tmp_path, "numbers.tsv", "a\t1\nb\t2\nc\t1.0\nd\tx\n")  # text labels
    with pytest.raises(ValueError, match=r"^read_tsv: .*numbers.tsv, line 3: the label '1.0' is "
                                         r"'1' \(line 1\) written another way \(as a number\)"):
        data.read_tsv(path)


def lines(text):
    return [line for _, line in data.numbered_lines(text)]


def test_read_text_keeps_the_file_as_it_is_and_the_readers_lines_end_as_csvs(tmp_path):
    content = "First Citizen:\r\nSpeak\u0085speak.\n\n  last line  "
    path = write(tmp_path, "corpus.txt", content)
    assert data.read_text(path) == content
    # lines end as Python's csv (and text mode) ends them: "\r\n", "\r" or "\n", not U+0085
    assert lines(content) == ["First Citizen:", "Speak\u0085speak.", "", "  last line  "]
    assert lines("a\nb\n") == ["a", "b"]
    assert lines("a\rb\r\rc\r") == ["a", "b", "", "c"]
    with pytest.raises(ValueError, match=r"read_text: .*nothing.txt is empty"):
        data.read_text(write(tmp_path, "nothing.txt", ""))


# --- split ---------------------------------------------------------------------------------------

def test_split_partitions_deterministically():
    train, validation = data.split(1000, 0.1, seed=7)
    assert len(train) == 900 and len(validation) == 100
    assert np.array_equal(np.sort(np.concatenate([train, validation])), np.arange(1000))
    assert np.all(np.diff(train) > 0) and np.all(np.diff(validation) > 0)
    again = data.split(1000, 0.1, seed=7)
    assert np.array_equal(again[0], train) and np.array_equal(again[1], validation)
    assert not np.array_equal(data.split(1000, 0.1, seed=8)[1], validation)
    assert len(data.split(100, 0.29, seed=0)[1]) == 29  # 0.29 · 100 is 28.999... in floats
    assert len(data.split(5, 0.0, seed=0)[1]) == 0


def test_split_takes_a_numpy_count_and_refuses_a_float_one():
    assert len(data.split(np.int64(10), 0.2, seed=0)[1]) == 2
    with pytest.raises(ValueError, match=r"split: n must be an int >= 0, got 10.0"):
        data.split(10.0, 0.2, seed=0)


@pytest.mark.parametrize("fraction", [1.0, -0.1, float("nan")])
def test_split_refuses_a_fraction_outside_0_1(fraction):
    with pytest.raises(ValueError, match=r"split: validation_fraction must lie in \[0, 1\)"):
        data.split(10, fraction, seed=0)


# --- batches -------------------------------------------------------------------------------------

def row_tagged(n, t=3):
    """ids (n, t) whose row i is all i, labels (n,) = 1000 + i: a batch shows its rows."""
    return np.repeat(np.arange(n)[:, None], t, axis=1), 1000 + np.arange(n)


def test_batches_visit_every_row_once_with_its_label():
    ids, labels = row_tagged(10)
    epoch = data.batches(ids, labels, 4, rng=np.random.default_rng(0))
    assert len(epoch) == 3
    seen = []
    for batch_ids, batch_labels in epoch:
        assert batch_ids.shape == (len(batch_labels), 3) and batch_ids.dtype == ids.dtype
        assert np.array_equal(batch_labels, 1000 + batch_ids[:, 0])
        seen.extend(batch_ids[:, 0].tolist())
    assert [len(b) for _, b in epoch] == [4, 4, 2]
    assert sorted(seen) == list(range(10)) and seen != list(range(10))
    assert seen == [row for b, _ in epoch for row in b[:, 0]]  # iterating again: same batches


def test_batches_order_is_a_function_of_the_rng():
    ids, labels = row_tagged(50)
    seed = 3
    epoch_batches = lambda epoch: data.batches(ids, labels, 8,  # noqa: E731 (the docstring's)
                                               rng=np.random.default_rng([seed, epoch]))
    order = lambda batches: np.concatenate([b for _, b in batches])  # noqa: E731
    assert np.array_equal(order(epoch_batches(1)), order(epoch_batches(1)))
    assert not np.array_equal(order(epoch_batches(1)), order(epoch_batches(2)))
    expected = 1000 + np.random.default_rng([seed, 1]).permutation(50)
    assert np.array_equal(order(epoch_batches(1)), expected)
    assert np.array_equal(order(data.batches(ids, labels, 8)), labels)  # rng None: in order


def test_batches_drop_last():
    ids, labels = row_tagged(10)
    epoch = data.batches(ids, labels, 4, rng=np.random.default_rng(0), drop_last=True)
    assert [len(b) for _, b in epoch] == [4, 4]


def test_batches_of_sequences_pad_each_batch_to_its_longest():
    sequences = [[5], [6, 7, 8], [9, 9], [4, 4, 4, 4, 4]]
    epoch = list(data.batches(sequences, [0, 1, 0, 1], 2, pad=0))
    assert epoch[0][0].tolist() == [[5, 0, 0], [6, 7, 8]] and epoch[0][1].tolist() == [0, 1]
    assert epoch[1][0].tolist() == [[9, 9, 0, 0, 0], [4, 4, 4, 4, 4]]


@pytest.mark.parametrize("call, error, message", [
    (lambda ids, y: data.batches(ids, y, 4, rng=0), TypeError,
     r"batches: rng must be an np.random.Generator \(np.random.default_rng\(...\)\) or None "
     r"for the rows in order, got int"),
    (lambda ids, y: data.batches(ids, y[:9], 4), ValueError,
     r"batches: 10 rows of ids but labels \(9,\)"),
    (lambda ids, y: data.batches(ids[0], y, 4), ValueError,
     r"batches: ids must be integer \(N, T\) or a list of sequences, got int64 \(3,\)"),
    (lambda ids, y: data.batches(ids * 1.0, y, 4), ValueError,
     r"batches: ids must be integer \(N, T\) or a list of sequences, got float64 \(10, 3\)"),
    (lambda ids, y: data.batches(ids, y, 0), ValueError,
     r"batches: batch_size must be an int >= 1, got 0"),
    (lambda ids, y: data.batches(ids, y, 2.0), ValueError,
     r"batches: batch_size must be an int >= 1, got 2.0"),
    (lambda ids, y: data.batches(list(ids), y, 4), ValueError,
     r"batches: ids given as a list of sequences need pad=<the pad id>"),
])
def test_batches_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(*row_tagged(10))


def test_lm_batches_are_windows_and_their_shift():
    corpus = np.arange(100, 200)  # id = 100 + its position: a window shows where it starts
    epoch = data.lm_batches(corpus, 8, 4, 5, rng=np.random.default_rng(0))
    assert len(epoch) == 5
    starts = np.random.default_rng(0).integers(0, 100 - 8, size=(5, 4))
    for (inputs, targets), batch_starts in zip(epoch, starts):
        assert inputs.shape == targets.shape == (4, 8) and inputs.dtype == corpus.dtype
        assert np.array_equal(inputs, corpus[batch_starts[:, None] + np.arange(8)])
        assert np.array_equal(targets, inputs + 1)
    assert max(t.max() for _, t in epoch) <= 199  # the last window may end on the last id


@pytest.mark.parametrize("args, error, message", [
    ((np.arange(9), 9, 2, 3, np.random.default_rng(0)), ValueError,
     r"lm_batches: a window of seq_len \+ 1 = 10 ids does not fit in the 9 ids"),
    ((np.arange(9), 0, 2, 3, np.random.default_rng(0)), ValueError,
     r"lm_batches: seq_len must be an int >= 1, got 0"),
    ((np.ones((2, 9), dtype=int), 4, 2, 3, np.random.default_rng(0)), ValueError,
     r"lm_batches: ids must be one integer sequence \(N,\), got int64 with shape \(2, 9\)"),
    ((np.arange(9), 4, 0, 3, np.random.default_rng(0)), ValueError,
     r"lm_batches: batch_size must be an int >= 1, got 0"),
    ((np.arange(9), 4, 2, 3, None), TypeError,
     r"lm_batches: rng must be an np.random.Generator, got NoneType"),
])
def test_lm_batches_errors(args, error, message):
    with pytest.raises(error, match=message):
        data.lm_batches(*args)


# --- the public data sets (read only when the folder is there) ----------------------------------

@needs_data
@pytest.mark.parametrize("name", ["amazon_cells", "imdb", "yelp"])
def test_uci_sentiment_files_read_1000_rows(name):
    texts, labels = read_quietly(data.read_tsv,
                                 DATA / "sentiment_sentences" / f"{name}_labelled.txt")
    assert len(texts) == 1000 and np.bincount(labels).tolist() == [500, 500]
    if name == "imdb":  # lines 179 and 968 hold U+0085, which splitlines() breaks on
        assert [i for i, t in enumerate(texts) if "\u0085" in t] == [178, 967]
        assert texts[178] == "The script is\u0085was there a script?"


@needs_data
@pytest.mark.parametrize("domain", ["books", "electronics", "kitchen"])
@pytest.mark.parametrize("polarity", ["positive", "negative"])
def test_amazon_hatn_files_hold_3000_reviews(domain, polarity):
    path = DATA / "amazon_hatn" / domain / f"review_{polarity}"
    reviews = lines(data.read_text(path))
    assert len(reviews) == 3000 and all(review.strip() for review in reviews)
    assert data.read_text(path).count("\n") == 3000


@needs_data
def test_tiny_shakespeare_has_65_characters():
    corpus = data.read_text(DATA / "tinyshakespeare" / "input.txt")
    tok = text.CharTokenizer.from_text(corpus)
    assert len(corpus) == 1_115_394 and len(tok) == 65
    ids = tok.encode(corpus)
    assert tok.decode(ids) == corpus
    inputs, targets = next(iter(data.lm_batches(ids, 64, 2, 1, np.random.default_rng(0))))
    assert tok.decode(inputs[0])[1:] == tok.decode(targets[0])[:-1]
