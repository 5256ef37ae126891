"""side_by_side.run: calls in processes of their own, results in order, a worker's error
raised once all have ended, and stoppable batches (fit's Ctrl-C) stopped by run()."""
import multiprocessing
import os
import signal

import numpy as np
import pytest

import autograd_lite as ag
from models import side_by_side, train


def square_in_a_worker(x):
    return x * x, os.getpid()


def fail_on(x, bad):
    if x == bad:
        raise ValueError(f"worker {x} failed")
    return x


def diverge(x):
    raise train.NonFiniteError("the loss is nan", "in no group", epoch=1, step=x, batch=2)


def fit_a_line(out, epochs):
    """fit y = 2x, its batches stoppable: -> the fitted weight."""
    xs = np.linspace(-1, 1, 8)

    def batches(epoch):
        return side_by_side.stoppable([(xs[i:i + 2], 2 * xs[i:i + 2]) for i in range(0, 8, 2)])

    def loss_fn(w, batch, rng):
        x, y = batch
        return ag.mean((w * x - y) ** 2)

    w, _ = train.fit(loss_fn, np.array(0.0), ag.optim.sgd(0.5), batches, epochs,
                     out_dir=out, progress=False)
    return float(w)


def test_the_calls_run_in_other_processes_and_return_in_order():
    results = side_by_side.run(square_in_a_worker, [(3,), (4,), (5,)])
    assert [value for value, _ in results] == [9, 16, 25]
    assert os.getpid() not in {pid for _, pid in results}


def meet_the_others(barrier):
    """Wait at the barrier until every call is there: only calls running at once all pass."""
    return barrier.wait()


def test_the_calls_run_at_once():
    with multiprocessing.get_context("spawn").Manager() as manager:
        barrier = manager.Barrier(3, timeout=60)
        places = side_by_side.run(meet_the_others, [(barrier,)] * 3)
    assert sorted(places) == [0, 1, 2]


def test_a_workers_error_is_raised_here_after_the_others_end():
    with pytest.raises(ValueError, match="worker 1 failed"):
        side_by_side.run(fail_on, [(0, 1), (1, 1), (2, 1)])


def test_fits_errors_cross_whole_from_a_worker():
    with pytest.raises(train.NonFiniteError) as raised:
        side_by_side.run(diverge, [(7,)])
    error = raised.value
    assert (error.what, error.where, error.epoch, error.step, error.batch) == (
        "the loss is nan", "in no group", 1, 7, 2)


def test_outside_a_worker_batches_are_not_wrapped():
    batches = [1, 2]
    assert side_by_side.stoppable(batches) is batches


def test_runs_of_fit_give_what_fit_gives_in_this_process(tmp_path):
    here = fit_a_line(tmp_path / "here", 3)
    there = side_by_side.run(fit_a_line, [(tmp_path / "a", 3), (tmp_path / "b", 3)])
    assert there == [here, here] and here == pytest.approx(2.0, abs=1e-3)


def ctrl_c_to_itself():
    """What a terminal's Ctrl-C does to a worker (it reaches the whole process group)."""
    os.kill(os.getpid(), signal.SIGINT)
    return "ignored"


def test_a_worker_ignores_ctrl_c_from_its_start():
    assert side_by_side.run(ctrl_c_to_itself, [()]) == ["ignored"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # here: as it was
