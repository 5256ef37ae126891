"""generate --gpt2 DIR: GPT-2 from the user's own files (model.safetensors, config.json,
vocab.json, merges.txt: Hugging Face's openai-community/gpt2), in lm.py's model
(models/gpt2.py) with GPT-2's tokenizer (models/inputs/bpe.py).

    generate --gpt2 DIR --prompt TEXT [--length N] [--temperature T] [--top-k K] [--top-p P]
    generate --gpt2 DIR --prompt TEXT --beam N [--no-repeat-ngram N]
    generate --gpt2 DIR --data FILE [--out RUN] [--steps N] [--lr R] ...   # fine-tune
    generate --out RUN --resume                                           # continue it
    generate --model RUN --prompt TEXT ...                                # use it

Fine-tuning trains every weight on random windows of --context tokens of the first 90% of
the text (train.fit: Adam, warm-up then cosine decay, clipped gradients, checkpoints, Ctrl-C
and --resume as every training demo), and records the loss of a few held-out windows each
--eval-every steps. The run's folder gets model.npz and GPT-2's config.json, vocab.json and
merges.txt, so that --model RUN reads it alone.
"""
import pathlib
import shutil
import sys

import numpy as np

import autograd_lite as ag
import models
from autograd_lite.io.atomic import write_text
from models import data, gpt2, lm, train
from models.inputs import bpe

from . import common, runs

TRAINING = dict(steps=200, context=128, batch_size=4, lr=1e-4, warmup=20, eval_every=50,
                dropout=0.0)
OPTIONS = ("seed", "data", "gpt2", *TRAINING)  # what a run keeps in hyperparameters.json
KINDS = {"seed": int, "data": str, "gpt2": str,
         **{name: type(value) for name, value in TRAINING.items()}}
CHARACTER_MODEL = ("quick", "d_model", "heads", "d_ff", "layers", "ngram", "sample_length",
                   "ensemble", "device")
SAMPLING = ("prompt", "length", "temperature", "top_k", "top_p", "beam", "no_repeat_ngram")
LENGTH, TEMPERATURE = 50, 1.0  # tokens added to a prompt, and the temperature, by default
VALIDATION_WINDOWS = 8  # held-out windows scored each epoch (a 124M forward each)
SAMPLE_PROMPT = 16  # held-out tokens that start the sample after fine-tuning
CLIP_NORM = 1.0
FILES = ("config.json", "vocab.json", "merges.txt")


def is_run(directory):
    """Whether `directory` holds a fine-tuning run of generate --gpt2."""
    try:
        return "gpt2" in runs.read_settings("generate", directory)["options"]
    except (ValueError, TypeError):
        return False


def checked_args(parser, args):
    """generate's arguments for GPT-2: sampling (--prompt, from --gpt2 DIR or a fine-tuned
    --model RUN) or fine-tuning (--data, or --resume), each refusing the other's options and
    the character model's. -> args, with defaults filled in"""
    common.refuse_unused(parser, args, CHARACTER_MODEL,
                         "sets the character model; GPT-2's files give this model")
    if args.prompt is not None or args.model is not None:
        if args.gpt2 is not None and args.model is not None:
            parser.error("--gpt2 DIR and --model RUN: give one, the model to continue --prompt")
        if not args.prompt:
            parser.error("--prompt TEXT (not empty) is what the model continues")
        common.refuse_unused(parser, args, ("out", "resume", "data", *TRAINING),
                             "is for fine-tuning (--gpt2 DIR --data FILE)")
        common.check_decoding_options(parser, args, ("temperature", "top_k", "top_p", "seed"),
                                      LENGTH, TEMPERATURE)
        return args
    common.refuse_unused(parser, args, SAMPLING, "is for --prompt TEXT (sampling)")
    if args.resume:
        if args.out is None:
            parser.error("--resume needs --out DIR, the folder of the run to continue")
        runs.take_run_options(parser, args, "generate", OPTIONS, paths=("data", "gpt2"),
                              kinds=KINDS)
    else:
        if args.data is None:
            parser.error("--gpt2 DIR needs --prompt TEXT (to sample) or --data FILE (to "
                         "fine-tune on it)")
        args.out = common.output_path(args, "generate")
        runs.check_new_run("generate", args.out)
        common.check_output_folder(parser, args.out)
    runs.fill_defaults(args, TRAINING)
    common.check_options(parser, args, counts=("steps", "context", "batch_size", "warmup",
                                               "eval_every"), rates=("lr",),
                         fractions=("dropout",), non_negative=("seed",))
    return args


def main(args, argv):
    if args.prompt is not None:
        with runs.stopped_quietly("generate"):
            return continue_prompt(args)
    return fine_tune(args, argv)


def load(args):
    """(model, tokenizer): GPT-2's from --gpt2 DIR, or a fine-tuned one from --model RUN."""
    if args.gpt2 is not None:
        return gpt2.load(args.gpt2), bpe.GPT2Tokenizer.load(args.gpt2)
    like = gpt2.shaped(gpt2.read_config(args.model))
    return ag.load(args.model / "model.npz", like=like), bpe.GPT2Tokenizer.load(args.model)


