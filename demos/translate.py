"""python -m demos.translate: the paper's encoder-decoder learns to write numbers in English.

    python -m demos.translate                 # the full run: >= 99% on numbers it never saw
    python -m demos.translate --quick         # a tiny model for a few seconds (CI)
    python -m demos.translate --share-embeddings all   # one vocabulary, one embedding matrix
    python -m demos.translate --out DIR --resume     # continue a stopped run, its own options
    python -m demos.translate --model DIR --number 4721 1000001   # (or numbers on stdin)
    python -m demos.translate --help          # the knobs: --epochs, --d-model, --layers, ...

The task (demos/support/number_words.py): 4721 -> "four thousand seven hundred twenty one", for
every whole number up to 999,999,999; digits in, one token each, words out. The model is
models.transformer with layer norm before each sublayer (--norm post is the paper's order,
which learns the task too), trained by models.train.fit. --share-embeddings all gives
both sides one vocabulary (number_words.JOINT_VOCAB: the words, then the digits) and the
model one matrix for the source embedding, the target embedding and the output projection,
as the paper does (§3.4); target ties the output projection to the word embedding alone;
none (the default) keeps three matrices. An epoch is --epoch-size batches
of numbers drawn afresh from (seed, epoch) out of the whole range except a held-out set,
which is drawn once from a fixed seed (the same for every --seed, so runs compare). After
each epoch fit measures the loss on a fixed validation set (numbers training may also draw)
and the exact match on a quarter of the held-out numbers. The last line printed is the
exact match (every word right, greedy decoding) on all the held-out numbers.

Saved in --out (default runs/translate-<timestamp>/): model.npz (the trained parameters:
ag.load reads them back), curves.png, attention.png (the last decoder layer's
attention over the digits of one held-out number), health.png (gradient norms and update
ratios by parameter group: models/training/health.py), and fit's files: last.npz (the
checkpoint a --resume continues), best.npz, history.json and hyperparameters.json.

The full run takes a few minutes of one core (its figures: docs/results.md). Like every
demo it runs on one thread unless --threads or OPENBLAS_NUM_THREADS say otherwise
(demos/support/program.py): at these sizes a second BLAS thread does not make a step faster,
and on a busy machine it makes a step many times slower (tests/benchmarks/README.md, "The
demos' BLAS threads").
"""
if __name__ == "__main__":  # a program's choice, made before numpy loads BLAS; never on import
    from .support import program
    program.start("translate")

import argparse  # noqa: E402
import functools  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
import models  # noqa: E402
from models import health, plots, train, transformer  # noqa: E402

from .support import common, program, runs  # noqa: E402
from .support.common import flag  # noqa: E402
from .support import number_words as nw  # noqa: E402

# The recipe, chosen by experiment, and the quick one: 8 epochs of 500 batches are the
# recipe's 4,000 steps.
FULL = dict(epochs=8, epoch_size=500, d_model=64, heads=4, d_ff=256, layers=2, norm="pre",
            batch_size=64, lr=1e-3, warmup=200, label_smoothing=0.0, dropout=0.0, held_out=2000,
            share_embeddings="none")
QUICK = dict(epochs=4, epoch_size=100, d_model=32, heads=4, d_ff=64, layers=1, norm="pre",
             batch_size=64, lr=1e-2, warmup=50, label_smoothing=0.0, dropout=0.0, held_out=500,
             share_embeddings="none")
CHOICES = {"norm": ("post", "pre"), "share_embeddings": ("none", "target", "all")}
AT_LEAST_ONE = ("epochs", "epoch_size", "d_model", "heads", "d_ff", "layers", "batch_size",
                "held_out")
OPTIONS = ("seed", *FULL)  # what a run keeps in hyperparameters.json and --resume reads
KINDS = {"seed": int, **{name: type(value) for name, value in FULL.items()}}
MAX_HELD_OUT = 100_000  # number_words.held_out_values draws at most this many
HELD_OUT_SEED = 0  # fixed: every run is measured on the same held-out numbers
VALIDATION_SEED = 1  # fixed: the validation numbers, drawn like training numbers
VALIDATION_BATCHES = 4
CLIP_NORM = 1.0
ADAM_BETAS, ADAM_EPS = (0.9, 0.98), 1e-9  # the paper's (§5.3)
BEAM_SIZE = 4
MAX_BEAM = 64


