"""Optimizers over pytrees, each as its torch.optim namesake: `opt.init(params) -> state`,
`opt.update(params, grads, state) -> (params, state)`, in place only where in_place=True asks.
The state is a pytree (it saves with ag.save; step counts are np.int64 scalars, whose dtype,
not value, ag.load checks: a fresh state is the `like` of a saved one). Only the
differentiable leaves (tree.is_differentiable) with a gradient move; a gradient of None counts
no step, as in torch. The learning rate is a number or a schedule `lr(step)`, step = 1 at the
first update.
"""
from .clipping import clip_by_global_norm, global_norm
from .optimizers import AdamState, Optimizer, SGDState, adam, adamw, sgd
from .schedules import warmup_schedule
