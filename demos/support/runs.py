"""The life of a training demo's run, the same for translate, classify and generate: a new
run in --out DIR; `--out DIR --resume` continues it with the options it was started with
(read from its hyperparameters.json, where the demo keeps them under "options"), and an
option given that contradicts them (or a saved one of the wrong kind) is refused by name;
Ctrl-C ends with one line giving the command that resumes, wherever it came (making the
data, a step, writing the epoch's files or the final model and plots), status 130; a full
disk ends with the file, the checkpoint that holds and that command, a diverging run (a
NaN, or a loss that ended far above where it started) and a resume whose files do not
match with one line too, status 1; `--model DIR` uses the trained model, after checking
the run's files against each other.

    runs.add_resume_option(parser)                   # --resume; --seed defaults to None
    args = parser.parse_args(argv)
    if args.resume:
        runs.take_run_options(parser, args, "translate", OPTIONS, kinds=KINDS)
    runs.fill_defaults(args, QUICK if args.quick else FULL)
    ...
    with runs.stopped_in_one_line("translate", out, argv, args.lr) as run:
        ...                                          # make the data, fit
        runs.check_not_diverged("translate", [history], classes, "words", args.lr)
        run.trained = True                           # then the model, the plots, the tests
"""
import contextlib
import json
import math
import os
import pathlib
import shlex
import sys
import types

import autograd_lite as ag
from models import train
from models.training.run_files import CHECKPOINT, HYPERPARAMETERS

from .program import CTRL_C_STATUS, end, stopped
from .common import flag, is_disk_full, one_line_error

MEMBER = "member-{}"  # the folder of an ensemble's model k, a run of fit (generate --ensemble)


def add_resume_option(parser):
    """--resume on the parser of a training demo; --seed then defaults to None (not given),
    so that a resume can tell it from the run's own (fill_defaults makes it 0)."""
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out DIR (stopped by Ctrl-C or killed) with "
                             "the options it was started with, read from its "
                             f"{HYPERPARAMETERS}; an option given must agree with them")
    parser.set_defaults(seed=None)


def fill_defaults(args, defaults):
    """Each option of `defaults` (and --seed, default 0) that is None takes its default."""
    for name, value in dict(defaults, seed=0).items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


def read_settings(program, directory):
    """The "hyperparameters" a run of `program` gave fit, from its hyperparameters.json; a
    missing, unreadable or foreign file is a ValueError naming the file."""
    path = pathlib.Path(directory) / HYPERPARAMETERS
    if not pathlib.Path(directory).is_dir():
        what = "a file" if pathlib.Path(directory).exists() else "not there"
        raise ValueError(f"{program}: {directory} is {what}, not the folder of a {program} run")
    if not path.is_file():
        raise ValueError(f"{program}: {directory} holds no {program} run (no {HYPERPARAMETERS})")
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))["hyperparameters"]
        if not isinstance(settings.get("options"), dict):
            raise KeyError("options")
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as error:
        raise ValueError(f"{program}: {path} is not the settings of a {program} run "
                         f"({type(error).__name__}: {error})") from None
    check_made_by(program, directory, settings)
    return settings


def check_made_by(program, directory, settings=None):
    """A run's settings (its hyperparameters; None: read from its hyperparameters.json, if
    it is there and reads) name the demo that made it ("demo"): one of another demo is a
    ValueError naming that demo."""
    if settings is None:
        try:
            path = pathlib.Path(directory) / HYPERPARAMETERS
            settings = json.loads(path.read_text(encoding="utf-8"))["hyperparameters"]
        except (OSError, ValueError, KeyError, TypeError):
            return
    made_by = settings.get("demo") if isinstance(settings, dict) else None
    if made_by is not None and made_by != program:
        raise ValueError(f"{program}: {directory} is a run of demos.{made_by}, not of "
                         f"demos.{program}: use it with python -m demos.{made_by}")


def take_run_options(parser, args, program, names, paths=(), kinds=None, choices=None):
    """For --resume: each option in `names` not given takes the run's value (from the
    "options" of its hyperparameters.json); one given that differs is refused by its flag.
    The run must have a checkpoint that loads (last.npz): else the program ends with one
    line naming the file. The options in `paths` are pathlib.Paths, saved and compared as
    text; those in `kinds` ({name: int, float or str}) must hold that kind of value in the
    file (or null), and those in `choices` ({name: the values allowed}) one of their values,
    else the program ends with one line naming the file and the option."""
    try:
        saved = read_settings(program, args.out)["options"]
        check_checkpoint(args.out)
        check_kinds(program, args.out / HYPERPARAMETERS, saved, kinds or {}, choices or {})
    except ValueError as error:
        sys.exit(one_line_error(program, error))
    for name in names:
        if name not in saved:
            parser.error(f"--resume: {args.out / HYPERPARAMETERS} has no option {name!r}")
        given, value = getattr(args, name), saved[name]
        if given is None:
            setattr(args, name, pathlib.Path(value) if name in paths and value is not None
                    else value)
        elif (str(given) if isinstance(given, pathlib.PurePath) else given) != value:
            parser.error(f"--resume: {flag(name)} {given} differs from the run's {value} "
                         f"(in {args.out / HYPERPARAMETERS})")