def parse_args(argv=None):
    parser = common.argument_parser("translate", __doc__)
    runs.add_resume_option(parser)
    for name, value in FULL.items():
        parser.add_argument(flag(name), type=type(value), default=None, choices=CHOICES.get(name),
                            help=f"full run: {value}, --quick: {QUICK[name]}")
    common.add_device_option(parser)
    use = parser.add_argument_group("using a trained model")
    use.add_argument("--model", type=pathlib.Path, metavar="DIR",
                     help="the --out folder of a translate run: write --number in words")
    use.add_argument("--number", type=int, nargs="+", metavar="N",
                     help="numbers to write in words (default: one a line on standard input)")
    use.add_argument("--beam", type=int, default=1, metavar="N",
                     help="beam search over N candidates (1: greedy decoding) (1)")
    args = parser.parse_args(argv)
    check_ranges(parser, args)
    if args.model is not None or args.number is not None:
        if args.model is None:
            parser.error("--number needs --model DIR, the folder of a trained translate run")
        common.refuse_unused(parser, args, ("quick", "out", "resume", "seed", *FULL),
                             "is for training: --model DIR uses the model trained in DIR")
        return args
    common.refuse_unused(parser, args, ("beam",), "is for --model DIR (the trained model's "
                                                  "answers); a run measures beam 4 itself")
    if args.resume:
        if args.out is None:
            parser.error("--resume needs --out DIR, the directory of the run to continue")
        common.refuse_unused(parser, args, ("quick",), "with --resume: the run goes on with "
                                                       "its own options")
        runs.take_run_options(parser, args, "translate", OPTIONS, kinds=KINDS, choices=CHOICES)
        check_ranges(parser, args)  # the run's own, as its file holds them
    else:
        runs.check_new_run("translate", common.output_path(args, "translate"))
        common.check_output_folder(parser, common.output_path(args, "translate"))
    runs.fill_defaults(args, QUICK if args.quick else FULL)
    if args.held_out > MAX_HELD_OUT:
        parser.error(f"--held-out must be at most {MAX_HELD_OUT:,} (numbers kept from "
                     f"training), got {args.held_out:,}")
    if args.d_model % args.heads:
        parser.error(f"--d-model {args.d_model} must be a multiple of --heads {args.heads}")
    length, vocab = nw.MAX_WORDS + 2, vocabulary_sizes(args.share_embeddings)[1]
    step_bytes = common.transformer_bytes(args.batch_size, length, args.d_model, args.d_ff,
                                           args.heads, 2 * args.layers, vocab, length,
                                           length * vocab)
    common.check_memory(parser, step_bytes, f"--batch-size {args.batch_size} --d-model "
                                            f"{args.d_model} --d-ff {args.d_ff} --layers "
                                            f"{args.layers}")
    return args


def check_ranges(parser, args):
    """Every option given (or read back by --resume) in its range."""
    common.check_options(parser, args, counts=(*AT_LEAST_ONE, "beam"), rates=("lr",),
                         fractions=("label_smoothing", "dropout"),
                         non_negative=("warmup", "seed"),
                         at_most={"beam": (MAX_BEAM, "a wider beam finds hardly anything "
                                                     "better")})


def settings(args):
    """The settings that make a run what it is (fit keeps them in hyperparameters.json):
    the demo's name and the options, which a --resume reads back."""
    return {"demo": "translate", "options": runs.saved_options(args, OPTIONS)}


def vocabulary_sizes(share_embeddings):
    """(src_vocab, tgt_vocab) of the model for --share-embeddings: "all" needs one vocabulary."""
    if share_embeddings == "all":
        return len(nw.JOINT_VOCAB), len(nw.JOINT_VOCAB)
    return len(nw.SOURCE_VOCAB), len(nw.TARGET_VOCAB)


