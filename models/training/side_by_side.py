"""Several training runs at once, each in its own process: on a machine of N cores, N small
models train in about the time of one (generate --ensemble trains its models this way).

    results = side_by_side.run(train_one, [(args_0, ...), (args_1, ...)])  # in that order

    def train_one(args, ...):                         # in a worker process
        batches = lambda epoch: side_by_side.stoppable(make_batches(epoch))
        return train.fit(loss_fn, params, optimizer, batches, ...)

Ctrl-C counts in this process alone: the workers ignore SIGINT from their first instruction
(a terminal sends it to them too). run() then sets a flag the workers share, and
`stoppable` batches raise KeyboardInterrupt at their next batch, so that fit saves each
run's checkpoint at its last step, as Ctrl-C does in one process. run()
waits for every worker to end before it raises: the KeyboardInterrupt, or the first error a
worker raised (the others were then stopped the same way). Arguments, results and errors
cross between the processes by pickle; the workers are started afresh ("spawn"), so they
read the environment (OPENBLAS_NUM_THREADS, say) as it is when run() is called.
"""
import concurrent.futures
import contextlib
import multiprocessing
import signal
import threading

from autograd_lite.interrupts import deferred_interrupts

_stop = None  # in a worker of run(): the flag run() sets to stop every worker


def run(function, calls):
    """[function(*arguments) for arguments in calls], computed in as many worker processes as
    there are calls, so that none waits for another (a worker whose call has ended may take
    one that has not started); see the module's docstring for Ctrl-C and errors."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    with _ctrl_c_ignored():  # from their first instruction on, the workers ignore it too
        pool = concurrent.futures.ProcessPoolExecutor(len(calls), mp_context=context,
                                                      initializer=_start_worker,
                                                      initargs=(stop,))
        futures = [pool.submit(function, *arguments) for arguments in calls]  # starts them
    with pool:
        try:
            return [future.result() for future in futures]
        except BaseException as error:
            stop.set()
            with deferred_interrupts():  # a second Ctrl-C must not leave a run half saved
                concurrent.futures.wait(futures)
            raise _first_cause(futures, error)


@contextlib.contextmanager
def _ctrl_c_ignored():
    """SIGINT ignored inside (in the main thread; elsewhere nothing changes): a process
    started meanwhile inherits that, while a handler would be reset in it. A Ctrl-C in this
    instant is lost, not raised."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _start_worker(stop):
    global _stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # run() tells the worker, through `stop`
    _stop = stop


def _first_cause(futures, error):
    """The error to raise for the whole: a worker's own (not a KeyboardInterrupt, which
    run() caused by stopping it), else `error`."""
    for future in futures:
        cause = None if future.cancelled() else future.exception()
        if cause is not None and not isinstance(cause, KeyboardInterrupt):
            return cause
    return error


def stoppable(batches):
    """`batches`, which in a worker of run() raise KeyboardInterrupt before their next batch
    once run() has stopped the workers; elsewhere `batches` themselves."""
    return batches if _stop is None else _Stoppable(batches, _stop)


class _Stoppable:
    def __init__(self, batches, stop):
        self.batches, self.stop = batches, stop

    def __len__(self):  # fit's progress bar shows the epoch's length
        return len(self.batches)

    def __iter__(self):
        for batch in self.batches:
            if self.stop.is_set():
                raise KeyboardInterrupt
            yield batch
