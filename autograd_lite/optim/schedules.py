"""Learning-rate schedules: functions of the update count, counting from 1, that an
optimizer calls in place of a fixed rate."""


def warmup_schedule(d_model, warmup, factor=1.0):
    """The paper's rate (§5.3): lr(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""
    def lr(step):
        step = max(step, 1)
        return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
    return lr
