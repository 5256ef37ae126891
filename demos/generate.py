"""python -m demos.generate: a decoder-only transformer learns a text one character at a time,
and is measured against a character n-gram model on the same held-out text.

    python -m demos.generate                  # Python's own reference text, a few minutes
    python -m demos.generate --data FILE      # any UTF-8 text file
    python -m demos.generate --quick          # a tiny model for a few seconds (CI)
    python -m demos.generate --out DIR --resume   # continue a stopped run, its own options
    python -m demos.generate --model DIR --prompt "The with" --length 200 [--beam 4]
    python -m demos.generate --data FILE --ensemble 2  # two models at once, one a core
    python -m demos.generate --gpt2 DIR --prompt "..." [--top-p 0.9]  # GPT-2's own files
    python -m demos.generate --gpt2 DIR --data FILE   # fine-tune GPT-2 (demos/support/gpt2_demo.py)

The default corpus is the text of Python's help topics that ships with Python
(pydoc_data.topics: 79 topics, joined in sorted order of their names with a newline
between them). The characters of the whole text make the vocabulary; the last 10% of the
text is held out, and the model (models.lm, trained by models.train.fit on random windows
of the first 90%) and the baseline (demos/support/ngram.py: interpolated Kneser-Ney, fitted on the
first 90%) are scored on it in bits per character: the mean over every held-out character
but the first of -log2 P(character | the characters before it). The transformer sees
windows of --context characters, advanced by half a window: each character is predicted
from at least --context / 2 characters before it (in the first window, from all of them).
After samples at temperatures 0.5, 0.8 and 1.0 and a beam search's continuation (the most
probable of a character model is often a phrase repeated, or spaces: the demo's beam may
not repeat any 8 characters, --no-repeat-ngram), the last line compares the two.

--ensemble N trains N models at once, each in a process of its own (models/training/
side_by_side.py), model k exactly as the run of --seed S + k would train it; the run's
probability of a character is the mean of theirs (mixture), and the last line
gives each model's bits beside the ensemble's. On a machine of N cores, N models train in
about the time of one: each process gets a core where one model's BLAS threads share the
step's few large products (docs/results.md: on 2 cores, the steps each makes).

Saved in --out (default runs/generate-<timestamp>/): model.npz (ag.load reads the
parameters back), tokenizer.txt (CharTokenizer.load), fit's last.npz, best.npz,
history.json and hyperparameters.json, curves.png, health.png (gradient norms and update
ratios by parameter group: models/training/health.py), samples.txt and result.json.
--out DIR --resume continues a run that Ctrl-C stopped (or that was killed: from its last
checkpoint), with the settings, --data and --seed it was started with. An ensemble's model.npz
holds the tuple of its models' parameters, and each model's files from fit, curves.png and
health.png are in its folder, member-0/, member-1/, ...

The default run's time and result, beside the n-grams': docs/results.md. Like every demo it
runs on one thread unless --threads or OPENBLAS_NUM_THREADS say otherwise: a step of these
sizes has little for a second BLAS thread to share, and on a busy machine the second thread
makes it several times slower (tests/benchmarks/README.md, "The demos' BLAS threads").
"""
import os

if __name__ == "__main__":  # before numpy is imported: BLAS reads its threads once, at load
    from .support import program
    program.start("generate")

import argparse  # noqa: E402  (after the thread setting, on purpose)
import json  # noqa: E402
import math  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
import models  # noqa: E402
from autograd_lite.io.atomic import write_text  # noqa: E402
from models import data, health, lm, side_by_side, text, train  # noqa: E402
from models.training.run_files import CHECKPOINT, HYPERPARAMETERS, write_json  # noqa: E402

from .support import common, gpt2_demo, ngram, program, runs  # noqa: E402
from .support.common import flag  # noqa: E402

FULL = dict(steps=2500, d_model=96, heads=4, d_ff=384, layers=2, context=128, batch_size=16,
            lr=3e-3, warmup=100, eval_every=250, ngram=4, sample_length=300, dropout=0.0,
            ensemble=1)
