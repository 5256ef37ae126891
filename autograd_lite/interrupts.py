"""Ctrl-C held back while some work must finish whole: writing a run's files together, or
numba compiling a kernel (llvmlite calls back into Python through ctypes, and a
KeyboardInterrupt raised inside a ctypes callback is printed as "Exception ignored" and
dropped, so the program would go on as if no Ctrl-C came). A leaf: it imports nothing of
the library, so that any part of it, the kernels included, may use it.

    with deferred_interrupts():
        save_the_files()      # a Ctrl-C here raises KeyboardInterrupt once they are written
"""
import contextlib
import signal
import threading


@contextlib.contextmanager
def deferred_interrupts():
    """Inside, a SIGINT is recorded instead of raising KeyboardInterrupt; on leaving, a
    recorded one raises KeyboardInterrupt there (an error raised inside goes first).
    Only in the main thread and only while Python's own SIGINT handler is installed (a
    program's own handler is left alone); elsewhere, and nested, it changes nothing."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
