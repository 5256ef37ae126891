"""The training loop: `fit` a model's parameters with an `ag.optim` optimizer, with a progress
bar, a history, checkpoints, an exact resume and a stop on the first non-finite loss.

    def loss_fn(params, batch, rng):          # rng: dropout's Generator; None in validation
        ids, labels = batch
        logits = classifier.apply(params, ids, training=rng is not None, rng=rng)
        accuracy = np.mean(np.argmax(ag.stop_gradient(logits), -1) == labels)  # plain numpy
        return ag.cross_entropy(logits, labels), {"accuracy": accuracy}

    params, history = train.fit(loss_fn, params, ag.optim.adam(1e-3), batches, epochs=10,
                                out_dir="runs/reviews", val_batches=validation)

`loss_fn` returns the scalar loss, or (loss, metrics) with a dict of scalar metrics.
`batches(epoch)` returns that epoch's iterable of batches, so an epoch can be rebuilt
and its first batches skipped on resume. Epochs, steps and batches count from 0. The rng of
a step is np.random.default_rng([seed, epoch, batch index]): a resumed run draws the same
numbers without any generator state in the checkpoint.

`out_dir` receives, after each epoch, `last.npz` (the checkpoint), `best.npz` (the params
with the lowest validation loss) and `history.json` (run_files.py describes the files).
Ctrl-C (a KeyboardInterrupt, also from inside `batches`) saves `last.npz` at the current
step and raises `TrainingInterrupted`, a KeyboardInterrupt whose message says where the
checkpoint is and how to resume: the program stops as Ctrl-C asked, and
`fit(..., resume=True)` then ends bit-identical to an uninterrupted run. While an epoch's
files are written, Ctrl-C waits until they are all whole (they agree with each other).
Without out_dir, Ctrl-C is a plain KeyboardInterrupt. fit changes nothing outside the run:
keeping freed memory for reuse (ag.memory.keep_freed_memory(), for the whole process) is
the program's call, and the demos make it.
"""
import itertools
import math
import os
from typing import Any, NamedTuple

import numpy as np

import autograd_lite as ag

from autograd_lite.interrupts import deferred_interrupts

from . import health
from .run_files import (CHECKPOINT, Position, RunMismatch, load_checkpoint, open_run,  # noqa: F401
                        save_checkpoint, save_epoch, write_history)  # (train.RunMismatch too)
from .progress import progress_bar

