"""Keep freed memory in the process for reuse (glibc only), when the program asks.

A backward pass allocates and frees many blocks of a few hundred kB to a few MB, which glibc
serves with mmap and gives back with munmap: thousands of page faults a step. Raising glibc's
mmap and trim thresholds keeps freed blocks in the heap for reuse (the process keeps its peak
memory). The allocator is the whole process's and the setting cannot be undone, so importing
changes nothing: a training loop or a demo makes the call, or a process about to start gets
`GLIBC_TUNABLES` below in its environment.
"""
import ctypes
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_LARGEST_HEAP_BLOCK = 32 * 2**20  # glibc's ceiling for M_MMAP_THRESHOLD on 64-bit
_KEEP_UP_TO = 256 * 2**20  # free memory at the top of the heap kept before trimming

GLIBC_TUNABLES = (f"glibc.malloc.mmap_threshold={_LARGEST_HEAP_BLOCK}:"
                  f"glibc.malloc.trim_threshold={_KEEP_UP_TO}")


def keep_freed_memory():
    """Ask glibc to serve blocks up to 32 MiB from the heap and to keep up to 256 MiB of
    freed memory, for the whole process; True if it did (False but on Linux with glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: no ldconfig lookup
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _LARGEST_HEAP_BLOCK)
                and mallopt(_M_TRIM_THRESHOLD, _KEEP_UP_TO))