QUICK = dict(steps=120, d_model=32, heads=2, d_ff=64, layers=1, context=32, batch_size=16,
             lr=1e-2, warmup=10, eval_every=40, ngram=3, sample_length=80, dropout=0.0,
             ensemble=1)
OPTIONS = ("seed", "data", *FULL)  # what a run keeps in hyperparameters.json; --resume reads
KINDS = {"seed": int, "data": str, **{name: type(value) for name, value in FULL.items()}}
LARGE_VOCABULARY = 1_000  # distinct characters assumed by the memory estimate (ASCII: ~100)
HELD_OUT_FRACTION = 0.1  # the last tenth of the text
TEMPERATURES = (0.5, 0.8, 1.0)
BEAM_SIZE = 4
# the demo's own beam: no 8 characters twice. Of 6, 8, 12, 16 and 24, 8 gave a model of the
# default sizes (1,000 steps) text rather than runs of spaces and table rules after its
# prompt, an indented example; without it, the prompt and spaces to the end
NO_REPEAT_NGRAM = 8
LENGTH, TEMPERATURE = 200, 0.8  # --model's defaults
MAX_LENGTH = 100_000  # characters one sampling may add (a character costs a model's step)
MAX_BEAM = 64
MAX_ENSEMBLE = 64  # models trained at once, a process each
PROMPT_LENGTH = 40  # characters of held-out text (at most context / 2) that start the samples
CLIP_NORM = 1.0
VALIDATION_WINDOWS = 64  # windows of held-out text for fit's per-epoch validation loss
PYDOC_TOPICS = "pydoc_data.topics"
NGRAM_ORDERS_SHOWN = 6  # the n-gram orders printed beside the one (--ngram) the result names
HELP = dict(steps="training steps (batches)", d_model="model width",
            heads="attention heads (must divide --d-model)", d_ff="feed-forward width",
            layers="decoder blocks", context="characters the model sees at once (its max_len)",
            batch_size="windows per step", lr="peak learning rate (Adam)",
            warmup="steps of linear warm-up, before a cosine decay",
            eval_every="steps between held-out losses (fit's epoch)",
            ngram="order of the n-gram baseline the last line names",
            sample_length="characters of each printed sample",
            dropout="dropout rate in training, in [0, 1)",
            ensemble="models trained at once, each in its own process (one a core) as the "
                     "run of the next --seed would train it; the run's probabilities are "
                     "the mean of theirs")


def positive(kind):
    """An argparse type: a number of `kind` greater than 0."""
    def parse(text):
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value
    parse.__name__ = kind.__name__  # argparse names the type in "invalid int value: 'x'"
    return parse


