"""Workers for models.training.torch_distributed.launch in the tests: module-level functions,
so that a spawned process can import them. Each takes (rank, world, job) with job a dict.

    all_reduce_steps(rank, world, job)   job["steps"] all-reduces of a tensor; the rank
                                         job["kill_rank"] kills itself with SIGKILL after
                                         job["kill_after"] of them, first writing the time
                                         into job["folder"]/killed
    raise_value_error(rank, world, job)  raises ValueError(job["message"])
"""
import os
import pathlib
import signal
import time


def all_reduce_steps(rank, world, job):
    import torch
    import torch.distributed as dist
    total = torch.zeros(1)
    for step in range(job["steps"]):
        if rank == job.get("kill_rank") and step == job["kill_after"]:
            pathlib.Path(job["folder"], "killed").write_text(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        one = torch.ones(1)
        dist.all_reduce(one)  # the others wait here for the killed one
        total += one
    if rank == 0:
        pathlib.Path(job["folder"], "total").write_text(repr(float(total)))


def raise_value_error(rank, world, job):
    raise ValueError(job["message"])
