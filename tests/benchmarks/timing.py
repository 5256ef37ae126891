"""What the benchmarks here share: threads fixed before numpy loads, the machine described,
two steps timed in alternating blocks, peak RSS, and results handed to run.py as JSON.

Threads. OpenBLAS reads OPENBLAS_NUM_THREADS once, when numpy loads it, so a script calls
`pin_threads(threads_from_argv())` before it imports numpy, and `torch_threads(torch, n)`
after it imports torch: both libraries get the same count.

Timing (`alternating_blocks`). Steps of the two sides strictly alternated are biased on a
small machine: OpenBLAS's and torch's worker threads keep spinning for ~0.1 s after a call,
and that spin slows whichever side runs next. So each side runs a block of k steps (k chosen
so that a block lasts about `block_seconds`), with a pause between blocks that lets the
spinning threads go to sleep; the order of the two blocks alternates from round to round; the
ratio is taken per round (the load of a shared machine changes from minute to minute, and
affects both blocks of a round alike) and its median over the rounds is reported, with the
quartiles. Standard library only at import: numpy must not load before `pin_threads`.
"""
import json
import os
import pathlib
import platform
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]  # the repository
RESULT_PREFIX = "RESULT "  # a line of JSON that run.py reads from a script's output
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


# ---- threads, before numpy loads ----------------------------------------------------------

def threads_from_argv(default=2):
    """The value of --threads in sys.argv (the scripts' option), else `default`."""
    args = sys.argv[1:]
    return int(args[args.index("--threads") + 1]) if "--threads" in args else default


def pin_threads(threads):
    """Set the BLAS and OpenMP thread counts in the environment; numpy must not be loaded yet.
    Also puts the repository on sys.path (the scripts run it uninstalled)."""
    if "numpy" in sys.modules:
        raise RuntimeError("pin_threads: numpy is already loaded, so OpenBLAS has fixed its "
                           "thread count; call pin_threads before importing numpy")
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return threads


def torch_threads(torch, threads):
    """torch's intra-op threads; the count must match the BLAS one for a fair comparison."""
    torch.set_num_threads(threads)
    return torch


def add_split_option(parser):
    """--split-from N: the library's kernels and attention core split from N threads on
    (autograd_lite.kernels.parallel.SPLIT_FROM_THREADS; default: the library's setting)."""
    parser.add_argument("--split-from", type=int, default=None, metavar="N",
                        help="split the kernels and the attention core from N threads on "
                             "(default: the library's SPLIT_FROM_THREADS)")


def split_setting(split_from=None):
    """split_from, if given, as the library's SPLIT_FROM_THREADS. -> the setting in force.
    The library's thread count is left to its policy: the BLAS's threads, pinned above, capped
    at the cores (ag.set_threads above the cores would oversubscribe them: OpenBLAS's threads
    spin while they wait)."""
    from autograd_lite.kernels import parallel
    if split_from is not None:
        parallel.SPLIT_FROM_THREADS = split_from
    return parallel.SPLIT_FROM_THREADS


# ---- the machine ------------------------------------------------------------------------

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def blas():
    """numpy's BLAS: {name, version, core, threads}. The core type (the kernel OpenBLAS chose
    for this CPU at run time) comes from threadpoolctl, an optional import; without it,
    numpy.show_config()'s build description, where the core is unknown."""
    import numpy as np
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return {"name": config.get("name", "?"), "version": config.get("version", "?"),
                "core": "unknown (pip install threadpoolctl to see it)",
                "threads": os.environ.get("OPENBLAS_NUM_THREADS", "?")}
    pools = [p for p in threadpool_info() if p["user_api"] == "blas"]
    if not pools:
        return {"name": "none found", "version": "?", "core": "?", "threads": "?"}
    pool = pools[0]
    return {"name": pool["internal_api"], "version": pool.get("version") or "?",
            "core": pool.get("architecture") or "?", "threads": pool["num_threads"]}


def load_average():
    """The 1-minute load average (runnable processes; 2 cores are saturated at 2.0)."""
    return os.getloadavg()[0]