def source_ids(share_embeddings):
    """The digits' token ids for --share-embeddings (or transformer.sharing(params)):
    number_words.JOINT_IDS when the model has one vocabulary, else SOURCE_IDS."""
    return nw.JOINT_IDS if share_embeddings == "all" else nw.SOURCE_IDS


def adam(args, steps):
    """Adam with the paper's betas and eps, its rate a linear warm-up to args.lr over
    args.warmup steps, then a cosine decay to common.FINAL_LR of it at `steps`
    (ag.optim.warmup_schedule). -> (the optimizer, the schedule)"""
    schedule = ag.optim.warmup_schedule(peak=args.lr, warmup=args.warmup, steps=steps,
                                        final=common.FINAL_LR)
    return ag.optim.adam(lr=schedule, betas=ADAM_BETAS, eps=ADAM_EPS), schedule


def trim_padding(ids):
    """Drop the columns that are padding in every row.  (B, L) -> (B, L')"""
    used = np.flatnonzero((ids != nw.PAD).any(axis=0))
    return ids[:, :used[-1] + 1]


def training_batch(rng, size, held_out, ids=nw.SOURCE_IDS):
    """Fresh numbers, none held out: sources (B, S) as token ids of `ids` (source_ids) and
    targets [BOS, words.., EOS] (B, T)."""
    values = nw.sample_values(rng, size, held_out)  # (B,)
    return trim_padding(nw.encode_sources(values, ids)), trim_padding(nw.encode_targets(values))


class EpochBatches:
    """The `size` training batches of one epoch, drawn as they are used from
    default_rng([seed, epoch]): the same batches whenever the epoch is run again (a resume)."""

    def __init__(self, seed, epoch, size, batch_size, held_out, ids=nw.SOURCE_IDS):
        self.seed, self.epoch, self.size = seed, epoch, size
        self.batch_size, self.held_out, self.ids = batch_size, held_out, ids

    def __len__(self):
        return self.size

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        for _ in range(self.size):
            yield training_batch(rng, self.batch_size, self.held_out, self.ids)


def loss_fn(params, batch, rng, label_smoothing=0.0):
    """Mean cross-entropy of each next word under teacher forcing; rng None: no dropout
    (with --dropout 0 there is none either way).  batch: src (B, S), tgt (B, T)"""
    src, tgt = batch
    logits = transformer.apply(params, src, tgt[:, :-1], src_pad=nw.PAD,
                               training=rng is not None, rng=rng)  # (B, T - 1, V)
    return ag.cross_entropy(logits, tgt[:, 1:], ignore_index=nw.PAD,
                            label_smoothing=label_smoothing)


def translate(params, values, beam_size=1):
    """Words for each value, by greedy decoding (beam_size=1) or beam search. -> list of lists"""
    src = nw.encode_sources(values, source_ids(transformer.sharing(params)))  # (B, S)
    longest = nw.MAX_WORDS + 2  # BOS, the words, EOS
    if beam_size == 1:
        ids = transformer.greedy_decode(params, src, nw.BOS, nw.EOS, longest, src_pad=nw.PAD)
    else:
        ids = transformer.beam_search(params, src, nw.BOS, nw.EOS, longest, beam_size,
                                      src_pad=nw.PAD)
    return [nw.decode_words(row) for row in ids]


def exact_match(params, values, beam_size=1):
    """The fraction of values whose translation is right word for word."""
    predicted = translate(params, values, beam_size)
    return float(np.mean([p == nw.to_words(int(v)) for p, v in zip(predicted, values)]))


