"""One counter of levels for the traces (tracer.py) and the vmap calls (batched.py): a trace
or a vmap call opened inside another gets a higher level, so an op knows which to serve first."""
import itertools

_levels = itertools.count(1)


def next_level():
    """A level above every trace and vmap call opened so far."""
    return next(_levels)
