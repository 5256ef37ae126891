"""The ops' kernels: the plain-array bodies of their fast rules, behind one interface, in two
implementations: numpy (numpy_kernels.py, always there) and compiled with numba
(numba_kernels.py and the files it imports, where numba imports: the `fast` extra). The
rules call `kernels.<name>(...)`; which implementation answers is chosen once, on the first
call, and `backend()` says which:

    AUTOGRAD_LITE_KERNELS unset     numba where it imports, else numpy
    AUTOGRAD_LITE_KERNELS=numpy     numpy
    AUTOGRAD_LITE_KERNELS=numba     numba, or an error saying it does not import

`select(name)` switches in-process (tests and paired benchmarks run both). On a device's
arrays (CuPy's) the rules take `of("cupy")`, cupy_kernels.py, which covers softmax,
log-softmax, layer norm, cross-entropy and the optimizers' updates; `of("host")` is this
package, as `select` set it (the device registry, core/devices.py, names the one for an op's
operands: `kernels_of`, which `backend(*arrays)` asks too). A kernel sees plain arrays only
(a fast rule runs on plain arrays, and the plain function under higher order:
core/rules.py), so nothing here knows about tracing; of the engine, this package imports the
device registry alone. The models' fast rules (models/fast) call these kernels too, to write
the Transformer's sublayers over BLAS. numba is imported lazily, on the first kernel call,
never by `import autograd_lite`.

Threads (ag.set_threads, autograd_lite/threads.py). numba's own thread pool is never used:
its OpenMP workers spin after each kernel and starve OpenBLAS's threads, and its passive
waiting or workqueue layer pays a wake-up on every kernel. The compiled kernels are serial
loops compiled `nogil` (numba_compile.py); from parallel.SPLIT_FROM_THREADS threads on, and
on arrays large enough, parallel.split_rows runs the row kernels (layer norm, the biases,
relu, cross-entropy, the optimizers' updates) in shares of rows on a pool of Python threads
that sleep between calls, each share the serial kernel on its rows: the same bits at any
thread count. Below that (2 threads: OpenBLAS with both threads for the products, every
kernel in the calling thread, the arrangement measured best on 2 cores) nothing is handed
to the pool. The numpy kernels are not split. Nothing here sets a thread count or a
threading layer (importing the library changes nothing outside it). The measurements, whole
steps against PyTorch with both backends, and what the compiled kernels cost at start-up (a
first run compiles each kernel once, `notify_compiling` says so; later runs load them from
numba's cache): tests/benchmarks/README.md.
"""
import os
import sys

from ..core.devices import kernels_of
from . import numpy_kernels, parallel

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


def backend(*arrays):
    """"numba" or "numpy": the kernels the fused ops use on numpy's arrays (choosing them on
    the first call); a device's backend ("cupy": cupy_kernels.py) where `arrays` are all
    that device's arrays, as the device registry (core/devices.py) says."""
    device_kernels = kernels_of(arrays)
    if device_kernels not in ("host", None):
        return device_kernels
    return _chosen or select()


def of(name):
    """The kernels of backend `name`: "host" (numpy's arrays: this package, the backend
    `select` chose) or a device's ("cupy": cupy_kernels.py, which imports CuPy only when a
    kernel first runs). core/devices.kernels_of names the one for an op's operands."""
    if name == "host":
        if _chosen is None:
            select()
        return _MODULE
    if name == "cupy":
        from . import cupy_kernels
        return cupy_kernels
    raise ValueError(f"kernels.of: {name!r}, expected 'host' or 'cupy'")


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


_MODULE = sys.modules[__name__]


def __getattr__(name):
    if name in NAMES:  # the first kernel call: choose, then the attribute exists
        select()
        return globals()[name]
    raise AttributeError(f"module 'autograd_lite.kernels' has no attribute '{name}'")

