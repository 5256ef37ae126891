"""Ctrl-C held back while some work must finish whole: writing a run's files together, or
numba compiling a kernel (a KeyboardInterrupt raised in llvmlite's ctypes callbacks is
printed and dropped). A leaf: it imports nothing of the library, so the kernels may use it.

    with deferred_interrupts():
        save_the_files()      # a Ctrl-C here raises KeyboardInterrupt once they are written
"""
import contextlib
import signal
import threading


@contextlib.contextmanager
def deferred_interrupts():
    """A SIGINT inside is recorded, and raised as KeyboardInterrupt on leaving (after an
    error raised inside). Only in the main thread under Python's own SIGINT handler;
    elsewhere, and nested, it changes nothing."""
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