HEALTH_EVERY = 10  # the demos' health_every: a record costs a few per cent of one of their
# steps, so a tenth of that over the training (tests/benchmarks/README.md, bench_health.py)


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped `fit`; the checkpoint at `path` holds the run at (epoch, step)."""

    def __init__(self, path, epoch, step):
        super().__init__(f"fit: interrupted at epoch {epoch}, after {step} batches of it; the "
                         f"checkpoint {path} holds this step: call fit(..., resume=True) with "
                         f"the same out_dir to continue")
        self.path, self.epoch, self.step = path, epoch, step

    def __reduce__(self):  # pickled by its own arguments: it crosses from a worker process
        return type(self), (self.path, self.epoch, self.step)


class NonFiniteError(FloatingPointError):
    """A loss or gradient was NaN or infinite; training stopped before that update.
    `what` ("the loss is nan", "the gradient is not finite"), `where` (the gradient's
    groups that hold NaN or inf, or its largest group), `epoch`, `step` (the update it
    would have been, from 0) and `batch` (its index in the epoch) say which."""

    def __init__(self, what, where, epoch, step, batch):
        super().__init__(f"fit: {what} at epoch {epoch}, step {step} (batch {batch} of the "
                         f"epoch); {where}; stopped before the update: no file was written "
                         f"after the last good step (a lower learning rate may help)")
        self.what, self.where, self.epoch, self.step, self.batch = what, where, epoch, step, batch

    def __reduce__(self):  # pickled by its own arguments: it crosses from a worker process
        return type(self), (self.what, self.where, self.epoch, self.step, self.batch)


class Loop(NamedTuple):
    """The settings of one `fit` call, passed whole to its parts."""
    loss_fn: Any
    optimizer: Any
    batches: Any
    val_batches: Any
    evaluate: Any
    seed: int
    clip_norm: Any
    count: Any
    unit: str
    out_dir: Any
    progress: bool
    health_every: Any = None  # record training health every this many updates (health.py)
    example_health: bool = False  # health records hold per-example gradient norms too


def fit(loss_fn, params, optimizer, batches, epochs, out_dir=None, val_batches=None,
        evaluate=None, seed=0, resume=False, clip_norm=None, hyperparameters=None,
        health_every=None, *, count=None, unit="samples", progress=True, example_health=False):
    """Train for `epochs` epochs: -> (params, history).

    val_batches: a function epoch -> batches, or batches to iterate again every epoch (a
    list, data.Batches; not an iterator, which one epoch would exhaust); their loss and
    metrics (rng None: no dropout) are recorded as val_<name>.
    evaluate(params) -> dict of scalar metrics, run after each epoch. clip_norm: the global
    norm gradients are clipped to (ag.optim.clip_by_global_norm). count(batch): the samples
    (or tokens) in a batch, default the length of its first array; it weights the epoch's
    means and the speed shown as `unit`/s. progress=False silences the progress bar.
    resume=True continues the run in out_dir: `params` then only gives the structure, shapes
    and dtypes, and the hyperparameters must be those the run started with.
    health_every=N records the training health (health.py) of updates 1, N + 1, 2N + 1, ...
    in history["health"]; it reads the step and changes no bit of the run. With
    example_health=True each record also has "example_grad_norm": the quantiles of the batch's
    per-example gradient norms (health.example_gradient_norms, through ag.vmap; loss_fn must
    take a batch of one).

    history = {"epochs": [{"epoch", "steps", "train_loss", "val_loss", ...}, ...],
               "step_loss": [the loss of every update, in order],
               "health": [{"step": update number from 1, "grad_norm", "clipped",
                           "nonfinite_fraction", "group_grad_norm": {group: norm},
                           "update_ratio": {group: ratio}}, ...]}   (with health_every only)
    """
    _check_arguments(epochs, seed, val_batches)
    _check_health_every(health_every)
    if example_health and health_every is None:
        raise ValueError("fit: example_health=True adds to the health records, which "
                         "health_every=N asks for")
    loop = Loop(loss_fn, optimizer, batches, val_batches, evaluate, int(seed), clip_norm,
                count or samples_in, unit, out_dir, progress, health_every, bool(example_health))
    position, history = _start(loop, params, resume, hyperparameters)
    while position.epoch < epochs:
        position, record = _run_epoch(loop, position, history)
        history["epochs"].append(record)
        position = position._replace(epoch=position.epoch + 1, step=0, totals={})
        if out_dir is not None:
            _save_whole(save_epoch, loop, position, history)
    return position.params, history


def _save_whole(save, loop, position, history):
    """save(out_dir, position, history) (save_epoch or save_checkpoint) with Ctrl-C deferred
    until every file is written, so that last.npz, history.json and best.npz agree; a Ctrl-C
    that came meanwhile then raises TrainingInterrupted at `position`."""
    try:
        with deferred_interrupts():
            save(loop.out_dir, position, history)
    except KeyboardInterrupt:
        raise TrainingInterrupted(os.path.join(loop.out_dir, CHECKPOINT), position.epoch,
                                  position.step) from None


def _check_arguments(epochs, seed, val_batches):
    for name, value in (("epochs", epochs), ("seed", seed)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"fit: {name} must be a non-negative int, got {value!r}")
    reiterable = hasattr(val_batches, "__iter__") and iter(val_batches) is not val_batches
    if val_batches is not None and not (callable(val_batches) or reiterable):
        raise TypeError(f"fit: val_batches must be a function of the epoch or batches to "
                        f"iterate every epoch (a list), got {type(val_batches).__name__} "
                        f"(an iterator would be empty after one epoch)")


def _check_health_every(health_every):
    if health_every is not None and (not isinstance(health_every, (int, np.integer))
                                     or isinstance(health_every, bool) or health_every < 1):
        raise ValueError(f"fit: health_every must be None or an int >= 1 (updates between "
                         f"health records), got {health_every!r}")


def samples_in(batch):
    """The length of the batch's first array (its leading axis)."""
    for leaf in ag.tree_leaves(batch):
        if np.ndim(leaf) >= 1:
            return len(leaf)
    raise ValueError("fit: a batch holds no array to count its samples by; pass count=")


