"""python -m demos.translate: the paper's encoder-decoder learns to write numbers in English.

    python -m demos.translate                 # the full run: >= 99% on numbers it never saw
    python -m demos.translate --quick         # a tiny model for a few seconds (CI)
    python -m demos.translate --help          # the knobs: --steps, --d-model, --layers, ...

The task (demos/number_words.py): 4721 -> "four thousand seven hundred twenty one", for
every whole number up to 999,999,999; digits in, one token each, words out. The model is
models.transformer with layer norm before each sublayer (--norm post is the paper's order,
which learns the task too). Each training
step draws a fresh batch of numbers from the whole range except a held-out set, drawn
once from a fixed seed (the same for every --seed, so runs compare). The last line
printed is the exact match (every word right, greedy decoding) on the held-out numbers.

Saved in --out (default runs/translate-<timestamp>/): model.npz (ag.save of the
parameters; ag.load reads it back) and history.json (the settings, and the loss, the
learning rate and the held-out exact match against steps).

The full run takes about 3 minutes on 2 cores. At these sizes a second BLAS thread does
not make a step faster, and on a machine busy with other work it makes it several times
slower: there, run it as OPENBLAS_NUM_THREADS=1 python -m demos.translate.
"""
import argparse
import datetime
import json
import math
import pathlib
import time

import numpy as np

import autograd_lite as ag
import models
from models import transformer

from . import number_words as nw

# The recipe found by experiment (the report of issue 13 holds the table), and the quick one.
FULL = dict(steps=4000, d_model=64, heads=4, d_ff=256, layers=2, norm="pre", batch_size=64, lr=1e-3,
            warmup=200, label_smoothing=0.0, dropout=0.0, held_out=2000, eval_every=500)
QUICK = dict(steps=400, d_model=32, heads=4, d_ff=64, layers=1, norm="pre", batch_size=64, lr=1e-2,
             warmup=50, label_smoothing=0.0, dropout=0.0, held_out=500, eval_every=100)
AT_LEAST_ONE = ("steps", "d_model", "heads", "d_ff", "layers", "batch_size", "held_out",
                "eval_every")
HELD_OUT_SEED = 0  # fixed: every run is measured on the same held-out numbers
CLIP_NORM = 1.0
BEAM_SIZE = 4


def flag(name):
    """The command-line flag of a setting: batch_size -> --batch-size."""
    return "--" + name.replace("_", "-")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m demos.translate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a tiny model trained for a few seconds (CI); other flags override it")
    parser.add_argument("--out", type=pathlib.Path, default=None,
                        help="where to save the checkpoint and history "
                             "(runs/translate-<timestamp>/)")
    parser.add_argument("--seed", type=int, default=0,
                        help="initial weights, batches and dropout (0)")
    for name, value in FULL.items():
        parser.add_argument(flag(name), type=type(value), default=None,
                            choices=("post", "pre") if name == "norm" else None,
                            help=f"full run: {value}, --quick: {QUICK[name]}")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
        elif name in AT_LEAST_ONE and getattr(args, name) < 1:
            parser.error(f"{flag(name)} must be at least 1, got {getattr(args, name)}")
    if args.out is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        args.out = pathlib.Path("runs") / f"translate-{stamp}"
    return args


def learning_rate(peak, warmup, steps):
    """Linear warm-up to `peak` over `warmup` steps, then a cosine decay to peak / 20 at `steps`."""
    def lr(step):
        if step < warmup:
            return peak * step / warmup
        progress = min(1.0, (step - warmup) / max(1, steps - warmup))
        return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))
    return lr


def trim_padding(ids):
    """Drop the columns that are padding in every row.  (B, L) -> (B, L')"""
    used = np.flatnonzero((ids != nw.PAD).any(axis=0))
    return ids[:, :used[-1] + 1]


def training_batch(rng, size, held_out):
    """Fresh numbers, none held out: sources (B, S) and targets [BOS, words.., EOS] (B, T)."""
    values = nw.sample_values(rng, size, held_out)  # (B,)
    return trim_padding(nw.encode_sources(values)), trim_padding(nw.encode_targets(values))


def loss_fn(params, src, tgt, rng, label_smoothing):
    """Mean cross-entropy of each next word under teacher forcing.  src (B, S), tgt (B, T)"""
    training = rng is not None
    logits = transformer.apply(params, src, tgt[:, :-1], src_pad=nw.PAD, training=training,
                               rng=rng)  # (B, T - 1, V)
    return ag.cross_entropy(logits, tgt[:, 1:], ignore_index=nw.PAD,
                            label_smoothing=label_smoothing)


def translate(params, values, beam_size=1):
    """Words for each value, by greedy decoding (beam_size=1) or beam search. -> list of lists"""
    src = nw.encode_sources(values)  # (B, S)
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