def continue_prompt(args):
    """Print --prompt continued by --length tokens: sampled (temperature, top-k, top-p,
    seeded by --seed) or the beam search's (stopping at "<|endoftext|>")."""
    with common.exit_on_bad_input("generate"):
        p, tokenizer = load(args)
        prompt = np.array([tokenizer.encode(args.prompt)[-(p.max_len - 1):]])
        n_new = min(args.length, p.max_len - prompt.shape[1])
    if n_new < args.length:
        print(f"generate: GPT-2 reads and writes {p.max_len} tokens at most: {n_new} are "
              f"added, not {args.length}", file=sys.stderr, flush=True)
    if args.beam is not None:
        ids = lm.beam_search(p, prompt, n_new, beam_size=args.beam, eos=tokenizer.end_of_text,
                             no_repeat_ngram=args.no_repeat_ngram)
    else:
        ids = lm.generate(p, prompt, n_new, temperature=args.temperature, top_k=args.top_k,
                          top_p=args.top_p, rng=np.random.default_rng(args.seed or 0))
    print(tokenizer.decode(ids[0]), flush=True)


def loss_fn(params, batch, rng):
    """Mean cross-entropy in nats of each next token.  inputs, targets: (B, T)"""
    inputs, targets = batch
    return ag.cross_entropy(lm.apply(params, inputs, training=rng is not None, rng=rng), targets)


def read_text_ids(args, tokenizer, max_len):
    """(training ids, held-out ids) of --data: the last tenth held out, each part longer than
    a window of --context + 1 tokens, --context within GPT-2's positions."""
    if args.context > max_len:
        raise ValueError(f"generate: --context {args.context} is longer than GPT-2's "
                         f"{max_len} positions")
    ids = np.array(tokenizer.encode(data.read_text(args.data)), dtype=np.int64)
    cut = len(ids) - len(ids) // 10
    if min(cut, len(ids) - cut) <= args.context + 1:
        raise ValueError(f"generate: {args.data} is {len(ids)} tokens: too short for windows "
                         f"of --context {args.context}, its first 90% and last 10% must each "
                         f"hold more than {args.context + 1}")
    return ids[:cut], ids[cut:]


def fine_tune(args, argv):
    """Train GPT-2 on --data in --out (resumable), then save it and print a sample."""
    out = pathlib.Path(args.out)
    with runs.stopped_in_one_line("generate", out, argv, args.lr) as run:
        with common.exit_on_bad_input("generate"):
            p = gpt2.load(args.gpt2, dropout=args.dropout)
            tokenizer = bpe.GPT2Tokenizer.load(args.gpt2)
            train_ids, held_out_ids = read_text_ids(args, tokenizer, p.max_len)
            out.mkdir(parents=True, exist_ok=True)
            for name in FILES:
                shutil.copyfile(pathlib.Path(args.gpt2) / name, out / name)
        print(f"generate: GPT-2 from {args.gpt2} ({models.summary(p).splitlines()[-1]}); "
              f"{args.data}: {len(train_ids) + len(held_out_ids):,} tokens, the last "
              f"{len(held_out_ids):,} held out")
        params, history = train_run(args, p, train_ids, held_out_ids, out)
        runs.check_not_diverged("generate", [history], len(tokenizer), "tokens", args.lr)
        run.trained = True
        ag.save(out / "model.npz", params)
        prompt = held_out_ids[None, :SAMPLE_PROMPT]
        n_new = min(LENGTH, params.max_len - SAMPLE_PROMPT)
        sample = tokenizer.decode(lm.generate(params, prompt, n_new, TEMPERATURE, top_p=0.9,
                                              rng=np.random.default_rng(args.seed))[0])
        write_text(out / "samples.txt", sample + "\n")
        print(f"--- a sample (top-p 0.9) after {SAMPLE_PROMPT} held-out tokens\n{sample}")
        losses = [epoch["val_loss"] for epoch in history["epochs"]]
        common.print_result(f"held-out loss: {losses[-1]:.3f} nats per token after "
                            f"{args.steps} steps (first epoch {losses[0]:.3f}); saved in {out}")


def train_run(args, params, train_ids, held_out_ids, out):
    """train.fit on random windows of the training ids, in `out` -> (params, history)."""
    n_epochs = -(-args.steps // args.eval_every)

    def batches(epoch):
        n = min(args.eval_every, args.steps - epoch * args.eval_every)
        return data.lm_batches(train_ids, args.context, args.batch_size, n,
                               rng=np.random.default_rng([args.seed, epoch]))
    validation = list(data.lm_batches(held_out_ids, args.context, VALIDATION_WINDOWS, 1,
                                      rng=np.random.default_rng([args.seed, n_epochs])))
    optimizer = ag.optim.adam(ag.optim.warmup_schedule(peak=args.lr, warmup=args.warmup,
                                                       steps=args.steps, final=common.FINAL_LR))
    settings = dict({name: getattr(args, name) for name in TRAINING}, demo="generate",
                    seed=args.seed, options=runs.saved_options(args, OPTIONS))
    return train.fit(loss_fn, params, optimizer, batches, n_epochs, out_dir=out,
                     val_batches=validation, seed=args.seed, resume=args.resume,
                     clip_norm=CLIP_NORM, hyperparameters=settings,
                     count=lambda batch: batch[0].size, unit="tokens")
