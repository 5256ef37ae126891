"""demos.support.to_torch_ddp: two processes under DistributedDataParallel, each on its rows of
every batch, take the steps one process takes on the whole batches (Adam, clipping, the
schedule), with shards of unequal size and unequal word counts."""
import numpy as np

from demos import to_torch, translate
from demos.support import number_words as nw
from demos.support import to_torch_ddp
from models.training import torch_distributed
from helpers.to_torch import torch_copy, trained_a_little

BATCH, STEPS = 15, 4  # 15 rows: shards of 8 and 7


def assert_same_weights(theirs, ours):
    """Every tensor to float32 rounding (rtol 1e-5, atol 1e-6 of its largest entry), the key
    biases left out (see to_torch_ddp.parameter_difference)."""
    for name, mine in ours.items():
        a, b = theirs[name].numpy(), mine.numpy()
        if name.endswith("in_proj_bias"):
            keep = np.r_[:len(b) // 3, 2 * len(b) // 3:len(b)]
            a, b = a[keep], b[keep]
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(b).max(), err_msg=name)


def test_two_workers_take_the_steps_of_one_process_on_the_whole_batches(torch):
    params, optimizer, state, schedule, held_out = trained_a_little(steps=2)
    settings = to_torch.model_settings(to_torch.parse_args(["--quick"]))
    job = to_torch_ddp.Job(params, state, to_torch_ddp.Schedule(settings.lr, settings.warmup,
                                                                100), 0, STEPS, BATCH, held_out,
                           first_step=3, check=2)
    assert job.schedule(7) == schedule(7)  # the schedule the workers rebuild is the one here
    result = to_torch_ddp.train(job, workers=2)

    module, adam = torch_copy(torch, params, state)
    batches = list(translate.EpochBatches(0, 1, STEPS, BATCH, held_out))
    losses = to_torch.train_in_torch(torch, module, adam, schedule, batches[:2], 3)
    checked = {name: t.clone() for name, t in module.state_dict().items()}
    losses += to_torch.train_in_torch(torch, module, adam, schedule, batches[2:], 5)
    np.testing.assert_allclose(result.losses, losses, rtol=1e-6)
    assert_same_weights(result.checked, checked)
    assert_same_weights(result.state_dict, module.state_dict())
    moved = [np.abs(sd["out.weight"].numpy() - params.out.w.T).max()
             for sd in (result.checked, result.state_dict)]
    assert 1e-3 < moved[0] < moved[1]  # the workers took steps, and more after the check
    assert to_torch_ddp.parameter_difference(result.state_dict, module.state_dict()) < 1e-5


def test_the_shards_hold_unequal_numbers_of_words():
    """Why the loss is divided by the whole batch's words: a mean over each shard's own words,
    averaged over the two, would weigh a word of the shorter shard more."""
    held_out = nw.held_out_values(to_torch.HELD_OUT, translate.HELD_OUT_SEED)
    for batch in translate.EpochBatches(0, 1, STEPS, BATCH, held_out):
        words = [np.count_nonzero(torch_distributed.shard(batch, rank, 2)[1][:, 1:] != nw.PAD)
                 for rank in (0, 1)]
        assert words[0] != words[1]


class DDPBefore213:
    """DistributedDataParallel's buffer keyword in torch 2.11 (and every release before 2.13)."""

    def __init__(self, module, broadcast_buffers=True):
        self.module, self.buffers = module, {"broadcast_buffers": broadcast_buffers}


class DDPSince213:
    """Its buffer keywords in torch 2.13: broadcast_buffers deprecated, its successor beside it."""

    def __init__(self, module, broadcast_buffers=None, forward_sync_buffers=None):
        self.module = module
        self.buffers = {"broadcast_buffers": broadcast_buffers,
                        "forward_sync_buffers": forward_sync_buffers}


def test_the_buffer_sync_is_turned_off_with_the_keyword_each_torch_knows():
    old = to_torch_ddp.without_buffer_sync(DDPBefore213, "module")
    assert old.module == "module" and old.buffers == {"broadcast_buffers": False}
    new = to_torch_ddp.without_buffer_sync(DDPSince213, "module")
    assert new.buffers == {"broadcast_buffers": None, "forward_sync_buffers": False}
