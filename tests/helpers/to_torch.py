"""The start the demos.to_torch tests share: the translate model after a few steps here,
and a torch copy of it with its Adam.

    params, optimizer, state, schedule, held_out = trained_a_little(steps=5)
    module, adam = torch_copy(torch, params, state)
"""
import numpy as np

from demos.support import number_words as nw
from demos import to_torch, translate


def trained_a_little(steps=5):
    """A --quick translate model after `steps` Adam steps here: (params, optimizer, state,
    schedule, held_out)."""
    settings = to_torch.model_settings(to_torch.parse_args(["--quick"]))
    held_out = nw.held_out_values(to_torch.HELD_OUT, translate.HELD_OUT_SEED)
    params = translate.build_model(settings, np.random.default_rng(0))
    optimizer, schedule = translate.adam(settings, 100)
    batches = translate.EpochBatches(0, 0, steps, 16, held_out)
    params, state, _ = to_torch.train_here(params, optimizer, optimizer.init(params), batches, 1)
    return params, optimizer, state, schedule, held_out


def torch_copy(torch, params, state=None):
    """A torch module holding params and its Adam, with our Adam's state when given."""
    from models import torch_bridge
    module = torch_bridge.torch_module_for(params)
    adam = torch.optim.Adam(module.parameters(), betas=translate.ADAM_BETAS,
                            eps=translate.ADAM_EPS)
    if state is not None:
        to_torch.adam_state_to_torch(torch, adam, module, state)
    return module, adam
