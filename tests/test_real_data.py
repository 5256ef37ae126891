"""The classify demo on real reviews no one here wrote (the data folder's SOURCES.md), in a
test-sized budget: the UCI sentiment sentences and a slice of amazon_hatn, each written to
files in the formats the demo reads (sentence<TAB>label, CSV), trained and tested by
`python -m demos.classify --data ... --test ...`. The full-size figures (longer runs) are
in docs/results.md."""
import csv

import numpy as np
from helpers.data_folder import DATA, needs_data
from helpers.demos import FINAL_LINE, run_classify

from models import data

pytestmark = needs_data
UCI = ("amazon_cells", "imdb", "yelp")
HATN = ("books", "electronics", "kitchen")


def accuracies(printed):
    """(transformer %, baseline %, test reviews) from the demo's final line."""
    _, transformer, bag, n = FINAL_LINE.fullmatch(printed[-1]).groups()
    return float(transformer), float(bag), int(n.replace(",", ""))


def test_uci_sentences_beat_the_majority_by_a_wide_margin(tmp_path):
    """3,000 sentences; every fifth of each file and label is a test sentence (a fixed
    stratified split: 600 test sentences, 300 per label, so the majority gets 50%)."""
    train, test = [], []
    for name in UCI:
        texts, labels = data.read_tsv(DATA / "sentiment_sentences" / f"{name}_labelled.txt")
        for label in (0, 1):
            rows = [f"{t}\t{label}\n" for t, y in zip(texts, labels) if y == label]
            test += rows[::5]
            train += [r for i, r in enumerate(rows) if i % 5]
    (tmp_path / "train.tsv").write_text("".join(train))
    (tmp_path / "test.tsv").write_text("".join(test))
    _, printed = run_classify("--data", tmp_path / "train.tsv", "--test", tmp_path / "test.tsv",
                          "--quick", "--epochs", 8, "--min-df", 1, "--out", tmp_path / "run")
    transformer, bag, n = accuracies(printed)
    assert n == 600 and transformer >= 70 and bag >= 70


def test_a_slice_of_amazon_hatn_learns(tmp_path):
    """333 reviews of each domain and polarity, 266 of them for training and 67 for testing
    (1,596 training and 402 test reviews), cut to their first 100 words."""
    rng = np.random.default_rng(0)
    rows = {"train": [], "test": []}
    for domain in HATN:
        for polarity in ("positive", "negative"):
            text = data.read_text(DATA / "amazon_hatn" / domain / f"review_{polarity}")
            lines = [line for _, line in data.numbered_lines(text)]
            chosen = rng.choice(len(lines), size=333, replace=False)
            picked = [(lines[i], polarity) for i in chosen]
            rows["train"] += picked[:266]
            rows["test"] += picked[266:]
    for part, content in rows.items():
        with open(tmp_path / f"{part}.csv", "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows([("text", "label")] + content)
    _, printed = run_classify("--data", tmp_path / "train.csv", "--test", tmp_path / "test.csv",
                          "--quick", "--max-len", 100, "--epochs", 4, "--out", tmp_path / "run")
    transformer, bag, n = accuracies(printed)
    assert n == 402 and transformer >= 70 and bag >= 75
