"""What every demo shares: the options --quick, --out, --seed and --threads (use_threads;
and `flag`, a setting's option), the checks of every option before anything is read or
written (check_options, check_memory, check_output_folder, check_picture_path,
refuse_unused), how far the training demos' learning rate decays (FINAL_LR), the output
directory, bad input as a one-line error, and the final line, which holds the measured
result.

    parser = common.argument_parser("classify", __doc__)  # --quick, --out, --seed, --threads
    args = parser.parse_args(argv)
    common.use_threads(args)                            # ag.set_threads(--threads)
    out = common.output_path(args, "classify")          # runs/classify-<timestamp>/, not made
    with common.exit_on_bad_input("classify"):           # "classify: <the error>", status 1
        ...                                              # read and check the input
    out.mkdir(parents=True, exist_ok=True)
    ...
    common.print_result("test accuracy: transformer 89.4%, ...")
"""
import argparse
import contextlib
import datetime
import errno
import math
import os
import pathlib
import sys

import numpy as np

import autograd_lite as ag
from models import progress


def argument_parser(name, doc):
    """The parser of `python -m demos.<name>`: the docstring's first paragraph describes it,
    the rest follows the options in --help; with the options every demo has (add_options)."""
    description, _, rest = doc.partition("\n\n")
    parser = argparse.ArgumentParser(prog=f"python -m demos.{name}", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=rest or None)
    add_options(parser)
    return parser


def add_options(parser):
    """--quick, --out DIR, --seed N and --threads N on an argparse parser."""
    parser.add_argument("--quick", action="store_true",
                        help="a tiny run of a few seconds, for CI; other options override it")
    parser.add_argument("--out", type=pathlib.Path, default=None, metavar="DIR",
                        help="where the run's files go (default: runs/<demo>-<timestamp>/)")
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="seeds the data, the initial weights, the batches and dropout (0)")
    parser.add_argument("--threads", type=positive_int, default=None, metavar="N",
                        help="threads for numpy's BLAS and the library's kernels (and torch's, "
                             "in to_torch): ag.set_threads(N). Default: OPENBLAS_NUM_THREADS "
                             "where the environment sets it, else 1 (at the demos' sizes a "
                             "second thread does not make a step faster, and on a busy machine "
                             "it makes steps many times slower)")


def use_threads(args):
    """--threads N where given: ag.set_threads(N), so that main(argv) called from Python, where
    numpy is already loaded, runs with N threads too (a program's start, program.start, has
    put N in the environment before numpy loaded)."""
    if args.threads is not None:
        ag.set_threads(args.threads)


def non_negative_int(text):
    """An argparse type: a whole number of at least 0 (numpy's generators take no other seed)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


non_negative_int.__name__ = "int"  # argparse names the type in "invalid int value: 'x'"


def positive_int(text):
    """An argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


positive_int.__name__ = "int"


def add_device_option(parser):
    """--device cpu|cuda: where the model and its batches live (cuda: CuPy's arrays on an
    NVIDIA GPU, the `gpu` extra)."""
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu (numpy) or cuda (CuPy on an NVIDIA GPU: pip install "
                             "autograd-lite[gpu] and the CuPy package for your CUDA) (cpu)")


