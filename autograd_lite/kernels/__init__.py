"""The plain-array bodies of the fused ops, behind one interface, in two implementations:
numpy (numpy_kernels.py, always there) and compiled with numba (numba_kernels.py, where
numba imports: the `fast` extra). The ops call `kernels.<name>(...)`; which implementation
answers is chosen once, on the first call, and `backend()` says which:

    AUTOGRAD_LITE_KERNELS unset     numpy
    AUTOGRAD_LITE_KERNELS=numpy     numpy
    AUTOGRAD_LITE_KERNELS=numba     numba, or an error saying it does not import

numpy is the default while the compiled kernels lose: at 2 threads on an AMD EPYC (load
average 2, tests/benchmarks/bench_models.py --rounds 3) a training step against PyTorch's took
4.16 times as long with them on w2 and 9.87 times on the LM, against 1.24 and 1.33 with numpy's,
and their first compile costs about 10 s a process. The profile says why (profile_step.py
--only lm, 5 steps, load 0.5, ms a step, numpy kernels / numba: layer norm ×5, softmax ×2,
linear ×13, whole step; PyTorch's step 17): numpy 2.6, 3.3, 8.4, 18.6; numba with numba's
default OpenMP threads 39.8, 25.0, 62.3, 143.9 (its workers spin after each kernel and starve
OpenBLAS's threads: the products, which run no numba code, slow down 7 times);
OMP_WAIT_POLICY=PASSIVE 1.5, 3.4, 8.1, 29.3; NUMBA_THREADING_LAYER=workqueue 2.2, 3.6, 6.5,
30.0; NUMBA_NUM_THREADS=1 0.9, 2.2, 6.2, 18.3. So the compiled kernels win op by op only when
they do not share the cores with BLAS. With NUMBA_NUM_THREADS=1 (bench_models.py --threads 2
--rounds 3 --only w1,w2,lm, load 1, our training step in ms, numba / numpy): w1 8.97 / 9.76,
w2 86.2 / 112.9, lm 18.3 / 25.3; the PyTorch twin in the same processes ran 12.6 / 9.9, 101 /
86, 22.5 / 15.4, so the ratios against it (0.61, 0.85, 0.80 against 0.99, 1.22, 1.64) are not
yet to be trusted: measure the twin alone before choosing this arrangement as the default.

`select(name)` switches in-process (tests and paired benchmarks run both). A kernel sees
plain arrays only (the seam in core.tracer.primitive runs an op's reference under higher
order), so nothing here knows about tracing; this package imports nothing from the engine.
numba is imported lazily, on the first kernel call, never by `import autograd_lite`.

Threads. The compiled kernels split rows over numba's threads (as many as cores; numba's
default threading layer, here GNU OpenMP: TBB does not load); OpenBLAS keeps its own. Nothing
here sets a thread count or a threading layer (importing the library changes nothing outside
it). Measured on an AMD EPYC with 2 cores shared with other work (load average 11 to 16),
paired numba / numpy blocks in one process (tests/benchmarks/bench_kernels.py --ops, 5
rounds), layer norm (1024, 512) forward and backward, ms: OpenMP's default (threads spin at
barriers) 82 against numpy's 133; OMP_WAIT_POLICY=PASSIVE 9.0 against 68;
NUMBA_THREADING_LAYER=workqueue 11.2 against 92; NUMBA_NUM_THREADS=1 16 against 143 (5.8
against 113 once the row sums were vectorised). Adam over 4M float32 entries: 9 to 15 against
46 to 74 in every arrangement. On a machine shared this way, spinning threads lose: use one
numba thread or passive waiting. Whole training steps at 2 threads took seconds on both sides
at that load (every barrier, OpenBLAS's too, waits for a descheduled thread), so the
arrangement for a quiet machine (2 threads, and the order of BLAS and kernel calls) is still
to be measured there: tests/benchmarks/README.md says how.
"""
import os

from . import numpy_kernels

NAMES = ("softmax_forward", "softmax_backward", "log_softmax_forward", "log_softmax_backward",
         "layer_norm_forward", "layer_norm_backward", "layer_norm_normalized",
         "layer_norm_eps_cotangent", "cross_entropy_forward", "cross_entropy_backward",
         "cross_entropy_probabilities", "gather_rows", "segment_sum",
         "adam_update", "sgd_update", "dropout_mask", "relu_forward", "relu_backward",
         "gelu_forward", "gelu_backward")
BACKENDS = ("numba", "numpy")
_chosen = None


def _numba_module():
    """numba_kernels, or None when numba does not import."""
    try:
        from . import numba_kernels
    except ImportError:
        return None
    return numba_kernels


def _wanted():
    wanted = os.environ.get("AUTOGRAD_LITE_KERNELS", "").strip().lower()
    if wanted and wanted not in BACKENDS:
        raise ValueError(f"AUTOGRAD_LITE_KERNELS={wanted!r}: expected one of {BACKENDS} "
                         "(or unset: numpy)")
    return wanted


def select(name=None):
    """Use the kernels of `name` ("numba" or "numpy"; None: as AUTOGRAD_LITE_KERNELS says,
    numpy when it is unset) from now on. -> the backend in use. A kernel numba does not
    implement is numpy's."""
    global _chosen
    name = name or _wanted() or "numpy"
    if name not in BACKENDS:
        raise ValueError(f"kernels.select: {name!r}, expected one of {BACKENDS}")
    compiled = None if name == "numpy" else _numba_module()
    if name == "numba" and compiled is None:
        raise ImportError("kernels.select('numba'): numba does not import; install the "
                          "`fast` extra (pip install autograd-lite[fast])")
    for kernel in NAMES:
        globals()[kernel] = getattr(compiled, kernel, None) or getattr(numpy_kernels, kernel)
    _chosen = "numpy" if compiled is None else "numba"
    return _chosen


def backend():
    """"numba" or "numpy": the kernels the fused ops use (choosing them on the first call)."""
    return _chosen or select()


def compiling_notice():
    """A line to print before the first step when the compiled kernels will compile in it (the
    first run after installing, or after the cache was cleared), else None."""
    if backend() != "numba":
        return None
    from .numba_compile import KERNELS, uncached
    missing = uncached()
    if not missing:
        return None
    return (f"compiling {missing} of the {len(KERNELS)} numba kernels during the first steps "
            "(a few seconds, once: numba caches them on disk)")


def __getattr__(name):
    if name in NAMES:  # the first kernel call: choose, then the attribute exists
        select()
        return globals()[name]
    raise AttributeError(f"module 'autograd_lite.kernels' has no attribute '{name}'")