def _start(loop, params, resume, hyperparameters):
    """The first position and history: a fresh run's, or those in out_dir's checkpoint."""
    position = Position(params, loop.optimizer.init(params), 0, 0, 0, {})
    if loop.out_dir is None and resume:
        raise ValueError("fit: resume=True needs the out_dir of the run to continue")
    settings = {"fit": {"seed": loop.seed, "clip_norm": loop.clip_norm},
                "hyperparameters": hyperparameters or {}}
    if loop.out_dir is not None and open_run(loop.out_dir, settings, resume):
        position, history = load_checkpoint(loop.out_dir, position)
        # as last.npz says: a stop while the epoch's files were written may have left the
        # history of the epoch before (and a resume with no epoch left writes nothing else)
        write_history(loop.out_dir, history)
        return position, history
    return position, {"epochs": [], "step_loss": []}


def _run_epoch(loop, position, history):
    """The epoch's remaining steps, then its record: -> (position at its end, record).
    Ctrl-C saves the last completed step and raises TrainingInterrupted."""
    bar = progress_bar(f"epoch {position.epoch}", loop.unit, loop.progress)
    try:
        source = loop.batches(position.epoch)
        bar.start(len(source) if hasattr(source, "__len__") else None, position.step,
                  position.totals.get("samples", 0))
        for position in _train_steps(loop, position, source, history):
            totals = position.totals
            bar.show(position.step, totals["loss"] / totals["samples"], totals["samples"])
        record = _epoch_record(loop, position)
    except KeyboardInterrupt:
        bar.close()
        if loop.out_dir is None:
            raise
        _save_whole(save_checkpoint, loop, position, history)
        raise TrainingInterrupted(os.path.join(loop.out_dir, CHECKPOINT), position.epoch,
                                  position.step) from None
    except BaseException:  # NonFiniteError and the like: the bar ends before their message
        bar.close()
        raise
    bar.close(", ".join(f"{k} {v:.4g}" for k, v in record.items()
                        if k not in ("epoch", "steps")))
    return position, record


def _train_steps(loop, position, source, history):
    """Each update of the epoch's batches in `source` after the first position.step, as the
    Position after it. history["step_loss"] gets the step's loss (and history["health"] its
    health record, when due) before the position is yielded (so a checkpoint keeps exactly
    the first global_step of them)."""
    epoch, batches = position.epoch, iter(source)
    groups = health.parameter_groups(position.params) if loop.health_every else None
    skipped = sum(1 for _ in itertools.islice(batches, position.step))  # used before a resume
    if skipped < position.step:
        raise ValueError(f"fit: batches({epoch}) gave {skipped} batches, but the checkpoint has "
                         f"used {position.step} of them")
    for index, batch in enumerate(batches, position.step):
        rng = np.random.default_rng([loop.seed, epoch, index])
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # _check_finite
            (loss, metrics), (grads,) = ag.value_and_gradient(  # says it, once, in one line
                lambda p: _loss_and_metrics(loop.loss_fn(p, batch, rng)), position.params,
                has_aux=True)
        _check_finite(loss, grads, position, index)
        due = groups is not None and position.global_step % loop.health_every == 0
        if due:
            record = health.gradient_health(grads, groups, loop.clip_norm)
            if loop.example_health:  # the step's generator untouched: a fresh one alike
                norms = health.example_gradient_norms(
                    loop.loss_fn, position.params, batch,
                    np.random.default_rng([loop.seed, epoch, index]))
                record["example_grad_norm"] = health.example_norm_quantiles(norms)
            before = health.snapshot(position.params, groups)
        if loop.clip_norm is not None:
            grads = ag.optim.clip_by_global_norm(grads, loop.clip_norm)
        params, state = loop.optimizer.update(position.params, grads, position.optimizer_state)
        history["step_loss"].append(float(loss))
        if due:
            history.setdefault("health", []).append(dict(
                step=position.global_step + 1, **record,
                update_ratio=health.update_ratios(before, params, groups)))
        totals = _add_to_totals(position.totals, loop.count(batch), loss, metrics)
        position = Position(params, state, epoch, index + 1, position.global_step + 1, totals)
        yield position


