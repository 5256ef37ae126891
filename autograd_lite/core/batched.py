"""The batched value under vmap, and how an op meets one (JAX's batching rules; vmap and the
ops' rules are autograd_lite/batching/). A `Batched` value holds the examples of one vmap
call (its `level`) stacked along axis `bdim` of its `value`; ops see it as one example.

An op called with a `Batched` argument (or a tuple holding one, as an index) runs its
batching rule (`BATCHING_RULES`) on the values of the highest level among the arguments,
each with its batch axis (None: not mapped); an op without one is an error that names it.

Nesting: `Batched` layers sit outside the boxes of the traces, the higher level outermost.
`gradient` boxes the plain array inside a batched argument and batches every argument it
differentiates over every vmap call in progress (`active_levels`), so that `vmap(grad(f))`
gives each example its own gradient. While a trace's backward pass runs, the vmap calls it
was opened in count as not running (`opened_levels`): its pullbacks compute on the arrays
under their layers, which a gradient taken there must not batch again.
"""
import contextlib
import itertools

import numpy as np


class Batched:
    """The examples of one vmap call (`level`) along axis `bdim` of `value`; shape: one's."""

    __slots__ = ("value", "level", "bdim")
    __array_priority__ = 1000.0

    def __init__(self, value, level, bdim):
        self.value = value
        self.level = level
        self.bdim = bdim

    @property
    def shape(self):
        s = self.value.shape
        return s[:self.bdim] + s[self.bdim + 1:]

    dtype = property(lambda self: self.value.dtype)
    ndim = property(lambda self: self.value.ndim - 1)
    size = property(lambda self: int(np.prod(self.shape)))
    length = property(lambda self: self.value.shape[self.bdim])

    def __len__(self):
        if not self.shape:
            raise TypeError("vmap: len() of a value under vmap that is 0-d in each example")
        return self.shape[0]

    def __bool__(self):
        """Where every example gives the same truth value, that value (a check of an input,
        `if ids.min() < 0`, takes the branch a loop would take for each); else an error."""
        if self.size != 1:
            raise ValueError(f"the truth value of a batched value of shape {self.shape} is "
                             "ambiguous (as numpy's): use .any() or .all()")
        values = Ops.every_value(self)  # numpy's or a device's array: bool() copies one bit
        if bool(values.all()) or not bool(values.any()):
            return bool(values.all())
        raise TypeError("under vmap a condition is True for some examples and False for "
                        "others, so no one branch is right for all: use ag.where to choose "
                        "per example")

    def __repr__(self):
        return f"Batched(level={self.level}, bdim={self.bdim}, {self.value!r})"

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            f"vmap: a mapped value ({self.shape} {self.dtype} per example) cannot become a "
            "plain numpy array inside the mapped function, as indexing a numpy array with it "
            "asks (numpy's own x[i] or x[mask] converts the index, and cannot map it): write "
            "ag.getitem(x, i) to index a numpy array x by a mapped i or mask, and autograd_lite's "
            "ops elsewhere")

    def __float__(self):
        raise TypeError(f"vmap: float() of a value under vmap ({self.shape} per example): it "
                        "holds one number per example; keep it an array, or convert vmap's "
                        "output")

    def __getattr__(self, name):  # only for what Batched lacks (ops/operators.py installs)
        raise AttributeError(
            f"vmap: x.{name} is not defined on a value under vmap ({self.shape} {self.dtype} "
            "per example): write the mapped function with autograd_lite's ops, which map every "
            f"example, or compute {name} on vmap's output")


# ---------------------------------------------------------------- vmap calls in progress

class MappedCall:
    """A running vmap call: its level, examples, `randomness` and draws (randomness.py)."""

    __slots__ = ("level", "length", "randomness", "draws")

    def __init__(self, level, length, randomness="error"):
        self.level, self.length, self.randomness, self.draws = level, length, randomness, None


_CALLS = []  # every vmap call in progress, outermost first
_OPENED = set()  # the levels of those whose Batched values are opened meanwhile (below)


_LEVELS = itertools.count(1)  # one counter for the traces (tracer.py) and the vmap calls


def new_level():
    """A level above every trace and vmap call opened so far: an op serves the highest."""
    return next(_LEVELS)


def calls_in_progress():
    """Every vmap call in progress, outermost first (its layers opened or not)."""
    return tuple(_CALLS)


def active_calls():
    """The vmap calls in progress whose layers are not opened, outermost first."""
    return tuple(c for c in _CALLS if c.level not in _OPENED)


def active_levels():
    """(level, examples) of each active vmap call (what a gradient taken now batches over)."""
    return tuple((c.level, c.length) for c in _CALLS if c.level not in _OPENED)


@contextlib.contextmanager
def running(call):
    """`with running(call):` marks a vmap call's function as running."""
    _CALLS.append(call)
    try:
        yield
    finally:
        _CALLS.remove(call)


@contextlib.contextmanager
def resumed(calls):
    """`with resumed(calls):` marks those of the vmap calls `calls` whose function has
    returned as running again, innermost last (checkpoint's recomputation in a backward pass
    after its vmap call returned: its random ops draw as they did in that call)."""
    ended = [c for c in calls if c not in _CALLS]
    _CALLS.extend(ended)
    try:
        yield
    finally:
        for call in ended:
            _CALLS.remove(call)


@contextlib.contextmanager
def opened_levels(levels):
    """The vmap calls of `levels` count as not running meanwhile (a trace's backward pass,
    computing on the arrays under their Batched layers)."""
    added = set(levels) - _OPENED
    _OPENED.update(added)
    try:
        yield
    finally:
        _OPENED.difference_update(added)


