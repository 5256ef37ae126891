"""How many threads the library uses: one count for the BLAS and for the kernels' pool
(kernels/parallel.py), which never changes a result (the BLAS's larger products may round
differently at another count).

    ag.thread_count()    the count in use: until set_threads, the BLAS's own (threadpoolctl's
                         reading, where installed), else OPENBLAS_NUM_THREADS, then
                         OMP_NUM_THREADS, else the cores; capped at the cores
    ag.set_threads(n)    n threads from now on (above the cores too): the pool's, and the
                         BLAS's through threadpoolctl (without it, only the pool follows n)

Importing sets nothing (no BLAS setting, no environment variable, no thread); a leaf module.
"""
import numbers
import os

_count = None  # set by set_threads, or read on first use


def cores():
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _threadpoolctl():
    """threadpoolctl where it is installed, else None, with the KMP_DUPLICATE_LIB_OK that its
    import sets taken out of os.environ again."""
    unset = "KMP_DUPLICATE_LIB_OK" not in os.environ
    try:
        import threadpoolctl
    except ImportError:
        return None
    finally:
        if unset:
            os.environ.pop("KMP_DUPLICATE_LIB_OK", None)
    return threadpoolctl


def _blas_threads():
    """The loaded BLAS's thread count as threadpoolctl reads it, or None."""
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is None:
        return None
    counts = [pool["num_threads"] for pool in threadpoolctl.threadpool_info()
              if pool["user_api"] == "blas"]
    return max(counts) if counts else None


def _environment_threads():
    """OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS (its first entry: OpenMP allows a list per
    nesting level), else None."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        text = os.environ.get(name, "").strip()
        if not text:
            continue
        first = text.split(",")[0].strip()
        if not first.isdigit() or int(first) < 1:
            raise ValueError(f"{name}={text!r}: expected a whole number of threads >= 1")
        return int(first)
    return None


def thread_count():
    """The threads the BLAS and the kernels' pool use (module docstring)."""
    global _count
    if _count is None:
        found = _blas_threads() or _environment_threads() or cores()
        _count = max(1, min(found, cores()))
    return _count


def set_threads(n):
    """Use n threads from now on, a whole number >= 1 (module docstring)."""
    global _count
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"set_threads: n={n!r}, expected a whole number >= 1")
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is not None:
        threadpoolctl.threadpool_limits(limits=int(n), user_api="blas")  # kept until changed
    _count = int(n)
