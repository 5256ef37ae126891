"""demos.classify's command line on bad input, as a new user meets it: each mistake ends the
program with one line on stderr that names the file or option and what was expected, before
anything is trained, and without leaving an output folder behind. A bug (not bad input)
keeps its traceback."""
import json
import re

import pytest

from demos import classify
from demos.support import review_files

TWO_LABELS = "".join(f"sentence {i}\t{'pos' if i % 2 else 'neg'}\n" for i in range(20))
FIVE_REVIEWS = "".join(json.dumps({"review_body": text, "stars": stars}) + "\n" for text, stars in
                       (("great stuff", 5), ("awful thing", 1), ("so so", 3), ("lovely", 4),
                        ("bad", 2)))


def refusal(tmp_path, *argv):
    """The one line classify.main(argv) exits with, run in tmp_path without --out; checks
    that no runs/<name>-<timestamp>/ folder was made."""
    with pytest.raises(SystemExit) as stop:
        classify.main([str(a) for a in argv])
    message = stop.value.code
    assert isinstance(message, str) and "\n" not in message, message
    assert not (tmp_path / "runs").exists()
    return message


@pytest.fixture
def in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name, content, flags, message", [
    ("reviews.csv", "a,b\nx,y\n", [],
     r"classify: read_csv: \S*reviews.csv, line 1: no column 'text'; the columns are \['a', "
     r"'b'\]; pass --text-column NAME and --label-column NAME to say which hold the text"),
    ("reviews.jsonl", '{"text": "x", "stars": 1}\n', [],
     r"classify: read_jsonl: \S*reviews.jsonl, line 1: no key 'review_body'; the keys are "
     r"\['text', 'stars'\]; pass --text-column NAME and --label-column NAME"),
    ("reviews.csv", "", [], r"classify: read_csv: \S*reviews.csv is empty"),
    ("reviews.tsv", "good\tpos\nno tab here\n", [],
     r"classify: read_tsv: \S*reviews.tsv, line 2: no TAB: expected sentence<TAB>label"),
    ("reviews.jsonl", '{"review_body": "x", "stars": 1}\n{bad\n', [],
     r"classify: read_jsonl: \S*reviews.jsonl, line 2: not valid JSON"),
    ("reviews.tsv", b"caf\xe9\tpos\n", [], r"classify: read_tsv: \S*reviews.tsv, line 1: not "
                                           r"UTF-8 \(byte 0xe9 at offset 3\)"),
    ("reviews.xml", TWO_LABELS, [], r"classify: cannot tell the format of \S*reviews.xml from "
                                    r"its suffix '.xml' .*; pass --format csv, jsonl or tsv"),
    ("reviews.tsv", "".join(f"review {i}\tpos\n" for i in range(9)), [],
     r"classify: every review in \S*reviews.tsv has the label 'pos': a classifier needs at "
     r"least two classes"),
    ("reviews.jsonl", FIVE_REVIEWS, ["--labels", "binary"],
     r"classify: --min-df 2: no word is in that many of the 3 training reviews, so the "
     r"model would read nothing"),
    ("reviews.tsv", "good\tpos\nbad\tneg\n", [],
     r"classify: \S*reviews.tsv: 2 reviews leave 2 to train on and 0 to test on \(20% held "
     r"out\): give more reviews, or a held-out file with --test FILE"),
], ids=["csv-columns", "jsonl-keys", "empty", "tsv-no-tab", "jsonl-not-json", "not-utf8",
        "suffix", "one-class", "baseline-no-features", "no-test-review"])
@pytest.mark.filterwarnings("ignore::models.inputs.data.DroppedRowsWarning")  # binary drops 3 stars
def test_a_bad_data_file_is_one_line_naming_it(in_tmp_path, name, content, flags, message):
    path = in_tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert_starts_as(message, refusal(in_tmp_path, "--quick", "--data", path, *flags))


def assert_starts_as(pattern, message):
    assert re.match(pattern, message), message


def test_a_missing_file_and_unknown_test_labels_are_one_line(in_tmp_path):
    (in_tmp_path / "train.tsv").write_text(TWO_LABELS)
    (in_tmp_path / "test.tsv").write_text("sentence\tmaybe\n")
    assert refusal(in_tmp_path, "--data", in_tmp_path / "nowhere.csv") == \
        f"classify: {in_tmp_path / 'nowhere.csv'}: No such file or directory"
    assert_starts_as(r"classify: read_tsv: \S*test.tsv, line 1: label 'maybe' is not one of "
                   r"label_names \['neg', 'pos'\]",
                   refusal(in_tmp_path, "--data", "train.tsv", "--test", "test.tsv"))


@pytest.mark.parametrize("files, why", [
    ({}, "missing model.npz, vocabulary.txt, hyperparameters.json"),
    ({"model.npz": "", "hyperparameters.json": '{"hyperparameters": {"steps": 120}}'},
     "missing vocabulary.txt"),
    ({"model.npz": "", "vocabulary.txt": "", "hyperparameters.json":  # a generate run's
      '{"fit": {}, "hyperparameters": {"steps": 120, "d_model": 32, "heads": 2}}'},
     "its hyperparameters.json has no vocab_size, pad, class_names, max_len, d_ff, layers, "
     "pool, dropout, embedding_scale"),
])
def test_model_must_be_a_classify_runs_folder(in_tmp_path, files, why):
    folder = in_tmp_path / "run"
    folder.mkdir()
    for name, content in files.items():
        (folder / name).write_text(content)
    assert refusal(in_tmp_path, "--model", folder, "--predict", "good") == \
        f"classify: --model {folder} is not the --out folder of a classify run ({why})"


def test_model_must_be_a_folder_that_exists(in_tmp_path):
    (in_tmp_path / "model.npz").write_text("")
    for path, why in ((in_tmp_path / "model.npz", "a file, not a folder"),
                      (in_tmp_path / "nowhere", "no such folder")):
        assert refusal(in_tmp_path, "--model", path, "--predict", "good") == \
            f"classify: --model {path} is not the --out folder of a classify run ({why})"


def test_an_out_folder_holding_a_run_is_refused_before_the_data_is_read(in_tmp_path):
    out = in_tmp_path / "earlier"
    out.mkdir()
    (out / "last.npz").write_text("")  # fit's checkpoint: a run was trained here
    assert refusal(in_tmp_path, "--data", "nowhere.csv", "--out", out) == \
        f"classify: --out {out} holds a classify run already: add --resume to continue it, " \
        f"or choose another --out"


def test_a_bug_keeps_its_traceback(in_tmp_path, monkeypatch):
    def broken(*args):
        raise TypeError("a bug, not bad input")
    monkeypatch.setattr(review_files, "load", broken)
    with pytest.raises(TypeError, match="a bug, not bad input"):
        classify.main(["--quick"])