def check_kinds(program, path, saved, kinds, choices):
    """Each option of `kinds` in the saved options is null or of its kind (an int is a
    float too; a bool is no int), and each of `choices` one of its values: a ValueError
    naming the file and the option if not."""
    for name, allowed in choices.items():
        if saved.get(name) is not None and saved[name] not in allowed:
            raise ValueError(f"{program}: {path}: the option {name!r} is "
                             f"{json.dumps(saved[name])}, not one of {', '.join(allowed)}: the "
                             f"file was changed; restore its value, or start the run again")
    for name, kind in kinds.items():
        value = saved.get(name)
        allowed = (int, float) if kind is float else kind
        if value is not None and (isinstance(value, bool) or not isinstance(value, allowed)):
            raise ValueError(f"{program}: {path}: the option {name!r} is {json.dumps(value)}, "
                             f"not {KIND_NAMES[kind]}: the file was changed; restore its value, "
                             f"or start the run again")


KIND_NAMES = {int: "a whole number", float: "a number", str: "a text"}


def check_checkpoint(directory):
    """The run's checkpoints (last.npz; an ensemble's, one a model) must be there and load:
    they decide where a resume starts."""
    found = checkpoints(directory)
    if not found:
        raise ValueError(f"{directory} holds no checkpoint to continue ({CHECKPOINT}): the run "
                         f"was stopped before its first one; start it again without --resume")
    for path in found:
        ag.load(path)  # a MalformedFile (a ValueError) names the file and what is wrong


def member_folder(out, k):
    """The folder of model k of an ensemble run in `out` (a run of fit of its own)."""
    return pathlib.Path(out) / MEMBER.format(k)


def checkpoints(directory):
    """The checkpoints of the run in `directory`: its last.npz, or those of an ensemble's
    models, each trained in its own folder (member-0/last.npz, ...; generate --ensemble)."""
    own = pathlib.Path(directory) / CHECKPOINT
    return [own] if own.is_file() else sorted(pathlib.Path(directory).glob(
        f"{MEMBER.format('*')}/{CHECKPOINT}"))


def saved_options(args, names):
    """The options in `names` as JSON values (paths as text), for hyperparameters.json."""
    return {name: str(value) if isinstance(value, pathlib.PurePath) else value
            for name in names for value in [getattr(args, name)]}


@contextlib.contextmanager
def stopped_in_one_line(program, out, argv, lr):
    """Around a training run in `out` (the program's arguments `argv`, None for sys.argv's;
    its peak learning rate `lr`): Ctrl-C anywhere inside ends the program with one line
    (interrupted) and status 130; a loss or gradient that is not finite (diverged), a full
    disk (disk_full) and a run whose files do not match its settings end it with one line
    and status 1, instead of a traceback. Yields an object whose `trained` the program sets
    once fit has returned."""
    run = types.SimpleNamespace(trained=False)
    try:
        yield run
    except KeyboardInterrupt as stop:
        end(interrupted(program, stop, out, argv, run.trained), CTRL_C_STATUS)
    except train.NonFiniteError as error:
        sys.exit(diverged(program, error, lr))
    except train.RunMismatch as error:
        sys.exit(one_line_error(program, error))
    except OSError as error:
        if not is_disk_full(error):
            raise
        sys.exit(disk_full(program, error, out, argv, run.trained))



@contextlib.contextmanager
def stopped_quietly(program):
    """Around a trained model's answers (--model): Ctrl-C ends the program with one line on
    stderr and status 130, not a traceback; nothing is written there, so nothing is lost."""
    try:
        yield
    except KeyboardInterrupt:
        stopped(program)


def interrupted(program, stop, out, argv=None, trained=False):
    """The one line Ctrl-C ends a run with: where it stopped and the command that resumes
    (from last.npz: fit's TrainingInterrupted says where; else the checkpoint on disk does),
    or, stopped before the first checkpoint, the command that starts it again."""
    if isinstance(stop, train.TrainingInterrupted):
        return (f"{program}: stopped at epoch {stop.epoch}, step {stop.step} (saved in "
                f"{checkpoint_named(out)}); {resume_command(program, out)}")
    if not checkpoints(out):
        return (f"{program}: stopped before its first checkpoint, so there is nothing to "
                f"continue; {start_again(program, argv)}")
    if trained:
        return (f"{program}: stopped after training, while writing its results (the trained "
                f"model is in {checkpoint_named(out)}); {resume_command(program, out)}")
    epoch, step = saved_position(out)
    return (f"{program}: stopped at epoch {epoch}, step {step} (saved in "
            f"{checkpoint_named(out)}); {resume_command(program, out)}")