def train(params, args, held_out, rng):
    """Adam on fresh batches, gradients clipped to norm 1; prints progress and returns
    (params, history), history holding the loss and the rate per step and the held-out
    exact match (on a quarter of the held-out set) every args.eval_every steps."""
    schedule = learning_rate(args.lr, args.warmup, args.steps)
    optimizer = ag.optim.adam(lr=schedule, betas=(0.9, 0.98), eps=1e-9)
    state = optimizer.init(params)
    dropout_rng = rng if args.dropout else None
    monitor = held_out[::4]  # evenly over the held-out set, which is sorted
    history = dict(step=[], loss=[], lr=[], eval_step=[], held_out_exact_match=[])
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        src, tgt = training_batch(rng, args.batch_size, held_out)
        loss, (grads, *_) = ag.value_and_gradient(loss_fn, params, src, tgt, dropout_rng,
                                                  args.label_smoothing)
        params, state = optimizer.update(params, ag.optim.clip_by_global_norm(grads, CLIP_NORM),
                                         state)
        history["step"].append(step)
        history["loss"].append(float(loss))
        history["lr"].append(schedule(step))
        if step % args.eval_every == 0 or step == args.steps:
            match = exact_match(params, monitor)
            history["eval_step"].append(step)
            history["held_out_exact_match"].append(match)
            recent = np.mean(history["loss"][-args.eval_every:])
            print(f"step {step:>5}/{args.steps}  loss {recent:.4f}  lr {schedule(step):.1e}  "
                  f"held-out {100 * match:5.1f}% ({len(monitor)} values)  "
                  f"{time.perf_counter() - start:6.1f} s", flush=True)
    history["train_seconds"] = time.perf_counter() - start
    return params, history


def show_examples(params, values):
    """Print each value with its greedy and beam translations, marked right or wrong."""
    greedy, beam = translate(params, values), translate(params, values, BEAM_SIZE)
    for value, g, b in zip(values, greedy, beam):
        truth = nw.to_words(int(value))
        print(f"  {int(value):>11,}  greedy {'ok ' if g == truth else 'BAD'} {' '.join(g)}")
        print(f"  {'':>11}  beam   {'ok ' if b == truth else 'BAD'} {' '.join(b)}")
        if g != truth or b != truth:
            print(f"  {'':>11}  truth      {' '.join(truth)}")


def write_plots(out_dir, params, history):
    """The attention heatmap and the training curves: they come with models.plots, which has
    not landed. Until then this writes nothing and says so."""
    print(f"plots: not written (models.plots is missing); the curves' data is in "
          f"{out_dir / 'history.json'}")


def build_model(args, rng):
    """The encoder-decoder with the sizes in args, for the task's two vocabularies."""
    return transformer.init(rng, len(nw.SOURCE_VOCAB), len(nw.TARGET_VOCAB),
                            d_model=args.d_model, n_heads=args.heads, d_ff=args.d_ff,
                            n_encoder=args.layers, n_decoder=args.layers,
                            max_len=nw.MAX_WORDS + 2, norm=args.norm, dropout=args.dropout)


def save_run(args, params, history):
    """model.npz (the parameters) and history.json (the settings and the curves) in args.out."""
    args.out.mkdir(parents=True, exist_ok=True)
    ag.save(args.out / "model.npz", params)
    settings = {k: str(v) if isinstance(v, pathlib.Path) else v for k, v in vars(args).items()}
    (args.out / "history.json").write_text(json.dumps(dict(settings=settings, **history)))
    print(f"saved {args.out / 'model.npz'} and {args.out / 'history.json'}")


def main(argv=None):
    args = parse_args(argv)
    ag.memory.keep_freed_memory()  # reuse freed blocks: training steps run markedly faster
    rng = np.random.default_rng(args.seed)
    held_out = nw.held_out_values(args.held_out, HELD_OUT_SEED)
    params = build_model(args, rng)
    print(f"translate: digits -> English words, 0..{nw.LARGEST:,}; {len(held_out):,} held-out "
          f"numbers never drawn for training")
    print(models.summary(params).splitlines()[-1])
    params, history = train(params, args, held_out, rng)
    print(f"trained {args.steps} steps in {history['train_seconds']:.0f} s "
          f"({1000 * history['train_seconds'] / args.steps:.1f} ms a step)")
    save_run(args, params, history)
    write_plots(args.out, params, history)

    print("held-out examples:")
    show_examples(params, held_out[:: max(1, len(held_out) // 6)][:6])
    beam = exact_match(params, held_out, BEAM_SIZE)
    print(f"held-out exact match: {100 * beam:.1f}% ({len(held_out):,} values), "
          f"beam of {BEAM_SIZE}")
    greedy = exact_match(params, held_out)
    print(f"held-out exact match: {100 * greedy:.1f}% ({len(held_out):,} values never seen in "
          f"training), greedy")


if __name__ == "__main__":
    main()
