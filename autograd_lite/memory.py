"""Keep freed memory in the process for reuse (glibc only), when the program asks.

A backward pass allocates and frees many arrays of a few hundred kB to a few MB.
glibc serves each such block with mmap and gives it back with munmap, so every
step pays thousands of page faults to get fresh zeroed pages. `keep_freed_memory()`
raises glibc's mmap and trim thresholds, so that freed blocks stay in the heap and
are reused; the process then keeps its peak memory instead of returning it to the
system.

Importing autograd_lite changes nothing: the allocator belongs to the whole process
(torch, a notebook kernel, a server) and the setting cannot be undone, so a training
loop, a benchmark or a demo makes the call. The same setting without code, from the
environment of a process about to start, is `GLIBC_TUNABLES` below:

    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456
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
    freed memory; True if it did (False elsewhere than Linux with glibc). For the whole
    process, irreversibly."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: no ldconfig lookup
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _LARGEST_HEAP_BLOCK)
                and mallopt(_M_TRIM_THRESHOLD, _KEEP_UP_TO))