def disk_full(program, error, out, argv=None, trained=False):
    """The one line a run ends with when a file could not be written for want of space:
    the file, the last checkpoint that holds (as on disk now), and the command that goes on
    from it once there is space (as after a Ctrl-C)."""
    head = (f"{program}: could not write {error.filename or 'a file'} "
            f"({os.strerror(error.errno)})")
    if not checkpoints(out):
        return (f"{head}; there is no checkpoint yet: once there is space, "
                f"{start_again(program, argv)}")
    if trained:
        return (f"{head}; the trained model is in {checkpoint_named(out)}: once there is space, "
                f"{resume_command(program, out)}")
    epoch, step = saved_position(out)
    return (f"{head}; the last checkpoint that holds is {checkpoint_named(out)} (epoch {epoch}, "
            f"step {step}): once there is space, {resume_command(program, out)}")


def saved_position(out):
    """(epoch, step) of the least advanced checkpoint of the run in `out` (there must be one)."""
    saved = min((json.loads(ag.load(path).position) for path in checkpoints(out)),
                key=lambda position: (position["epoch"], position["step"]))
    return saved["epoch"], saved["step"]


def start_again(program, argv=None):
    """The command that starts the program again with its arguments (sys.argv's for None)."""
    again = shlex.join(sys.argv[1:] if argv is None else [str(a) for a in argv])
    return f"to start again: python -m demos.{program} {again}".rstrip()


def checkpoint_named(out):
    """The run's checkpoint as a line names it: its last.npz, or an ensemble's member-*/last.npz."""
    found = checkpoints(out)
    return found[0] if len(found) == 1 else pathlib.Path(out, MEMBER.format("*"), CHECKPOINT)


def resume_command(program, out):
    return f"to continue: python -m demos.{program} --out {shlex.quote(str(out))} --resume"


def diverged(program, error, lr):
    """The one line a run ends with when fit met a loss or gradient that is not finite
    (train.NonFiniteError): the step, where in the gradient, and what to try."""
    return (f"{program}: {error.what} at step {error.step} (epoch {error.epoch}); "
            f"{error.where}; stopped before that update: try a lower --lr than {lr:g}")


JUDGED_FROM = 10  # steps: a shorter run's last steps say little against its first
FAR_ABOVE = 2.0  # a final loss this many times the first step's: the run went the wrong way
ABOVE = 1.2  # or this many times it, and above a uniform guess's (with ABOVE_UNIFORM's margin)
ABOVE_UNIFORM = 1.1


def final_loss(history):
    """The mean training loss of the run's last tenth of steps (at least one step)."""
    losses = history["step_loss"]
    last = losses[-max(1, len(losses) // 10):]
    return sum(last) / len(last)


def divergence(history, classes, what):
    """Why a run's training loss shows that it diverged without a NaN, or None: it ended far
    above where it started (FAR_ABOVE times its first step's), or above it and above a
    uniform guess's, log(classes) (a model that knows nothing does better). A run of fewer
    than JUDGED_FROM steps is not judged."""
    if len(history["step_loss"]) < JUDGED_FROM:
        return None
    start, end, uniform = history["step_loss"][0], final_loss(history), math.log(classes)
    if end > FAR_ABOVE * start:
        return (f"ended at {end:.4g} nats, more than {FAR_ABOVE:g} times the {start:.4g} it "
                f"started at")
    if end > ABOVE * start and end > ABOVE_UNIFORM * uniform:
        return (f"ended at {end:.4g} nats, above the {start:.4g} it started at and above a "
                f"uniform guess's {uniform:.4g} (the log of {classes:,} {what})")
    return None


def check_not_diverged(program, histories, classes, what, lr):
    """A run whose training loss diverged without a NaN (`divergence`, of the mean of its
    last steps) ends the program with one line saying so and what to try, and status 1.
    histories: fit's history of each model the run trained; what: the classes' name
    ("characters")."""
    for k, history in enumerate(histories):
        why = divergence(history, classes, what)
        if why:
            model = f" of model {k}" if len(histories) > 1 else ""
            sys.exit(f"{program}: the training loss{model} {why}: the run diverged; try a "
                     f"lower --lr than {lr:g}")


def check_new_run(program, out):
    """A new run may not overwrite a run in --out (nor write into a file): else the program
    ends with one line saying so."""
    if out.exists() and not out.is_dir():
        sys.exit(f"{program}: --out {out} is a file, not a folder")
    if checkpoints(out):
        sys.exit(f"{program}: --out {out} holds a {program} run already: add --resume to "
                 f"continue it, or choose another --out")
