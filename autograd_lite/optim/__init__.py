"""Optimizers over pytrees, each as its torch.optim namesake: `opt.init(params) -> state`,
`opt.update(params, grads, state) -> (params, state)`, in place only where in_place=True asks.
The state is a pytree (it saves with ag.save; step counts are np.int64 scalars).

Only differentiable leaves (tree.is_differentiable) move; static leaves pass through, and a
leaf whose gradient is None neither moves nor counts a step (as torch skips a .grad of None).
The learning rate is a number or a schedule `lr(step)`, step = 1 at the first update. The
moving leaves are updated in chunks (one dtype, one step count; flat.py): a dozen numpy calls
a chunk, with the bits of the leaf-by-leaf rule.
"""
from .clipping import clip_by_global_norm, global_norm
from .optimizers import AdamState, Optimizer, SGDState, adam, adamw, sgd
from .schedules import warmup_schedule
