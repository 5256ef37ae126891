"""Run one function on N local PyTorch processes joined in a gloo process group, the setting
for torch's DistributedDataParallel on CPUs, and watch them so that a worker that dies stops
the others at once instead of leaving them waiting in a collective.

    warning = check_workers(n)                 # ValueError below 1; a warning past the cores
    port = choose_port(0)                      # a free port on 127.0.0.1 (or check a given one)
    launch(worker, n, job, port=port)          # worker(rank, world, job) in each process
    rows = shard(batch, rank, world)           # DistributedSampler's split: rows rank::world

Everything stays on the loopback interface: the rendezvous is tcp://127.0.0.1:<port> and
gloo's own connections use the loopback device (GLOO_SOCKET_IFNAME, set in the workers
only). Workers are started with the "spawn" method (a fresh interpreter, which imports
`worker`'s module: it must be a module-level function) and run one torch thread each: the
processes are the parallelism. torch is imported here only, lazily for the parent's checks.
"""
import datetime
import multiprocessing.connection
import os
import pathlib
import pickle
import signal
import socket
import sys
import tempfile
import time
import traceback

LOOPBACK = "127.0.0.1"
GRACE_SECONDS = 5.0  # how long the others get to stop on SIGTERM before SIGKILL


class WorkerFailed(RuntimeError):
    """A worker exited with an error or was killed; the others have been stopped."""


def cores():
    """The cores this process may run on (its affinity), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_workers(n, available=None):
    """A ValueError for fewer than one worker; a warning (a string, else None) when there are
    more workers than cores: allowed, but they take turns on the cores."""
    available = cores() if available is None else available
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"--workers must be at least 1, got {n}")
    if n > available:
        return (f"warning: --workers {n} starts {n} processes on {available} cores; they take "
                f"turns on the cores, so each step is slower than with {available}")
    return None


def choose_port(port=0):
    """A TCP port on 127.0.0.1 for the rendezvous: port 0 -> one the system says is free;
    another -> that port, after checking that nothing listens on it (ValueError if taken)."""
    if not 0 <= port < 65536:
        raise ValueError(f"--port must lie in 0..65535 (0: choose a free one), got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError as error:
            raise ValueError(f"--port {port} on {LOOPBACK} is in use ({error.strerror}): pass "
                             f"another, or --port 0 to choose a free one") from None
        return probe.getsockname()[1]


def loopback_interface():
    """The name of the loopback network interface ('lo' on Linux, 'lo0' on macOS)."""
    names = [name for _, name in socket.if_nameindex()]
    for name in ("lo", "lo0"):
        if name in names:
            return name
    raise RuntimeError(f"no loopback interface among {names}")


def shard(batch, rank, world):
    """Rows rank, rank + world, ... of each array of `batch` (a tuple of (B, ...) arrays),
    the split of torch's DistributedSampler without shuffling: disjoint, and together all
    B rows. The batches themselves come shuffled by their seed."""
    return tuple(a[rank::world] for a in batch)


def launch(worker, n, job, port=0, timeout=60.0):
    """worker(rank, n, job) in n spawned processes joined in a gloo group on 127.0.0.1:port
    (port 0: a free one). Returns when all have finished; when one fails (an exception, an
    exit status, a signal) the others are stopped at once and WorkerFailed says which and how.
    `timeout` (s) bounds each collective, so a worker left waiting for a peer gives up."""
    import torch.multiprocessing as mp
    port = choose_port(port)
    with tempfile.TemporaryDirectory(prefix="workers-") as folder:
        folder = pathlib.Path(folder)
        # The job goes by file: a start() that pipes a large job to a child which dies before
        # reading it (an import error, say) would wait forever.
        with open(folder / "job.pickle", "wb") as fh:
            pickle.dump(job, fh)
        context = mp.get_context("spawn")
        processes = [context.Process(target=_run, args=(worker, rank, n, port, timeout, folder),
                                     name=f"worker-{rank}") for rank in range(n)]
        start = time.perf_counter()
        try:
            for process in processes:
                process.start()
            _watch(processes, folder, start)
        finally:
            _stop(processes)


def _run(worker, rank, world, port, timeout, folder):
    """A worker process: join the group, run worker(rank, world, the job in folder), leave the
    group. An exception is printed, its last line kept in folder/error-<rank>, and the process
    exits with status 1."""
    import torch
    import torch.distributed as dist
    os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()
    torch.set_num_threads(1)
    try:
        with open(folder / "job.pickle", "rb") as fh:
            job = pickle.load(fh)  # written by launch, in its own temporary folder
        dist.init_process_group("gloo", init_method=f"tcp://{LOOPBACK}:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=timeout))
        try:
            worker(rank, world, job)
        finally:
            dist.destroy_process_group()
    except BaseException as error:
        traceback.print_exc()
        last = traceback.format_exception_only(type(error), error)[-1].strip()
        (folder / f"error-{rank}").write_text(last)
        sys.stderr.flush()
        os._exit(1)  # status 1 for certain, without the interpreter's (and torch's) teardown


def _watch(processes, folder, start):
    """Wait until every process has exited with status 0, or raise WorkerFailed as soon as
    one has not. Should several have failed by then, those that died without an exception
    (a signal, os._exit) come first: their peers' errors ("Connection closed by peer") are
    more likely the consequence than the cause."""
    while True:
        for process in processes:
            process.join(0)
        # One look at each exit status per round: a worker that ends between two looks would
        # otherwise be neither failed (first look) nor waited on (second), and pass as done.
        codes = [process.exitcode for process in processes]
        failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:  # checked before the first wait too: a worker may have failed already
            failed.sort(key=lambda rank: (folder / f"error-{rank}").exists())
            what = "; ".join(f"worker {rank} of {len(processes)} "
                             f"{_how_it_ended(processes[rank], folder / f'error-{rank}')}"
                             for rank in failed)
            raise WorkerFailed(f"{what} after {time.perf_counter() - start:.1f} s; the others "
                               f"were stopped")
        running = [p.sentinel for p, code in zip(processes, codes) if code is None]
        if not running:
            return
        multiprocessing.connection.wait(running)


def _how_it_ended(process, error_file):
    """'failed: <the exception's last line>', 'was killed by SIGKILL' or 'exited with status 3'."""
    if error_file.exists():
        return f"failed: {error_file.read_text()}"
    if process.exitcode < 0:
        return f"was killed by {signal.Signals(-process.exitcode).name}"
    return f"exited with status {process.exitcode}"


def _stop(processes):
    """SIGTERM to those still running, SIGKILL to those still running GRACE_SECONDS later."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + GRACE_SECONDS
    for process in processes:
        if process.pid is not None:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
