"""python -m demos.classify: the review classifier of the Julia posts (models.classifier),
trained on reviews in which word order matters, next to a bag-of-words baseline.

    python -m demos.classify                   # generated reviews: "not really good", "... but ..."
    python -m demos.classify --quick           # a tiny run of a few seconds (CI)
    python -m demos.classify --data reviews.csv --text-column review --label-column sentiment
    python -m demos.classify --data train.jsonl --labels binary --test test.jsonl
    python -m demos.classify --out DIR --resume  # continue a stopped run, its own options
    python -m demos.classify --model runs/classify-<timestamp> --predict "not bad at all"

Without --data the reviews are generated (demos/support/reviews.py) so that only the order of the
words says whether "not" applies and which clause decides: a bag of words gets about 60%
of them right, a model that reads the order nearly all.
With --data, a CSV, JSON lines (Amazon-reviews-multi: review_body, stars) or
sentence<TAB>label file; 20% of it, drawn by --seed, is the test set unless --test names
one. Each review is cut to its first --max-len words. A label is read without the spaces
around it, and labels that differ only in case ("Positive", "positive") or are one number
("1", "1.0") are refused, naming them: fix the file, or it would train two classes.

The baseline is logistic regression on TF-IDF features of words and word pairs
(demos/support/baseline.py), trained on the same reviews. The defaults were tuned on 18,000
real Amazon reviews (docs/results.md): at --max-len 200 the transformer matches the baseline.

Saved in --out: model.npz (ag.save), vocabulary.txt (IndexTokenizer.save),
hyperparameters.json and history.json (models.train.fit, with last.npz and best.npz),
curves.png, health.png (gradient norms and update ratios by parameter group:
models/training/health.py), confusion.png and probabilities.png. --predict needs only that folder
(and answers with the transformer alone).
The last line printed is the test accuracy of the two models' ensemble (demos/support/ensemble.py:
the mean of their probabilities), the demo's result, then of each model. Like every demo it
runs on one thread unless --threads or OPENBLAS_NUM_THREADS say otherwise: at these sizes a
second BLAS thread hardly helps a step, and on a busy machine it makes steps several times
slower.
"""
if __name__ == "__main__":  # a program's choice, made before numpy loads BLAS; never on import
    from .support import program
    program.start("classify")

import json  # noqa: E402
import math  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any, NamedTuple  # noqa: E402

import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
import models  # noqa: E402
from models import classifier, health, plots, text, train  # noqa: E402

from .support import baseline, common, ensemble, program, review_files, runs  # noqa: E402
from .support.common import flag  # noqa: E402
from .support.length_buckets import (fixed_length, length_bucketed_batches,  # noqa: E402
                                     probabilities)

# Tuned on amazon_hatn at --max-len 200 (docs/results.md); QUICK is a tiny run for CI.
DEFAULTS = dict(max_len=200, epochs=3, d_model=64, layers=1, heads=4, pool="mean",
                vocab_size=20_000, min_df=2, batch_size=32, lr=3e-3, dropout=0.3,
                generated=16_000)
QUICK = dict(max_len=200, epochs=3, d_model=32, layers=1, heads=2, pool="mean",
             vocab_size=20_000, min_df=2, batch_size=32, lr=3e-3, dropout=0.0,
             generated=6_000)
