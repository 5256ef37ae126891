"""The plain-array bodies of the fused ops, behind one interface, in two implementations:
numpy (numpy_kernels.py, always there) and compiled with numba (numba_kernels.py and the
files it imports, where numba imports: the `fast` extra). The ops call `kernels.<name>(...)`;
which implementation answers is chosen once, on the first call, and `backend()` says which:

    AUTOGRAD_LITE_KERNELS unset     numba where it imports, else numpy
    AUTOGRAD_LITE_KERNELS=numpy     numpy
    AUTOGRAD_LITE_KERNELS=numba     numba, or an error saying it does not import

`select(name)` switches in-process (tests and paired benchmarks run both). A kernel sees
plain arrays only (the seam in core.tracer.primitive runs an op's reference under higher
order), so nothing here knows about tracing; this package imports nothing from the engine.
Above the per-backend kernels, sublayers.py writes the bodies of the models' two fused
sublayer ops (multi-head attention, the relu feed-forward network) once, over BLAS and
whichever kernels are in use.
numba is imported lazily, on the first kernel call, never by `import autograd_lite`.

Threads: the compiled kernels are serial. Kernels and OpenBLAS share the cores, and the
arrangement that wins on 2 cores is OpenBLAS with both threads for the products and every
kernel in the calling thread (measured on an AMD EPYC, tests/benchmarks/profile_step.py
--only lm, 5 steps, load 0.5, ms a step: layer norm x5, softmax x2, linear x13, the whole
step; PyTorch's step 17):

    numpy kernels                                      2.6   3.3   8.4   18.6
    numba, prange, its default OpenMP threads          39.8  25.0  62.3  143.9
    numba, prange, OMP_WAIT_POLICY=PASSIVE             1.5   3.4   8.1   29.3
    numba, prange, NUMBA_THREADING_LAYER=workqueue     2.2   3.6   6.5   30.0
    numba, prange, NUMBA_NUM_THREADS=1                 0.9   2.2   6.2   18.3

numba's OpenMP workers spin after each kernel and starve OpenBLAS's threads (the products,
which run no numba code, slowed down 7 times); passive waiting and the workqueue layer pay a
wake-up on every kernel, which at these row counts costs more than the second core saves.
So the kernels are compiled without `parallel` (numba_compile.py): no thread pool is ever
started, nothing here sets a thread count or a threading layer (importing the library
changes nothing outside it), and the first compile is cheaper. Whole steps against
PyTorch, both backends: README.md and tests/benchmarks/README.md.

Start-up (tests/benchmarks/bench_startup.py: a fresh process imports the library and runs
one LM step and one forward; medians): numpy's kernels 0.41 s; numba's with an empty cache
+7 - 8 s (every kernel compiles, once; the demos say so on stderr, `notify_compiling`); with
numba's cache +0.7 - 0.9 s on the extras' install and +0.8 - 1.3 s where scipy is installed.
All but about 0.1 s of the warm cost is numba's own floor, which the script measures too (a
one-line cached numba function's first call: +0.8 - 0.9 s, and +1.0 - 1.2 s with scipy,
which numba imports to look for BLAS); each of our cached kernels then loads in 4 - 6 ms.
"""
import os

from . import numpy_kernels

NAMES = ("softmax_forward", "softmax_backward", "log_softmax_forward", "log_softmax_backward",
         "layer_norm_forward", "layer_norm_backward", "layer_norm_normalized",
         "layer_norm_eps_cotangent", "residual_layer_norm_forward", "cross_entropy_forward",
         "cross_entropy_backward", "cross_entropy_probabilities", "gather_rows", "segment_sum",
         "adam_update", "sgd_update", "dropout_mask", "relu_forward", "relu_backward",
         "gelu_forward", "gelu_backward", "add_bias", "bias_relu_forward", "bias_relu_backward")
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
                         "(or unset: numba where it imports, else numpy)")
    return wanted


def select(name=None):
    """Use the kernels of `name` ("numba" or "numpy"; None: as AUTOGRAD_LITE_KERNELS says,
    and when it is unset numba's where numba imports, else numpy's) from now on. -> the
    backend in use. A kernel numba does not implement is numpy's."""
    global _chosen
    name = name or _wanted()
    if name and name not in BACKENDS:
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


def notify_compiling(notice):
    """Call notice(line) once, when this process first compiles one of the numba kernels
    (the first run after installing, or after numba's cache was cleared; a kernel loaded
    from the cache compiles nothing): a line saying so, for a program to show. Nothing
    happens with numpy's kernels."""
    if backend() != "numba":
        return
    from .numba_compile import watch_compiles
    watch_compiles(lambda: notice("compiling numba's kernels on their first call, once (about "
                                  "half a second each; numba caches them on disk) ..."))


def compiled_summary():
    """A line saying how many kernels this process compiled and in how many seconds, or None
    when it compiled none (or notify_compiling was not called first)."""
    if backend() != "numba":
        return None
    from .numba_compile import watch_compiles
    seconds = watch_compiles().seconds
    if not seconds:
        return None
    return (f"numba compiled {len(seconds)} of the kernels in {sum(seconds):.1f} s; later runs "
            f"load them from its cache")


def __getattr__(name):
    if name in NAMES:  # the first kernel call: choose, then the attribute exists
        select()
        return globals()[name]
    raise AttributeError(f"module 'autograd_lite.kernels' has no attribute '{name}'")


from .sublayers import (attention_over_backward, attention_over_forward,  # noqa: E402,F401
                        feed_forward_backward, feed_forward_forward, heads_projection_backward,
                        heads_projection_forward, multihead_attention_backward,
                        multihead_attention_forward)