def environment(torch=None):
    """What a figure depends on: CPU, numpy and its BLAS, torch and its threads, the load."""
    import numpy as np
    env = {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
           "numpy": np.__version__, "blas": blas(), "load": load_average()}
    if "autograd_lite" in sys.modules:  # which kernels the fused ops run (numba or numpy)
        ag = sys.modules["autograd_lite"]
        env["kernels"] = ag.kernels.backend()
        env["split_from"] = ag.kernels.parallel.SPLIT_FROM_THREADS
        env["library_threads"] = ag.thread_count()
    if torch is not None:
        env["torch"] = torch.__version__
        env["torch_threads"] = torch.get_num_threads()
    return env


def describe_environment(env):
    b = env["blas"]
    text = (f"CPU: {env['cpu']} ({env['cores']} cores); Python {env['python']}, numpy "
            f"{env['numpy']} with {b['name']} {b['version']} (core {b['core']}, "
            f"{b['threads']} threads)")
    if "kernels" in env:
        text += (f"; autograd_lite kernels: {env['kernels']}, {env['library_threads']} threads, "
                 f"split from {env['split_from']}")
    if "torch" in env:
        text += f"; torch {env['torch']} ({env['torch_threads']} threads)"
    return text + f"; load average {env['load']:.2f}"


# ---- timing ------------------------------------------------------------------------------

def seconds_of(fn, repeats=1):
    """Wall-clock seconds of `repeats` calls of fn()."""
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return time.perf_counter() - start


def quartiles(values):
    """(first quartile, median, third quartile); a single value is all three."""
    if len(values) < 2:
        return (values[0],) * 3
    low, median, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, median, high


class BlockTiming:
    """Per-step seconds of sides a and b, one pair per round, k steps a block."""

    def __init__(self, k, a, b):
        self.k, self.a, self.b = k, a, b

    @property
    def ratios(self):
        return [x / y for x, y in zip(self.a, self.b)]

    def summary(self):
        """Median ms per step of each side; the median and quartiles of the ratios a / b."""
        low, median, high = quartiles(self.ratios)
        return {"ms_a": 1e3 * statistics.median(self.a), "ms_b": 1e3 * statistics.median(self.b),
                "ratio": median, "ratio_q1": low, "ratio_q3": high, "k": self.k,
                "rounds": len(self.a)}


def steps_per_block(a, b, block_seconds, most=200):
    """k such that k steps of the slower side last about block_seconds (at least 1)."""
    slowest = max(seconds_of(a), seconds_of(b))
    return max(1, min(most, round(block_seconds / slowest)))


def alternating_blocks(a, b, rounds, pause=0.3, block_seconds=0.5, warmup=1):
    """Time a() against b(): after `warmup` calls of each, `rounds` rounds of one block of k
    calls per side, a pause of `pause` seconds before each block, the side that goes first
    alternating between rounds. -> BlockTiming (per-call seconds of each side, per round)."""
    for _ in range(warmup):
        a(), b()
    k = steps_per_block(a, b, block_seconds)
    per_call = {a: [], b: []}
    for r in range(rounds):
        for fn in ((a, b) if r % 2 == 0 else (b, a)):
            time.sleep(pause)
            per_call[fn].append(seconds_of(fn, k) / k)
    return BlockTiming(k, per_call[a], per_call[b])


# ---- memory ------------------------------------------------------------------------------

def _status_mib(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024


def rss_mib():
    """The process's resident memory now (Linux)."""
    return _status_mib("VmRSS:")


def peak_rss_mib():
    """The process's peak resident memory since it started or since reset_peak_rss()."""
    return _status_mib("VmHWM:")


def reset_peak_rss():
    """Start the peak RSS (VmHWM) afresh (Linux 4.0+): False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# ---- results for run.py ------------------------------------------------------------------

def emit(result):
    """Print `result` as the line run.py reads (after the script's own readable output)."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def read_result(output):
    """The result a script emitted, from its standard output."""
    lines = [line for line in output.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        raise ValueError("the benchmark printed no result line:\n" + output[-2000:])
    return json.loads(lines[-1][len(RESULT_PREFIX):])