# Embedding rows ~ N(0, 0.1²), not TransformersLite's N(0, 1): Adam moves a coordinate by
# about lr a step, so unit-sized random rows change slowly and a rare word keeps one, which
# test reviews then read as noise (amazon_hatn: 88.3% after 2 epochs instead of 86.3%).
EMBEDDING_SCALE = 0.1
# Without --epochs, a small file gets more than DEFAULTS' epochs: at least MIN_STEPS updates
# (the UCI sentences, 2,400 to train on: 14 epochs, 82.5% over 5 folds where 3 gave 76%).
MIN_STEPS = baseline.MIN_STEPS  # the same rule for both models
WARMUP_FRACTION = 0.05  # of the steps: a linear warm-up, then a cosine decay to zero
WEIGHT_DECAY = 0.01
CLIP_NORM = 1.0
MAX_GENERATED = 10_000_000  # generated reviews: about 300 bytes each, kept with their words
MODEL, VOCABULARY, HYPERPARAMETERS = "model.npz", "vocabulary.txt", "hyperparameters.json"
# what build_model and predict read from a run's hyperparameters.json
MODEL_SETTINGS = ("vocab_size", "pad", "class_names", "max_len", "d_model", "heads", "d_ff",
                  "layers", "pool", "dropout", "embedding_scale")
DATA_OPTIONS = ("test", "format", "text_column", "label_column", "labels")  # need --data
# what a run keeps in its hyperparameters.json and --resume reads back
OPTIONS = ("seed", "data", *DATA_OPTIONS, *DEFAULTS)
KINDS = {"seed": int, **{name: str for name in ("data", *DATA_OPTIONS)},
         **{name: type(value) for name, value in DEFAULTS.items()}}
CHOICES = {"pool": classifier.POOLS, "format": ("csv", "jsonl", "tsv"),
           "labels": ("binary", "stars")}


class Run(NamedTuple):
    """What a training run made: its final line, the trained model and where its files are."""
    line: str
    params: Any
    tokenizer: text.IndexTokenizer
    settings: dict
    out: pathlib.Path


def parse_args(argv=None):
    parser = common.argument_parser("classify", __doc__)
    files = parser.add_argument_group("data")
    files.add_argument("--data", type=pathlib.Path, metavar="FILE",
                       help="labelled reviews: .csv, .jsonl or .tsv/.txt (sentence<TAB>label)")
    files.add_argument("--test", type=pathlib.Path, metavar="FILE",
                       help="a held-out file in the same format, instead of 20%% of --data")
    files.add_argument("--format", choices=CHOICES["format"],
                       help="the format of --data and --test (default: from the suffix)")
    files.add_argument("--text-column", metavar="NAME",
                       help="CSV or TSV column or JSON key of the text (default: text; JSON: "
                            "review_body; TSV: the text before the last TAB, a header line "
                            "left out)")
    files.add_argument("--label-column", metavar="NAME",
                       help="CSV or TSV column or JSON key of the label (default: label; JSON: "
                            "stars; TSV: after the last TAB)")
    files.add_argument("--labels", choices=CHOICES["labels"], default=None,
                       help="JSON lines: 1-5 star classes, or binary (1-2 vs 4-5 stars, 3 "
                            "left out) (stars)")
    run = parser.add_argument_group("model and training (default / --quick)")
    for name, kind, help_text in (
            ("max_len", int, "words kept of each review"), ("epochs", int, "passes over the data; without it, at least "
                                            f"{MIN_STEPS:,} steps on a small file"),
            ("d_model", int, "model width"), ("layers", int, "encoder blocks"),
            ("heads", int, "attention heads"), ("pool", str, "flatten (the seed's) or mean"),
            ("vocab_size", int, "most frequent words kept"),
            ("min_df", int, "reviews a word must be in to be kept"),
            ("batch_size", int, "reviews per step"), ("lr", float, "peak learning rate (AdamW)"),
            ("dropout", float, "dropout rate"),
            ("generated", int, "generated reviews, without --data")):
        run.add_argument("--" + name.replace("_", "-"), type=kind, default=None,
                         metavar={int: "N", float: "RATE"}.get(kind),
                         choices=classifier.POOLS if name == "pool" else None,
                         help=f"{help_text} ({DEFAULTS[name]} / {QUICK[name]})")
    use = parser.add_argument_group("using a saved model")
    use.add_argument("--predict", nargs="+", metavar="TEXT", help="texts to classify")
    use.add_argument("--model", type=pathlib.Path, metavar="DIR",
                     help="the --out folder of a classify run")
    runs.add_resume_option(parser)
    common.add_device_option(parser)
    args = parser.parse_args(argv)
    if (args.predict is None) != (args.model is None):
        parser.error("--predict and --model go together")
    check_ranges(parser, args)
    if args.model is not None:
        common.refuse_unused(parser, args, ("quick", "out", "resume", "seed", "device", "data",
                                            *DATA_OPTIONS, *DEFAULTS),
                             "is for training: --model DIR --predict TEXT answers with the "
                             "model trained in DIR, on the CPU")
        return args
    if args.resume:
        if args.out is None:
            parser.error("--resume needs --out DIR, the folder of the run to continue")
        common.refuse_unused(parser, args, ("quick",), "with --resume: the run goes on with "
                                                       "its own options")
        runs.take_run_options(parser, args, "classify", OPTIONS, paths=("data", "test"),
                              kinds=KINDS, choices=CHOICES)
        check_ranges(parser, args)  # the run's own, as its file holds them
    else:
        runs.check_new_run("classify", common.output_path(args, "classify"))
        common.check_output_folder(parser, common.output_path(args, "classify"))
    check_data_options(parser, args)
    args.epochs_to_fit = args.epochs is None and not args.quick  # set by epochs_for the data
    runs.fill_defaults(args, QUICK if args.quick else DEFAULTS)
    if args.d_model % args.heads:
        parser.error(f"--d-model {args.d_model} must be a multiple of --heads {args.heads}")
    common.check_memory(parser, common.transformer_bytes(
        args.batch_size, args.max_len, args.d_model, 4 * args.d_model, args.heads, args.layers,
        args.vocab_size, args.max_len, 8), f"--max-len {args.max_len} --batch-size "
                                        f"{args.batch_size} --d-model {args.d_model}")
    return args