def _loss_and_metrics(out):
    """loss_fn's result as (loss, metrics dict)."""
    if isinstance(out, tuple):
        if len(out) != 2 or not isinstance(out[1], dict):
            raise TypeError("fit: loss_fn must return the loss or (loss, dict of metrics), got "
                            f"({', '.join(type(x).__name__ for x in out)})")
        return out
    return out, {}


def _check_finite(loss, grads, position, index):
    """Stop before the update on a NaN or inf loss or gradient, saying where (the gradient's
    groups: health.describe_nonfinite). The gradient is checked by its squared norm, Σ g·g
    in its own precision (one BLAS dot a leaf: NaN or inf in any entry makes it so; in
    float32 so does a norm above ~1e19)."""
    what = None
    if not math.isfinite(loss):
        what = f"the loss is {float(loss)}"
    else:
        leaves = [g for g in ag.tree_leaves(grads) if g is not None and ag.is_differentiable(g)]
        if not math.isfinite(_squared_norm(leaves)):
            what = ("the gradient is not finite" if not all(np.isfinite(g).all() for g in leaves)
                    else "the gradient is too large (its squared norm overflows its precision)")
    if what:
        where = health.describe_nonfinite(grads, health.parameter_groups(position.params))
        raise NonFiniteError(what, where, position.epoch, position.global_step, index)


def _squared_norm(leaves):
    """Σ g·g over the leaves, each dot in its leaf's precision, summed in float64; a device's
    dots (CuPy's) are summed there and read once, not once a leaf."""
    dots = [np.vdot(g, g) for g in leaves]
    if all(isinstance(d, (np.generic, float)) for d in dots):
        return sum(float(d) for d in dots)
    return float(sum(d.astype(np.float64) for d in dots))


def _add_to_totals(totals, samples, loss, metrics):
    """totals + samples · (loss, metrics), as a new dict: the Position holding it is
    replaced whole, never changed in place."""
    new = {"samples": totals.get("samples", 0) + samples,
           "loss": totals.get("loss", 0.0) + samples * float(loss)}
    for name, value in metrics.items():
        if name in new:
            raise ValueError(f"fit: loss_fn's metrics may not be called {name!r}: fit keeps "
                             f"that total itself")
        new[name] = totals.get(name, 0.0) + samples * _scalar(name, value)
    return new


def _scalar(name, value):
    """A metric as a Python float; anything but a scalar is refused by name."""
    if np.ndim(value) != 0:
        raise ValueError(f"fit: the metric {name!r} must be a scalar, got shape "
                         f"{np.shape(value)}")
    return float(value)


def _means(totals, prefix):
    return {f"{prefix}_{name}": total / totals["samples"]
            for name, total in totals.items() if name != "samples"}


def _epoch_record(loop, position):
    """The epoch's train means, validation means and evaluate's metrics."""
    if not position.totals:
        raise ValueError(f"fit: batches({position.epoch}) gave no batches")
    record = {"epoch": position.epoch, "steps": position.global_step}
    record.update(_means(position.totals, "train"))
    if loop.val_batches is not None:
        record.update(_means(_validation_totals(loop, position), "val"))
    for name, value in (loop.evaluate(position.params) if loop.evaluate else {}).items():
        if name in record:
            raise ValueError(f"fit: evaluate returned {name!r}, which the history already has")
        record[name] = _scalar(name, value)
    return record


def _validation_totals(loop, position):
    source = loop.val_batches(position.epoch) if callable(loop.val_batches) else loop.val_batches
    totals = {}
    for batch in source:
        loss, metrics = _loss_and_metrics(loop.loss_fn(position.params, batch, None))
        totals = _add_to_totals(totals, loop.count(batch), loss, metrics)
    if not totals:
        raise ValueError(f"fit: the validation batches of epoch {position.epoch} are empty")
    return totals
