"""Learning-rate schedules: functions of the update count, counting from 1, that an
optimizer calls in place of a fixed rate."""
import math


def warmup_schedule(d_model=None, warmup=4000, factor=1.0, *, peak=None, steps=None,
                    final=0.0):
    """A linear warm-up over `warmup` updates, then a decay: lr(step) for step = 1, 2, ...

    From d_model, the paper's rate (§5.3), which peaks at step = warmup and then falls as
    step^-0.5:

        lr(step) = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)

    From peak= and steps= instead, a cosine decay from peak to final · peak at `steps`,
    held there after:

        lr(step) = peak · step / warmup                                 step <= warmup
        lr(step) = peak · (final + (1 - final) · (1 + cos(π t)) / 2)    t = min(1, (step -
                                                                        warmup) / (steps - warmup))
    """
    if (d_model is None) == (peak is None) or (peak is not None and steps is None):
        raise ValueError(f"warmup_schedule: give d_model (the paper's rate) or peak= and "
                         f"steps= (a cosine decay), got d_model={d_model!r}, peak={peak!r}, "
                         f"steps={steps!r}")
    if peak is None:
        def lr(step):
            step = max(step, 1)
            return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
        return lr

    def lr(step):
        if step <= warmup:
            return peak * step / warmup
        progress = min(1.0, (step - warmup) / max(1, steps - warmup))
        return peak * (final + (1 - final) * 0.5 * (1 + math.cos(math.pi * progress)))
    return lr
