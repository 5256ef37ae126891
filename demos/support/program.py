"""How a demo ends as a program (`python -m demos.<name>`), the same for every demo: a Ctrl-C
at any moment, from the first import on, ends it with one line on stderr and exit status
130 (a shell's status for a program a SIGINT ended); a run that stops itself prints its one
line and exits with its status. Standard library only: it is imported before numpy.

    if __name__ == "__main__":                 # at the top of the demo, before numpy
        from .support import program
        program.stop_quietly_while_importing("translate")
    ...
    if __name__ == "__main__":                 # at the bottom
        program.run("translate", main)
"""
import signal
import sys

CTRL_C_STATUS = 130  # 128 + SIGINT
FAILED_STATUS = 1  # a run that could not go on (it says why)


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
