"""demos.classify and its parts: the generated reviews read by a hand-written parser, the
--quick run's final line against floors, its saved files, --predict against the model in
memory, the same bits from the same seed, user files (CSV, JSON lines, TSV) and their label
classes, the TF-IDF baseline against features worked by hand, length-bucketed batches, and
the learning-rate schedule."""
import importlib
import json
import math
import os
import pathlib
import re
import subprocess
import sys
from argparse import Namespace
from collections import Counter

import numpy as np
import pytest
from helpers.demos import FINAL_LINE, run_classify

import autograd_lite as ag
from demos import classify
from demos.support import baseline, length_buckets, review_files, reviews
from models import classifier, text, train


# --- the generated reviews ---------------------------------------------------------------------

POSITIVE = {"good", "great", "excellent", "decent", "impressive", "pleasant"}
NEGATIVE = {"bad", "poor", "awful", "disappointing", "terrible", "mediocre"}


def meaning(review):
    """The label a reader gives: the last clause decides, its adjective flipped by "not"."""
    last = re.split(r" but | and ", review)[-1].split()
    adjective = [w for w in last if w in POSITIVE | NEGATIVE]
    assert len(adjective) == 1, review
    return int((adjective[0] in POSITIVE) != ("not" in last))


def test_generated_label_is_the_last_clause_read_with_its_negation():
    texts, labels = reviews.generate(3000, seed=0)
    assert [meaning(t) for t in texts] == labels.tolist()
    assert np.bincount(labels).tolist() == [1500, 1500]
    assert sum(" but " in t for t in texts) > 900 and sum(" not " in t for t in texts) > 900
    again, _ = reviews.generate(3000, seed=0)
    assert again == texts and reviews.generate(3000, seed=1)[0] != texts


def test_swapping_the_clauses_around_but_keeps_the_word_pairs_and_flips_the_label():
    texts, labels = reviews.generate(600, seed=3)
    contrasts = [(t, y) for t, y in zip(texts, labels) if " but " in t]
    for review, label in contrasts:
        first, second = review.split(" but ")
        swapped = f"{second} but {first}"
        assert Counter(baseline.ngrams(swapped.split())) - Counter(baseline.ngrams(
            review.split())) <= Counter([f"{first.split()[-1]} but", f"{second.split()[-1]} but"])
        assert meaning(swapped) == 1 - label


# --- the --quick run ---------------------------------------------------------------------------

