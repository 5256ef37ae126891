"""Random ops under vmap (vmap's `randomness`, as torch.func.vmap has it): what a random op
(ag.dropout, drawing from an np.random.Generator) draws while vmap calls run.

    "error"      (the default) a random op under vmap raises, naming the option;
    "same"       one draw for every example, as if the function ran once;
    "different"  each example the draws a Python loop over the examples makes from the same
                 generator, in order: the same bits, and the generator left where the loop
                 leaves it.

In the loop, example e's draws start where example e - 1's ended. Where a generator is drawn
from at one place, one draw of B times its size is the loop's. Where at several (dropout in
every layer), each example's count D is known only once the function has run: the outermost
"different" call (the owner) then rewinds the generators and runs the function again, the
first draw from each generator taking every example's row of D draws at once, and each
random op its slice of every row. Nested "different" calls' examples are rows too.
"""
import contextlib
import copy
import math

import numpy as np

from .batched import active_calls, calls_in_progress, wrap


def draw_under_vmap(op, draw, shape, rng):
    """The draws of the random op `op` of one example's `shape` from `rng`, as the running
    vmap calls want them (a Batched array under "different" ones): draw(shape, source) draws
    with source.random(shape, dtype=np.float32)."""
    calls = active_calls()
    if not calls:
        return draw(shape, rng)
    refusing = [c for c in calls if c.randomness == "error"]
    if refusing:
        raise ValueError(
            f"vmap: {op} draws from a generator under vmap, and randomness='error' (vmap's "
            "default) refuses that: pass randomness='different' (each example the draws of a "
            "Python loop over the examples, the same bits) or randomness='same' (one draw "
            "for every example) to vmap")
    different = [c for c in calls if c.randomness == "different"]
    if not different:
        return draw(shape, rng)
    owner = different[0]
    if owner.draws is None:
        owner.draws = Draws()
    lengths = tuple(c.length for c in different)
    source = owner.draws.source(op, rng, different, math.prod(shape))
    return wrap(draw(lengths + tuple(shape), source), [(c.level, 0) for c in reversed(different)])


def copied_generator(rng):
    """A copy of `rng` (checkpoint's, to draw again what it drew); under a replaying
    "different" call, one that gives the slices `rng` would give next."""
    duplicate = copy.deepcopy(rng)
    for call in calls_in_progress():
        if call.draws is not None:
            call.draws.copied(rng, duplicate)
    return duplicate


class CheckpointFrame:
    """A checkpointed function running (core/remat.py). Its first run: the generators among
    its arguments (the recomputation gets copies of those) and a copy of every other
    generator an op or a fast rule draws from, taken before its first draw (one in a closure,
    or a global one). A recomputation: those others' stand-ins, copies of the saved copies."""

    def __init__(self, arguments=(), stand_ins=None):
        self.first_run = stand_ins is None
        self.arguments = {id(g) for g in arguments}
        self.others = {}  # first run: id -> (generator, its copy before its first draw)
        self.stand_ins = stand_ins or {}  # recomputation: id(generator) -> its stand-in


_FRAMES = []  # the checkpointed functions running, outermost first


@contextlib.contextmanager
def checkpoint_frame(frame):
    """`with checkpoint_frame(frame):` a checkpointed function's first run or recomputation
    runs: random ops draw through generator_to_draw_from."""
    _FRAMES.append(frame)
    try:
        yield frame
    finally:
        _FRAMES.remove(frame)


def generator_to_draw_from(rng):
    """The generator a random op handed `rng` draws from: in a recomputation, the stand-in
    for a generator its first run drew from without it being an argument (so the
    recomputation draws what the first run drew, and the caller's generator is not advanced
    again); else rng, which a first run copies first if it is not one of its arguments."""
    if not _FRAMES:
        return rng
    for frame in _FRAMES:  # outermost first: an inner first run recorded the outer's stand-in
        rng = frame.stand_ins.get(id(rng), rng)
    innermost = _FRAMES[-1]
    known = id(rng) in innermost.arguments or id(rng) in innermost.others
    if innermost.first_run and not known:
        innermost.others[id(rng)] = (rng, copied_generator(rng))
    return rng


def inside_checkpoint():
    """Whether a checkpointed function is running (a fast rule's generators may need
    generator_to_draw_from: rules.py asks this first, on its hot path)."""
    return bool(_FRAMES)


class Stream:
    """One generator under an owner: its state before its first draw, each random op's count
    per example, the vmap calls they ran under; replaying, every example's row of draws."""

    def __init__(self, generator, calls):
        self.generator = generator
        self.state = copy.deepcopy(generator.bit_generator.state)
        self.calls = calls
        self.examples = math.prod(c.length for c in calls)
        self.counts = []
        self.rows = None


class Replay:
    """A source of a stream's draws in the loop's order, from `read` on."""

    def __init__(self, stream, read):
        self.stream, self.read = stream, read

    def random(self, shape, dtype=np.float64):
        if np.dtype(dtype) != np.float32:
            raise TypeError(f"vmap randomness='different': draws of {np.dtype(dtype)}; random "
                            "ops draw float32")
        stream = self.stream
        if stream.rows is None:  # the first draw: every example's row at once
            stream.rows = stream.generator.random((stream.examples, sum(stream.counts)),
                                                  dtype=np.float32)
        n = math.prod(shape) // stream.examples
        out = stream.rows[:, self.read:self.read + n].reshape(shape)
        self.read += n
        return out


class Draws:
    """The random ops' draws under one owner: recorded in a first run, replayed in a second
    where a generator is drawn from at more than one place."""

    def __init__(self):
        self.replaying = False
        self.streams = {}  # id(generator) -> Stream
        self.replays = {}  # id(generator or checkpoint's copy) -> Replay (replaying only)

    def source(self, op, rng, calls, size):
        """What `op` draws from: the generator while recording, its Replay while replaying."""
        key = id(rng)
        if self.replaying and key in self.replays:
            return self.replays[key]
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = Stream(rng, calls)
        elif [c.length for c in stream.calls] != [c.length for c in calls] or any(
                a is not b for a, b in zip(stream.calls, calls)):
            raise ValueError(
                f"vmap: {op} draws from one generator under different vmap calls with "
                "randomness='different' nested in one another; the loop's draws are given "
                "where every random op that draws from a generator runs under the same ones: "
                "draw from a generator of its own in each, or use randomness='same'")
        stream.counts.append(size)
        return rng

    def needs_replay(self):
        return not self.replaying and any(len(s.counts) > 1 for s in self.streams.values())

    def rewind(self):
        """Back to the generators' states before the first run, to replay the loop's draws."""
        self.replaying = True
        for stream in self.streams.values():
            stream.generator.bit_generator.state = stream.state
        self.replays = {key: Replay(stream, 0) for key, stream in self.streams.items()}

    def copied(self, rng, duplicate):
        """checkpoint copied `rng`: the copy replays from where `rng` reads now."""
        replay = self.replays.get(id(rng))
        if self.replaying and replay is not None:
            self.replays[id(duplicate)] = Replay(replay.stream, replay.read)
