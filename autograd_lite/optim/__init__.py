"""Optimizers over pytrees: `opt.init(params) -> state`, `opt.update(params, grads, state)
-> (params, state)`. Nothing is updated in place unless Adam's `in_place=True` asks for it;
state is a pytree (it saves with ag.save).

Each optimizer follows its torch.optim namesake. Only differentiable leaves
(tree.is_differentiable) with a gradient move; static leaves (n_heads, Hyper settings,
activation functions) pass through, and a leaf whose gradient is None is skipped
entirely, as torch skips a parameter whose .grad is None: it neither moves nor
advances its own step count. The learning rate is a number or a schedule `lr(step)`,
called with the number of updates made, counting from 1.

Adam and AdamW update the leaves that are float arrays in chunks (one dtype, one step
count, up to CHUNK_SIZE entries): a dozen numpy calls a chunk instead of a dozen a leaf, with
the same bits as the leaf-by-leaf rule (_adam_leaf). A chunk's new parameters and moments
are views of one fresh array each, which the next update reads without copying.

Step counts are np.int64 scalars: they save and load as arrays do (`ag.load` checks
their dtype, not their value, so a fresh state is the `like` of a saved one).
"""
from .clipping import clip_by_global_norm, global_norm
from .optimizers import AdamState, Optimizer, SGDState, adam, adamw, sgd
from .schedules import warmup_schedule