@contextlib.contextmanager
def closed_levels(levels):
    """The inverse of opened_levels inside it (checkpoint's recomputation)."""
    removed = set(levels) & _OPENED
    _OPENED.difference_update(removed)
    try:
        yield
    finally:
        _OPENED.update(removed)


# ---------------------------------------------------------------- dispatch

# op (a primitive's wrapper or a fusable) -> rule(values, bdims, **keyword_only) -> (out, bdim):
# values holds every positional argument (defaults filled in), bdims their batch axes.
BATCHING_RULES = {}


class Ops:
    """The ops the axis helpers need, installed by autograd_lite/batching (core imports no op):
    moveaxis(x, source, destination), broadcast_axis(x, axis, length), every_value(x)."""
    moveaxis = None
    broadcast_axis = None
    every_value = None


def _level_of(a):
    """An argument's vmap level: a Batched value's, a tuple's entries' highest, else -1."""
    if type(a) is Batched:
        return a.level
    if type(a) is tuple:
        return max((e.level for e in a if type(e) is Batched), default=-1)
    return -1


def batched_call(op, args, kwargs, plain=None):
    """Call `op` on arguments among which some are Batched (or tuples holding Batched
    entries): its rule gets each argument's value at the highest level and its batch axis
    (None where it is not batched there; a tuple's, a tuple of both). A fusable's rule may
    return NotImplemented: its plain function `plain` runs."""
    name = getattr(op, "op_name", getattr(op, "__name__", "op"))
    for key, value in kwargs.items():
        if type(value) is Batched:
            raise TypeError(f"vmap: {name}'s keyword-only argument '{key}' is batched; only "
                            "positional arguments of an op may be mapped")
    level = max(_level_of(a) for a in args)
    parameters = getattr(op, "parameters", ())
    if len(args) < len(parameters):  # the rule sees every positional parameter
        args = list(args) + [default for _, default in parameters[len(args):]]
    values, bdims = [], []
    for a in args:
        if type(a) is Batched and a.level == level:
            values.append(a.value)
            bdims.append(a.bdim)
        elif type(a) is tuple and _level_of(a) == level:
            at_level = [type(e) is Batched and e.level == level for e in a]
            values.append(tuple(e.value if here else e for e, here in zip(a, at_level)))
            bdims.append(tuple(e.bdim if here else None for e, here in zip(a, at_level)))
        else:
            values.append(a)
            bdims.append(None)
    rule = BATCHING_RULES.get(op)
    if rule is None:
        if plain is not None:
            return plain(*args, **kwargs)
        shapes = ", ".join(_describe(a) for a in args)
        raise NotImplementedError(
            f"vmap: no batching rule for the op '{name}' (arguments: {shapes}); register one "
            "in autograd_lite/batching, or write the function with ops that have one")
    try:
        out = rule(values, bdims, **kwargs)
    except (IndexError, ValueError) as error:
        raise _named_under_vmap(error, name) from None
    if out is NotImplemented:
        return plain(*args, **kwargs)
    out, bdim = out
    return out if bdim is None else Batched(out, level, bdim)


def _named_under_vmap(error, name):
    """numpy's IndexError or ValueError, computing every example at once, named by the op."""
    message = str(error)
    if type(error) not in (IndexError, ValueError) or message.startswith("vmap"):
        return error
    return type(error)(f"vmap: {name}, computing every example at once: {message}")


def _describe(a):
    if type(a) is Batched:
        return f"{a.shape} {a.dtype} mapped over {a.length}"
    shape = getattr(a, "shape", None)
    return f"{shape} {a.dtype}" if shape is not None else type(a).__name__


# ---------------------------------------------------------------- layers and axes

def peel(x):
    """(core, layers): the value under every Batched layer, and the (level, bdim) layers."""
    layers = []
    while type(x) is Batched:
        layers.append((x.level, x.bdim))
        x = x.value
    return x, layers


def wrap(core, layers):
    """The inverse of peel; a Batched core (other levels) gets the layers at their places."""
    for level, bdim in reversed(layers):
        core = insert_level(core, level, bdim)
    return core


def insert_level(x, level, axis):
    """x with its logical axis `axis` made the batch axis of `level`, nested below the
    layers of higher levels."""
    if type(x) is Batched and x.level > level:
        inner_axis = axis + (1 if x.bdim <= axis else 0)
        bdim = x.bdim - (1 if inner_axis < x.bdim else 0)
        return Batched(insert_level(x.value, level, inner_axis), x.level, bdim)
    return Batched(x, level, axis)


def strip_level(x, level):
    """(y, axis): x without its layer of `level`, whose examples become y's logical axis
    `axis`; (x, None) where x is not batched at `level`."""
    if type(x) is not Batched or x.level < level:
        return x, None
    if x.level == level:
        return x.value, x.bdim
    inner, axis = strip_level(x.value, level)
    if axis is None:
        return x, None
    bdim = x.bdim + (1 if x.bdim >= axis else 0)
    outer_axis = axis if axis < bdim else axis - 1
    return Batched(inner, x.level, bdim), outer_axis


def aligned(x, layers, lengths):
    """x as the value under `layers` (as peel gives them): x's examples of each layer's level
    moved to its axis, broadcast to `lengths[level]` where x is not batched at it."""
    for level, bdim in layers:
        y, axis = strip_level(x, level)
        if axis is None:
            x = Ops.broadcast_axis(x, bdim, lengths[level])
        else:
            x = Ops.moveaxis(y, axis, bdim) if axis != bdim else y
    return x


def batched_over(x, levels):
    """x batched at every (level, length) of `levels` (ascending) where it is not already,
    broadcast along a new front axis."""
    for level, length in levels:
        _, axis = strip_level(x, level)
        if axis is None:
            x = insert_level(Ops.broadcast_axis(x, 0, length), level, 0)
    return x

