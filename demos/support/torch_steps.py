"""The PyTorch side's training steps, shared by demos.to_torch (one process) and
demos.support.to_torch_ddp (its workers): the Adam state carried over, the steps with
translate's loss and clipping, each process's part of the loss over a batch, and the progress
lines.

    adam_state_to_torch(torch, optimizer, module, state)    # our Adam's moments, in torch's
    losses = train_in_torch(torch, module, adam, schedule, batches, first_step, rank, world)
    loss = shard_loss(torch, module, batch, rank, world)    # this process's part of the mean
"""
import numpy as np

from models.training import torch_distributed

from . import number_words as nw
from .. import translate


def adam_state_to_torch(torch, optimizer, module, state):
    """Our Adam's moments m, v (trees shaped like the parameters, which the bridge maps as
    it maps gradients) and step count, as torch.optim.Adam's state of module's parameters."""
    from models import torch_bridge
    m, v = torch_bridge.to_torch(state.m), torch_bridge.to_torch(state.v)
    for name, parameter in module.named_parameters():
        optimizer.state[parameter] = {"step": torch.tensor(float(state.step)),
                                      "exp_avg": m[name], "exp_avg_sq": v[name]}


def train_in_torch(torch, module, optimizer, schedule, batches, first_step, rank=0, world=1):
    """torch.optim.Adam steps on `batches`, with translate's loss and clipping; the learning
    rate schedule(step) goes on from first_step. With world > 1, module is a
    DistributedDataParallel over `world` processes and this one, `rank`, computes on rows
    rank::world of each batch (demos.support.to_torch_ddp). -> the loss of each step's whole
    batch"""
    module.train()
    losses = []
    for step, batch in enumerate(batches, first_step):
        for group in optimizer.param_groups:
            group["lr"] = schedule(step)
        loss = shard_loss(torch, module, batch, rank, world)
        optimizer.zero_grad()
        loss.backward()  # under DDP: the gradients averaged over the processes
        torch.nn.utils.clip_grad_norm_(module.parameters(), translate.CLIP_NORM)
        optimizer.step()
        losses.append(batch_loss(torch, loss, world))
        if rank == 0:
            report("torch", step, first_step, len(batches), losses)
    return losses


def shard_loss(torch, module, batch, rank, world):
    """world · Σ cross-entropy over the words of rows rank::world / the words of the whole
    batch (src (B, S), tgt (B, T)): with world = 1 the mean over the batch's words; averaged
    over the processes (as DDP averages gradients), that mean too."""
    src, tgt = torch_distributed.shard(batch, rank, world)  # (B/world, S), (B/world, T)
    words = np.count_nonzero(batch[1][:, 1:] != nw.PAD)
    logits = module(torch.from_numpy(src), torch.from_numpy(tgt[:, :-1]), nw.PAD)
    total = torch.nn.functional.cross_entropy(logits.flatten(0, 1),
                                              torch.from_numpy(tgt[:, 1:]).flatten(),
                                              ignore_index=nw.PAD, reduction="sum")
    return total / (words / world)


def batch_loss(torch, loss, world):
    """The whole batch's loss from this process's shard_loss: the mean over the processes."""
    if world == 1:
        return loss.item()
    total = loss.detach().clone()
    torch.distributed.all_reduce(total)  # the sum over the processes
    return total.item() / world


def report(where, step, first_step, n_steps, losses):
    """A progress line four times a part: the mean loss of the last 10 steps."""
    done = step - first_step + 1
    if done == n_steps or done % max(1, n_steps // 4) == 0:
        print(f"  {where} step {step:>4}: loss {np.mean(losses[-10:]):.4f}", flush=True)