def check_ranges(parser, args):
    """Every option given (or read back by --resume) in its range."""
    common.check_options(parser, args, counts=[n for n in DEFAULTS if n not in ("lr", "dropout",
                                                                              "pool")],
                         rates=("lr",), fractions=("dropout",), non_negative=("seed",),
                         at_most={"generated": (MAX_GENERATED, "a few GB of reviews")})


def epochs_for(n_reviews, batch_size):
    """The default number of epochs for n_reviews to train on: DEFAULTS' epochs, or as many
    as make MIN_STEPS updates of batch_size reviews when that is more."""
    steps_per_epoch = math.ceil(n_reviews / batch_size)
    return max(DEFAULTS["epochs"], math.ceil(MIN_STEPS / steps_per_epoch))


def check_data_options(parser, args):
    """The options about a data file need --data, and --labels a JSON lines file, for which
    it defaults to stars (other files keep None: a resumed CSV or TSV run reads it back)."""
    for name in DATA_OPTIONS:
        if args.data is None and getattr(args, name) is not None:
            parser.error(f"{flag(name)} is about the --data file: it needs --data FILE")
    kind = args.format or review_files.FORMATS.get((args.data or pathlib.Path()).suffix.lower())
    if args.labels is not None and kind not in (None, "jsonl"):
        parser.error(f"--labels {args.labels} is for JSON lines (star ratings), but --data "
                     f"{args.data} is {kind}")
    if kind == "jsonl" and args.labels is None:
        args.labels = "stars"
    if args.text_column is not None and args.text_column == args.label_column:
        parser.error(f"--text-column and --label-column both name {args.text_column!r}: the "
                     f"model would read the label it is to tell")
    if kind == "tsv" and (args.text_column is None) != (args.label_column is None):
        parser.error("--text-column and --label-column name a TSV's columns by its header "
                     "line: give both (without them, the label follows the last TAB)")


def loss_fn(params, batch, rng):
    """Cross-entropy and accuracy of a batch (ids (B, T), labels (B,)); dropout when rng."""
    ids, labels = batch
    logits = classifier.apply(params, ids, training=rng is not None, rng=rng)  # (B, C)
    accuracy = np.mean(np.argmax(ag.stop_gradient(logits), axis=-1) == labels)
    return ag.cross_entropy(logits, labels), {"accuracy": accuracy}


