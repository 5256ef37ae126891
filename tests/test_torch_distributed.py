"""models.training.torch_distributed: the checks of --workers and --port, the shards against
torch's DistributedSampler, and processes that fail or are killed (the others stopped at once,
the failure named). Processes that finish: tests/test_demo_to_torch_ddp.py."""
import multiprocessing
import os
import socket
import time

import numpy as np
import pytest

from models.training import torch_distributed
from helpers import workers


def test_fewer_than_one_worker_is_refused_and_more_than_the_cores_warned():
    for n in (0, -2):
        with pytest.raises(ValueError, match=rf"^--workers must be at least 1, got {n}$"):
            torch_distributed.check_workers(n, available=2)
    assert torch_distributed.check_workers(2, available=2) is None
    warning = torch_distributed.check_workers(3, available=2)
    assert warning.startswith("warning: --workers 3 starts 3 processes on 2 cores")


def test_port_zero_finds_a_free_port_and_a_taken_one_is_named():
    port = torch_distributed.choose_port(0)
    assert 0 < port < 65536
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))  # free: choose_port let it go
        listener.listen()
        with pytest.raises(ValueError, match=rf"^--port {port} on 127\.0\.0\.1 is in use "
                                             r"\(.+\): pass another, or --port 0"):
            torch_distributed.choose_port(port)
    with pytest.raises(ValueError, match=r"--port must lie in 0\.\.65535 .* got 70000"):
        torch_distributed.choose_port(70000)


@pytest.mark.parametrize("world", [2, 3])
def test_shards_are_torch_distributed_samplers_split(torch, world):
    batch = (np.arange(12).reshape(6, 2), np.arange(6) * 10)
    shards = [torch_distributed.shard(batch, rank, world) for rank in range(world)]
    for rank, (x, y) in enumerate(shards):
        sampler = torch.utils.data.DistributedSampler(range(6), world, rank, shuffle=False)
        np.testing.assert_array_equal(x, batch[0][list(sampler)])
        np.testing.assert_array_equal(y, batch[1][list(sampler)])
    assert sorted(np.concatenate([y for _, y in shards])) == list(batch[1])


def test_a_killed_worker_stops_the_others_at_once(torch, tmp_path):
    """Rank 1 dies by SIGKILL after 2 all-reduces, while rank 0 waits in the third: the
    parent stops rank 0 within seconds, long before the collectives' timeout of 120 s."""
    job = {"steps": 1000, "kill_rank": 1, "kill_after": 2, "folder": tmp_path}
    with pytest.raises(torch_distributed.WorkerFailed,
                       match=r"^worker 1 of 2 was killed by SIGKILL(; worker 0 of 2 failed: "
                             r".+)? after [\d.]+ s; the others were stopped$"):
        torch_distributed.launch(workers.all_reduce_steps, 2, job, timeout=120)
    after_the_kill = time.time() - float((tmp_path / "killed").read_text())
    assert after_the_kill < torch_distributed.GRACE_SECONDS + 5
    assert not (tmp_path / "total").exists()


def test_a_worker_that_raises_is_named_with_its_error(torch, capfd):
    with pytest.raises(torch_distributed.WorkerFailed,
                       match=r"^worker 0 of 1 failed: ValueError: no data for rank 0 after "):
        torch_distributed.launch(workers.raise_value_error, 1, {"message": "no data for rank 0"})
    assert "Traceback" in capfd.readouterr().err  # the worker's own, for the details


class EndsWhileLookedAt:
    """A process that is running at the first look at its exit status and has failed with
    status 1 at every later one; its sentinel is a pipe that is always ready."""

    def __init__(self):
        self.looks = 0
        self.sentinel, writer = os.pipe()
        os.write(writer, b"x")
        os.close(writer)

    def join(self, timeout=None):
        pass

    @property
    def exitcode(self):
        self.looks += 1
        return None if self.looks == 1 else 1


def test_a_worker_that_ends_between_two_looks_is_reported(tmp_path):
    """The watch judges and waits on one look at each status: a worker that fails just after
    it was seen running is reported in the next round, never taken for one that finished."""
    process = EndsWhileLookedAt()
    try:
        with pytest.raises(torch_distributed.WorkerFailed,
                           match=r"^worker 0 of 1 exited with status 1 after "):
            torch_distributed._watch([process], tmp_path, time.perf_counter())
    finally:
        os.close(process.sentinel)


def test_a_worker_that_failed_before_the_watch_began_is_still_reported(tmp_path):
    """A worker can fail before launch starts watching (a fast error on a loaded machine):
    the watch looks at the exit statuses before it first waits, instead of returning."""
    process = multiprocessing.get_context("spawn").Process(target=os._exit, args=(3,))
    process.start()
    process.join()
    with pytest.raises(torch_distributed.WorkerFailed,
                       match=r"^worker 0 of 1 exited with status 3 after "):
        torch_distributed._watch([process], tmp_path, time.perf_counter())