def parse_args(argv=None):
    parser = common.argument_parser("generate", __doc__)
    parser.add_argument("--data", type=pathlib.Path, default=None, metavar="FILE",
                        help=f"a UTF-8 text file to learn (default: Python's {PYDOC_TOPICS})")
    runs.add_resume_option(parser)
    for name, value in FULL.items():
        kind = float if name == "dropout" else positive(type(value))  # a rate of 0 is allowed
        parser.add_argument(flag(name), type=kind, default=None,
                            metavar={int: "N", float: "RATE"}[type(value)],
                            help=f"{HELP[name]} (full run: {value}, --quick: {QUICK[name]})")
    use = parser.add_argument_group("using a trained model")
    use.add_argument("--model", type=pathlib.Path, metavar="DIR",
                     help="the --out folder of a generate run: continue --prompt")
    use.add_argument("--prompt", metavar="TEXT", help="the text to continue (with --model)")
    use.add_argument("--length", type=positive(int), default=None, metavar="N",
                     help=f"characters to add to the prompt ({LENGTH})")
    use.add_argument("--temperature", type=positive(float), default=None, metavar="T",
                     help=f"sampling temperature: lower is safer, higher more varied "
                          f"({TEMPERATURE})")
    use.add_argument("--beam", type=positive(int), default=None, metavar="N",
                     help="instead of sampling, the most probable continuation that a beam "
                          "search of N finds (deterministic: no --temperature, no --seed); "
                          "a character model's is often a phrase repeated, or spaces")
    use.add_argument("--no-repeat-ngram", type=positive(int), default=None, metavar="N",
                     help="with --beam: no N characters in a row twice in the text, the "
                          "prompt included (as Hugging Face's no_repeat_ngram_size), which "
                          f"keeps the beam from looping; the demo's own beam uses "
                          f"{NO_REPEAT_NGRAM}")
    use.add_argument("--top-k", type=positive(int), default=None, metavar="K",
                     help="with --gpt2: sample among the K most probable tokens only")
    use.add_argument("--top-p", type=positive(float), default=None, metavar="P",
                     help="with --gpt2: sample among the most probable tokens that hold "
                          "probability P (nucleus sampling), P in (0, 1]")
    parser.add_argument("--gpt2", type=pathlib.Path, default=None, metavar="DIR",
                        help="GPT-2's files (model.safetensors, config.json, vocab.json, "
                             "merges.txt): continue --prompt, or fine-tune on --data FILE")
    common.add_device_option(parser)
    args = parser.parse_args(argv)
    check_ranges(parser, args)
    if args.top_p is not None and args.top_p > 1:
        parser.error(f"--top-p must lie in (0, 1], got {args.top_p}")
    if (args.gpt2 is not None or gpt2_demo.is_run(args.model)
            or (args.resume and args.out is not None and gpt2_demo.is_run(args.out))):
        return gpt2_demo.checked_args(parser, args)
    common.refuse_unused(parser, args, ("top_k", "top_p"), "is for GPT-2 (--gpt2 DIR)")
    model_options = ("length", "temperature", "beam", "no_repeat_ngram")
    if args.model is not None or args.prompt is not None:
        if args.model is None or not args.prompt:
            parser.error("--model DIR and --prompt TEXT (not empty) go together")
        common.refuse_unused(parser, args, ("quick", "out", "resume", "data", "device", *FULL),
                             "is for training: --model DIR uses the model trained in DIR, "
                             "on the CPU")
        common.check_decoding_options(parser, args, ("temperature", "seed"), LENGTH,
                                      TEMPERATURE)
        return args
    common.refuse_unused(parser, args, model_options, "is for --model DIR --prompt TEXT (a "
                                                      "trained model's answers)")
    if args.resume:
        if args.out is None:
            parser.error("--resume needs --out DIR, the folder of the run to continue")
        common.refuse_unused(parser, args, ("quick",), "with --resume: the run goes on with "
                                                       "its own options")
        runs.take_run_options(parser, args, "generate", OPTIONS, paths=("data",), kinds=KINDS)
        check_ranges(parser, args)  # the run's own, as its file holds them
    else:
        runs.check_new_run("generate", common.output_path(args, "generate"))
        common.check_output_folder(parser, common.output_path(args, "generate"))
    runs.fill_defaults(args, QUICK if args.quick else FULL)
    if args.d_model % args.heads:
        parser.error(f"--d-model {args.d_model} must be a multiple of --heads {args.heads}")
    common.check_memory(parser, args.ensemble * common.transformer_bytes(
        args.batch_size, args.context, args.d_model, args.d_ff, args.heads, args.layers,
        LARGE_VOCABULARY, args.context, args.context * LARGE_VOCABULARY),
        f"--context {args.context} --batch-size {args.batch_size} --d-model {args.d_model}"
        + (f" --ensemble {args.ensemble}" if args.ensemble > 1 else ""))
    return args


def check_ranges(parser, args):
    """Every option given (or read back by --resume) in its range (the types of the
    command line's options check more: positive counts)."""
    common.check_options(parser, args, counts=[n for n, v in FULL.items() if type(v) is int],
                         rates=("lr", "temperature"), fractions=("dropout",),
                         non_negative=("seed",),
                         at_most={"ensemble": (MAX_ENSEMBLE, "a process for each model"),
                                  "length": (MAX_LENGTH, "about a minute of sampling"),
                                  "sample_length": (MAX_LENGTH, "about a minute of sampling each"),
                                  "beam": (MAX_BEAM, "a wider beam finds hardly anything better")})