def hyperparameters(args, tokenizer, class_names):
    """What --predict needs to rebuild the model, and how it was trained."""
    return dict(vocab_size=len(tokenizer), pad=tokenizer.pad_id, class_names=list(class_names),
                max_len=args.max_len, d_model=args.d_model, heads=args.heads, d_ff=4 * args.d_model,
                layers=args.layers, pool=args.pool, dropout=args.dropout, epochs=args.epochs,
                batch_size=args.batch_size, lr=args.lr, weight_decay=WEIGHT_DECAY,
                warmup_fraction=WARMUP_FRACTION, embedding_scale=EMBEDDING_SCALE,
                min_df=args.min_df, seed=args.seed, demo="classify",
                options=runs.saved_options(args, OPTIONS))


def build_model(settings, rng):
    """A classifier with the sizes in `settings` (hyperparameters' dict), weights from rng,
    its embedding rows scaled by settings["embedding_scale"]."""
    p = classifier.init(rng, settings["vocab_size"], len(settings["class_names"]),
                        d_model=settings["d_model"], n_heads=settings["heads"],
                        d_ff=settings["d_ff"], n_layers=settings["layers"],
                        max_len=settings["max_len"], pool=settings["pool"], pad=settings["pad"],
                        dropout=settings["dropout"])
    return p._replace(embed=p.embed._replace(table=p.embed.table * settings["embedding_scale"]))


def words_of(texts, max_len):
    """Each text's words (text.words), cut to the first max_len."""
    return [text.words(t)[:max_len] for t in texts]


def train_transformer(args, settings, train_set, test_set, out):
    """fit a new model on train_set (id sequences, labels), with the test set's loss and
    accuracy after each epoch (nothing is chosen by them); -> (params, history)"""
    params = build_model(settings, np.random.default_rng(args.seed))
    print(f"model: {models.summary(params).splitlines()[-1]}")
    params = ag.to_device(params, args.device)
    pad, length = settings["pad"], fixed_length(params)
    batches = lambda epoch: length_bucketed_batches(  # noqa: E731
        *train_set, args.batch_size, pad, np.random.default_rng([args.seed, epoch]), length)
    total_steps = args.epochs * len(batches(0))
    warmup = max(1, round(WARMUP_FRACTION * total_steps))
    schedule = ag.optim.warmup_schedule(peak=args.lr, warmup=warmup, steps=total_steps)
    optimizer = ag.optim.adamw(schedule, weight_decay=WEIGHT_DECAY)
    return train.fit(loss_fn, params, optimizer, common.batches_on(args.device, batches),
                     args.epochs, out_dir=out, val_batches=common.batches_on(
                         args.device, length_bucketed_batches(*test_set, 256, pad, None, length)),
                     seed=args.seed, resume=args.resume, clip_norm=CLIP_NORM,
                     hyperparameters=settings, unit="reviews", health_every=train.HEALTH_EVERY)


def baseline_probabilities(features, train_words, train_labels, test_words, n_classes, seed):
    """The TF-IDF baseline's test probabilities (N, C), trained on the same words
    (features: baseline.fit_features of train_words)."""
    params = baseline.train(features, train_words, train_labels, n_classes, seed=seed)
    return baseline.predict(params, features, test_words)


def print_confusion(counts, class_names):
    """The confusion matrix as text: a row per true class, a column per predicted one."""
    width = max(len(n) for n in class_names + ("true \\ predicted",))
    cells = [max(len(n), len(str(counts.max()))) for n in class_names]
    print("true \\ predicted".ljust(width), *(n.rjust(w) for n, w in zip(class_names, cells)))
    for name, row in zip(class_names, counts):
        print(name.ljust(width), *(str(c).rjust(w) for c, w in zip(row, cells)))