def check_device(program, args):
    """With --device cuda, CuPy and a GPU must answer before anything is read or written:
    otherwise one line, "<program>: --device cuda: <why>", and exit status 1."""
    if args.device == "cpu":
        return
    try:
        ag.to_device(np.zeros(1, np.float32), args.device)  # imports CuPy, reaches the GPU
    except (ImportError, RuntimeError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        sys.exit(f"{program}: --device {args.device}: {first_line}")


class OnDevice:
    """An iterable of batches (with a length: fit's progress bar reads it) whose every batch
    is moved to `device` as it is drawn."""

    def __init__(self, batches, device):
        self.batches, self.device = batches, device

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        return (ag.to_device(batch, self.device) for batch in self.batches)


def batches_on(device, batches):
    """fit's batches (a function epoch -> batches, or an iterable to run again) with every
    batch on `device`; as they are on the cpu."""
    if device == "cpu":
        return batches
    if callable(batches):
        return lambda epoch: _moved(batches(epoch), device)
    return _moved(batches, device)


def _moved(batches, device):
    if hasattr(batches, "__len__"):
        return OnDevice(batches, device)
    return (ag.to_device(batch, device) for batch in batches)


def flag(name):
    """The command-line flag of a setting: batch_size -> --batch-size."""
    return "--" + name.replace("_", "-")


def check_options(parser, args, counts=(), rates=(), fractions=(), non_negative=(),
                  at_most=None):
    """Refuse by its flag (parser.error) an option of args that is given and out of range:
    a count below 1, a rate that is not a finite number above 0, a fraction outside [0, 1),
    a non_negative one below 0, one above its bound in `at_most` ({name: (bound, what the
    bound keeps within)}). Options that are None (not given, not set) are left alone."""
    for name, (bound, reason) in (at_most or {}).items():
        value = getattr(args, name)
        if value is not None and value > bound:
            parser.error(f"{flag(name)} must be at most {bound:,} ({reason}), got {value:,}")
    for names, least in ((counts, 1), (non_negative, 0)):
        for name in names:
            value = getattr(args, name)
            if value is not None and value < least:
                parser.error(f"{flag(name)} must be at least {least}, got {value}")
    for name in rates:
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            parser.error(f"{flag(name)} must be a finite number above 0, got {value}")
    for name in fractions:
        value = getattr(args, name)
        if value is not None and not 0 <= value < 1:
            parser.error(f"{flag(name)} must lie in [0, 1), got {value}")


def refuse_unused(parser, args, names, reason):
    """Refuse by its flag (parser.error) each option in `names` that was given (its value is
    not the parser's default), saying `reason`: why the mode chosen does not use it."""
    for name in names:
        if getattr(args, name) != parser.get_default(name):
            parser.error(f"{flag(name)} {reason}")


def check_decoding_options(parser, args, sampling, length, temperature):
    """--beam N refuses the `sampling` options; sampling refuses --no-repeat-ngram. Fills in
    --length and --temperature where they were not given."""
    if args.beam is not None:
        refuse_unused(parser, args, sampling,
                      "is for sampling: --beam N searches, drawing nothing")
    else:
        refuse_unused(parser, args, ("no_repeat_ngram",), "is for --beam N")
    args.length = length if args.length is None else args.length
    args.temperature = temperature if args.temperature is None else args.temperature


def check_output_folder(parser, path, option="--out"):
    """Refuse (parser.error) a folder that cannot be made: the folders of `path` that are
    missing are made, to see that they can be, and removed again."""
    path = pathlib.Path(path)
    made = []
    try:
        for folder in reversed([path, *path.parents]):
            if folder.exists() and not folder.is_dir():
                parser.error(f"{option} {path}: {folder} is a file, not a folder")
            if not folder.is_dir():
                folder.mkdir()
                made.append(folder)
    except OSError as error:
        parser.error(f"{option} {path}: cannot make the folder {error.filename or folder} "
                     f"({error.strerror})")
    finally:
        for folder in reversed(made):
            folder.rmdir()


def check_picture_path(parser, option, path, suffixes):
    """Refuse (parser.error) a picture's path whose suffix is not one of `suffixes` (what is
    written must be what the name says) or whose folder is not there."""
    if path is None:
        return
    path = pathlib.Path(path)
    if path.suffix.lower() not in suffixes:
        parser.error(f"{option} {path}: the picture is written as {' or '.join(suffixes)}, "
                     f"so its name must end in one of them")
    if not path.parent.is_dir():
        parser.error(f"{option} {path}: there is no folder {path.parent}")


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(error):
    """Whether `error` is an OSError of a full disk (no space left, or the quota used up)."""
    return isinstance(error, OSError) and error.errno in DISK_FULL


# The translate and generate demos' rate: ag.optim.warmup_schedule's linear warm-up to the
# peak --lr, then a cosine decay to a twentieth of it at the last step.
FINAL_LR = 0.05


def transformer_bytes(batch, length, d_model, d_ff, heads, layers, vocab, max_len, logits):
    """A generous estimate of the memory of one training step of a transformer, float32:
    the parameters (with the position table, max_len · d_model) four times (the values, the
    gradient, Adam's two moments), and the activations the backward pass keeps, per layer
    about 16 · T · d_model + 3 · T · d_ff + 4 · heads · T² numbers a sequence (projections,
    norms, the feed-forward, the attention scores and weights), plus 3 · `logits` (the
    logits of a sequence: T · vocab for a language model, the classes for a classifier).
    -> bytes"""
    params = vocab * d_model + max_len * d_model + layers * (4 * d_model ** 2 + 2 * d_model * d_ff)
    per_sequence = (layers * (16 * length * d_model + 3 * length * d_ff + 4 * heads * length ** 2)
                    + 3 * logits)
    return 4 * (4 * params + batch * per_sequence)


def memory_of_this_machine():
    """The machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(parser, estimate, options):
    """Refuse settings whose estimated memory (bytes) exceeds the machine's, naming the
    options that set it (a text such as "--max-len 1000000000 --batch-size 32") and the
    estimate, before anything is allocated."""
    available = memory_of_this_machine()
    if available is not None and estimate > available:
        need = estimate / 2 ** 30
        parser.error(f"{options} need about {need:,.0f} GiB for one training step (an "
                     f"estimate), more than this machine's {available / 2 ** 30:,.1f} GiB")


def say_if_compiling():
    """From now on, a line on stderr when the compiled kernels (the `fast` extra) compile,
    which they do once, on the first run after installing: it takes a few seconds longer.
    print_result then says how many compiled."""
    ag.kernels.notify_compiling(progress.notice)


def output_path(args, name):
    """args.out, or runs/<name>-<YYYYmmdd-HHMMSS>/ when not given; not created."""
    if args.out is not None:
        return args.out
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return pathlib.Path("runs") / f"{name}-{stamp}"


def output_directory(args, name):
    """output_path(args, name), created if missing."""
    out = output_path(args, name)
    out.mkdir(parents=True, exist_ok=True)
    return out


@contextlib.contextmanager
def exit_on_bad_input(program):
    """Around reading and checking a user's input: a ValueError (a malformed file, not UTF-8,
    a bad setting) or an OSError (a missing file) ends the program with one line on stderr,
    "<program>: <the error>", and exit status 1. Other errors are bugs and keep their
    traceback."""
    try:
        yield
    except (ValueError, OSError) as error:
        sys.exit(one_line_error(program, error))


def one_line_error(program, error):
    """The message of `error` prefixed by the program's name (once); an OSError as
    "<file>: <what went wrong>" rather than "[Errno 2] ..."."""
    message = str(error)
    if isinstance(error, OSError) and error.strerror:
        message = f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    return message if message.startswith(f"{program}:") else f"{program}: {message}"


def print_result(line):
    """The run's last line: its measured result (after, on stderr, how many kernels numba
    compiled, when it compiled some)."""
    compiled = ag.kernels.compiled_summary()
    if compiled:
        progress.notice(compiled)
    print(line, flush=True)
