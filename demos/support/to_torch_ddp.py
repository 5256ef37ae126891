"""The distributed part of demos.to_torch (--workers N): N PyTorch processes go on training
the moved model with DistributedDataParallel over gloo on 127.0.0.1, each on its shard of
every batch, and rank 0 hands the weights back.

    job = Job(params, state, schedule, seed, steps, batch_size, held_out, first_step, check)
    result = train(job, workers=2, port=0)    # Result(state_dict, checked, losses, seconds)
    losses, checked = train_checked(torch, module, adam, job, rank=0, world=1)   # one process
    parallel = without_buffer_sync(DistributedDataParallel, module)   # what each worker trains
    loss = shard_loss(torch, module, batch, rank, world)    # this process's part of the mean
    parameter_difference(state_dict, reference)             # how far, the key biases aside

Every process draws the batches one process would (translate.EpochBatches(seed, 1, ...)) and
keeps rows rank::N of each (models.training.torch_distributed.shard). Its loss is
N · Σ (cross-entropy of its rows' words) / (the words of the whole batch): DDP averages the
processes' gradients, so each applies the gradient of the mean over the whole batch, the
gradient one process computes on the whole batch, and the clipping after it sees the same
norm. So N processes take the steps of one, up to the order of float32 sums (without dropout,
whose masks differ; the demo's rate is 0). Training amplifies those last bits as it does any
change of order: one process given each batch's rows reversed differs from itself by 1e-6 of
the largest weight after 30 steps, 1e-2 after 200 (as 2 processes do). So the weights are
compared after the first `check` steps, where rounding alone stays far below the tolerance.
"""
import inspect
import pathlib
import tempfile
import time
from typing import Any, NamedTuple

import autograd_lite as ag
from models.training import torch_distributed

from .. import translate
from . import common
from .torch_steps import (adam_state_to_torch, batch_loss, shard_loss,  # noqa: F401
                          train_in_torch)


class Schedule(NamedTuple):
    """translate.adam's schedule as its arguments: a schedule a spawned process can be sent."""
    peak: float
    warmup: int
    steps: int

    def __call__(self, step):
        return ag.optim.warmup_schedule(peak=self.peak, warmup=self.warmup, steps=self.steps,
                                        final=common.FINAL_LR)(step)


class Job(NamedTuple):
    """What every worker is sent: the start (our parameters and Adam state) and the steps."""
    params: Any  # a models.transformer tree
    state: Any  # ag.optim.adam's state for params
    schedule: Schedule
    seed: int  # the batches: translate.EpochBatches(seed, 1, steps, batch_size, held_out)
    steps: int
    batch_size: int
    held_out: Any  # the values no batch may draw
    first_step: int  # the step number of the first batch (the schedule goes on from it)
    check: int  # the weights after this many steps are kept for comparison
    result: str = ""  # the file rank 0 writes; train() fills it in


class Result(NamedTuple):
    state_dict: dict  # rank 0's module's, after the steps
    checked: dict  # the same after job.check steps
    losses: list  # of the whole batch, each step
    seconds_per_step: float  # rank 0's wall time over the steps / steps


def train(job, workers, port=0, timeout=60.0):
    """job's steps on `workers` processes (models.training.torch_distributed.launch). -> Result;
    WorkerFailed when one dies, ValueError when `port` is taken."""
    import torch
    with tempfile.TemporaryDirectory(prefix="to_torch-") as folder:
        result = pathlib.Path(folder, "rank0.pt")
        torch_distributed.launch(worker, workers, job._replace(result=str(result)), port,
                                 timeout)
        return Result(**torch.load(result))


def worker(rank, world, job):
    """One process: the model and its Adam state from job, wrapped in DDP, trained on rows
    rank::world of each batch; rank 0 saves a Result's fields to job.result."""
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from models import torch_bridge
    module = torch_bridge.torch_module_for(job.params)
    adam = torch.optim.Adam(module.parameters(), betas=translate.ADAM_BETAS,
                            eps=translate.ADAM_EPS)
    adam_state_to_torch(torch, adam, module, job.state)
    parallel = without_buffer_sync(DistributedDataParallel, module)
    start = time.perf_counter()
    losses, checked = train_checked(torch, parallel, adam, job, rank, world)
    seconds = (time.perf_counter() - start) / job.steps
    if rank == 0:
        torch.save({"state_dict": module.state_dict(), "checked": checked, "losses": losses,
                    "seconds_per_step": seconds}, job.result)


def without_buffer_sync(ddp, module):
    """module under ddp (torch's DistributedDataParallel class), with no sync of the buffers
    before each forward: the one buffer, the position table, is a constant. torch 2.13 spells
    this forward_sync_buffers=False and deprecates broadcast_buffers=False (a FutureWarning in
    every worker); older releases, 2.11 among them, know only broadcast_buffers. So the
    keyword follows the signature of the torch at hand."""
    if "forward_sync_buffers" in inspect.signature(ddp).parameters:
        return ddp(module, forward_sync_buffers=False)
    return ddp(module, broadcast_buffers=False)


def train_checked(torch, module, adam, job, rank=0, world=1):
    """job's steps (torch_steps.train_in_torch) on module, a copy of whose weights is kept after
    the first job.check. module: a DistributedDataParallel over `world` processes, or with
    world = 1 a plain module. -> (the loss of each step, the copy)"""
    batches = list(translate.EpochBatches(job.seed, 1, job.steps, job.batch_size,
                                          job.held_out))
    losses = train_in_torch(torch, module, adam, job.schedule, batches[:job.check],
                            job.first_step, rank, world)
    inner = getattr(module, "module", module)  # DDP's names carry a "module." prefix
    checked = {name: t.detach().clone() for name, t in inner.state_dict().items()}
    losses += train_in_torch(torch, module, adam, job.schedule, batches[job.check:],
                             job.first_step + job.check, rank, world)
    return losses, checked


def parameter_difference(state_dict, reference):
    """max over the tensors of max |a - b| / max |b|, b in reference, leaving out the key
    biases (the middle third of each in_proj_bias): softmax ignores them, so their gradient
    is 0 up to rounding, which Adam's g / √v turns into steps of full size and any sign."""
    worst = 0.0
    for name, b in reference.items():
        a = state_dict[name]
        if name.endswith("in_proj_bias"):
            third = len(b) // 3
            a, b = (x[list(range(third)) + list(range(2 * third, 3 * third))] for x in (a, b))
        worst = max(worst, float((a - b).abs().max() / b.abs().max()))
    return worst