def read_corpus(path):
    """(name, text): the file at `path`, or Python's help topics when path is None."""
    if path is None:
        from pydoc_data.topics import topics
        return PYDOC_TOPICS, "\n".join(topics[name] for name in sorted(topics))
    return str(path), data.read_text(path)


def split_text(ids, context):
    """(training ids, held-out ids): the held-out part is the last tenth, and each part must
    hold more than one window of context + 1 ids."""
    cut = len(ids) - round(HELD_OUT_FRACTION * len(ids))
    if min(cut, len(ids) - cut) <= context + 1:
        raise ValueError(f"generate: a text of {len(ids)} characters is too short for windows "
                         f"of --context {context}: its first 90% ({cut}) and last 10% "
                         f"({len(ids) - cut}) must each hold more than {context + 1}")
    return ids[:cut], ids[cut:]


def check_characters(corpus_name, tokenizer):
    """A text of one distinct character is degenerate: every model predicts it with
    certainty (0 bits), so there is nothing to learn or to measure."""
    if len(tokenizer) < 2:
        raise ValueError(f"generate: {corpus_name} holds one distinct character "
                         f"({tokenizer.decode([0])!r}) and nothing else: there is nothing to "
                         f"predict; give a text of more than one character")


def check_ngram_order(order, vocab_size):
    """--ngram must be an order whose n-grams over the vocabulary have int64 codes."""
    if not ngram.codes_fit(order, vocab_size):
        largest = max(k for k in range(1, order) if ngram.codes_fit(k, vocab_size))
        raise ValueError(f"generate: --ngram {order}: {order}-grams over the text's "
                         f"{vocab_size} distinct characters do not fit in int64 codes; the "
                         f"largest order that does is {largest}")


def ngram_baselines(train_ids, held_out_ids, vocab_size, order):
    """{k: held-out bits per character of the k-gram model} for `order` and for k = 1 .. 6
    (those whose k-grams have int64 codes: up to 5 over 6,000 characters)."""
    shown = {k for k in range(1, NGRAM_ORDERS_SHOWN + 1) if ngram.codes_fit(k, vocab_size)}
    return {k: ngram.bits_per_character(ngram.fit(train_ids, k, vocab_size), held_out_ids)
            for k in sorted(shown | {order})}


def loss_fn(params, batch, rng):
    """Mean cross-entropy in nats of each next character.  inputs, targets: (B, T)"""
    inputs, targets = batch
    logits = lm.apply(params, inputs, training=rng is not None, rng=rng)  # rng None: validation
    return ag.cross_entropy(logits, targets)


def window_starts(n_targets, context, stride):
    """Starts of the windows that cover positions 1 .. n_targets: every `stride`, and a last
    one ending at the final position."""
    last = n_targets - context
    starts = list(range(0, last + 1, stride))
    return starts if starts[-1] == last else starts + [last]


def members_of(model):
    """The models of a run as a tuple: (model,) for one (an lm.LM, a NamedTuple), an
    ensemble's (a tuple or list of them) as they are."""
    return tuple(model) if type(model) in (tuple, list) else (model,)


def held_out_bits(model, ids, batch_windows=64):
    """Bits per character of the model (an lm.LM, or an ensemble: a tuple of them, whose
    probabilities are averaged) on ids (N,). See held_out_log_probs."""
    return bits_per_character(mixture(held_out_log_probs(model, ids, batch_windows)))