def train_model(params, args, held_out, out):
    """models.train.fit: Adam with a warm-up and cosine schedule, gradients clipped to norm 1,
    args.epochs epochs of args.epoch_size fresh batches; after each epoch the validation loss
    and the exact match on every fourth held-out value. -> (params, history)"""
    optimizer, _ = adam(args, args.epochs * args.epoch_size)
    rng, ids = np.random.default_rng(VALIDATION_SEED), source_ids(args.share_embeddings)
    validation = common.batches_on(args.device, [training_batch(rng, args.batch_size, held_out,
                                                                ids)
                                                 for _ in range(VALIDATION_BATCHES)])
    monitor = held_out[::4]  # evenly over the held-out set, which is sorted
    return train.fit(
        functools.partial(loss_fn, label_smoothing=args.label_smoothing), params, optimizer,
        common.batches_on(args.device, lambda epoch: EpochBatches(
            args.seed, epoch, args.epoch_size, args.batch_size, held_out, ids)),
        args.epochs, out_dir=out, val_batches=validation,
        evaluate=lambda p: {"held_out_exact_match": exact_match(p, monitor)},
        seed=args.seed, resume=args.resume, clip_norm=CLIP_NORM, hyperparameters=settings(args),
        unit="numbers", health_every=train.HEALTH_EVERY)


def show_examples(params, values):
    """Print each value with its greedy and beam translations, marked right or wrong."""
    greedy, beam = translate(params, values), translate(params, values, BEAM_SIZE)
    for value, g, b in zip(values, greedy, beam):
        truth = nw.to_words(int(value))
        print(f"  {int(value):>11,}  greedy {'ok ' if g == truth else 'BAD'} {' '.join(g)}")
        print(f"  {'':>11}  beam   {'ok ' if b == truth else 'BAD'} {' '.join(b)}")
        if g != truth or b != truth:
            print(f"  {'':>11}  truth      {' '.join(truth)}")


def write_plots(out, params, history, value):
    """curves.png (fit's history), and attention.png (draw_attention)."""
    plots.training_curves(history, out / "curves.png", log_loss=True)
    draw_attention(out / "attention.png", params, value)
    plots.training_health(history, out / "health.png")  # fit's health records
    print(health.summary(history.get("health")))
    print(f"saved {out / 'curves.png'}, {out / 'attention.png'} and {out / 'health.png'}")


def draw_attention(path, params, value):
    """The last decoder layer's attention over the digits of `value` while the model writes
    its words (the words it should write, fed by teacher forcing), averaged over the heads."""
    digits, words = list(str(int(value))), nw.to_words(int(value))
    ids = source_ids(transformer.sharing(params))
    src = nw.encode_sources([value], ids)[:, :len(digits)]  # (1, S): the digits, no padding
    tgt = nw.encode_targets([value])[:, :len(words) + 1]  # (1, T): BOS and the words
    weights = plots.transformer_cross_attention(params, src, tgt, nw.PAD)  # (1, H, T, S)
    plots.attention(weights[0].mean(axis=0), path, words + ["<eos>"], digits,
                    xlabel="digit read", ylabel="word written",
                    title=f"{int(value):,}: last decoder layer, mean over heads")


def build_model(args, rng):
    """The encoder-decoder with the sizes in args, for the task's two vocabularies (one with
    --share-embeddings all)."""
    share = args.share_embeddings
    return transformer.init(rng, *vocabulary_sizes(share), d_model=args.d_model,
                            n_heads=args.heads, d_ff=args.d_ff, n_encoder=args.layers,
                            n_decoder=args.layers, max_len=nw.MAX_WORDS + 2, norm=args.norm,
                            dropout=args.dropout,
                            share_embeddings=False if share == "none" else share)


def load_model(directory):
    """(params, options) of the translate run in `directory`: model.npz checked against the
    sizes in its hyperparameters.json (ag.load names a leaf whose shape differs)."""
    options = runs.read_settings("translate", directory)["options"]
    options = {"share_embeddings": "none", **options}  # runs from before the option: none
    try:
        like = build_model(argparse.Namespace(**options), np.random.default_rng(0))
    except (TypeError, ValueError, AttributeError) as error:  # a run of an older version
        raise ValueError(f"translate: {pathlib.Path(directory) / 'hyperparameters.json'}: "
                         f"its options do not make a model ({error})") from None
    model = pathlib.Path(directory) / "model.npz"
    if not model.is_file():
        raise ValueError(f"translate: {directory} holds no trained model (no model.npz): "
                         f"the run has not finished")
    try:
        return ag.load(model, like=like), options
    except ValueError as error:  # a MalformedFile: a shape, dtype or structure differs
        raise ValueError(f"translate: {model} is not the model its hyperparameters.json "
                         f"describes, the files are not of one run ({error})") from None