CURVES = []  # the quick run's calls of plots.training_curves: (path, keyword arguments)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("classify")
    real = classify.plots.training_curves

    def recorded(history, path, **kwargs):
        CURVES.append((path, kwargs))
        return real(history, path, **kwargs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(classify.plots, "training_curves", recorded)
        return run_classify("--quick", "--out", out)


def test_the_curves_call_the_test_set_test(quick_run):
    """fit's validation batches are classify's test reviews: its curves say so."""
    ((path, kwargs),) = CURVES
    assert path.name == "curves.png" and kwargs["val_name"] == "test"
    lines = [line.get_label() for ax in classify.plots.training_curves(
        json.loads((path.parent / "history.json").read_text()), path.parent / "again.png",
        **kwargs).axes for line in ax.get_lines()]
    assert "test loss (epoch mean)" in lines and "test accuracy" in lines
    assert not [label for label in lines if label.startswith("val")], lines


def test_quick_run_learns_what_a_bag_of_words_cannot(quick_run):
    run, printed = quick_run
    _, transformer, bag, n = FINAL_LINE.fullmatch(printed[-1]).groups()
    # chance is 50%; a bag of words and pairs cannot see negation or which clause is last
    assert float(transformer) >= 75 and 50 <= float(bag) <= 68
    assert float(transformer) >= float(bag) + 15
    assert run.line == printed[-1] and int(n.replace(",", "")) > 1000


def test_quick_run_saves_the_model_vocabulary_history_and_plots(quick_run):
    run, printed = quick_run
    names = {p.name for p in run.out.iterdir()}
    assert {"model.npz", "vocabulary.txt", "history.json", "hyperparameters.json", "last.npz",
            "curves.png", "confusion.png", "probabilities.png", "health.png"} <= names
    history = json.loads((run.out / "history.json").read_text())
    steps = len(history["step_loss"])  # health every train.HEALTH_EVERY updates, from the first
    assert [r["step"] for r in history["health"]] == list(range(1, steps + 1,
                                                                 train.HEALTH_EVERY))
    assert len(history["epochs"]) == run.settings["epochs"] == classify.QUICK["epochs"]
    saved = json.loads((run.out / "hyperparameters.json").read_text())["hyperparameters"]
    assert saved == run.settings and saved["class_names"] == ["negative", "positive"]
    counts = [[int(c) for c in line.split()[1:]] for line in printed[-3:-1]]
    accuracy = float(FINAL_LINE.fullmatch(printed[-1]).group(2))  # the transformer's
    assert round(100 * np.trace(counts) / np.sum(counts), 1) == accuracy


def test_the_reported_ensemble_is_the_mean_of_both_models_recomputed(quick_run, tmp_path):
    """The final line's first figure against the two models' test probabilities worked out
    again outside the demo's report: the trained transformer's, and a baseline trained anew
    on the same words from the same seed; their mean in float64."""
    run, printed = quick_run
    combined, transformer, bag = map(float, FINAL_LINE.fullmatch(printed[-1]).groups()[:3])
    args = classify.parse_args(["--quick", "--out", str(tmp_path / "unused")])
    split, (train_words, test_words), features, tokenizer = classify.read_reviews(args)
    sequences = [run.tokenizer.encode(w) for w in test_words]
    p_model = length_buckets.probabilities(run.params, sequences, run.tokenizer.pad_id)  # (N, 2)
    params = baseline.train(features, train_words, split.train.labels, 2, seed=args.seed)
    p_bag = baseline.predict(params, features, test_words)  # (N, 2)
    labels = split.test.labels
    mean = (p_model.astype(np.float64) + p_bag.astype(np.float64)) / 2
    for figure, p in ((combined, mean), (transformer, p_model), (bag, p_bag)):
        assert figure == round(100 * np.mean(p.argmax(axis=1) == labels), 1)


def test_predict_gives_the_probabilities_of_the_model_in_memory(quick_run):
    run, _ = quick_run
    texts = ["the food was not very good overall but the staff was really pleasant honestly",
             "the staff was really pleasant honestly but the food was not very good overall",
             "Not bad!"]
    words = classify.words_of(texts, run.settings["max_len"])
    sequences = [run.tokenizer.encode(w) for w in words]
    in_memory = length_buckets.probabilities(run.params, sequences, run.tokenizer.pad_id)  # (3, 2)
    saved, names = classify.predict(run.out, texts)
    np.testing.assert_array_equal(saved, in_memory)
    result, printed = run_classify("--model", run.out, "--predict", *texts)
    assert result is None and len(printed) == 3
    for line, row, t in zip(printed, in_memory, texts):
        assert line == (f"{names[row.argmax()]}: negative {row[0]:.4f}, positive {row[1]:.4f}"
                        f"   {t!r}")


def test_same_seed_same_bits(quick_run, tmp_path):
    run, _ = quick_run
    again, _ = run_classify("--quick", "--out", tmp_path)
    assert again.line == run.line
    for a, b in zip(ag.tree_leaves(again.params), ag.tree_leaves(run.params)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("flags, message", [
    (["--predict", "good"], "--predict and --model go together"),
    (["--epochs", "0"], "--epochs must be at least 1, got 0"),
    (["--d-model", "30", "--heads", "4"], "--d-model 30 must be a multiple of --heads 4"),
    (["--test", "test.csv"], "--test is about the --data file: it needs --data FILE"),
    (["--format", "csv"], "--format is about the --data file: it needs --data FILE"),
    (["--text-column", "review"], "--text-column is about the --data file: it needs --data"),
    (["--label-column", "stars"], "--label-column is about the --data file: it needs --data"),
    (["--labels", "binary"], "--labels is about the --data file: it needs --data FILE"),
    (["--data", "reviews.csv", "--labels", "binary"],
     "--labels binary is for JSON lines (star ratings), but --data reviews.csv is csv"),
    (["--data", "reviews.txt", "--format", "tsv", "--labels", "stars"],
     "--labels stars is for JSON lines (star ratings), but --data reviews.txt is tsv"),
])
def test_bad_options_are_refused_by_name(flags, message, capsys):
    with pytest.raises(SystemExit) as stop:
        classify.parse_args(flags)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_options_fill_in_the_defaults():
    args = classify.parse_args(["--quick", "--d-model", "16"])
    assert args.d_model == 16 and args.epochs == classify.QUICK["epochs"]
    assert classify.parse_args([]).max_len == 200
    assert classify.parse_args(["--data", "r.jsonl"]).labels == "stars"
    assert classify.parse_args(["--data", "r.jsonl", "--labels", "binary"]).labels == "binary"



def test_without_epochs_a_small_file_gets_at_least_min_steps_updates():
    assert classify.MIN_STEPS == 1_000 and classify.DEFAULTS["epochs"] == 3
    assert classify.epochs_for(14_400, 32) == 3  # 450 steps an epoch: the default, 1,350
    assert classify.epochs_for(2_400, 32) == 14  # 75 steps an epoch: 13 x 75 = 975 falls short
    assert classify.epochs_for(2_464, 32) == 13  # 77 steps an epoch: 13 x 77 = 1,001
    assert classify.epochs_for(20, 32) == 1_000  # one step an epoch
    assert classify.parse_args([]).epochs_to_fit
    assert not classify.parse_args(["--epochs", "3"]).epochs_to_fit
    assert not classify.parse_args(["--quick"]).epochs_to_fit

# --- user files --------------------------------------------------------------------------------

def options(**given):
    defaults = dict(data=None, test=None, format=None, text_column=None, label_column=None,
                    labels="stars")
    return Namespace(**{**defaults, **given})


def test_a_csv_with_a_test_file_trains_and_tests(tmp_path):
    def write(name, n, seed):
        texts, labels = reviews.generate(n, seed)
        rows = "".join(f'"{t}",{reviews.CLASS_NAMES[y]}\n' for t, y in zip(texts, labels))
        (tmp_path / name).write_text("review,sentiment\n" + rows)
    write("train.csv", 6000, seed=0)
    write("test.csv", 500, seed=1)
    run, printed = run_classify("--quick", "--data", tmp_path / "train.csv", "--test",
                            tmp_path / "test.csv", "--text-column", "review", "--label-column",
                            "sentiment", "--out", tmp_path / "run")
    _, transformer, bag, n = FINAL_LINE.fullmatch(printed[-1]).groups()
    assert float(transformer) >= 75 and n == "500"
    assert printed[0].startswith("data: ") and "6,000 training and 500 test reviews" in printed[0]


def test_json_lines_binary_and_stars(tmp_path):
    path = tmp_path / "reviews.jsonl"
    stars = [1, 2, 3, 4, 5, 5]
    path.write_text("".join(json.dumps({"review_body": f"review {i}", "stars": s}) + "\n"
                            for i, s in enumerate(stars)))
    with pytest.warns(UserWarning, match="3 stars"):
        binary = review_files.read(path, options(labels="binary"))
    names, values = review_files.classes_of(binary, binary_stars=True)
    assert names == ("negative", "positive")
    assert review_files.class_ids(binary, values, path).tolist() == [0, 0, 1, 1, 1]
    five = review_files.read(path, options())
    names, values = review_files.classes_of(five)
    assert names == ("1", "2", "3", "4", "5")
    assert review_files.class_ids(five, values, path).tolist() == [0, 1, 2, 3, 4, 4]


@pytest.mark.filterwarnings("ignore::models.inputs.data.DroppedRowsWarning")  # the header
def test_a_tsv_header_is_not_a_review_and_its_columns_can_be_named(tmp_path):
    """A header line above 0/1 labels once became a review labelled "label", which made the
    labels text: three classes. It is left out; named columns read a TSV table."""
    rows = "".join(f"sentence {i}\t{i % 2}\n" for i in range(50))
    (tmp_path / "h.tsv").write_text("sentence\tlabel\n" + rows)
    split = review_files.load(options(data=tmp_path / "h.tsv"), None, seed=0)
    assert split.class_names == ("0", "1") and len(split.train.texts) + len(split.test.texts) == 50
    (tmp_path / "t.tsv").write_text("stars\tbody\n" + "".join(
        f"{i % 2}\tsentence {i}\n" for i in range(50)))
    split = review_files.load(options(data=tmp_path / "t.tsv", text_column="body",
                                      label_column="stars"), None, seed=0)
    assert split.class_names == ("0", "1")
    assert all(int(t.split()[1]) % 2 == y for t, y in zip(split.train.texts, split.train.labels))


def test_a_tsv_is_split_by_the_seed_and_test_labels_must_be_known(tmp_path):
    (tmp_path / "all.txt").write_text("".join(f"sentence {i}\t{i % 3}\n" for i in range(50)))
    split = review_files.load(options(data=tmp_path / "all.txt"), None, seed=0)
    assert (len(split.train.texts), len(split.test.texts)) == (40, 10)
    assert split.class_names == ("0", "1", "2")
    for part in split:
        if isinstance(part, review_files.Reviews):
            assert [int(t.split()[1]) % 3 for t in part.texts] == part.labels.tolist()
    (tmp_path / "test.txt").write_text("sentence\t7\n")
    with pytest.raises(ValueError, match=r"test.txt has the labels \[7\].*\[0, 1, 2\]"):
        review_files.load(options(data=tmp_path / "all.txt", test=tmp_path / "test.txt"), None, 0)
    with pytest.raises(ValueError, match=r"format of .*reviews.xml.*--format"):
        review_files.file_format(tmp_path / "reviews.xml")


# --- the baseline ------------------------------------------------------------------------------

def test_tfidf_rows_worked_by_hand():
    documents = [["not", "good"], ["good"], ["good", "good", "bad"]]
    features = baseline.fit_features(documents, min_document_frequency=1)
    # document frequencies: good 3, bad 1, not 1, "not good" 1, "good good" 1, "good bad" 1
    idf = {"good": 1.0, "bad": np.log(4 / 2) + 1}
    assert features.idf[features.index["good"]] == pytest.approx(idf["good"])
    ids, values = baseline.sparse_row(features, ["good", "good", "bad"])
    row = {g: values[list(ids).index(features.index[g])] for g in ("good", "bad", "good bad")}
    raw = np.array([2 * idf["good"], idf["bad"], idf["bad"], idf["bad"]])  # + "good good"
    assert row["good"] == pytest.approx(raw[0] / np.linalg.norm(raw))
    assert row["good bad"] == pytest.approx(idf["bad"] / np.linalg.norm(raw))
    assert len(ids) == 4


def test_baseline_logits_are_the_dense_product(rng):
    p = baseline.LogisticRegression(rng.standard_normal((6, 3)).astype(np.float32),
                                    rng.standard_normal(3).astype(np.float32))
    x = baseline.stack_rows([(np.array([0, 4]), np.array([0.6, 0.8], np.float32)),
                             (np.array([5]), np.array([1.0], np.float32))])
    dense = np.zeros((2, 6), np.float32)
    dense[0, [0, 4]], dense[1, 5] = [0.6, 0.8], 1.0
    np.testing.assert_allclose(baseline.logits(p, x), dense @ p.w + p.b, rtol=1e-6)


def test_baseline_learns_which_words_mean_what():
    documents = [[w, "food"] for w in ("good", "great", "bad", "awful")] * 10
    labels = np.array([1, 1, 0, 0] * 10)
    features = baseline.fit_features(documents)
    params = baseline.train(features, documents, labels, n_labels=2, seed=0, epochs=100, lr=0.1)
    probabilities = baseline.predict(params, features, [["great", "food"], ["awful", "food"]])
    assert probabilities[0, 1] > 0.95 and probabilities[1, 0] > 0.95
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, rtol=1e-6)


def test_the_baseline_on_a_small_file_gets_the_transformers_step_budget(monkeypatch):
    """400 reviews whose one adjective decides the label (a bag of words can get them all
    right): a fixed 6 epochs, 42 steps, left the baseline at 83% of the test reviews."""
    rng = np.random.default_rng(0)
    adjectives = {0: ("bad", "poor", "awful", "disappointing", "terrible", "mediocre"),
                  1: ("good", "great", "excellent", "decent", "impressive", "pleasant")}
    filler = [f"w{i}" for i in range(60)]
    labels = rng.integers(0, 2, 500)
    documents = []
    for label in labels:
        words = list(rng.choice(filler, 8))
        words[rng.integers(8)] = str(rng.choice(adjectives[label]))
        documents.append(words)
    steps = []
    real_fit = baseline.training.fit
    monkeypatch.setattr(baseline.training, "fit", lambda *a, **k: steps.append(a[4]) or
                        real_fit(*a, **k))
    features = baseline.fit_features(documents[:400])
    params = baseline.train(features, documents[:400], labels[:400], 2, seed=0)
    assert steps == [math.ceil(classify.MIN_STEPS / math.ceil(400 / baseline.BATCH_SIZE))]
    assert steps[0] * math.ceil(400 / baseline.BATCH_SIZE) >= classify.MIN_STEPS
    predicted = baseline.predict(params, features, documents[400:]).argmax(axis=1)
    assert np.mean(predicted == labels[400:]) >= 0.93


# --- batches and schedule ----------------------------------------------------------------------

def test_length_bucketed_batches_cover_every_row_once_with_similar_lengths(rng):
    sequences = [np.arange(1, 1 + n) for n in rng.integers(0, 30, size=500)]
    labels = np.arange(500)
    batches = list(length_buckets.length_bucketed_batches(sequences, labels, 8, 0,
                                                          np.random.default_rng(1)))
    assert sorted(np.concatenate([y for _, y in batches]).tolist()) == list(range(500))
    for ids, y in batches:
        lengths = [len(sequences[i]) for i in y]
        assert ids.shape == (len(y), max(lengths + [1]))
        for row, i in zip(ids, y):
            assert row[:len(sequences[i])].tolist() == sequences[i].tolist()
            assert not row[len(sequences[i]):].any()
    spread = np.mean([np.ptp([len(sequences[i]) for i in y]) for _, y in batches])
    assert spread < 3  # random batches of 8 lengths in 0..29 spread about 20


@pytest.mark.parametrize("pool", classifier.POOLS)
def test_probabilities_in_batches_equal_each_review_alone(rng, pool):
    p = classifier.init(rng, 20, 3, d_model=8, n_heads=2, d_ff=16, max_len=12, pool=pool,
                        pad=0, dtype=np.float64)
    sequences = [rng.integers(1, 20, size=n) for n in (5, 0, 12, 3, 7)]
    batched = length_buckets.probabilities(p, sequences, 0, batch_size=2)
    for row, s in zip(batched, sequences):
        alone = np.zeros((1, 12 if pool == "flatten" else max(len(s), 1)), dtype=np.int64)
        alone[0, :len(s)] = s  # flatten reads exactly max_len ids: s and then padding
        np.testing.assert_allclose(row, ag.softmax(classifier.apply(p, alone))[0], rtol=1e-12)
    ids, _ = next(iter(length_buckets.length_bucketed_batches(
        sequences, np.zeros(5), 2, 0, None, length_buckets.fixed_length(p))))
    assert ids.shape == ((2, 12) if pool == "flatten" else (2, 3))


def test_a_vocabulary_that_is_not_the_models_is_refused(quick_run, tmp_path):
    """vocabulary.txt cut to 10 lines against the model's embedding predicted, confidently."""
    import shutil
    run, _ = quick_run
    copy = tmp_path / "run"
    shutil.copytree(run.out, copy)
    vocabulary = copy / "vocabulary.txt"
    vocabulary.write_text("".join(vocabulary.read_text().splitlines(keepends=True)[:10]))
    kept = len(text.IndexTokenizer.load(vocabulary))
    with pytest.raises(SystemExit) as stop:
        classify.main(["--model", str(copy), "--predict", "good"])
    assert stop.value.code == (f"classify: --model {copy}: vocabulary.txt holds {kept} words (pad "
                               f"id 0), but hyperparameters.json says vocab_size "
                               f"{run.settings['vocab_size']:,} (pad id 0): the files are not of "
                               f"one run")
    assert kept < run.settings["vocab_size"]


AS_PROGRAM = """
import os, runpy, sys
sys.argv = ["demos.classify", "--help"]
try:
    runpy.run_module("demos.classify", run_name="__main__")
except SystemExit:
    pass
print("threads", os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.parametrize("preset, expected", [(None, "1"), ("2", "2")])
def test_as_a_program_it_uses_one_blas_thread_unless_told_as_translate_does(preset, expected):
    """classify pins its BLAS threads as translate and generate do (a second thread made a
    busy machine's --quick run many times slower); its --help states the labels' policy."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    done = subprocess.run([sys.executable, "-c", AS_PROGRAM], capture_output=True, text=True,
                          cwd=pathlib.Path(__file__).resolve().parents[1], env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"threads {expected}"
    assert "labels that differ only in case" in done.stdout.replace("\n", " ").replace("  ", " ")


def test_importing_the_demo_leaves_the_threads_alone(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    importlib.reload(classify)
    assert "OPENBLAS_NUM_THREADS" not in os.environ