def held_out_log_probs(model, ids, batch_windows=64):
    """log P(ids[i] | the window's ids before i) for i = 1 .. N - 1 by each of the model's
    members (members_of): (M, N - 1) float64. Windows of T = max_len ids start every T // 2;
    each position is scored in the first window that reaches it, so from at least T - T // 2
    ids before it (all of them in the first window)."""
    members = members_of(model)
    context = min(members[0].max_len, len(ids) - 1)
    starts = window_starts(len(ids) - 1, context, max(1, context // 2))
    offsets = np.arange(context)
    first_new = [0] + [previous + context - start for previous, start in zip(starts, starts[1:])]
    scored = [[] for _ in members]
    for i in range(0, len(starts), batch_windows):
        rows = np.array(starts[i:i + batch_windows])[:, None] + offsets  # (W, T)
        counted = offsets >= np.array(first_new[i:i + batch_windows])[:, None]  # (W, T)
        for params, log_probs in zip(members, scored):
            log_p = ag.log_softmax(lm.apply(params, ids[rows]).astype(np.float64))  # (W, T, V)
            picked = np.take_along_axis(log_p, ids[rows + 1][..., None], axis=-1)[..., 0]
            log_probs.append(picked[counted])  # the positions new in these windows
    return np.stack([np.concatenate(log_probs) for log_probs in scored])


def mixture(log_probs):
    """log of the members' mean probability of each character: (M, N) -> (N,)
    log (1/M Σ_m P_m) = logsumexp_m(log P_m) - log M"""
    return np.logaddexp.reduce(log_probs, axis=0) - math.log(len(log_probs))


def bits_per_character(log_probs):
    """The mean of -log2 P over the characters: (N,) natural logs -> bits."""
    return -log_probs.mean() / math.log(2)


def continue_text(model, prompt, n_new, temperature, rng):
    """prompt (T_p,) ids followed by n_new sampled ids (from an ensemble's mean probabilities).
    Beyond the model's max_len, sampling goes on in chunks, each prompted by the last
    max_len // 2 ids (positions restart at 0)."""
    members = members_of(model)
    ids = np.asarray(prompt)
    max_len = members[0].max_len
    keep = max_len // 2
    while n_new > 0:
        window = ids[-keep:] if len(ids) > keep else ids
        chunk = min(n_new, max_len - len(window))
        new = lm.ensemble_generate(members, window[None], chunk, temperature=temperature,
                                   rng=rng)[0]
        ids = np.concatenate([ids, new[len(window):]])
        n_new -= chunk
    return ids


def sample_prompt(ids, tokenizer, length):
    """The first `length` ids after the first line break in ids (from the start without one)."""
    breaks = np.flatnonzero(ids[:-length] == tokenizer.ids.get("\n"))
    start = breaks[0] + 1 if len(breaks) else 0
    return ids[start:start + length]


def samples(model, tokenizer, prompt, length, seed):
    """{label: text}: the prompt continued at each temperature, and by beam search."""
    members = members_of(model)
    out = {}
    for temperature in TEMPERATURES:
        rng = np.random.default_rng([seed, round(100 * temperature)])
        out[f"temperature {temperature}"] = tokenizer.decode(
            continue_text(members, prompt, length, temperature, rng))
    beam_length = min(length, members[0].max_len - len(prompt))
    beam = lm.ensemble_beam_search(members, prompt[None], beam_length, beam_size=BEAM_SIZE,
                                   no_repeat_ngram=NO_REPEAT_NGRAM)[0]
    out[f"beam search ({BEAM_SIZE} beams, no {NO_REPEAT_NGRAM} characters repeated)"] = \
        tokenizer.decode(beam)
    return out


def build_model(args, vocab_size, rng):
    return lm.init(rng, vocab_size, d_model=args.d_model, n_heads=args.heads, d_ff=args.d_ff,
                   n_layers=args.layers, max_len=args.context, dropout=args.dropout)


def hyperparameters(args, corpus_name):
    """The run's settings as JSON values: fit checks a resumed run against them."""
    return dict({name: getattr(args, name) for name in FULL}, corpus=corpus_name,
                seed=args.seed, demo="generate", options=runs.saved_options(args, OPTIONS))


def train_model(args, params, train_ids, held_out_ids, out, corpus_name, progress=True):
    """fit on random windows of the training ids; the held-out loss of a fixed set of
    windows is recorded after each epoch of eval_every steps (progress: fit's progress bar).
    -> (params, history, {"wall": seconds, "cpu": this process's CPU seconds, "steps": the
    steps this process trained, fewer than args.steps after --resume})"""
    n_epochs = math.ceil(args.steps / args.eval_every)

    def batches(epoch):
        n = min(args.eval_every, args.steps - epoch * args.eval_every)
        return side_by_side.stoppable(data.lm_batches(  # stopped with the others: an ensemble
            train_ids, args.context, args.batch_size, n,
            rng=np.random.default_rng([args.seed, epoch])))
    validation = list(data.lm_batches(held_out_ids, args.context, VALIDATION_WINDOWS, 1,
                                      rng=np.random.default_rng([args.seed, n_epochs])))
    optimizer = ag.optim.adam(ag.optim.warmup_schedule(peak=args.lr, warmup=args.warmup,
                                                       steps=args.steps, final=common.FINAL_LR))
    steps_before = steps_recorded(out) if args.resume else 0
    started = time.perf_counter(), time.process_time()
    params, history = train.fit(loss_fn, params, optimizer,
                                common.batches_on(args.device, batches), n_epochs, out_dir=out,
                                val_batches=common.batches_on(args.device, validation),
                                seed=args.seed, resume=args.resume, clip_norm=CLIP_NORM,
                                hyperparameters=hyperparameters(args, corpus_name),
                                count=lambda batch: batch[0].size, unit="chars",
                                health_every=train.HEALTH_EVERY, progress=progress)
    return params, history, {"wall": time.perf_counter() - started[0],
                             "cpu": time.process_time() - started[1],
                             "steps": len(history["step_loss"]) - steps_before}


def train_member(args, vocab_size, train_ids, held_out_ids, out, corpus_name, progress=True):
    """One model of the run, as the run of --seed args.seed trains it, in `out`: built and
    trained by train_model -> (params on the host, history, seconds)."""
    ag.memory.keep_freed_memory()  # in a process of its own, too: steps run faster
    params = build_model(args, vocab_size, np.random.default_rng(args.seed))
    params, history, seconds = train_model(args, ag.to_device(params, args.device), train_ids,
                                           held_out_ids, out, corpus_name, progress)
    return ag.to_device(params, "cpu"), history, seconds


def train_ensemble(args, vocab_size, train_ids, held_out_ids, out, corpus_name):
    """The run's --ensemble N models: one trains in this process, in `out`; N > 1 train at
    once, each in a process of its own (side_by_side.run) and its own folder out/member-k,
    model k as the run of --seed args.seed + k trains it (the first shows its progress).
    -> (params of each model, history of each, seconds: {"wall", "cpu" (all processes'),
    "steps" (each model's, in this run)})"""
    if args.ensemble == 1:
        params, history, seconds = train_member(args, vocab_size, train_ids, held_out_ids, out,
                                                corpus_name)
        return (params,), [history], seconds
    write_json(out / HYPERPARAMETERS, {"hyperparameters": hyperparameters(args, corpus_name)})
    calls = []
    for k in range(args.ensemble):
        folder = runs.member_folder(out, k)
        member = argparse.Namespace(**dict(vars(args), seed=args.seed + k, resume=args.resume
                                           and (folder / CHECKPOINT).is_file()))
        calls.append((member, vocab_size, train_ids, held_out_ids, folder, corpus_name, k == 0))
    started = time.perf_counter()
    trained = side_by_side.run(train_member, calls)
    return (tuple(params for params, _, _ in trained), [history for _, history, _ in trained],
            {"wall": time.perf_counter() - started,
             "cpu": sum(seconds["cpu"] for _, _, seconds in trained),
             "steps": max(seconds["steps"] for _, _, seconds in trained)})


def steps_recorded(out):
    """The training steps an interrupted run in `out` has done (its checkpoint's)."""
    path = out / CHECKPOINT
    return json.loads(ag.load(path).position)["global_step"] if path.exists() else 0


def save_outputs(out, members, tokenizer, histories, texts, result):
    """model.npz (one model's parameters; an ensemble's: the tuple of its members'),
    tokenizer.txt, curves.png and health.png (when matplotlib is installed; an ensemble's in
    each member's folder), samples.txt and result.json in out."""
    ag.save(out / "model.npz", members[0] if len(members) == 1 else members)
    tokenizer.save(out / "tokenizer.txt")
    try:
        from models import plots
    except ImportError as error:  # matplotlib: in the demos extra, not a dependency
        print(f"curves.png: not drawn ({error})")
    else:
        reported = result["transformer_bits"]
        if len(members) == 1:
            folders, finals = [out], [(reported, f"the reported {reported:.2f}")]
        else:  # each model's pictures in its folder
            folders = [runs.member_folder(out, k) for k in range(len(members))]
            finals = [(bits, f"this model alone {bits:.2f} (the ensemble's reported "
                             f"{reported:.2f})") for bits in result["member_bits"]]
        context = members[0].max_len - members[0].max_len // 2
        for folder, history, (bits, label) in zip(folders, histories, finals):
            plots.training_curves(
                history, folder / "curves.png", bits=True, per="character",
                val_label=f"val loss: {VALIDATION_WINDOWS} random held-out windows, every "
                          f"position (the first with little context)",
                final=(bits, f"{label}: all held-out text, each character read after "
                             f"{context} or more"))
            plots.training_health(history, folder / "health.png")  # fit's health records
    write_text(out / "samples.txt", "".join(f"--- {label}\n{sample}\n\n"
                                            for label, sample in texts.items()))
    write_json(out / "result.json", result)


def load_model(directory):
    """(model, tokenizer) of the generate run in `directory`, the model an lm.LM or, for a
    run of --ensemble N, a tuple of N of them: model.npz is checked against
    the sizes in hyperparameters.json and the characters of tokenizer.txt (ag.load names a
    leaf whose shape differs, e.g. the embedding's rows against the tokenizer's size)."""
    directory = pathlib.Path(directory)
    options = runs.read_settings("generate", directory)["options"]
    for name in ("model.npz", "tokenizer.txt"):
        if not (directory / name).is_file():
            raise ValueError(f"generate: {directory} holds no trained model (no {name}): the "
                             f"run has not finished")
    tokenizer = text.CharTokenizer.load(directory / "tokenizer.txt")
    try:
        # runs from before --dropout existed trained without it
        like = build_model(argparse.Namespace(**{"dropout": 0.0, **options}), len(tokenizer),
                           np.random.default_rng(0))
        if options.get("ensemble", 1) > 1:  # runs from before --ensemble had one model
            like = (like,) * options["ensemble"]
    except (TypeError, ValueError, AttributeError) as error:  # a run of an older version
        raise ValueError(f"generate: {directory / 'hyperparameters.json'}: its options do not "
                         f"make a model ({error})") from None
    try:
        return ag.load(directory / "model.npz", like=like), tokenizer
    except ValueError as error:  # a MalformedFile: a shape, dtype or structure differs
        raise ValueError(f"generate: {directory / 'model.npz'} is not the model that "
                         f"hyperparameters.json and tokenizer.txt ({len(tokenizer)} characters) "
                         f"describe, the files are not of one run ({error})") from None


def use_model(args):
    """--model DIR --prompt TEXT: print the prompt continued by --length characters, sampled
    at --temperature (seeded by --seed), or by a beam search of --beam (an ensemble's: from
    the mean of its models' probabilities)."""
    with common.exit_on_bad_input("generate"):
        model, tokenizer = load_model(args.model)
        prompt = tokenizer.encode(args.prompt)
    members = members_of(model)
    if args.beam is not None:
        max_len = members[0].max_len
        kept = prompt[-(max_len - 1):]
        n_new = min(args.length, max_len - len(kept))
        if len(kept) < len(prompt) or n_new < args.length:
            print(f"generate: a beam search reads and writes within the model's context of "
                  f"{max_len} characters: it continues the prompt's last {len(kept)} by "
                  f"{n_new} (not {args.length}); sampling goes on past it", file=sys.stderr,
                  flush=True)
        ids = lm.ensemble_beam_search(members, kept[None], n_new, beam_size=args.beam,
                                      no_repeat_ngram=args.no_repeat_ngram)[0]
    else:
        rng = np.random.default_rng(args.seed or 0)
        ids = continue_text(members, prompt, args.length, args.temperature, rng)
    print(tokenizer.decode(ids), flush=True)


def main(argv=None):
    args = parse_args(argv)
    common.use_threads(args)
    common.check_device("generate", args)
    common.say_if_compiling()
    if args.gpt2 is not None or gpt2_demo.is_run(args.model):
        return gpt2_demo.main(args, argv)
    if args.model is not None:
        with runs.stopped_quietly("generate"):
            return use_model(args)
    ag.memory.keep_freed_memory()  # reuse freed blocks: training steps run markedly faster
    out = common.output_path(args, "generate")
    with runs.stopped_in_one_line("generate", out, argv, args.lr) as run:
        with common.exit_on_bad_input("generate"):
            corpus_name, corpus = read_corpus(args.data)
            tokenizer = text.CharTokenizer.from_text(corpus)
            check_characters(corpus_name, tokenizer)
            train_ids, held_out_ids = split_text(tokenizer.encode(corpus), args.context)
            check_ngram_order(args.ngram, len(tokenizer))
            out.mkdir(parents=True, exist_ok=True)
        print(f"generate: {corpus_name}, {len(corpus):,} characters, {len(tokenizer)} "
              f"distinct; held out: the last {len(held_out_ids):,}")

        baselines = ngram_baselines(train_ids, held_out_ids, len(tokenizer), args.ngram)
        print("n-gram baselines (interpolated Kneser-Ney), held-out bits per character: " +
              ", ".join(f"{order}-gram {bits:.3f}" for order, bits in baselines.items()))

        size = models.summary(build_model(args, len(tokenizer), np.random.default_rng(0)))
        print(size.splitlines()[-1] + (f"; {args.ensemble} such models, trained at once in a "
                                       f"process each" if args.ensemble > 1 else ""))
        load = os.getloadavg()[0]
        members, histories, seconds = train_ensemble(args, len(tokenizer), train_ids,
                                                     held_out_ids, out, corpus_name)
        runs.check_not_diverged("generate", histories, len(tokenizer), "characters", args.lr)
        run.trained = True
        steps = max(seconds["steps"], 1)
        each = " each" if args.ensemble > 1 else ""
        print(f"trained {seconds['steps']} steps{each} in {seconds['wall']:.0f} s, "
              f"{1000 * seconds['wall'] / steps:.0f} ms a step (CPU {seconds['cpu']:.0f} s; "
              f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after, on "
              f"{os.cpu_count()} cores)")
        report(args, out, members, tokenizer, histories, held_out_ids,
               dict(corpus=corpus_name, ngram=args.ngram, ngram_bits=baselines,
                    train_seconds=seconds, steps=args.steps))


def report(args, out, members, tokenizer, histories, held_out_ids, result):
    """Measure the held-out bits (of an ensemble: of the mean of its members' probabilities,
    and of each member alone), print and save the samples, the model and the pictures, then
    the last line. result: what result.json gets besides the held-out measures."""
    log_probs = held_out_log_probs(members, held_out_ids)  # (M, N - 1)
    bits = bits_per_character(mixture(log_probs))
    prompt = sample_prompt(held_out_ids, tokenizer, min(PROMPT_LENGTH, args.context // 2))
    texts = samples(members, tokenizer, prompt, args.sample_length, args.seed)
    for label, sample in texts.items():
        print(f"--- {label}\n{sample}")
    result = dict(result, held_out_characters=len(held_out_ids), transformer_bits=bits)
    alone = ""
    if len(members) > 1:
        result["member_bits"] = [bits_per_character(member) for member in log_probs]
        alone = (f" (the mean of {len(members)} models' probabilities; alone " +
                 ", ".join(f"{member:.2f}" for member in result["member_bits"]) + ")")
    save_outputs(out, members, tokenizer, histories, texts, result)
    for k, history in enumerate(histories):
        print((f"member-{k}: " if len(members) > 1 else "") +
              health.summary(history.get("health")))
    print(f"saved the model, tokenizer, history, curves and samples in {out}")
    baseline = result["ngram_bits"][args.ngram]
    common.print_result(f"held-out bits per character: transformer {bits:.2f}{alone}, "
                        f"{args.ngram}-gram baseline {baseline:.2f} (last 10% of the text)")


if __name__ == "__main__":
    program.run("generate", main)
