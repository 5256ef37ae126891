"""How a demo starts and ends as a program (`python -m demos.<name>`), the same for every
demo. It starts with the demos' one thread policy (`use_threads`), set before numpy loads
BLAS. A Ctrl-C at any moment, from the first import on, ends it with one line on stderr and
exit status 130 (a shell's status for a program a SIGINT ended); a run that stops itself
prints its one line and exits with its status. Standard library only: it is imported before
numpy.

    if __name__ == "__main__":                 # at the top of the demo, before numpy
        from .support import program
        program.start("translate")
    ...
    if __name__ == "__main__":                 # at the bottom
        program.run("translate", main)
"""
import os
import signal
import sys

CTRL_C_STATUS = 130  # 128 + SIGINT
FAILED_STATUS = 1  # a run that could not go on (it says why)
# The demos' thread count where neither --threads nor the environment gives one: at their sizes
# a second BLAS thread does not make a step faster, and on a busy machine it makes steps many
# times slower (tests/benchmarks/README.md, "The demos' BLAS threads").
DEFAULT_THREADS = 1
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")  # numpy's BLAS; torch's threads


class Ended(SystemExit):
    """The end of a program that has printed its last line on stderr: SystemExit(status),
    whose str is that line (so that a caller of main sees what the user saw)."""

    def __init__(self, line, status):
        super().__init__(status)
        self.line = line

    def __str__(self):
        return self.line


def end(line, status):
    """Print `line` on stderr and end the program with `status` (raises Ended)."""
    print(line, file=sys.stderr, flush=True)
    raise Ended(line, status)


def stopped(program):
    """The end of a Ctrl-C where nothing was being written: "<program>: stopped" (below
    the terminal's ^C), status 130."""
    print(file=sys.stderr)
    end(f"{program}: stopped", CTRL_C_STATUS)


def start(program):
    """What a demo does first as a program, before numpy loads: its threads (use_threads, from
    --threads in sys.argv), then a quiet Ctrl-C while it imports."""
    use_threads(threads_asked(sys.argv[1:]))
    stop_quietly_while_importing(program)


def threads_asked(args):
    """N of `--threads N` or `--threads=N` in a program's arguments (the last one given), or
    None where it is absent or not a whole number >= 1 (argparse then refuses it)."""
    asked = None
    for i, arg in enumerate(args):
        if arg == "--threads" and i + 1 < len(args):
            text = args[i + 1]
        elif arg.startswith("--threads="):
            text = arg.partition("=")[2]
        else:
            continue
        asked = int(text) if text.isdigit() and int(text) >= 1 else None
    return asked


def use_threads(asked=None):
    """The demos' one thread policy, in the environment that numpy's BLAS and torch read once,
    when they load: the library's thread count (ag.thread_count: the BLAS's and the kernels'
    pool's, threads.py) and torch's. `asked` (--threads) sets OPENBLAS_NUM_THREADS and
    OMP_NUM_THREADS; without it each keeps the environment's value, and an unset one takes
    the other's, else DEFAULT_THREADS. -> the thread count the BLAS will start with."""
    if asked is not None:
        for name in THREAD_VARIABLES:
            os.environ[name] = str(asked)
        return asked
    given = [os.environ[name].strip() for name in THREAD_VARIABLES
             if os.environ.get(name, "").strip()]
    count = given[0] if given else str(DEFAULT_THREADS)
    for name in THREAD_VARIABLES:
        if not os.environ.get(name, "").strip():
            os.environ[name] = count
    first = count.split(",")[0].strip()
    return int(first) if first.isdigit() else None


def stop_quietly_while_importing(program):
    """Until `run` calls main, a Ctrl-C ends the program through `stopped`: Python's own
    handler would raise KeyboardInterrupt inside whichever import is running, and print its
    traceback."""
    signal.signal(signal.SIGINT, lambda signum, frame: stopped(program))


def run(program, main):
    """main(), with Python's Ctrl-C back (a KeyboardInterrupt, which the demo's run turns
    into its own line); one that main lets through ends in `stopped`."""
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return main()
    except KeyboardInterrupt:
        stopped(program)
