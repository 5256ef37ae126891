"""The files of a training run in its out_dir, each replaced atomically (a temporary file,
then os.replace), so that a crash never loses the previous version (a process killed while
writing leaves its <name>.partial-<pid>, which the next start in out_dir deletes):

    hyperparameters.json   the run's settings, written when it starts; a resume must match them
    last.npz               the Position after the last completed epoch (or the step of a Ctrl-C):
                           params and optimizer state as arrays (ag.save), the rest as JSON text
    best.npz               the params with the lowest validation loss so far:
                           ag.load(path, like=params)
    history.json           per-epoch means, per-step losses and health records, as `fit`
                           returns them
"""
import json
import math
import os
from typing import Any, NamedTuple

import autograd_lite as ag
from autograd_lite.io.atomic import write_atomically

CHECKPOINT, BEST, HISTORY, HYPERPARAMETERS = ("last.npz", "best.npz", "history.json",
                                              "hyperparameters.json")


class RunMismatch(ValueError):
    """A resume whose settings, or whose run's files, are not those of the run in out_dir:
    the message names what differs."""


class Checkpoint(NamedTuple):
    """last.npz's tree: errors name its paths, e.g. 'params.encoder[0].ff.linear1.w'."""
    params: Any
    optimizer_state: Any
    position: str  # JSON: the Position's other fields, and the history up to it


class Position(NamedTuple):
    """Where a run stands. A checkpoint holds it; resuming from it continues exactly."""
    params: Any
    optimizer_state: Any
    epoch: int  # the epoch in progress
    step: int  # batches of that epoch used so far
    global_step: int  # optimizer updates since the start
    totals: dict  # the epoch's sums so far: "samples", and samples · value for loss and metrics


def open_run(out_dir, settings, resume):
    """Check out_dir for a new run (no checkpoint; writes hyperparameters.json) or for a
    resumed one (a checkpoint, the same settings). -> True when resuming."""
    try:
        json.dumps(settings)
    except (TypeError, ValueError) as error:
        raise TypeError(f"fit: the hyperparameters go to {HYPERPARAMETERS} and must be "
                        f"JSON numbers, strings, lists and dicts ({error})") from None
    checkpoint = os.path.join(out_dir, CHECKPOINT)
    remove_stale_partials(out_dir)
    if not resume:
        if os.path.exists(checkpoint):
            raise FileExistsError(f"fit: {checkpoint} exists: pass resume=True to continue that "
                                  f"run, or choose another out_dir")
        os.makedirs(out_dir, exist_ok=True)
        write_json(os.path.join(out_dir, HYPERPARAMETERS), settings)
        return False
    if not os.path.exists(checkpoint):
        raise FileNotFoundError(f"fit: resume=True but there is no checkpoint {checkpoint}")
    path = os.path.join(out_dir, HYPERPARAMETERS)
    try:
        with open(path, encoding="utf-8") as fh:
            saved = json.load(fh)
    except (OSError, ValueError) as error:
        raise RunMismatch(f"fit: resume=True, but {path}, the run's settings, does not read "
                          f"({error})") from None
    differ = differences(saved, json.loads(json.dumps(settings)))  # tuples are lists in JSON
    if differ:
        shown = "; ".join(f"{name} {_short(given)} now, {_short(was)} in the run"
                          for name, was, given in differ[:MOST_SHOWN])
        more = f"; and {len(differ) - MOST_SHOWN} more" if len(differ) > MOST_SHOWN else ""
        raise RunMismatch(f"fit: resume=True with settings that differ from the run's ({path}): "
                          f"{shown}{more}; the resumed run would not continue the same one")
    return True


MOST_SHOWN = 4  # settings named in the error of a resume that differs


NOT_SET = object()  # a key that one of two settings lacks


def differences(saved, given, name=""):
    """[(name, saved value, given value)] at each place where two JSON trees differ, named
    by its keys ("hyperparameters.vocab_size"); a key only one has is NOT_SET in the other."""
    if not (isinstance(saved, dict) and isinstance(given, dict)):
        return [] if saved == given else [(name or "(the settings)", saved, given)]
    found = []
    for key in dict.fromkeys([*saved, *given]):
        found += differences(saved.get(key, NOT_SET), given.get(key, NOT_SET),
                             f"{name}.{key}" if name else key)
    return found


def _short(value, most=60):
    text = "not set" if value is NOT_SET else json.dumps(value)
    return text if len(text) <= most else text[:most - 3] + "..."


def remove_stale_partials(out_dir):
    """Delete the temporary files (<name>.partial-<pid>) that a process killed while writing
    left in out_dir; those of a process still running are its own, and stay."""
    if not os.path.isdir(out_dir):
        return
    for name in os.listdir(out_dir):
        _, partial, pid = name.rpartition(".partial-")
        if partial and pid.isdigit() and not _running(int(pid)):
            os.remove(os.path.join(out_dir, name))


def _running(pid):
    """Whether a process with this id runs (this one included)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def save_epoch(out_dir, position, history):
    """After an epoch: best.npz if the validation loss improved, then last.npz, then
    history.json (a crash between them leaves each file whole, and last.npz decides a resume)."""
    losses = [r["val_loss"] for r in history["epochs"] if "val_loss" in r]
    if losses and losses[-1] < min(losses[:-1], default=math.inf):
        ag.save(os.path.join(out_dir, BEST), position.params)
    save_checkpoint(out_dir, position, history)
    write_history(out_dir, history)


def write_history(out_dir, history):
    """history.json: fit's history, whole."""
    write_json(os.path.join(out_dir, HISTORY), history)


def save_checkpoint(out_dir, position, history):
    """last.npz, with the history up to the position (its first global_step step losses). -> path"""
    history = dict(history, step_loss=history["step_loss"][:position.global_step])
    if "health" in history:  # fit's health records, of updates 1 .. global_step only
        history["health"] = [r for r in history["health"] if r["step"] <= position.global_step]
    rest = dict(position._asdict(), history=history)
    del rest["params"], rest["optimizer_state"]
    path = os.path.join(out_dir, CHECKPOINT)
    ag.save(path, Checkpoint(position.params, position.optimizer_state, json.dumps(rest)))
    return path


def load_checkpoint(out_dir, start):
    """(position, history) from last.npz; the Position `start` gives the structure, shapes and
    dtypes of the params and optimizer state (a mismatch is an error naming the path)."""
    path = os.path.join(out_dir, CHECKPOINT)
    try:
        saved = ag.load(path, like=Checkpoint(start.params, start.optimizer_state, str))
    except ValueError as error:  # a MalformedFile: a shape, dtype or structure differs
        raise RunMismatch(f"fit: resume=True, but {path} does not hold parameters of the "
                          f"model given (another model, or a run whose {HYPERPARAMETERS} was "
                          f"changed?): {error}") from None
    rest = json.loads(saved.position)
    history = rest.pop("history")
    return Position(saved.params, saved.optimizer_state, **rest), history


def write_json(path, obj):
    """Write obj as JSON to path atomically (the old file or the new one survives a crash),
    with the umask's permissions, as the run's other files."""
    write_atomically(path, lambda fh: json.dump(obj, fh, indent=1), mode="w", caller="write_json",
                     encoding="utf-8")