def report(split, model_probabilities, baseline_probabilities, out):
    """Print and plot the test results (the plots and the confusion matrix: the transformer's,
    the model --predict uses); -> the final line: the ensemble's accuracy
    (demos/support/ensemble.py), the demo's result, then each model's."""
    names, labels = split.class_names, split.test.labels
    predicted = model_probabilities.argmax(axis=1)
    plots.confusion_matrix(labels, predicted, out / "confusion.png", class_names=names)
    plots.probabilities_by_class(model_probabilities, labels, out / "probabilities.png",
                                 class_names=names)
    print("confusion matrix of the transformer on the test reviews:")
    print_confusion(plots.confusion_counts(labels, predicted, len(names)), names)
    both = ensemble.mean_probabilities(model_probabilities, baseline_probabilities)  # (N, C)
    combined, model, bag = (100 * ensemble.accuracy(p, labels) for p in (
        both, model_probabilities, baseline_probabilities))
    return (f"test accuracy: ensemble (mean probability) {combined:.1f}%, transformer "
            f"{model:.1f}%, bag-of-words baseline (TF-IDF words and pairs) {bag:.1f}% "
            f"({len(labels):,} review{'s' if len(labels) != 1 else ''})")


def run_settings(directory):
    """The hyperparameters a classify run saved in `directory`; a folder that is not a
    classify run's is an error naming what it lacks."""
    not_a_run = f"--model {directory} is not the --out folder of a classify run"
    if not directory.is_dir():
        what = "a file, not a folder" if directory.exists() else "no such folder"
        raise ValueError(f"{not_a_run} ({what})")
    runs.check_made_by("classify", directory)  # a run of another demo is named as such
    missing = [name for name in (MODEL, VOCABULARY, HYPERPARAMETERS)
               if not (directory / name).is_file()]
    if missing:
        raise ValueError(f"{not_a_run} (missing {', '.join(missing)})")
    with open(directory / HYPERPARAMETERS) as fh:
        saved = json.load(fh)  # fit's file: {"fit": ..., "hyperparameters": ...}
    settings = saved.get("hyperparameters", {}) if isinstance(saved, dict) else {}
    lacking = [name for name in MODEL_SETTINGS if name not in settings]
    if lacking:
        raise ValueError(f"{not_a_run} (its {HYPERPARAMETERS} has no {', '.join(lacking)})")
    return settings


def load_model(directory):
    """(params, tokenizer, settings) of a saved run: only the files in `directory`."""
    directory = pathlib.Path(directory)
    settings = run_settings(directory)
    tokenizer = text.IndexTokenizer.load(directory / VOCABULARY)
    if len(tokenizer) != settings["vocab_size"] or tokenizer.pad_id != settings["pad"]:
        raise ValueError(f"--model {directory}: {VOCABULARY} holds {len(tokenizer):,} words "
                         f"(pad id {tokenizer.pad_id}), but {HYPERPARAMETERS} says vocab_size "
                         f"{settings['vocab_size']:,} (pad id {settings['pad']}): the files "
                         f"are not of one run")
    like = build_model(settings, np.random.default_rng(0))
    return ag.load(directory / MODEL, like=like), tokenizer, settings


def predict(directory, texts):
    """(class probabilities (N, C), class names) of the texts under the model saved in
    `directory`."""
    return predict_with(load_model(directory), texts)


def predict_with(model, texts):
    """predict's result under load_model's (params, tokenizer, settings)."""
    params, tokenizer, settings = model
    sequences = [tokenizer.encode(w) for w in words_of(texts, settings["max_len"])]
    return probabilities(params, sequences, tokenizer.pad_id), settings["class_names"]