def read_numbers(lines):
    """The whole numbers in `lines` (standard input), one a line; blank lines skipped."""
    numbers = []
    for i, line in enumerate(lines, 1):
        if line.strip():
            try:
                numbers.append(int(line.replace(",", "").replace("_", "")))
            except ValueError:
                raise ValueError(f"translate: line {i} of standard input, {line.strip()!r}, "
                                 f"is not a whole number") from None
    return numbers


def print_translations(params, numbers, beam_size):
    """A line per number: the number, a tab, its words as the model writes them."""
    for value in numbers:
        if not 0 <= value <= nw.LARGEST:
            raise ValueError(f"translate: --number {value} is outside 0..{nw.LARGEST:,}, the "
                             f"numbers the model learned")
    for value, words in zip(numbers, translate(params, np.array(numbers), beam_size)):
        print(f"{value}\t{' '.join(words)}", flush=True)


def use_model(args):
    """--model DIR: the words of --number (or of standard input's numbers)."""
    with common.exit_on_bad_input("translate"):
        params, _ = load_model(args.model)
        params = ag.to_device(params, args.device)
        numbers = args.number if args.number is not None else read_numbers(sys.stdin)
        if not numbers:
            raise ValueError("translate: standard input held no numbers: give them one a line "
                             "(printf '12\\n345\\n' | python -m demos.translate --model DIR), or "
                             "as --number N ...")
        print_translations(params, numbers, args.beam)


def main(argv=None):
    args = parse_args(argv)
    common.use_threads(args)
    common.check_device("translate", args)
    common.say_if_compiling()
    if args.model is not None:
        with runs.stopped_quietly("translate"):
            return use_model(args)
    ag.memory.keep_freed_memory()  # reuse freed blocks: training steps run markedly faster
    out = common.output_directory(args, "translate")
    with runs.stopped_in_one_line("translate", out, argv, args.lr) as run:
        held_out = nw.held_out_values(args.held_out, HELD_OUT_SEED)
        params = ag.to_device(build_model(args, np.random.default_rng(args.seed)), args.device)
        print(f"translate: digits -> English words, 0..{nw.LARGEST:,}; {len(held_out):,} "
              f"held-out numbers never drawn for training")
        print(models.summary(params).splitlines()[-1])
        start = time.perf_counter()
        params, history = train_model(params, args, held_out, out)
        runs.check_not_diverged("translate", [history],
                                vocabulary_sizes(args.share_embeddings)[1], "words", args.lr)
        run.trained = True
        seconds, steps = time.perf_counter() - start, len(history["step_loss"])
        print(f"trained {steps} steps; this session took {seconds:.0f} s")
        report(out, params, history, held_out)


def report(out, params, history, held_out):
    """Save the model and the plots, show examples, and measure the held-out exact match."""
    ag.save(out / "model.npz", params)
    print(f"saved {out / 'model.npz'} and fit's files (history.json, last.npz, ...) in {out}")
    examples = held_out[:: max(1, len(held_out) // 6)][:6]
    write_plots(out, ag.to_device(params, "cpu"), history, examples[-1])

    print("held-out examples:")
    show_examples(params, examples)
    beam = exact_match(params, held_out, BEAM_SIZE)
    print(f"held-out exact match: {100 * beam:.1f}% ({len(held_out):,} values), "
          f"beam of {BEAM_SIZE}")
    greedy = exact_match(params, held_out)
    common.print_result(f"held-out exact match: {100 * greedy:.1f}% ({len(held_out):,} values "
                        f"never seen in training), greedy")


if __name__ == "__main__":
    program.run("translate", main)