def print_predictions(model, texts):
    """A line per text: the predicted class, every class's probability and the text, under
    load_model's (params, tokenizer, settings); on stderr, a note for each text of which
    the model knows no word (its answer is then the same for any such text)."""
    probs, names = predict_with(model, texts)
    for t, row in zip(texts, probs):
        shares = ", ".join(f"{n} {p:.4f}" for n, p in zip(names, row))
        print(f"{names[int(row.argmax())]}: {shares}   {t!r}", flush=True)
        if not known_words(model, t):
            print(f"classify: none of the words of {t!r} is in the model's vocabulary: the "
                  f"prediction above is its answer to a review it cannot read", file=sys.stderr,
                  flush=True)


def known_words(model, review):
    """How many of the review's words (the first max_len) are in the model's vocabulary,
    under load_model's (params, tokenizer, settings)."""
    _, tokenizer, settings = model
    ids = tokenizer.encode(words_of([review], settings["max_len"])[0])
    return int(np.sum(ids != tokenizer.unk_id))


def read_reviews(args):
    """Every check of the input before anything is trained or written: -> (the Split, the
    words of (training, test) reviews, the baseline's features of the training words, the
    tokenizer of the training words)."""
    split = review_files.load(args, args.generated, args.seed)
    words = tuple(words_of(part.texts, args.max_len) for part in (split.train, split.test))
    kept = text.select_vocabulary(words[0], args.min_df, args.vocab_size)
    if not kept:
        raise ValueError(f"classify: --min-df {args.min_df}: no word is in that many of the "
                         f"{len(words[0]):,} training reviews, so the model would read nothing")
    return split, words, baseline.fit_features(words[0]), text.IndexTokenizer(kept)


def main(argv=None):
    """Train and test: -> Run. With --model and --predict: print the predictions, -> None."""
    args = parse_args(argv)
    common.use_threads(args)
    common.check_device("classify", args)
    common.say_if_compiling()
    ag.memory.keep_freed_memory()
    if args.predict is not None:
        with runs.stopped_quietly("classify"):
            with common.exit_on_bad_input("classify"):
                model = load_model(args.model)
            return print_predictions(model, args.predict)
    out = common.output_path(args, "classify")
    with runs.stopped_in_one_line("classify", out, argv, args.lr) as run:
        return train_and_test(args, out, run)


def train_and_test(args, out, run):
    """Read the reviews, train, save and test: -> Run (run.trained set once fit returned)."""
    with common.exit_on_bad_input("classify"):
        split, (train_words, test_words), features, tokenizer = read_reviews(args)
        out.mkdir(parents=True, exist_ok=True)
    print(f"data: {split.source}: {len(split.train.texts):,} training and "
          f"{len(split.test.texts):,} test reviews, classes {', '.join(split.class_names)}")
    if args.epochs_to_fit:
        args.epochs = epochs_for(len(split.train.texts), args.batch_size)
    settings = hyperparameters(args, tokenizer, split.class_names)
    train_sequences, test_sequences = ([tokenizer.encode(w) for w in words]
                                       for words in (train_words, test_words))
    started = time.perf_counter()
    params, history = train_transformer(args, settings, (train_sequences, split.train.labels),
                                        (test_sequences, split.test.labels), out)
    runs.check_not_diverged("classify", [history], len(split.class_names), "classes", args.lr)
    run.trained = True
    params = ag.to_device(params, "cpu")  # the test and the files on the host
    print(f"trained in {time.perf_counter() - started:.0f} s; vocabulary {len(tokenizer):,} "
          f"words; files in {out}")
    ag.save(out / MODEL, params)
    tokenizer.save(out / VOCABULARY)
    plots.training_curves(history, out / "curves.png", val_name="test")
    plots.training_health(history, out / "health.png")  # fit's health records
    print(health.summary(history.get("health")))
    line = report(split, probabilities(params, test_sequences, tokenizer.pad_id),
                  baseline_probabilities(features, train_words, split.train.labels, test_words,
                                         len(split.class_names), args.seed), out)
    common.print_result(line)
    return Run(line, params, tokenizer, settings, out)


if __name__ == "__main__":
    program.run("classify", main)
